package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
)

// testPrune: store.Prune deletes the sessions that ended before the cutoff
// and nothing else — not a paused or a running one however old, not one
// resumed after it closed, not one that ended after the cutoff — and a
// deleted session's id is free again.
func testPrune(t *testing.T, s store.Store) {
	defer s.Close()
	ctx := context.Background()
	if _, ok := s.(store.Pruner); !ok {
		t.Fatalf("%T does not implement store.Pruner", s)
	}
	start := func(run string) []event.Draft {
		return []event.Draft{
			{RunID: run, Type: event.SessionStart, Actor: "runtime", Payload: map[string]any{"prompt": "p"}},
			{RunID: run, Type: event.RunStarted, Actor: "runtime", Payload: map[string]any{"run_id": run, "prompt": "p"}},
			msg("working"),
		}
	}
	closeEv := event.Draft{RunID: "r1", Type: event.SessionClose, Actor: "runtime", Payload: map[string]any{"ok": true}}
	paused := event.Draft{RunID: "r1", Type: event.RunPaused, Actor: "runtime", Payload: map[string]any{"reason": "approval", "approval_ids": []string{"a1"}}}
	sessions := map[string][]event.Draft{
		"paused":  append(start("r1"), paused, msg("waiting")),
		"running": start("r1"),
		"ended":   append(start("r1"), closeEv),
		// Host events after the close (the bot's notes) do not reopen it.
		"ended-noted": append(append(start("r1"), closeEv), msg("a note after the end")),
		// A new run after the close does.
		"reopened": append(append(start("r1"), closeEv), event.Draft{RunID: "r2", Type: event.RunStarted, Actor: "runtime", Payload: map[string]any{"run_id": "r2", "prompt": "again"}}),
	}
	for _, id := range []string{"paused", "running", "ended", "ended-noted", "reopened"} {
		if _, err := s.Append(ctx, id, 0, sessions[id]...); err != nil {
			t.Fatal(id, err)
		}
	}
	time.Sleep(5 * time.Millisecond)
	cutoff := time.Now()
	time.Sleep(5 * time.Millisecond)
	if _, err := s.Append(ctx, "ended-recent", 0, append(start("r1"), closeEv)...); err != nil {
		t.Fatal(err)
	}

	// A session appended to after it was listed is not deleted.
	if _, err := s.(store.Pruner).DeleteSession(ctx, "ended", 1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("DeleteSession with a stale last seq = %v; want a conflict", err)
	}
	if n, err := s.(store.Pruner).DeleteSession(ctx, "no-such-session", 3); err != nil || n != 0 {
		t.Fatalf("DeleteSession of an unknown session = %d, %v", n, err)
	}

	res, err := store.Prune(ctx, s, store.PruneOptions{Before: cutoff})
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.PruneResult{Sessions: 2, Events: 4 + 5}); res != want {
		t.Errorf("Prune = %+v; want %+v", res, want)
	}
	for id, kept := range map[string]bool{"paused": true, "running": true, "reopened": true, "ended-recent": true, "ended": false, "ended-noted": false} {
		evs, err := s.Read(ctx, id, 1)
		if err != nil {
			t.Fatal(id, err)
		}
		if (len(evs) > 0) != kept {
			t.Errorf("%s: %d events after Prune; kept = %v", id, len(evs), kept)
		}
	}
	page, err := s.List(ctx, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range page {
		if in.SessionID == "ended" || in.SessionID == "ended-noted" {
			t.Errorf("List still has the deleted session %s", in.SessionID)
		}
	}
	infos, err := s.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 4 {
		t.Errorf("Sessions after Prune = %d sessions; want 4", len(infos))
	}
	// Nothing more to delete: a second pass is a no-op.
	if res, err := store.Prune(ctx, s, store.PruneOptions{Before: cutoff}); err != nil || res != (store.PruneResult{}) {
		t.Errorf("second Prune = %+v, %v", res, err)
	}
	// The id of a deleted session names a new session.
	evs, err := s.Append(ctx, "ended", 0, msg("new"))
	if err != nil || len(evs) != 1 || evs[0].Seq != 1 {
		t.Fatalf("Append to a deleted session's id = %+v, %v", evs, err)
	}
	if got, err := s.Read(ctx, "ended", 1); err != nil || len(got) != 1 {
		t.Fatalf("Read of the new session = %d events, %v", len(got), err)
	}
}

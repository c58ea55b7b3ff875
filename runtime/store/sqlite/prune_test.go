package sqlite

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/storetest"
	"github.com/agentos/agentos/schemas"
)

// TestDeleteSessionSharedBatches: sessions appended concurrently share
// batch rows; deleting some, while the others go on appending, blanks
// exactly their events (their lines are gone from the rows), and the
// others' chains still read and verify, before and after a reopen, and
// across folds of the heads.
func TestDeleteSessionSharedBatches(t *testing.T) {
	dir := t.TempDir()
	sealer := storetest.NewSealer(t)
	s := mustOpen(t, dir, sealer)
	ctx := context.Background()
	const sessions, events = 8, 3 * foldEvery
	text := func(i, n int) string { return fmt.Sprintf("marker-s%d-event-%d", i, n) }
	appendN := func(i, from, to int) error {
		for n := from; n < to; n++ {
			if _, err := s.Append(ctx, fmt.Sprintf("s%d", i), int64(n), event.Draft{RunID: "r1", Type: event.OutputMessage, Actor: "worker", Payload: map[string]any{"text": text(i, n)}}); err != nil {
				return err
			}
		}
		return nil
	}
	run := func(from, to int, skip map[int]bool) {
		var wg sync.WaitGroup
		errs := make(chan error, sessions)
		for i := range sessions {
			if skip[i] {
				continue
			}
			wg.Add(1)
			go func() { defer wg.Done(); errs <- appendN(i, from, to) }()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	run(0, events, nil)
	var rows int
	if err := s.db.QueryRow(`SELECT count(*) FROM batches`).Scan(&rows); err != nil || rows >= sessions*events {
		t.Logf("batches rows %d for %d events (%v): the sessions may not share rows", rows, sessions*events, err)
	}
	deleted := map[int]bool{0: true, 3: true}
	// Delete while the others append.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); run(events, 2*events, deleted) }()
	for i := range deleted {
		n, err := s.DeleteSession(ctx, fmt.Sprintf("s%d", i), events)
		if err != nil || n != events {
			t.Fatalf("DeleteSession(s%d) = %d, %v; want %d", i, n, err, events)
		}
	}
	wg.Wait()
	check := func(s *Store) {
		t.Helper()
		for i := range sessions {
			sid := fmt.Sprintf("s%d", i)
			evs, err := s.Read(ctx, sid, 1)
			if err != nil {
				t.Fatal(sid, err)
			}
			if deleted[i] {
				if len(evs) != 0 {
					t.Errorf("%s: %d events after delete", sid, len(evs))
				}
				var n int
				if err := s.db.QueryRow(`SELECT count(*) FROM batches WHERE instr(lines, ?) > 0`, "marker-"+sid+"-").Scan(&n); err != nil || n != 0 {
					t.Errorf("%s: its lines are still in %d rows (%v)", sid, n, err)
				}
				continue
			}
			if len(evs) != 2*events {
				t.Fatalf("%s: %d events; want %d", sid, len(evs), 2*events)
			}
			if rep := replay.VerifyEvents(schemas.MustDefault(), evs); rep.Problem != nil && rep.Problem.Code != replay.ProblemEmpty {
				t.Fatalf("%s: %v", sid, rep.Problem)
			}
		}
		infos, err := s.Sessions(ctx)
		if err != nil || len(infos) != sessions-len(deleted) {
			t.Fatalf("Sessions = %d, %v; want %d", len(infos), err, sessions-len(deleted))
		}
		page, err := s.List(ctx, store.ListOptions{})
		if err != nil || len(page) != sessions-len(deleted) {
			t.Fatalf("List = %d, %v; want %d", len(page), err, sessions-len(deleted))
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir, sealer)
	check(s)
	// A deleted id starts a new session; the others go on.
	if evs, err := s.Append(ctx, "s0", 0, event.Draft{RunID: "r1", Type: event.OutputMessage, Actor: "worker", Payload: map[string]any{"text": "new"}}); err != nil || evs[0].Seq != 1 {
		t.Fatalf("Append to a deleted id = %v, %v", evs, err)
	}
	if _, err := s.Append(ctx, "s1", 2*events, event.Draft{RunID: "r1", Type: event.OutputMessage, Actor: "worker", Payload: map[string]any{"text": "more"}}); err != nil {
		t.Fatal(err)
	}
	if evs, err := s.Read(ctx, "s0", 1); err != nil || len(evs) != 1 {
		t.Fatalf("Read(s0) = %d, %v", len(evs), err)
	}
}

// BenchmarkDeleteSession: deleting a 20-event session (its records
// blanked in batch rows shared with another session) against the
// baseline of appending those 20 events, one append each, in the same
// run. go test -run '^$' -bench DeleteSession ./runtime/store/sqlite
func BenchmarkDeleteSession(b *testing.B) {
	const perSession = 20
	ctx := context.Background()
	msg := func(i int) event.Draft {
		return event.Draft{RunID: "r1", Type: event.OutputMessage, Actor: "worker", Payload: map[string]any{"text": fmt.Sprintf("event %d", i)}}
	}
	fill := func(b *testing.B, s *Store, sid string) {
		for i := range perSession {
			if _, err := s.Append(ctx, sid, int64(i), msg(i)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("append20", func(b *testing.B) {
		s := mustOpen(b, b.TempDir(), storetest.NewSealer(b))
		for n := 0; b.Loop(); n++ {
			fill(b, s, fmt.Sprintf("s%d", n))
		}
	})
	b.Run("delete20", func(b *testing.B) {
		s := mustOpen(b, b.TempDir(), storetest.NewSealer(b))
		n := 0
		for b.Loop() {
			b.StopTimer()
			sid := fmt.Sprintf("s%d", n)
			var wg sync.WaitGroup
			wg.Add(2) // two sessions at once: their events share rows
			go func() { defer wg.Done(); fill(b, s, sid) }()
			go func() { defer wg.Done(); fill(b, s, sid+"-other") }()
			wg.Wait()
			n++
			b.StartTimer()
			if got, err := s.DeleteSession(ctx, sid, perSession); err != nil || got != perSession {
				b.Fatalf("DeleteSession = %d, %v", got, err)
			}
		}
	})
}

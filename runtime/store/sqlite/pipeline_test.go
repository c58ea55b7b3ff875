package sqlite

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/storetest"
)

func msg(text string) event.Draft {
	return event.Draft{RunID: "r", Type: event.OutputMessage, Actor: "worker", Payload: map[string]any{"text": text}}
}

// TestUnsyncedEventsInvisible: an event whose transaction has committed
// but whose WAL fsync has not returned is neither acknowledged nor seen by
// Read or Sessions in this process; once the fsync returns, it is both.
func TestUnsyncedEventsInvisible(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, t.TempDir(), storetest.NewSealer(t))
	if _, err := s.Append(ctx, "old", 0, msg("old 1")); err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	realSync := s.syncWAL
	s.syncWAL = func() error {
		close(entered)
		<-release
		return realSync()
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, "old", 1, msg("old 2"))
		if err == nil {
			_, err = s.Append(ctx, "new", 0, msg("new 1"))
		}
		done <- err
	}()
	<-entered // "old 2" is committed; its fsync is blocked
	evs, err := s.Read(ctx, "old", 1)
	if err != nil || len(evs) != 1 {
		t.Fatalf("read during fsync: %d events, %v; want only the synced one", len(evs), err)
	}
	infos, err := s.Sessions(ctx)
	if err != nil || len(infos) != 1 || infos[0].LastSeq != 1 {
		t.Fatalf("sessions during fsync: %+v %v", infos, err)
	}
	select {
	case err := <-done:
		t.Fatalf("append acknowledged before its fsync returned (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	s.syncWAL = realSync // read by the batcher's sync stage only after release
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if evs, err := s.Read(ctx, "old", 1); err != nil || len(evs) != 2 {
		t.Fatalf("after fsync: %d events, %v", len(evs), err)
	}
	if infos, err := s.Sessions(ctx); err != nil || len(infos) != 2 {
		t.Fatalf("sessions after fsync: %+v %v", infos, err)
	}
}

// TestFsyncFailureFailsClosed: after a failed fsync nothing more is
// acknowledged, by this store; reopening recovers a consistent log that
// accepts appends again.
func TestFsyncFailureFailsClosed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sealer := storetest.NewSealer(t)
	s := mustOpen(t, dir, sealer)
	if _, err := s.Append(ctx, "a", 0, msg("1")); err != nil {
		t.Fatal(err)
	}
	s.syncWAL = func() error { return errors.New("EIO (injected)") }
	if _, err := s.Append(ctx, "a", 1, msg("2")); err == nil || !strings.Contains(err.Error(), "fsync WAL") {
		t.Fatalf("append with a failed fsync: %v", err)
	}
	if _, err := s.Append(ctx, "b", 0, msg("x")); err == nil {
		t.Fatal("append after a failed fsync was acknowledged")
	}
	s.Close()
	s = mustOpen(t, dir, sealer)
	evs, err := s.Read(ctx, "a", 1)
	if err != nil || len(evs) < 1 || evs[0].Seq != 1 {
		t.Fatalf("after reopen: %v %v", evs, err)
	}
	if _, err := s.Append(ctx, "a", evs[len(evs)-1].Seq, msg("3")); err != nil {
		t.Fatal(err)
	}
}

// TestStaleHintResealed: a caller seals its events on the tip it last saw
// (a hint); when another writer moved the tip meanwhile, the commit loop
// must not store those events but seal them again on the real tip (here a
// schema violation, which is appended whatever seq the caller expected).
func TestStaleHintResealed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sealer := storetest.NewSealer(t)
	a := mustOpen(t, dir, sealer)
	b := mustOpen(t, dir, sealer)
	if _, err := a.Append(ctx, "s", 0, msg("a 1")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, "s", 1, msg("b 2")); err != nil {
		t.Fatal(err)
	}
	// a's hint says seq 1; expected 1 matches it, but the tip is 2.
	var ce *store.ConflictError
	if _, err := a.Append(ctx, "s", 1, msg("a 2")); !errors.As(err, &ce) || ce.Actual != 2 {
		t.Fatalf("append on a stale hint: %v, want a conflict at 2", err)
	}
	if _, err := b.Append(ctx, "s", 2, msg("b 3")); err != nil {
		t.Fatal(err)
	}
	bad := event.Draft{RunID: "r", Type: event.OutputMessage, Actor: "worker", Payload: map[string]any{"text": 7}}
	if _, err := a.Append(ctx, "s", 2, bad); err == nil {
		t.Fatal("invalid payload accepted")
	}
	evs, err := b.Read(ctx, "s", 1)
	if err != nil || len(evs) != 4 {
		t.Fatalf("read: %d events, %v", len(evs), err)
	}
	for i, e := range evs {
		if h, err := event.CheckLineHash(e.Line()); err != nil || h != e.Hash || (i > 0 && e.PrevHash != evs[i-1].Hash) {
			t.Fatalf("seq %d: chain broken: %v", e.Seq, err)
		}
	}
	if evs[3].Type != event.SchemaViolation {
		t.Fatalf("last event %s, want the schema violation", evs[3].Type)
	}
}

package journal

import (
	"context"
	"errors"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
)

// lostAnswerStore stores the first checkpoint.created appended to it but
// answers with an in-doubt *store.UnavailableError, as the PostgreSQL
// store does when the commit reached the database and its answer did not
// come back within the retry bound.
type lostAnswerStore struct {
	store.Store
	done bool
}

func (s *lostAnswerStore) Append(ctx context.Context, sid string, expected int64, drafts ...event.Draft) ([]event.Event, error) {
	evs, err := s.Store.Append(ctx, sid, expected, drafts...)
	if err == nil && !s.done && drafts[0].Type == event.CheckpointCreated {
		s.done = true
		return nil, &store.UnavailableError{Op: "append", SessionID: sid, Attempts: 3, InDoubt: true, Err: errors.New("connection reset")}
	}
	return evs, err
}

// TestCheckpointInDoubtStopsTheJournal: a periodic checkpoint whose
// append is in doubt (it did commit) leaves the journal's tip unknown:
// the event that triggered it is appended, and the next append fails with
// the store fault instead of writing on a stale tip (a conflict the run
// would have taken for another writer).
func TestCheckpointInDoubtStopsTheJournal(t *testing.T) {
	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &lostAnswerStore{Store: store.NewMemory(sealer)}
	ctx := context.Background()
	j, err := Open(ctx, s, "unsure")
	if err != nil {
		t.Fatal(err)
	}
	j.Checkpoints(replay.NewFolder(), 2)
	if _, err := j.Append(ctx, event.SessionStart, "user", map[string]any{"prompt": "p"}, ""); err != nil {
		t.Fatal(err)
	}
	// The second event triggers the checkpoint, whose answer is lost.
	if _, err := j.Append(ctx, event.RunStarted, "runtime", map[string]any{"run_id": "run-1", "prompt": "p", "trigger": map[string]any{}}, ""); err != nil {
		t.Fatalf("the event before the checkpoint: %v", err)
	}
	_, err = j.Append(ctx, event.RunCompleted, "runtime", map[string]any{"output": "x"}, "")
	var ue *store.UnavailableError
	if !errors.Is(err, store.ErrUnavailable) || !errors.As(err, &ue) || !ue.InDoubt {
		t.Fatalf("append after the in-doubt checkpoint: %v, want the store fault", err)
	}
	evs, err := s.Read(ctx, "unsure", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 || evs[2].Type != event.CheckpointCreated {
		t.Fatalf("stored %d events (last %s), want session.start, run.started, checkpoint.created", len(evs), evs[len(evs)-1].Type)
	}
	// A journal opened again (the process taking the run over) reads the
	// tip and appends.
	j2, err := Open(ctx, s, "unsure")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j2.Append(ctx, event.RunCompleted, "runtime", map[string]any{"output": "x"}, ""); err != nil {
		t.Fatalf("append after reopening: %v", err)
	}
}

package queue

import (
	"context"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
)

// BeatOnAppend returns st with every successful Append counted as
// progress (Beat) on the delivery whose claim the append's context
// carries: a run that keeps writing its log keeps its delivery's claim;
// one that cannot write, or has stopped, lets it expire.
func BeatOnAppend(st store.Store) store.Store {
	if st == nil {
		return nil // no store stays no store, not a wrapper around nil
	}
	return beatingStore{st}
}

type beatingStore struct{ store.Store }

func (s beatingStore) Append(ctx context.Context, sessionID string, expectedSeq int64, drafts ...event.Draft) ([]event.Event, error) {
	evs, err := s.Store.Append(ctx, sessionID, expectedSeq, drafts...)
	if err == nil {
		Beat(ctx)
	}
	return evs, err
}

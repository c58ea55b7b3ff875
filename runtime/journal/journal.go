// Package journal is a session's append handle on the Store: it remembers
// the session's tip, numbers appends, and implements kernel.Recorder so the
// kernel and hooks record into the same chain as the runtime.
package journal

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
)

// Journal appends to one session. It is safe for concurrent use; appends are
// serialised so that each sees the previous one's seq. If another writer
// appends to the session, the next append fails with store.ErrConflict:
// one active run per session is the RunManager's job, and a conflict means
// that guarantee was broken, so the journal does not paper over it.
type Journal struct {
	store     store.Store
	sessionID string

	mu    sync.Mutex
	runID string
	seq   int64
	last  event.Event
}

// Open returns a journal positioned at the session's current tip.
func Open(ctx context.Context, s store.Store, sessionID string) (*Journal, error) {
	if !event.ValidSessionID(sessionID) {
		return nil, fmt.Errorf("journal: %q: %w", sessionID, event.ErrInvalidSession)
	}
	j := &Journal{store: s, sessionID: sessionID}
	evs, err := s.Read(ctx, sessionID, 1)
	if err != nil {
		return nil, fmt.Errorf("journal: read %s: %w", sessionID, err)
	}
	if n := len(evs); n > 0 {
		j.last = evs[n-1]
		j.seq = j.last.Seq
		j.runID = j.last.RunID
	}
	return j, nil
}

// SessionID returns the session id.
func (j *Journal) SessionID() string { return j.sessionID }

// SetRun sets the run id stamped on later events.
func (j *Journal) SetRun(runID string) {
	j.mu.Lock()
	j.runID = runID
	j.mu.Unlock()
}

// RunID returns the current run id.
func (j *Journal) RunID() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.runID
}

// Seq returns the last appended seq.
func (j *Journal) Seq() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.seq
}

// Append appends one event and returns it. A schema violation appends a
// schema.violation event (the journal's tip moves past it) and returns the
// *event.SchemaViolationError.
func (j *Journal) Append(ctx context.Context, typ, actor string, payload any, parentID string) (event.Event, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	evs, err := j.store.Append(ctx, j.sessionID, j.seq, event.Draft{RunID: j.runID, Type: typ, Actor: actor, Payload: payload, ParentID: parentID})
	if n := len(evs); n > 0 {
		j.seq = evs[n-1].Seq
		j.last = evs[n-1]
	}
	if err != nil {
		var sv *event.SchemaViolationError
		if errors.As(err, &sv) {
			return event.Event{}, err
		}
		return event.Event{}, fmt.Errorf("journal: append %s: %w", typ, err)
	}
	return evs[0], nil
}

// Record implements kernel.Recorder.
func (j *Journal) Record(ctx context.Context, eventType, actor string, payload any, parentID string) (string, error) {
	e, err := j.Append(ctx, eventType, actor, payload, parentID)
	if err != nil {
		return "", err
	}
	return e.ID, nil
}

// Events reads the whole session.
func (j *Journal) Events(ctx context.Context) ([]event.Event, error) {
	return j.store.Read(ctx, j.sessionID, 1)
}

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
	"github.com/agentos/agentos/runtime/replay"
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

	// Checkpoints: fold is the session's state, kept current
	// with every append; every > 0 writes checkpoint.created after that
	// many events since the last one.
	fold   *replay.Folder
	every  int64
	lastCP int64
	// unsure is the store fault of a periodic checkpoint whose append may
	// have committed (store.UnavailableError): the tip is not known any
	// more, so every later append fails with it (the run stops and is
	// taken over from the log, which says).
	unsure error
}

// Checkpoints keeps f (the session's state up to the journal's tip)
// current with every append, and writes checkpoint.created every `every`
// events (0: only when Checkpoint is called).
func (j *Journal) Checkpoints(f *replay.Folder, every int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.fold, j.every = f, every
	if s := f.Snapshot(); s.Checkpoint > j.lastCP {
		j.lastCP = s.Checkpoint
	}
}

// Checkpoint writes checkpoint.created with the folded state, unless the
// last event already is one or Checkpoints was not called.
func (j *Journal) Checkpoint(ctx context.Context) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.checkpointLocked(ctx)
}

func (j *Journal) checkpointLocked(ctx context.Context) error {
	if j.fold == nil || j.seq == 0 || j.last.Type == event.CheckpointCreated {
		return nil
	}
	cp, err := replay.NewCheckpoint(j.fold)
	if err != nil {
		return fmt.Errorf("journal: checkpoint: %w", err)
	}
	_, err = j.appendLocked(ctx, event.CheckpointCreated, "runtime", cp, "")
	return err
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
	e, err := j.appendLocked(ctx, typ, actor, payload, parentID)
	if err != nil || j.fold == nil || j.every <= 0 || typ == event.CheckpointCreated || j.seq-j.lastCP < j.every {
		return e, err
	}
	// A checkpoint that cannot be written is not the caller's failure:
	// the event is in the log and resume falls back to the full fold. A
	// store error shows on the next append: one that leaves the tip in
	// doubt fails it (unsure).
	if cerr := j.checkpointLocked(context.WithoutCancel(ctx)); errors.Is(cerr, store.ErrUnavailable) {
		j.unsure = cerr
	}
	return e, nil
}

func (j *Journal) appendLocked(ctx context.Context, typ, actor string, payload any, parentID string) (event.Event, error) {
	if j.unsure != nil {
		return event.Event{}, fmt.Errorf("journal: append %s: the session's tip is unknown since a checkpoint failed: %w", typ, j.unsure)
	}
	evs, err := j.store.Append(ctx, j.sessionID, j.seq, event.Draft{RunID: j.runID, Type: typ, Actor: actor, Payload: payload, ParentID: parentID})
	if n := len(evs); n > 0 {
		j.seq = evs[n-1].Seq
		j.last = evs[n-1]
		if j.fold != nil {
			for i := range evs {
				if ferr := j.fold.Apply(&evs[i]); ferr != nil {
					j.fold = nil // stop checkpointing a state we lost track of
					break
				}
			}
			if j.last.Type == event.CheckpointCreated {
				j.lastCP = j.seq
			}
		}
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

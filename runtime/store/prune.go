package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentos/agentos/runtime/event"
)

// Retention: deleting the stored events of sessions that ended long ago
// (docs/operations.md, "Retention"). A session is deleted only when its
// latest lifecycle event is session.close — it ended with a terminal
// report — and its last event is older than the cutoff; a paused session
// (waiting for an approval), a running one, or one the bot resumed after
// it closed is never deleted. The bot's record of where a session lives on
// GitHub is an event of the session's own log, so it goes with it; a
// session's log exported to the artifact branch is not touched, and a
// later request on the same issue or pull request imports it from there.

// Pruner is implemented by stores that can delete a session's events.
type Pruner interface {
	// DeleteSession deletes every event of the session, provided its last
	// event is still lastSeq, and returns how many it deleted. If the
	// session moved on (another writer appended) it deletes nothing and
	// returns a *ConflictError; an unknown session deletes nothing.
	DeleteSession(ctx context.Context, sessionID string, lastSeq int64) (int64, error)
}

// ErrNoPrune is returned by Prune for a store that cannot delete sessions.
var ErrNoPrune = errors.New("this event store cannot delete sessions")

// PruneOptions select the sessions Prune deletes.
type PruneOptions struct {
	// Before: only sessions whose last event is older are deleted. Zero
	// deletes nothing.
	Before time.Time
	// Keep, if set, vetoes the deletion of an ended session (true keeps
	// it).
	Keep func(SessionInfo) bool
}

// PruneResult counts what Prune deleted.
type PruneResult struct {
	Sessions int64 // sessions deleted
	Events   int64 // their events
}

// Prune deletes the sessions of s that ended before o.Before (see the
// package's retention note above). It walks the listing from the oldest
// activity end, one page at a time, and stops at ctx's end.
func Prune(ctx context.Context, s Store, o PruneOptions) (PruneResult, error) {
	var res PruneResult
	p, ok := s.(Pruner)
	if !ok {
		return res, ErrNoPrune
	}
	if o.Before.IsZero() {
		return res, nil
	}
	cutoff := o.Before.UTC().Format(event.TimeFormat)
	// Candidates are collected first, then checked and deleted one by one
	// (each deletion checks the session did not move since it was listed).
	var cands []SessionInfo
	var after Cursor
	for {
		page, err := s.List(ctx, ListOptions{Limit: MaxListLimit, After: after})
		if err != nil {
			return res, fmt.Errorf("prune: list sessions: %w", err)
		}
		for _, in := range page {
			if in.LastTS < cutoff && in.LastSeq > 0 {
				cands = append(cands, in)
			}
		}
		if len(page) < MaxListLimit {
			break
		}
		after = CursorOf(page[len(page)-1])
	}
	for _, in := range cands {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		ended, err := Ended(ctx, s, in)
		if err != nil {
			return res, fmt.Errorf("prune: session %s: %w", in.SessionID, err)
		}
		if !ended || (o.Keep != nil && o.Keep(in)) {
			continue
		}
		n, err := p.DeleteSession(ctx, in.SessionID, in.LastSeq)
		if errors.Is(err, ErrConflict) {
			continue // appended to since it was listed: it lives on
		}
		if err != nil {
			return res, fmt.Errorf("prune: delete session %s: %w", in.SessionID, err)
		}
		if n > 0 {
			res.Sessions++
			res.Events += n
		}
	}
	return res, nil
}

// lifecycle are the event types that change whether a session is open:
// the latest of them says whether it ended.
var lifecycle = map[string]bool{
	event.SessionStart: true, event.SessionClose: true,
	event.RunStarted: true, event.RunResumed: true, event.RunPaused: true, event.RunInterrupted: true,
	event.RunCompleted: true, event.RunFailed: true, event.RunCancelled: true,
	event.TurnTerminal: true, event.ApprovalRequested: true, event.ApprovalResolved: true,
}

// endedTail is how many of a session's last events Ended reads before it
// reads the whole log.
const endedTail = 64

// Ended reports whether the session in has ended: its latest lifecycle event
// (session.start or .close, run.*, turn.terminal, approval.*) is
// session.close, which a run appends after its terminal report only. A
// paused run (run.paused), a running or interrupted one, and a session
// resumed after it closed are not ended. It reads the last events of the
// session, and the whole log only when those hold no lifecycle event.
func Ended(ctx context.Context, s Store, in SessionInfo) (bool, error) {
	if in.LastType == event.SessionClose {
		return true, nil
	}
	latest := ""
	from := max(1, in.LastSeq-endedTail+1)
	note := func(e *event.Event) error {
		if lifecycle[e.Type] {
			latest = e.Type
		}
		return nil
	}
	if err := s.Scan(ctx, in.SessionID, from, note); err != nil {
		return false, err
	}
	if latest == "" && from > 1 {
		if err := s.Scan(ctx, in.SessionID, 1, note); err != nil {
			return false, err
		}
	}
	return latest == event.SessionClose, nil
}

// Delete drops the session's entry, if it has one.
func (x *Index) Delete(sessionID string) {
	if n, ok := x.byID[sessionID]; ok {
		x.remove(n)
	}
}

// DeleteSession implements Pruner.
func (m *Memory) DeleteSession(ctx context.Context, sessionID string, lastSeq int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	evs := m.sessions[sessionID]
	if len(evs) == 0 {
		return 0, nil
	}
	if last := evs[len(evs)-1].Seq; last != lastSeq {
		return 0, &ConflictError{SessionID: sessionID, Expected: lastSeq, Actual: last}
	}
	delete(m.sessions, sessionID)
	m.index.Delete(sessionID)
	return int64(len(evs)), nil
}

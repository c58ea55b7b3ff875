// Package store defines the event Store: append with an expected sequence
// number, read a session from a sequence number, list sessions, and watch
// for new events. Backends live in sub-packages (sqlite, jsonl); Memory is
// the in-process backend for tests and benchmarks.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentos/agentos/runtime/event"
)

// Store is the append-only event log. Implementations are safe for
// concurrent use and must make an appended event durable before Append
// returns (Memory excepted).
type Store interface {
	// Append seals drafts and appends them to the session right after
	// expectedSeq (0 for a new session). If another writer appended first it
	// returns a *ConflictError and appends nothing. If a draft's payload
	// fails its schema it appends one schema.violation event instead of the
	// batch and returns *event.SchemaViolationError.
	Append(ctx context.Context, sessionID string, expectedSeq int64, drafts ...event.Draft) ([]event.Event, error)
	// Read returns the session's events with seq >= fromSeq, in order.
	// An unknown session has no events.
	Read(ctx context.Context, sessionID string, fromSeq int64) ([]event.Event, error)
	// Scan calls fn for each of the session's events with seq >=
	// fromSeq, in order, until fn returns an error (which Scan returns).
	// Unlike Read it does not hold the whole log in memory: a backend
	// reads it in pieces. fn may keep the event.
	Scan(ctx context.Context, sessionID string, fromSeq int64, fn func(*event.Event) error) error
	// Sessions lists every session with at least one event, by id. Its
	// cost grows with the number of sessions: listings use List.
	Sessions(ctx context.Context) ([]SessionInfo, error)
	// List returns one page of sessions, newest activity first, from the
	// backend's index (see ListOptions and Cursor): its cost does not grow
	// with the number of sessions stored.
	List(ctx context.Context, o ListOptions) ([]SessionInfo, error)
	// Watch returns a channel that receives a value (coalesced) after each
	// successful append to the session, and a function that stops watching.
	Watch(sessionID string) (<-chan struct{}, func())
	Close() error
}

// SessionInfo summarises one session.
type SessionInfo struct {
	SessionID string `json:"session_id"`
	LastSeq   int64  `json:"last_seq"`
	FirstTS   string `json:"first_ts"`
	LastTS    string `json:"last_ts"`
	LastType  string `json:"last_type"`
}

// ErrConflict matches every *ConflictError.
var ErrConflict = errors.New("append conflict")

// ErrClosed is returned by operations on a closed store.
var ErrClosed = errors.New("store closed")

// ConflictError says another writer appended to the session first.
type ConflictError struct {
	SessionID string
	Expected  int64 // the seq the caller believed was last
	Actual    int64 // the session's actual last seq
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("append to session %s: expected last seq %d, store has %d", e.SessionID, e.Expected, e.Actual)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Follow calls fn for every event of the session with seq > afterSeq, in
// order and without gaps or duplicates, first the backlog and then new
// events as they are appended, until ctx ends, fn returns an error, or fn
// returns stop=true. It is the basis of SSE streaming.
func Follow(ctx context.Context, s Store, sessionID string, afterSeq int64, fn func(event.Event) (stop bool, err error)) error {
	wake, cancel := s.Watch(sessionID)
	defer cancel()
	next := afterSeq + 1
	for {
		evs, err := s.Read(ctx, sessionID, next)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.Seq != next {
				return fmt.Errorf("follow %s: gap: want seq %d, got %d", sessionID, next, e.Seq)
			}
			stop, err := fn(e)
			if err != nil || stop {
				return err
			}
			next++
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

// ErrUnavailable matches every *UnavailableError.
var ErrUnavailable = errors.New("store unavailable")

// UnavailableError says an append could not reach the database within
// the store's retry bound (a network blip or restart that outlasted it).
// Appends are retried with backoff inside the bound and are idempotent by
// (session, seq, hash), so a retried append that had in fact committed is
// reported as committed, never written twice; this error is returned only
// once the bound has passed.
//
// InDoubt says an attempt reached the database and its outcome is
// unknown: the events may be in the log. A caller must not append after
// them on its own idea of the tip: it should stop (a run pauses), and
// read the session again once the store answers, which tells whether the
// events are there.
type UnavailableError struct {
	Op        string // "append", "import"
	SessionID string
	Attempts  int
	Elapsed   time.Duration
	InDoubt   bool
	Err       error // the last attempt's error
}

func (e *UnavailableError) Error() string {
	doubt := ""
	if e.InDoubt {
		doubt = " (an attempt may have committed: read the session before appending again)"
	}
	return fmt.Sprintf("%s to session %s: the store was unreachable for %s (%d attempts)%s: %v", e.Op, e.SessionID, e.Elapsed.Round(time.Millisecond), e.Attempts, doubt, e.Err)
}

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

func (e *UnavailableError) Unwrap() error { return e.Err }

package postgres

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Appends ride out a database blip. An append that fails because the
// database cannot be reached (connection refused or reset, the backend
// terminated, the server starting or shutting down) is retried with
// backoff until Options.RetryFor has passed since its first attempt, then
// fails with *store.UnavailableError.
//
// A retry must not write the events twice. An attempt whose connection
// died may have committed (the COMMIT reached the server, its answer did
// not reach us), so each sealed version of an append that may have been
// sent is kept as in doubt; before trying again the store asks the
// database whether the last event of such a version is stored with its
// hash, and if it is, the append succeeded. Otherwise the same sealed
// events are sent again where the session's head has not moved, so a
// commit that lands late makes the retry a unique violation, which the
// same check resolves. Events are thus idempotent by (session, seq, hash).

// DefaultRetryFor is how long appends are retried by default.
const DefaultRetryFor = 30 * time.Second

// transient reports whether err says the database could not be reached
// or dropped the connection, as opposed to refusing the statement.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code[:2] {
		case "08": // connection exception
			return true
		case "57": // operator intervention: admin shutdown, crash shutdown, cannot connect now
			return pe.Code != "57014" // query_canceled is not a blip
		case "53": // insufficient resources (too many connections)
			return pe.Code == "53300"
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err) || pgconn.Timeout(err) || isClosedConn(err)
}

func isClosedConn(err error) bool {
	var oe *net.OpError
	return errors.Is(err, net.ErrClosed) || errors.As(err, &oe) || errors.Is(err, pgx.ErrTxClosed)
}

// backoff paces the retries of one append within the bound.
type backoff struct {
	start    time.Time
	bound    time.Duration
	next     time.Duration
	attempts int
}

func (s *Store) newBackoff() *backoff {
	return &backoff{start: time.Now(), bound: s.opts.RetryFor, next: 50 * time.Millisecond, attempts: 1}
}

// wait sleeps before the next attempt and reports whether there is one
// (false: the bound has passed, or ctx ended).
func (b *backoff) wait(ctx context.Context) bool {
	left := b.bound - time.Since(b.start)
	if b.bound <= 0 || left <= 0 {
		return false
	}
	d := min(b.next/2+rand.N(b.next/2+1), left)
	b.next = min(2*b.next, 2*time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return false
	}
	b.attempts++
	return true
}

func (b *backoff) unavailable(op, sid string, inDoubt bool, err error) error {
	return &store.UnavailableError{Op: op, SessionID: sid, Attempts: b.attempts, Elapsed: time.Since(b.start), InDoubt: inDoubt, Err: err}
}

// committed reports which of the in-doubt versions of a session's append
// is stored (-1: none), by the hash of its last event.
func (s *Store) committed(ctx context.Context, sid string, versions [][]event.Event) (int, error) {
	for i, v := range versions {
		last := v[len(v)-1]
		var hash string
		err := s.pool.QueryRow(ctx, `SELECT hash FROM agentos_events WHERE session_id = $1 AND seq = $2`, sid, last.Seq).Scan(&hash)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return -1, err
		}
		if hash == last.Hash {
			return i, nil
		}
	}
	return -1, nil
}

package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrLeased is returned by Leases.Acquire when another live replica holds
// the session's lease.
var ErrLeased = errors.New("the session is leased by another replica")

// LeasedError names the holder of a lease.
type LeasedError struct {
	SessionID string
	Owner     string
	Expires   time.Time
}

func (e *LeasedError) Error() string {
	return fmt.Sprintf("session %s is leased by replica %s until %s", e.SessionID, e.Owner, e.Expires.UTC().Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrLeased) true.
func (e *LeasedError) Is(target error) bool { return target == ErrLeased }

var leaseMigrations = []Migration{
	{Version: 1, SQL: `
CREATE TABLE agentos_leases (
	session_id text        PRIMARY KEY,
	owner      text        NOT NULL,
	token      text        NOT NULL,
	expires_at timestamptz NOT NULL
);`},
	// A cancel asked of the replica that holds the lease: its renewal
	// sees it (Leases.OnCancel).
	{Version: 2, SQL: `
ALTER TABLE agentos_leases ADD COLUMN cancel_by text, ADD COLUMN cancel_reason text;`},
}

// Defaults of Leases.
const DefaultLeaseTTL = 30 * time.Second

// LeaseOptions tune Leases.
type LeaseOptions struct {
	// Owner names this replica. A lease held under the same Owner by an
	// earlier process (it restarted) is taken over at once.
	Owner string
	// TTL is how long a lease lasts without renewal (default
	// DefaultLeaseTTL); held leases are renewed every TTL/3, so the
	// sessions of a replica that dies are free after at most TTL.
	TTL    time.Duration
	Logger *slog.Logger
}

// Leases are per-session leases in PostgreSQL: one replica at a time
// works a session. A lease is a row (session, owner, token, expiry);
// Acquire inserts it or takes over an expired one in one statement, the
// owner renews what it holds, and Release deletes it (by token, so a
// replica that lost its lease cannot delete the next holder's).
type Leases struct {
	pool *pgxpool.Pool
	opts LeaseOptions
	now  func() time.Time

	mu       sync.Mutex
	held     map[string]string // session → token
	lost     map[string]bool   // sessions whose renewal found the lease gone
	cancels  map[string]bool   // held sessions whose cancel was handed to onCancel
	onCancel func(sessionID, by, reason string)
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// OpenLeases migrates the lease table and starts renewing.
func OpenLeases(ctx context.Context, pool *pgxpool.Pool, o LeaseOptions) (*Leases, error) {
	if o.Owner == "" {
		return nil, errors.New("postgres: leases need an owner name")
	}
	if o.TTL <= 0 {
		o.TTL = DefaultLeaseTTL
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := Migrate(ctx, pool, "leases", leaseMigrations); err != nil {
		return nil, err
	}
	l := &Leases{pool: pool, opts: o, now: time.Now, held: map[string]string{}, lost: map[string]bool{}, cancels: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go l.renewLoop()
	return l, nil
}

// Owner is this replica's name.
func (l *Leases) Owner() string { return l.opts.Owner }

// Acquire takes the session's lease for this replica, or fails with a
// *LeasedError if another replica holds an unexpired one. The returned
// release gives it up. Acquiring a lease this replica already holds in
// this process is the caller's error (serialise per session first).
func (l *Leases) Acquire(ctx context.Context, sessionID string) (release func(), err error) {
	tok := randomHex()
	now := l.now()
	var got string
	err = l.pool.QueryRow(ctx, `
INSERT INTO agentos_leases AS l (session_id, owner, token, expires_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, token = excluded.token, expires_at = excluded.expires_at
WHERE l.expires_at <= $5 OR l.owner = $2
RETURNING token`, sessionID, l.opts.Owner, tok, now.Add(l.opts.TTL), now).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		le := &LeasedError{SessionID: sessionID}
		if err := l.pool.QueryRow(ctx, `SELECT owner, expires_at FROM agentos_leases WHERE session_id = $1`, sessionID).Scan(&le.Owner, &le.Expires); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("postgres: lease %s: %w", sessionID, err)
		}
		return nil, le
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: lease %s: %w", sessionID, err)
	}
	l.mu.Lock()
	l.held[sessionID] = tok
	delete(l.lost, sessionID)
	l.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { l.release(sessionID, tok) }) }, nil
}

// RequestCancel asks the replica holding session sessionID's lease to
// cancel the session's run: its next renewal (within TTL/3) hands the
// request to its OnCancel. held is false when no replica holds a live
// lease (the caller can take the lease and cancel itself). A lease
// taken over after its holder died keeps the request.
func (l *Leases) RequestCancel(ctx context.Context, sessionID, by, reason string) (held bool, err error) {
	tag, err := l.pool.Exec(ctx, `UPDATE agentos_leases SET cancel_by = $2, cancel_reason = $3 WHERE session_id = $1 AND expires_at > $4`, sessionID, by, reason, l.now())
	if err != nil {
		return false, fmt.Errorf("postgres: request cancel of %s: %w", sessionID, err)
	}
	return tag.RowsAffected() > 0, nil
}

// OnCancel sets what a renewal calls, once per held lease, when another
// replica asked for the session's cancel (RequestCancel): the dispatcher
// cancels the run it works. It is called on its own goroutine.
func (l *Leases) OnCancel(f func(sessionID, by, reason string)) {
	l.mu.Lock()
	l.onCancel = f
	l.mu.Unlock()
}

// Lost reports whether renewing found the session's lease taken (this
// replica stalled past the TTL and another took the session over): the
// caller must stop working the session.
func (l *Leases) Lost(sessionID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost[sessionID]
}

func (l *Leases) release(sessionID, tok string) {
	l.mu.Lock()
	if l.held[sessionID] == tok {
		delete(l.held, sessionID)
		delete(l.cancels, sessionID)
	}
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := l.pool.Exec(ctx, `DELETE FROM agentos_leases WHERE session_id = $1 AND token = $2`, sessionID, tok); err != nil {
		// It expires on its own.
		l.opts.Logger.Warn("postgres: release lease", "session", sessionID, "err", err)
	}
}

func (l *Leases) renewLoop() {
	defer close(l.done)
	t := time.NewTicker(l.opts.TTL / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		l.renew()
	}
}

// renew extends every held lease; a lease no longer ours is marked lost.
func (l *Leases) renew() {
	l.mu.Lock()
	sids := make([]string, 0, len(l.held))
	toks := make([]string, 0, len(l.held))
	for sid, tok := range l.held {
		sids, toks = append(sids, sid), append(toks, tok)
	}
	l.mu.Unlock()
	if len(toks) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.TTL/3)
	defer cancel()
	rows, err := l.pool.Query(ctx, `UPDATE agentos_leases SET expires_at = $2 WHERE token = ANY($1) RETURNING token, cancel_by, cancel_reason`, toks, l.now().Add(l.opts.TTL))
	if err != nil {
		l.opts.Logger.Warn("postgres: renew leases", "err", err)
		return
	}
	kept := map[string]bool{}
	type request struct{ by, reason string }
	asked := map[string]request{} // token → the cancel asked of it
	for rows.Next() {
		var tok string
		var by, reason *string
		if rows.Scan(&tok, &by, &reason) == nil {
			kept[tok] = true
			if by != nil {
				c := request{by: *by}
				if reason != nil {
					c.reason = *reason
				}
				asked[tok] = c
			}
		}
	}
	if rows.Err() != nil {
		return
	}
	l.mu.Lock()
	for i, sid := range sids {
		c, ok := asked[toks[i]]
		if !ok || l.held[sid] != toks[i] || l.cancels[sid] || l.onCancel == nil {
			continue
		}
		l.cancels[sid] = true
		l.opts.Logger.Info("postgres: another replica asked to cancel a session this replica works", "session", sid, "by", c.by)
		go l.onCancel(sid, c.by, c.reason)
	}
	for i, sid := range sids {
		if !kept[toks[i]] && l.held[sid] == toks[i] {
			l.lost[sid] = true
			delete(l.held, sid)
			l.opts.Logger.Error("postgres: lost the lease of a session another replica took over", "session", sid)
		}
	}
	l.mu.Unlock()
}

// Close stops renewing and releases every held lease.
func (l *Leases) Close() {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		l.mu.Lock()
		held := l.held
		l.held = map[string]string{}
		l.mu.Unlock()
		for sid, tok := range held {
			l.release(sid, tok)
		}
	})
}

// crash stops renewing without releasing (tests: a killed replica).
func (l *Leases) crash() {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
	})
}

func randomHex() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

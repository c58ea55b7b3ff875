// Package postgres is the Store for several server replicas on one
// PostgreSQL database (pgx v5, pgxpool).
//
// Layout (component "events", see Migrate): agentos_events holds each
// event's canonical line under the primary key (session_id, seq), so two
// appends that race for the same seq cannot both commit: the loser gets a
// unique violation, returned as a *store.ConflictError, and the chain never
// forks. agentos_sessions holds each session's head (last seq and hash,
// first and last time, last type) for Sessions and for sealing.
//
// Appends are group-committed (group.go, on runtime/groupcommit): the
// appends waiting when a commit slot is free share one transaction and
// one WAL flush, with the
// batch's head rows locked in session order, and pg_notify announces
// "session seq" on the channel agentos_events at commit.
// BenchmarkAppend64, 64 sessions: 18.5k events/s against 1.7k with a
// transaction per append, and 55k for embedded SQLite in the same run.
//
// Without group commit (Options.NoGroupCommit, the baseline) an append is
// one statement (one round trip, its own transaction): the events go in
// with a multi-row INSERT from arrays, the head row is upserted and
// pg_notify called, all in one data-modifying CTE. The events are sealed
// before the statement on the session's tip: the tip this process last
// appended or read (a hint), else read from the head row. A stale hint is
// harmless: event seq E with hash H never changes once committed, so
// sealing on (E, H) is correct exactly when seq E+1 does not exist yet,
// which the primary key checks.
//
// Watch is served by a LISTEN on agentos_events (one connection per
// Listener) plus a poll every Options.PollInterval, so events appended by
// another replica reach this replica's followers, and a lost notification
// only delays them.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/groupcommit"
	"github.com/agentos/agentos/runtime/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// EventsChannel is the NOTIFY channel of appends; the payload is
// "<session id> <last seq>".
const EventsChannel = "agentos_events"

// eventMigrations are the versioned steps of the event store's schema.
var eventMigrations = []Migration{
	{Version: 1, SQL: `
CREATE TABLE agentos_events (
	session_id text   NOT NULL,
	seq        bigint NOT NULL CHECK (seq > 0),
	hash       text   NOT NULL,
	line       bytea  NOT NULL,
	PRIMARY KEY (session_id, seq)
);
CREATE TABLE agentos_sessions (
	session_id text   PRIMARY KEY,
	last_seq   bigint NOT NULL,
	last_hash  text   NOT NULL,
	first_ts   text   NOT NULL,
	last_ts    text   NOT NULL,
	last_type  text   NOT NULL
);`},
	// Listing by activity (List): an index range scan from the cursor.
	// Head rows with last_seq 0 are a group commit's placeholders.
	{Version: 2, SQL: `
CREATE INDEX agentos_sessions_activity ON agentos_sessions (last_ts COLLATE "C" DESC, session_id COLLATE "C" DESC) WHERE last_seq > 0;`},
}

// EventMigrations returns the event store's schema steps (for tools and
// tests that check the version).
func EventMigrations() []Migration { return append([]Migration(nil), eventMigrations...) }

// Options tune the store.
type Options struct {
	// Listener delivers cross-replica wake-ups; nil: the store starts its
	// own (one connection) and closes it with the store.
	Listener *Listener
	// PollInterval wakes every watcher this often, in case a notification
	// was lost (default 2 s; negative: never).
	PollInterval time.Duration
	Logger       *slog.Logger
	// NoGroupCommit appends each call in its own one-statement
	// transaction (one WAL flush each): the baseline of BenchmarkAppend64.
	NoGroupCommit bool
	// MaxBatch bounds the appends one group commit takes (default 256).
	MaxBatch int
	// Committers is how many group commits may be in flight at once, each
	// on its own connection (default 2): while one waits for its flush the
	// next batch is being written. BenchmarkAppend64 (64 sessions, shared
	// 2-core machine): 1 → 16k events/s, 2 → 18.5k, 4 → 9k (smaller
	// batches contending for the same head rows).
	Committers int
	// RetryFor bounds how long an append is retried while the database
	// cannot be reached (default DefaultRetryFor; negative: not retried).
	// After it the append fails with *store.UnavailableError (retry.go).
	RetryFor time.Duration
}

// Store is the PostgreSQL event store.
type Store struct {
	store.Watchers
	pool    *pgxpool.Pool
	sealer  *event.Sealer
	opts    Options
	ownsL   bool
	hintsMu sync.Mutex
	hints   map[string]event.Tip

	// gc group-commits appends (group.go); nil with NoGroupCommit.
	gc *groupcommit.Batcher[*groupReq]

	stop   chan struct{}
	done   chan struct{}
	mu     sync.RWMutex
	closed bool
}

// Open migrates the schema (under an advisory lock) and returns the store
// on pool. The pool stays the caller's: Close does not close it.
func Open(ctx context.Context, pool *pgxpool.Pool, sealer *event.Sealer, opts Options) (*Store, error) {
	if err := Migrate(ctx, pool, "events", eventMigrations); err != nil {
		return nil, err
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 2 * time.Second
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	if opts.Committers <= 0 {
		opts.Committers = 2
	}
	if opts.RetryFor == 0 {
		opts.RetryFor = DefaultRetryFor
	}
	s := &Store{pool: pool, sealer: sealer, opts: opts, hints: map[string]event.Tip{}, stop: make(chan struct{}), done: make(chan struct{})}
	if !opts.NoGroupCommit {
		gc, err := groupcommit.New(s.commitGroup, groupcommit.Options[*groupReq]{MaxBatch: opts.MaxBatch, InFlight: opts.Committers})
		if err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		s.gc = gc
	}
	l := opts.Listener
	if l == nil {
		l = NewListener(pool, opts.Logger)
		s.ownsL = true
	}
	l.Handle(EventsChannel, s.onNotify, s.NotifyAll)
	if s.ownsL {
		l.Start()
	}
	s.opts.Listener = l
	go s.poll()
	return s, nil
}

// Listener returns the listener the store's Watch uses.
func (s *Store) Listener() *Listener { return s.opts.Listener }

// Pool returns the store's pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

func (s *Store) onNotify(payload string) {
	if sid, _, ok := parseNotify(payload); ok {
		s.Notify(sid)
	}
}

func (s *Store) poll() {
	defer close(s.done)
	if s.opts.PollInterval < 0 {
		<-s.stop
		return
	}
	t := time.NewTicker(s.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.NotifyAll()
		}
	}
}

func (s *Store) hint(sid string) (event.Tip, bool) {
	s.hintsMu.Lock()
	defer s.hintsMu.Unlock()
	t, ok := s.hints[sid]
	return t, ok
}

// maxHints bounds the cached tips; the map is dropped when full.
const maxHints = 1 << 16

func (s *Store) setHint(sid string, t event.Tip) {
	s.hintsMu.Lock()
	if len(s.hints) >= maxHints {
		s.hints = map[string]event.Tip{}
	}
	if cur, ok := s.hints[sid]; !ok || t.Seq > cur.Seq {
		s.hints[sid] = t
	}
	s.hintsMu.Unlock()
}

// head reads a session's committed tip from its head row.
func (s *Store) head(ctx context.Context, sid string) (event.Tip, error) {
	var t event.Tip
	err := s.pool.QueryRow(ctx, `SELECT last_seq, last_hash FROM agentos_sessions WHERE session_id = $1`, sid).Scan(&t.Seq, &t.Hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return event.Tip{}, nil
	}
	if err != nil {
		return t, fmt.Errorf("postgres: read head of %s: %w", sid, err)
	}
	s.setHint(sid, t)
	return t, nil
}

func (s *Store) open() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.ErrClosed
	}
	return nil
}

// Append implements store.Store.
func (s *Store) Append(ctx context.Context, sessionID string, expectedSeq int64, drafts ...event.Draft) ([]event.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.open(); err != nil {
		return nil, err
	}
	ps, perr := s.sealer.PrepareAll(sessionID, drafts)
	if ps == nil {
		return nil, perr
	}
	if s.gc != nil {
		r := &groupReq{sid: sessionID, expected: expectedSeq, prepared: ps, perr: perr, done: make(chan struct{})}
		if err := s.submit(ctx, r); err != nil {
			return nil, err
		}
		if r.err != nil {
			return nil, r.err
		}
		s.Notify(sessionID)
		return store.Finish(r.out, perr)
	}
	bo := s.newBackoff()
	var doubt [][]event.Event // versions sent whose outcome is unknown
	for attempt := 0; ; attempt++ {
		if len(doubt) > 0 {
			i, err := s.committed(ctx, sessionID, doubt)
			if transient(err) && bo.wait(ctx) {
				continue
			}
			if err != nil {
				return nil, bo.unavailable("append", sessionID, true, err)
			}
			if i >= 0 {
				evs := doubt[i]
				last := evs[len(evs)-1]
				s.setHint(sessionID, event.Tip{Seq: last.Seq, Hash: last.Hash})
				s.Notify(sessionID)
				return store.Finish(evs, perr)
			}
		}
		tip, ok := s.hint(sessionID)
		if !ok || (tip.Seq != expectedSeq && perr == nil) || attempt > 0 {
			var err error
			if tip, err = s.head(ctx, sessionID); err != nil {
				if transient(err) && bo.wait(ctx) {
					continue
				}
				if transient(err) {
					return nil, bo.unavailable("append", sessionID, len(doubt) > 0, err)
				}
				return nil, err
			}
		}
		if tip.Seq != expectedSeq && perr == nil {
			return nil, &store.ConflictError{SessionID: sessionID, Expected: expectedSeq, Actual: tip.Seq}
		}
		var evs []event.Event
		if n := len(doubt); n > 0 && doubt[n-1][0].Seq == tip.Seq+1 && doubt[n-1][0].PrevHash == tip.Hash {
			// The same events again: should the first try's commit land
			// late, this one is a unique violation, resolved above.
			evs = doubt[n-1]
		} else {
			evs = s.sealer.Chain(tip, ps)
		}
		err := s.insert(ctx, sessionID, tip.Seq, evs)
		if transient(err) {
			doubt = append(doubt, evs)
			if bo.wait(ctx) {
				continue
			}
			return nil, bo.unavailable("append", sessionID, true, err)
		}
		if err == nil {
			last := evs[len(evs)-1]
			s.setHint(sessionID, event.Tip{Seq: last.Seq, Hash: last.Hash})
			s.Notify(sessionID)
			return store.Finish(evs, perr)
		}
		if !isUniqueViolation(err) {
			return nil, fmt.Errorf("postgres: append to %s: %w", sessionID, err)
		}
		// Lost the race for tip.Seq+1 (perhaps to a late commit of our
		// own, which the check at the top finds). A schema.violation goes
		// on the new tip; anything else is the caller's conflict.
		if (perr != nil || len(doubt) > 0) && attempt < 10 {
			continue
		}
		actual, herr := s.head(ctx, sessionID)
		if herr != nil {
			return nil, herr
		}
		return nil, &store.ConflictError{SessionID: sessionID, Expected: expectedSeq, Actual: actual.Seq}
	}
}

// submit hands r to the group commit and waits for it. Once submitted,
// the append commits or fails as a whole even if ctx ends, so that the
// caller's view of the session stays right.
func (s *Store) submit(ctx context.Context, r *groupReq) error {
	if err := s.gc.Send(ctx, r); err != nil {
		if errors.Is(err, groupcommit.ErrClosed) {
			return store.ErrClosed
		}
		return err
	}
	<-r.done
	return nil
}

// appendSQL inserts a session's events, moves its head and notifies, in
// one statement.
const appendSQL = `
WITH ins AS (
	INSERT INTO agentos_events (session_id, seq, hash, line)
	SELECT $1, u.seq, u.hash, u.line FROM unnest($2::bigint[], $3::text[], $4::bytea[]) AS u(seq, hash, line)
	RETURNING seq
), head AS (
	INSERT INTO agentos_sessions AS h (session_id, last_seq, last_hash, first_ts, last_ts, last_type)
	VALUES ($1, $5, $6, $7, $8, $9)
	ON CONFLICT (session_id) DO UPDATE SET last_seq = excluded.last_seq, last_hash = excluded.last_hash,
		last_ts = excluded.last_ts, last_type = excluded.last_type,
		first_ts = CASE WHEN h.first_ts = '' THEN excluded.first_ts ELSE h.first_ts END
	WHERE h.last_seq = $10
	RETURNING 1
)
SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM head), pg_notify('` + EventsChannel + `', $1 || ' ' || $5::text)`

func (s *Store) insert(ctx context.Context, sid string, after int64, evs []event.Event) error {
	seqs := make([]int64, len(evs))
	hashes := make([]string, len(evs))
	lines := make([][]byte, len(evs))
	for i := range evs {
		seqs[i], hashes[i], lines[i] = evs[i].Seq, evs[i].Hash, evs[i].Line()
	}
	last := evs[len(evs)-1]
	var ins, head int64
	var discard string
	// Once sent, the statement commits or not as a whole; a cancelled ctx
	// must not leave the caller unsure whether its events are in.
	err := s.pool.QueryRow(context.WithoutCancel(ctx), appendSQL, sid, seqs, hashes, lines, last.Seq, last.Hash, evs[0].TS, last.TS, last.Type, after).Scan(&ins, &head, &discard)
	if err != nil {
		return err
	}
	if ins != int64(len(evs)) || head != 1 {
		// Cannot happen while every writer goes through this statement
		// (the primary key admits seq after+1 only once, and only after
		// seq after). Report it rather than pretend.
		return fmt.Errorf("postgres: append to %s: inserted %d events and moved %d heads (the head row disagrees with the events)", sid, ins, head)
	}
	return nil
}

func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// ImportSealed implements store.Importer.
func (s *Store) ImportSealed(ctx context.Context, sessionID string, evs []event.Event) error {
	if len(evs) == 0 {
		return nil
	}
	if err := s.open(); err != nil {
		return err
	}
	tip, err := s.head(ctx, sessionID)
	if err != nil {
		return err
	}
	if err := store.CheckContinues(tip, sessionID, evs); err != nil {
		return err
	}
	if s.gc != nil {
		r := &groupReq{sid: sessionID, imported: evs, done: make(chan struct{})}
		if err := s.submit(ctx, r); err != nil {
			return err
		}
		if r.err == nil {
			s.Notify(sessionID)
		}
		return r.err
	}
	if err := s.insert(ctx, sessionID, tip.Seq, evs); err != nil {
		if isUniqueViolation(err) {
			return fmt.Errorf("import into %s: another writer appended first: %w", sessionID, store.ErrChain)
		}
		return fmt.Errorf("postgres: import into %s: %w", sessionID, err)
	}
	last := evs[len(evs)-1]
	s.setHint(sessionID, event.Tip{Seq: last.Seq, Hash: last.Hash})
	s.Notify(sessionID)
	return nil
}

// Read implements store.Store.
func (s *Store) Read(ctx context.Context, sessionID string, fromSeq int64) ([]event.Event, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	// A read rides out a blip as an append does (retry.go), then fails
	// with *store.UnavailableError, so a run reading its own log stops
	// and is handed back instead of failing on a connection error.
	return s.readPageRetried(ctx, sessionID, max(fromSeq, 1), 0)
}

// readPage reads the session's events from seq fromSeq on, at most limit
// of them (0: all).
func (s *Store) readPage(ctx context.Context, sessionID string, fromSeq int64, limit int) ([]event.Event, error) {
	q := `SELECT seq, line FROM agentos_events WHERE session_id = $1 AND seq >= $2 ORDER BY seq`
	args := []any{sessionID, fromSeq}
	if limit > 0 {
		q += ` LIMIT $3`
		args = append(args, limit)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: read %s: %w", sessionID, err)
	}
	defer rows.Close()
	var out []event.Event
	for rows.Next() {
		var seq int64
		var line []byte
		if err := rows.Scan(&seq, &line); err != nil {
			return nil, fmt.Errorf("postgres: read %s: %w", sessionID, err)
		}
		e, err := event.ParseLineFast(line)
		if err != nil || e.Seq != seq || e.SessionID != sessionID {
			return nil, fmt.Errorf("postgres: read %s: seq %d: stored line does not decode to its row (%v)", sessionID, seq, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: read %s: %w", sessionID, err)
	}
	return out, nil
}

// Sessions implements store.Store.
func (s *Store) Sessions(ctx context.Context) ([]store.SessionInfo, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT session_id, last_seq, first_ts, last_ts, last_type FROM agentos_sessions WHERE last_seq > 0 ORDER BY session_id COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("postgres: sessions: %w", err)
	}
	defer rows.Close()
	var out []store.SessionInfo
	for rows.Next() {
		var si store.SessionInfo
		if err := rows.Scan(&si.SessionID, &si.LastSeq, &si.FirstTS, &si.LastTS, &si.LastType); err != nil {
			return nil, fmt.Errorf("postgres: sessions: %w", err)
		}
		out = append(out, si)
	}
	return out, rows.Err()
}

// Ping checks the database is reachable (readiness).
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// Close stops the store's background work (and its own listener); the
// pool stays open.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	if s.gc != nil {
		s.gc.Close() // commits what was sent, refuses the rest
	}
	close(s.stop)
	<-s.done
	if s.ownsL {
		s.opts.Listener.Close()
	}
	return nil
}

// parseNotify splits an events notification payload.
func parseNotify(p string) (string, int64, bool) {
	sid, seq, ok := strings.Cut(p, " ")
	if !ok {
		return "", 0, false
	}
	n, err := strconv.ParseInt(seq, 10, 64)
	return sid, n, err == nil
}

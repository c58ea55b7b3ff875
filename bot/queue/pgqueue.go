package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/agentos/agentos/runtime/groupcommit"
	"github.com/agentos/agentos/runtime/store/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DeliveriesChannel is the NOTIFY channel on which PGQueue announces a new
// delivery.
const DeliveriesChannel = "agentos_deliveries"

// Defaults of PGQueue.
const (
	DefaultClaimTTL = 60 * time.Second
	// DefaultStallTimeout is longer than any one model call or tool the
	// run makes without appending an event.
	DefaultStallTimeout = 3 * time.Minute
	DefaultMaxBackoff   = time.Hour
	// DefaultMaxClaims dead-letters a delivery whose claim expired this
	// many times (its processing keeps killing the replica).
	DefaultMaxClaims = 5
	deadLetterMsg    = "claimed %s times and never finished (the replica working it died or lost the database each time)"
	pgQueueComponent = "deliveries"
)

var deliveryMigrations = []postgres.Migration{
	{Version: 1, SQL: `
CREATE TABLE agentos_deliveries (
	id          text        PRIMARY KEY,
	seq         bigserial   NOT NULL,
	event       text        NOT NULL,
	action      text        NOT NULL,
	body        bytea       NOT NULL,
	received_at timestamptz NOT NULL,
	state       text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'claimed', 'done')),
	attempts    integer     NOT NULL DEFAULT 0,
	due         timestamptz NOT NULL,
	claim_token text,
	claimed_by  text,
	outcome     text        NOT NULL DEFAULT '',
	error       text        NOT NULL DEFAULT '',
	done_at     timestamptz
);
CREATE INDEX agentos_deliveries_open ON agentos_deliveries (seq) WHERE state IN ('pending', 'claimed');
CREATE INDEX agentos_deliveries_done ON agentos_deliveries (done_at) WHERE state = 'done';
CREATE INDEX agentos_deliveries_dead ON agentos_deliveries (done_at) WHERE state = 'done' AND outcome = 'failed';
CREATE INDEX agentos_deliveries_claimed ON agentos_deliveries (due) WHERE state = 'claimed';`},
	// failures: the dispatches that failed (OutcomeRetry), which the
	// backoff and the Processor's MaxAttempts count; attempts counts claims.
	{Version: 2, SQL: `ALTER TABLE agentos_deliveries ADD COLUMN failures integer NOT NULL DEFAULT 0;`},
	// payload_key: PayloadKey, NULL for none; a delivery with a key
	// already stored is a duplicate (a replay under another ID).
	{Version: 3, SQL: `ALTER TABLE agentos_deliveries ADD COLUMN payload_key text;
CREATE UNIQUE INDEX agentos_deliveries_payload_key ON agentos_deliveries (payload_key);`},
	// claimed_at: when the current claim was taken (due is its expiry,
	// moved by every renewal); the oldest one is OldestClaim.
	{Version: 4, SQL: `ALTER TABLE agentos_deliveries ADD COLUMN claimed_at timestamptz;
CREATE INDEX agentos_deliveries_claimed_at ON agentos_deliveries (claimed_at) WHERE state = 'claimed';`},
}

// PGQueueOptions tune a PGQueue.
type PGQueueOptions struct {
	// Owner names this replica in claimed_by. A queue opened with an
	// explicit Owner releases the claims an earlier process of the same
	// Owner left behind (it restarted: they are claimable at once). Empty:
	// host-pid-random, and a dead process's claims wait for their TTL.
	Owner string
	// ClaimTTL is how long a claim lasts without renewal; the queue renews
	// every ClaimTTL/3 the claims whose worker made progress (Beat) within
	// StallTimeout, so a claim outlives its replica, or the progress of
	// its worker, by at most ClaimTTL. Default DefaultClaimTTL.
	ClaimTTL time.Duration
	// StallTimeout is how long a claimed delivery's worker may go without
	// progress (Beat: the run appended an event) before its claim stops
	// being renewed. Default DefaultStallTimeout.
	StallTimeout time.Duration
	// Logger receives the claims given up for want of progress; nil
	// discards.
	Logger *slog.Logger
	// MaxAttempts dead-letters a delivery claimed this many times whose
	// last claim expired (its processing keeps killing the replica).
	// Default DefaultMaxClaims.
	MaxAttempts int
	// Listener wakes the Processor on NOTIFY; nil: the queue starts its own.
	Listener *postgres.Listener
	// Now is the queue's clock; nil means time.Now. Replicas' clocks must
	// agree to well within ClaimTTL.
	Now func() time.Time
}

// PGQueue is the Queue as a PostgreSQL table shared by every replica.
// Enqueue is one INSERT … ON CONFLICT DO NOTHING on the delivery ID (a
// redelivery, or the same delivery sent to several replicas, is a
// duplicate), committed before it returns, so the handler's 202 means the
// delivery is in PostgreSQL. Claim takes the oldest claimable row with
// SELECT … FOR UPDATE SKIP LOCKED, so replicas never wait on each other
// nor claim the same row. A claim has an expiry that the owning queue
// renews; a delivery whose claim expired (its replica died) is claimable
// again, with the attempt counted. OutcomeRetry makes a delivery
// claimable after 2^(failures-1) s (capped; failures: its failed
// dispatches, not its claims); OutcomeFailed is the
// dead-letter state (state done, outcome failed), listed by
// List(ctx, "dead", …).
//
// Time is this process's clock (for tests), so replicas' clocks must
// agree to well within ClaimTTL (NTP does).
type PGQueue struct {
	pool  *pgxpool.Pool
	opts  PGQueueOptions
	now   func() time.Time
	ready chan struct{}
	ownsL bool

	mu     sync.Mutex
	claims map[string]*claimState // claimed delivery ID → our claim
	closed bool
	gc     *groupcommit.Batcher[*enqueueReq] // group inserts, as LogQueue groups its writes
	swept  time.Time                         // last dead-letter sweep
	stop   chan struct{}
	done   chan struct{}
}

// OpenPGQueue migrates the deliveries schema and returns the queue.
func OpenPGQueue(ctx context.Context, pool *pgxpool.Pool, o PGQueueOptions) (*PGQueue, error) {
	if err := postgres.Migrate(ctx, pool, pgQueueComponent, deliveryMigrations); err != nil {
		return nil, err
	}
	explicit := o.Owner != ""
	if !explicit {
		host, _ := os.Hostname()
		o.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), randomToken()[:8])
	}
	if o.ClaimTTL <= 0 {
		o.ClaimTTL = DefaultClaimTTL
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxClaims
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	q := &PGQueue{pool: pool, opts: o, now: now, ready: make(chan struct{}, 1), claims: map[string]*claimState{}, stop: make(chan struct{}), done: make(chan struct{})}
	gc, err := groupcommit.New(q.commitInserts, groupcommit.Options[*enqueueReq]{MaxBatch: maxInsertBatch})
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	q.gc = gc
	if explicit {
		if _, err := pool.Exec(ctx, `UPDATE agentos_deliveries SET state = 'pending', due = $2, claim_token = NULL
			WHERE state = 'claimed' AND claimed_by = $1`, o.Owner, q.now()); err != nil {
			return nil, fmt.Errorf("queue: release the claims of %s: %w", o.Owner, err)
		}
	}
	l := o.Listener
	if l == nil {
		l = postgres.NewListener(pool, nil)
		q.ownsL = true
	}
	l.Handle(DeliveriesChannel, func(string) { q.wake() }, q.wake)
	if q.ownsL {
		l.Start()
	}
	q.opts.Listener = l
	go q.renew()
	return q, nil
}

func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (q *PGQueue) wake() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// Ready implements Notifier.
func (q *PGQueue) Ready() <-chan struct{} { return q.ready }

// Owner is the name this queue claims under.
func (q *PGQueue) Owner() string { return q.opts.Owner }

func (q *PGQueue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

// Enqueue implements Queue. Enqueues that arrive together share one
// INSERT, one transaction and one WAL flush (the group commit LogQueue
// uses too: while one insert is under way, the next batch gathers); each
// returns once its transaction committed.
func (q *PGQueue) Enqueue(ctx context.Context, d Delivery) (bool, error) {
	at := d.ReceivedAt
	if at.IsZero() {
		at = q.now()
	}
	r := &enqueueReq{d: d, at: at, done: make(chan struct{})}
	if err := q.gc.Send(ctx, r); err != nil {
		if errors.Is(err, groupcommit.ErrClosed) {
			return false, ErrQueueClosed
		}
		return false, err
	}
	// Once sent, the insert commits or fails as a whole.
	<-r.done
	return r.dup, r.err
}

type enqueueReq struct {
	d    Delivery
	at   time.Time
	dup  bool
	err  error
	done chan struct{}
}

// maxInsertBatch bounds the rows of one group insert.
const maxInsertBatch = 512

// enqueueTimeout bounds one group insert.
const enqueueTimeout = 5 * time.Second

// commitInserts is the group commit's commit: one INSERT for the batch.
func (q *PGQueue) commitInserts(batch []*enqueueReq) {
	q.insertBatch(batch)
	for _, r := range batch {
		close(r.done)
	}
}

func (q *PGQueue) insertBatch(batch []*enqueueReq) {
	first := map[string]*enqueueReq{}
	var ids, events, actions, keys []string
	var bodies [][]byte
	var ats []time.Time
	var uniq []*enqueueReq
	for _, r := range batch {
		if _, seen := first[r.d.ID]; seen {
			r.dup = true // the same ID twice in one batch: the first decides
			continue
		}
		first[r.d.ID] = r
		uniq = append(uniq, r)
	}
	// Replicas insert overlapping batches (a load balancer's retries
	// reach several): rows are inserted in ID order, so two inserts wait
	// on each other's keys in one order and cannot deadlock.
	sort.Slice(uniq, func(i, j int) bool { return uniq[i].d.ID < uniq[j].d.ID })
	for _, r := range uniq {
		ids, events, actions, keys = append(ids, r.d.ID), append(events, r.d.Event), append(actions, r.d.Action), append(keys, r.d.Key)
		bodies, ats = append(bodies, r.d.Body), append(ats, r.at)
	}
	inserted := map[string]bool{}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		clear(inserted)
		if err = q.insertRows(ids, events, actions, keys, bodies, ats, inserted); !isDeadlock(err) {
			break
		}
	}
	for _, r := range batch {
		switch {
		case err != nil:
			r.err, r.dup = fmt.Errorf("queue: enqueue %s: %w", r.d.ID, err), false
		case !r.dup:
			r.dup = !inserted[r.d.ID]
		}
	}
}

// isDeadlock reports PostgreSQL's deadlock_detected (40P01): the
// transaction was rolled back and may be tried again.
func isDeadlock(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "40P01"
}

// insertRows inserts one batch and records the IDs that were new. A row
// whose ID or payload key is stored already (or comes earlier in the
// batch) is not inserted.
func (q *PGQueue) insertRows(ids, events, actions, keys []string, bodies [][]byte, ats []time.Time, inserted map[string]bool) error {
	// Bounded: a database that does not answer must not hold the handler
	// past GitHub's 10 s (a Spool then keeps the delivery).
	ctx, cancel := context.WithTimeout(context.Background(), enqueueTimeout)
	defer cancel()
	rows, err := q.pool.Query(ctx, `
WITH ins AS (
	INSERT INTO agentos_deliveries (id, event, action, payload_key, body, received_at, due)
	SELECT u.id, u.event, u.action, NULLIF(u.key, ''), u.body, u.at, u.at
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::timestamptz[]) AS u(id, event, action, key, body, at)
	ON CONFLICT DO NOTHING
	RETURNING id
)
SELECT ins.id FROM ins LEFT JOIN (SELECT pg_notify('`+DeliveriesChannel+`', '') FROM ins LIMIT 1) n ON true`, ids, events, actions, keys, bodies, ats)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		inserted[id] = true
	}
	return rows.Err()
}

// Claim implements Queue.
func (q *PGQueue) Claim(ctx context.Context) (Delivery, bool, error) {
	if q.isClosed() {
		return Delivery{}, false, ErrQueueClosed
	}
	now := q.now()
	// Deliveries whose claims expired MaxAttempts times go to the dead
	// letters instead of killing another replica. Swept at most once a
	// second (an index on the claims' expiry keeps it cheap), not per claim.
	q.mu.Lock()
	sweep := now.Sub(q.swept) >= time.Second || now.Before(q.swept)
	if sweep {
		q.swept = now
	}
	q.mu.Unlock()
	if sweep {
		if err := q.sweepDead(ctx, now); err != nil {
			return Delivery{}, false, err
		}
	}
	tok := randomToken()
	var d Delivery
	err := q.pool.QueryRow(ctx, `
UPDATE agentos_deliveries d SET state = 'claimed', attempts = d.attempts + 1, due = $2, claim_token = $3, claimed_by = $4, claimed_at = $1
FROM (SELECT id FROM agentos_deliveries WHERE state IN ('pending', 'claimed') AND due <= $1
      AND NOT (state = 'claimed' AND attempts >= $5)
      ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED) c
WHERE d.id = c.id
RETURNING d.id, d.event, d.action, d.body, d.received_at, d.attempts, d.failures`, now, now.Add(q.opts.ClaimTTL), tok, q.opts.Owner, q.opts.MaxAttempts).
		Scan(&d.ID, &d.Event, &d.Action, &d.Body, &d.ReceivedAt, &d.Attempts, &d.Failures)
	if errors.Is(err, pgx.ErrNoRows) {
		return Delivery{}, false, nil
	}
	if err != nil {
		return Delivery{}, false, fmt.Errorf("queue: claim: %w", err)
	}
	q.mu.Lock()
	q.claims[d.ID] = &claimState{tok: tok, beat: q.now()}
	q.mu.Unlock()
	return d, true, nil
}

// sweepDead moves deliveries whose claims expired MaxAttempts times to
// the dead letters.
func (q *PGQueue) sweepDead(ctx context.Context, now time.Time) error {
	if _, err := q.pool.Exec(ctx, `UPDATE agentos_deliveries SET state = 'done', outcome = 'failed', done_at = $1, claim_token = NULL,
		error = format('`+deadLetterMsg+`', attempts)
		WHERE state = 'claimed' AND due <= $1 AND attempts >= $2`, now, q.opts.MaxAttempts); err != nil {
		return fmt.Errorf("queue: sweep dead letters: %w", err)
	}
	return nil
}

// Done implements Queue. It fails with ErrUnknownDelivery unless this
// queue holds the delivery's current claim (a claim that expired and was
// taken by another replica is no longer ours to finish).
func (q *PGQueue) Done(ctx context.Context, id, outcome, errMsg string) error {
	if q.isClosed() {
		return ErrQueueClosed
	}
	q.mu.Lock()
	c, ok := q.claims[id]
	q.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownDelivery, id)
	}
	now := q.now()
	var tag string
	var err error
	if outcome == OutcomeRetry {
		var ct interface{ RowsAffected() int64 }
		// The backoff counts failed dispatches, this one included (the
		// right-hand side reads the row before the update), not claims.
		// A busy retry (waitsForLease) counts no failure and waits
		// BusyRetryDelay.
		ct, err = q.pool.Exec(ctx, `UPDATE agentos_deliveries SET state = 'pending', claim_token = NULL, error = $3,
			failures = failures + CASE WHEN $6 THEN 0 ELSE 1 END,
			due = $4::timestamptz + CASE WHEN $6 THEN $7 ELSE least(power(2, failures), $5) END * interval '1 second'
			WHERE id = $1 AND state = 'claimed' AND claim_token = $2`, id, c.tok, errMsg, now, DefaultMaxBackoff.Seconds(), waitsForLease(outcome, errMsg), BusyRetryDelay.Seconds())
		if err == nil && ct.RowsAffected() == 0 {
			tag = "lost"
		}
	} else {
		var ct interface{ RowsAffected() int64 }
		ct, err = q.pool.Exec(ctx, `UPDATE agentos_deliveries SET state = 'done', claim_token = NULL, outcome = $3, error = $4, done_at = $5
			WHERE id = $1 AND state = 'claimed' AND claim_token = $2`, id, c.tok, outcome, errMsg, now)
		if err == nil && ct.RowsAffected() == 0 {
			tag = "lost"
		}
	}
	if err != nil {
		return fmt.Errorf("queue: done %s: %w", id, err)
	}
	q.mu.Lock()
	delete(q.claims, id)
	q.mu.Unlock()
	if tag == "lost" {
		return fmt.Errorf("%w: %s (its claim expired and was taken over)", ErrUnknownDelivery, id)
	}
	return nil
}

// Depth implements Queue: deliveries not yet finished.
func (q *PGQueue) Depth(ctx context.Context) (int, error) {
	var n int
	err := q.pool.QueryRow(ctx, `SELECT count(*) FROM agentos_deliveries WHERE state IN ('pending', 'claimed')`).Scan(&n)
	return n, err
}

// OldestClaim returns how long the oldest delivery claimed by any replica
// and not yet finished has been claimed (0 when none): one lookup in the
// partial index on claimed_at. A claim whose replica died counts until
// another replica claims the delivery again or it is dead-lettered.
func (q *PGQueue) OldestClaim(ctx context.Context) (time.Duration, error) {
	var at *time.Time
	if err := q.pool.QueryRow(ctx, `SELECT min(claimed_at) FROM agentos_deliveries WHERE state = 'claimed'`).Scan(&at); err != nil {
		return 0, fmt.Errorf("queue: oldest claim: %w", err)
	}
	if at == nil {
		return 0, nil
	}
	return max(0, q.now().Sub(*at)), nil
}

// Dead counts the dead-lettered deliveries (outcome failed).
func (q *PGQueue) Dead(ctx context.Context) (int, error) {
	var n int
	err := q.pool.QueryRow(ctx, `SELECT count(*) FROM agentos_deliveries WHERE state = 'done' AND outcome = 'failed'`).Scan(&n)
	return n, err
}

const recordColumns = `id, event, action, body, received_at, attempts, failures, state, outcome, error, coalesce(payload_key, '')`

func scanRecord(row pgx.Row) (Record, error) {
	var r Record
	err := row.Scan(&r.ID, &r.Event, &r.Action, &r.Body, &r.ReceivedAt, &r.Attempts, &r.Failures, &r.State, &r.Outcome, &r.Error, &r.Key)
	return r, err
}

// Release implements Releaser: the claimed delivery id is pending again at
// once, its claim counted in attempts, no failure counted. Like Done it
// fails with ErrUnknownDelivery unless this queue holds the claim.
func (q *PGQueue) Release(ctx context.Context, id string) error {
	if q.isClosed() {
		return ErrQueueClosed
	}
	q.mu.Lock()
	c, ok := q.claims[id]
	q.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownDelivery, id)
	}
	ct, err := q.pool.Exec(ctx, `UPDATE agentos_deliveries SET state = 'pending', claim_token = NULL, due = $3
		WHERE id = $1 AND state = 'claimed' AND claim_token = $2`, id, c.tok, q.now())
	if err != nil {
		return fmt.Errorf("queue: release %s: %w", id, err)
	}
	q.mu.Lock()
	delete(q.claims, id)
	q.mu.Unlock()
	if ct.RowsAffected() == 0 {
		return fmt.Errorf("%w: %s (its claim expired and was taken over)", ErrUnknownDelivery, id)
	}
	q.wake()
	return nil
}

// Withdraw implements Withdrawer, on the table every replica shares: a
// delivery waiting at any replica is withdrawn. The open deliveries are
// read with their bodies (the partial index on open deliveries), and the
// matching ones still pending are finished in one UPDATE that re-checks
// their state under the row lock: a replica that claimed one in between
// keeps it, and it is reported claimed.
func (q *PGQueue) Withdraw(ctx context.Context, before string, match func(Delivery) bool, reason string) ([]Withdrawal, error) {
	if q.isClosed() {
		return nil, ErrQueueClosed
	}
	rows, err := q.pool.Query(ctx, `SELECT id, event, action, body, received_at, attempts, failures, coalesce(payload_key, '')
		FROM agentos_deliveries WHERE state IN ('pending', 'claimed')
		AND seq < coalesce((SELECT seq FROM agentos_deliveries WHERE id = $1), 9223372036854775807)
		ORDER BY seq`, before)
	if err != nil {
		return nil, fmt.Errorf("queue: withdraw: %w", err)
	}
	var matched []Delivery
	var ids []string
	for rows.Next() {
		var d Delivery
		if err := rows.Scan(&d.ID, &d.Event, &d.Action, &d.Body, &d.ReceivedAt, &d.Attempts, &d.Failures, &d.Key); err != nil {
			rows.Close()
			return nil, fmt.Errorf("queue: withdraw: %w", err)
		}
		if match(d) {
			matched = append(matched, d)
			ids = append(ids, d.ID)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue: withdraw: %w", err)
	}
	if len(matched) == 0 {
		return nil, nil
	}
	done := map[string]bool{}
	rows, err = q.pool.Query(ctx, `UPDATE agentos_deliveries SET state = 'done', outcome = $2, error = $3, done_at = $4, claim_token = NULL
		WHERE id = ANY($1) AND state = 'pending' RETURNING id`, ids, OutcomeWithdrawn, reason, q.now())
	if err != nil {
		return nil, fmt.Errorf("queue: withdraw: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("queue: withdraw: %w", err)
		}
		done[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue: withdraw: %w", err)
	}
	out := make([]Withdrawal, len(matched))
	for i, d := range matched {
		out[i] = Withdrawal{Delivery: d, Withdrawn: done[d.ID]}
	}
	return out, nil
}

// Get returns the stored state of a delivery.
func (q *PGQueue) Get(ctx context.Context, id string) (Record, bool, error) {
	r, err := scanRecord(q.pool.QueryRow(ctx, `SELECT `+recordColumns+` FROM agentos_deliveries WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("queue: get %s: %w", id, err)
	}
	return r, true, nil
}

// List returns up to limit deliveries in state (pending, claimed, done, or
// dead: done with outcome failed), oldest first, bodies left out.
func (q *PGQueue) List(ctx context.Context, state string, limit int) ([]Record, error) {
	if err := validListState(state); err != nil {
		return nil, err
	}
	where := map[string]string{
		"pending": `state = 'pending'`,
		"claimed": `state = 'claimed'`,
		"done":    `state = 'done'`,
		"dead":    `state = 'done' AND outcome = 'failed'`,
	}[state]
	if limit <= 0 || limit > MaxListed {
		limit = MaxListed
	}
	rows, err := q.pool.Query(ctx, `SELECT id, event, action, ''::bytea, received_at, attempts, failures, state, outcome, error, coalesce(payload_key, '')
		FROM agentos_deliveries WHERE `+where+` ORDER BY seq LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("queue: list %s: %w", state, err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		r.Body = nil
		out = append(out, r)
	}
	return out, rows.Err()
}

// Prune forgets deliveries finished before t (a later redelivery of one is
// new again) and returns how many.
func (q *PGQueue) Prune(ctx context.Context, t time.Time) (int64, error) {
	ct, err := q.pool.Exec(ctx, `DELETE FROM agentos_deliveries WHERE state = 'done' AND done_at < $1`, t)
	if err != nil {
		return 0, fmt.Errorf("queue: prune: %w", err)
	}
	return ct.RowsAffected(), nil
}

// claimState is one claim this queue holds.
type claimState struct {
	tok     string
	beat    time.Time // the worker's latest progress (Beat), or the claim
	stalled bool      // renewal stopped for want of progress (logged once)
}

// Beat implements Beater: the worker holding the claim on id made
// progress, so the claim is renewed for another ClaimTTL.
func (q *PGQueue) Beat(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if c, ok := q.claims[id]; ok {
		c.beat, c.stalled = q.now(), false
	}
}

// renew extends, every ClaimTTL/3, the claims whose worker made progress
// within StallTimeout. The others are left to expire: a worker whose run
// is stuck (it cannot write to the database, or waits on something that
// will not come) must not hold its delivery for ever, since no other
// replica can take it over while the claim is renewed.
func (q *PGQueue) renew() {
	defer close(q.done)
	t := time.NewTicker(q.opts.ClaimTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-q.stop:
			return
		case <-t.C:
		}
		now := q.now()
		q.mu.Lock()
		toks := make([]string, 0, len(q.claims))
		var stalled []string
		for id, c := range q.claims {
			if now.Sub(c.beat) <= q.opts.StallTimeout {
				toks = append(toks, c.tok)
				continue
			}
			if !c.stalled {
				c.stalled = true
				stalled = append(stalled, id)
			}
		}
		q.mu.Unlock()
		for _, id := range stalled {
			q.opts.Logger.Warn("queue: no progress on a claimed delivery: its claim is no longer renewed, another replica takes it over once it expires",
				"delivery", id, "stall_timeout", q.opts.StallTimeout, "claim_ttl", q.opts.ClaimTTL)
		}
		if len(toks) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), q.opts.ClaimTTL/3)
		_, _ = q.pool.Exec(ctx, `UPDATE agentos_deliveries SET due = $2 WHERE state = 'claimed' AND claim_token = ANY($1)`, toks, now.Add(q.opts.ClaimTTL))
		cancel()
	}
}

// Close stops renewing and gives the claims this queue still holds back
// (claimable at once, the attempt stays counted). The pool stays open.
func (q *PGQueue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	toks := make([]string, 0, len(q.claims))
	for _, c := range q.claims {
		toks = append(toks, c.tok)
	}
	q.claims = map[string]*claimState{}
	q.mu.Unlock()
	q.gc.Close()
	close(q.stop)
	<-q.done
	if q.ownsL {
		q.opts.Listener.Close()
	}
	if len(toks) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := q.pool.Exec(ctx, `UPDATE agentos_deliveries SET state = 'pending', due = $2, claim_token = NULL WHERE state = 'claimed' AND claim_token = ANY($1)`, toks, q.now())
	return err
}

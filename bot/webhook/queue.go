package webhook

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Delivery is one webhook delivery as received: the routing fields and the
// raw, verified body.
type Delivery struct {
	ID         string // X-GitHub-Delivery; a redelivery keeps it
	Event      string // X-GitHub-Event
	Action     string // the payload's top-level "action", "" if none
	Body       []byte
	ReceivedAt time.Time
	// Attempts counts the claims of this delivery, this one included.
	Attempts int
}

// Queue is the durable hand-off between the handler and the Processor.
// Enqueue returns only once the delivery survives a crash; dup reports a
// delivery ID the queue already holds (it is not stored again). Claim hands
// out the oldest pending delivery (ok false when there is none); Done
// records how its processing ended: OutcomeRetry makes it claimable again
// later, any other outcome is final. A delivery claimed and never Done is
// claimed again after the queue is reopened (at-least-once processing).
// Enqueue must not keep d.Body once it returns: the handler reuses the
// buffer for later deliveries.
type Queue interface {
	Enqueue(ctx context.Context, d Delivery) (dup bool, err error)
	Claim(ctx context.Context) (Delivery, bool, error)
	Done(ctx context.Context, id string, outcome string, errMsg string) error
	Depth(ctx context.Context) (int, error)
}

// Notifier is implemented by queues that can wake an idle Processor when a
// delivery becomes claimable; without it the Processor polls.
type Notifier interface {
	Ready() <-chan struct{}
}

// Outcomes recorded by Done and reported to the Observer. OutcomeRetry is
// not final: the queue makes the delivery claimable again after a backoff.
const (
	OutcomeProcessed = "processed"
	OutcomeIgnored   = "ignored"
	OutcomeFailed    = "failed"
	OutcomeRetry     = "retry"
)

// ErrQueueClosed is returned by a closed queue.
var ErrQueueClosed = errors.New("webhook: queue closed")

// ErrUnknownDelivery is returned by Done for an ID the queue does not hold
// as claimed.
var ErrUnknownDelivery = errors.New("webhook: no such claimed delivery")

// SQLiteQueue is the Queue in one SQLite file (pure-Go driver, WAL,
// synchronous=FULL). All writes — enqueues, claims, completions — go through
// one commit loop that groups whatever arrived together into one
// transaction and one fsync, as runtime/store/sqlite does for events: many
// concurrent webhook requests share a commit, and each is acknowledged only
// after it.
//
// Layout, chosen so that a commit dirties few pages: deliveries are small
// rows in arrival order (seq), bodies a separate append-only table, so
// claims and completions rewrite small rows only. Delivery IDs are random
// UUIDs; a UNIQUE index on them would dirty one random index page per
// delivery, so the dedup index is a map in memory, rebuilt from the table
// when the file is opened (the table stays the record of truth).
//
// One process owns the file: opening it makes every delivery left claimed
// by an earlier process claimable again.
type SQLiteQueue struct {
	db *sql.DB

	idxMu sync.Mutex
	index map[string]int64 // delivery ID → seq, for every stored delivery
	// conn is the commit loop's own connection, with its statements
	// prepared once: the loop is the only writer.
	conn                                          *sql.Conn
	stInsert, stBody, stClaim, stGetBody, stRetry *sql.Stmt
	stFinal                                       *sql.Stmt

	claimMu     sync.Mutex
	claimed     []Delivery // claimed in a batch, not yet handed out
	claimClosed bool

	gc    *groupCommit[*queueOp]
	ready chan struct{}

	// The checkpointer copies the WAL into the database file in its own
	// goroutine and connection, so that no commit (and no webhook answer)
	// waits for it. The commit loop kicks it every ckptEvery enqueues.
	ckptKick    chan struct{}
	ckptDone    chan struct{}
	sinceKick   int
	ckptErrMu   sync.Mutex
	lastCkptErr error
	now         func() time.Time

	// MaxBatch bounds the operations committed together.

}

type opKind uint8

const (
	opEnqueue opKind = iota
	opClaim
	opDone
	opPrune
)

type queueOp struct {
	kind opKind
	d    Delivery   // enqueue: in
	ds   []Delivery // claim: out
	// done
	id, outcome, errMsg string

	before int64 // prune: in
	pruned int64 // prune: out

	dup bool // enqueue: out
	err error
	ack chan struct{}
}

const queueSchema = `
CREATE TABLE IF NOT EXISTS deliveries (
	seq         INTEGER PRIMARY KEY,
	id          TEXT NOT NULL,
	event       TEXT NOT NULL,
	action      TEXT NOT NULL,
	received_at INTEGER NOT NULL,
	state       INTEGER NOT NULL DEFAULT 0,
	attempts    INTEGER NOT NULL DEFAULT 0,
	not_before  INTEGER NOT NULL DEFAULT 0,
	outcome     TEXT NOT NULL DEFAULT '',
	error       TEXT NOT NULL DEFAULT '',
	done_at     INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS bodies (
	seq  INTEGER PRIMARY KEY,
	body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS deliveries_open ON deliveries (state, seq) WHERE state < 2;
`

// Delivery states.
const (
	statePending = 0
	stateClaimed = 1
	stateDone    = 2
)

// OpenQueue opens (creating if needed) the queue in the SQLite file at path.
//
// WAL with synchronous=FULL makes every commit durable. Pages are 16 KiB
// (a typical 10–15 KB payload fits in one, written as one WAL frame rather
// than four). SQLite's automatic checkpoint is off: it would run inside
// whichever commit crosses the threshold and stall every webhook waiting
// on that commit; a background checkpointer does the work instead.
func OpenQueue(path string) (*SQLiteQueue, error) {
	dsn := "file:" + path + "?_pragma=page_size(16384)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_pragma=wal_autocheckpoint(0)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("webhook queue: %w", err)
	}
	db.SetMaxOpenConns(4)
	if _, err := db.Exec(queueSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("webhook queue: create schema: %w", err)
	}
	// Claims of a previous process are void: it will never call Done.
	if _, err := db.Exec(`UPDATE deliveries SET state = ? WHERE state = ?`, statePending, stateClaimed); err != nil {
		db.Close()
		return nil, fmt.Errorf("webhook queue: release claims: %w", err)
	}
	index, err := loadIndex(db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("webhook queue: load delivery ids: %w", err)
	}
	q := &SQLiteQueue{
		db: db, index: index, ready: make(chan struct{}, 1),
		now: time.Now, ckptKick: make(chan struct{}, 1), ckptDone: make(chan struct{}),
	}
	if err := q.prepare(); err != nil {
		db.Close()
		return nil, fmt.Errorf("webhook queue: %w", err)
	}
	q.gc = newGroupCommit(512, 0, q.commit)
	go q.checkpointLoop()
	q.signal()
	return q, nil
}

func loadIndex(db *sql.DB) (map[string]int64, error) {
	rows, err := db.Query(`SELECT id, seq FROM deliveries`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	index := map[string]int64{}
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			return nil, err
		}
		index[id] = seq
	}
	return index, rows.Err()
}

// claimBatch is how many deliveries one claim takes from the database;
// the rest wait in memory for the next Claim. Close gives those back
// (attempt uncounted); after a crash they are released when the file is
// reopened, with the attempt counted.
const claimBatch = 16

func (q *SQLiteQueue) prepare() (err error) {
	ctx := context.Background()
	if q.conn, err = q.db.Conn(ctx); err != nil {
		return err
	}
	for _, p := range []struct {
		st  **sql.Stmt
		sql string
	}{
		{&q.stInsert, `INSERT INTO deliveries (id, event, action, received_at) VALUES (?, ?, ?, ?)`},
		{&q.stBody, `INSERT INTO bodies (seq, body) VALUES (?, ?)`},
		{&q.stClaim, `UPDATE deliveries SET state = 1, attempts = attempts + 1
			WHERE seq IN (SELECT seq FROM deliveries WHERE state = 0 AND not_before <= ? ORDER BY seq LIMIT ?)
			RETURNING seq, id, event, action, received_at, attempts`},
		{&q.stGetBody, `SELECT body FROM bodies WHERE seq = ?`},
		{&q.stRetry, `UPDATE deliveries SET state = 0, outcome = ?, error = ?, not_before = ? + (1000000000 << min(attempts - 1, 8))
			WHERE seq = ? AND state = 1`},
		{&q.stFinal, `UPDATE deliveries SET state = 2, outcome = ?, error = ?, done_at = ? WHERE seq = ? AND state = 1`},
	} {
		if *p.st, err = q.conn.PrepareContext(ctx, p.sql); err != nil {
			q.conn.Close()
			return err
		}
	}
	return nil
}

// Ready implements Notifier: it receives after a commit that made a
// delivery claimable.
func (q *SQLiteQueue) Ready() <-chan struct{} { return q.ready }

func (q *SQLiteQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// Enqueue implements Queue.
func (q *SQLiteQueue) Enqueue(ctx context.Context, d Delivery) (bool, error) {
	if d.ID == "" {
		return false, errors.New("webhook queue: delivery without id")
	}
	if d.ReceivedAt.IsZero() {
		d.ReceivedAt = q.now()
	}
	op := &queueOp{kind: opEnqueue, d: d}
	if err := q.submit(ctx, op); err != nil {
		return false, err
	}
	return op.dup, op.err
}

// Claim implements Queue. It takes up to claimBatch deliveries from the
// database at once and hands them out one by one, oldest first.
func (q *SQLiteQueue) Claim(ctx context.Context) (Delivery, bool, error) {
	if d, ok := q.takeClaimed(); ok {
		return d, true, nil
	}
	op := &queueOp{kind: opClaim}
	if err := q.submit(ctx, op); err != nil {
		return Delivery{}, false, err
	}
	if op.err != nil || len(op.ds) == 0 {
		return Delivery{}, false, op.err
	}
	q.claimMu.Lock()
	if q.claimClosed {
		// Closed meanwhile: the rest stay claimed until the file is reopened.
		q.claimMu.Unlock()
		return op.ds[0], true, nil
	}
	q.claimed = append(q.claimed, op.ds[1:]...)
	q.claimMu.Unlock()
	return op.ds[0], true, nil
}

func (q *SQLiteQueue) takeClaimed() (Delivery, bool) {
	q.claimMu.Lock()
	defer q.claimMu.Unlock()
	if q.claimClosed || len(q.claimed) == 0 {
		return Delivery{}, false
	}
	d := q.claimed[0]
	q.claimed[0] = Delivery{}
	q.claimed = q.claimed[1:]
	return d, true
}

// Done implements Queue. OutcomeRetry makes the delivery claimable again
// after a backoff of 2^(attempts-1) seconds, at most 256 s; any other
// outcome is final.
func (q *SQLiteQueue) Done(ctx context.Context, id, outcome, errMsg string) error {
	op := &queueOp{kind: opDone, id: id, outcome: outcome, errMsg: errMsg}
	if err := q.submit(ctx, op); err != nil {
		return err
	}
	return op.err
}

// Depth implements Queue: deliveries not yet Done (pending or claimed).
func (q *SQLiteQueue) Depth(ctx context.Context) (int, error) {
	var n int
	if err := q.db.QueryRowContext(ctx, `SELECT count(*) FROM deliveries WHERE state < 2`).Scan(&n); err != nil {
		return 0, fmt.Errorf("webhook queue: depth: %w", err)
	}
	return n, nil
}

// Record is the stored state of one delivery, for inspection and tests.
type Record struct {
	Delivery
	State   string // pending | claimed | done
	Outcome string
	Error   string
}

// Get returns the stored record of a delivery; ok is false if the queue
// does not hold it.
func (q *SQLiteQueue) Get(ctx context.Context, id string) (Record, bool, error) {
	seq, ok := q.lookup(id)
	if !ok {
		return Record{}, false, nil
	}
	var r Record
	var recv int64
	var state int
	err := q.db.QueryRowContext(ctx, `SELECT d.id, d.event, d.action, b.body, d.received_at, d.attempts, d.state, d.outcome, d.error
		FROM deliveries d JOIN bodies b ON b.seq = d.seq WHERE d.seq = ?`, seq).
		Scan(&r.ID, &r.Event, &r.Action, &r.Body, &recv, &r.Attempts, &state, &r.Outcome, &r.Error)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("webhook queue: get %s: %w", id, err)
	}
	r.ReceivedAt = time.Unix(0, recv)
	r.State = [...]string{"pending", "claimed", "done"}[state%3]
	return r, true, nil
}

func (q *SQLiteQueue) lookup(id string) (int64, bool) {
	q.idxMu.Lock()
	defer q.idxMu.Unlock()
	seq, ok := q.index[id]
	return seq, ok
}

// Prune deletes deliveries finished before t and returns how many. A
// pruned delivery's ID is no longer recognised as a duplicate, so keep
// them at least as long as GitHub allows redelivery (a few days).
func (q *SQLiteQueue) Prune(ctx context.Context, before time.Time) (int64, error) {
	op := &queueOp{kind: opPrune, before: before.UnixNano()}
	if err := q.submit(ctx, op); err != nil {
		return 0, err
	}
	return op.pruned, op.err
}

func (q *SQLiteQueue) submit(ctx context.Context, op *queueOp) error {
	op.ack = make(chan struct{})
	if err := q.gc.send(ctx, op); err != nil {
		return err
	}
	// Once sent, the operation is committed or fails as a whole; waiting
	// for it even if ctx ends tells the caller the truth (and lets the
	// handler reuse the body buffer).
	<-op.ack
	return nil
}

// commit runs a batch in one transaction. If it fails, every operation in
// it fails with the error.
// ckptEvery is how many enqueued deliveries (about 16 KiB of WAL each)
// trigger a background checkpoint.
const ckptEvery = 512

// checkpointLoop runs passive checkpoints when kicked, until Close. A
// passive checkpoint never blocks the writer; SQLite starts the WAL over
// once a checkpoint has caught up.
func (q *SQLiteQueue) checkpointLoop() {
	defer close(q.ckptDone)
	ctx := context.Background()
	for range q.ckptKick {
		_, err := q.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
		q.ckptErrMu.Lock()
		q.lastCkptErr = err
		q.ckptErrMu.Unlock()
	}
}

// CheckpointErr returns the error of the last background checkpoint, nil
// if it succeeded (for health checks: a WAL that is never checkpointed
// grows without bound).
func (q *SQLiteQueue) CheckpointErr() error {
	q.ckptErrMu.Lock()
	defer q.ckptErrMu.Unlock()
	return q.lastCkptErr
}

func (q *SQLiteQueue) kickCheckpoint(enqueued int) {
	q.sinceKick += enqueued
	if q.sinceKick < ckptEvery {
		return
	}
	select {
	case q.ckptKick <- struct{}{}:
		q.sinceKick = 0
	default: // one is running; it will be kicked again
	}
}

func (q *SQLiteQueue) commit(batch []*queueOp) {
	wake, err := q.commitOnce(batch)
	for _, op := range batch {
		if err != nil {
			op.err, op.dup, op.ds = fmt.Errorf("webhook queue: commit: %w", err), false, nil
		}
		close(op.ack)
	}
	if err == nil && wake {
		q.signal()
		n := 0
		for _, op := range batch {
			if op.kind == opEnqueue && !op.dup {
				n++
			}
		}
		q.kickCheckpoint(n)
	}
}

func (q *SQLiteQueue) commitOnce(batch []*queueOp) (wake bool, err error) {
	ctx := context.Background()
	if _, err := q.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return false, err
	}
	// IDs added to (or removed from) the index by this transaction, undone
	// if it does not commit.
	var added []string
	removed := map[string]int64{}
	defer func() {
		if err != nil {
			if _, rerr := q.conn.ExecContext(ctx, "ROLLBACK"); rerr != nil {
				err = errors.Join(err, rerr)
			}
			q.idxMu.Lock()
			for _, id := range added {
				delete(q.index, id)
			}
			for id, seq := range removed {
				q.index[id] = seq
			}
			q.idxMu.Unlock()
		}
	}()
	now := q.now().UnixNano()
	for _, op := range batch {
		switch op.kind {
		case opEnqueue:
			d := &op.d
			if _, ok := q.lookup(d.ID); ok {
				op.dup = true
				continue
			}
			res, err := q.stInsert.ExecContext(ctx, d.ID, d.Event, d.Action, d.ReceivedAt.UnixNano())
			if err != nil {
				return false, err
			}
			seq, err := res.LastInsertId()
			if err != nil {
				return false, err
			}
			if _, err := q.stBody.ExecContext(ctx, seq, d.Body); err != nil {
				return false, err
			}
			q.idxMu.Lock()
			q.index[d.ID] = seq
			q.idxMu.Unlock()
			added = append(added, d.ID)
			wake = true
		case opClaim:
			if op.ds, err = q.claimRows(ctx, now); err != nil {
				return false, err
			}
		case opDone:
			seq, ok := q.lookup(op.id)
			if !ok {
				op.err = fmt.Errorf("%w: %s", ErrUnknownDelivery, op.id)
				continue
			}
			var res sql.Result
			if op.outcome == OutcomeRetry {
				res, err = q.stRetry.ExecContext(ctx, op.outcome, op.errMsg, now, seq)
			} else {
				res, err = q.stFinal.ExecContext(ctx, op.outcome, op.errMsg, now, seq)
			}
			if err != nil {
				return false, err
			}
			if n, err := res.RowsAffected(); err != nil {
				return false, err
			} else if n != 1 {
				op.err = fmt.Errorf("%w: %s", ErrUnknownDelivery, op.id)
			}
		case opPrune:
			if op.pruned, err = q.prune(ctx, op.before, removed); err != nil {
				return false, err
			}
		}
	}
	_, err = q.conn.ExecContext(ctx, "COMMIT")
	return wake, err
}

// prune deletes finished deliveries done before `before` (unix ns) and
// drops their IDs from the index, noting them in removed.
func (q *SQLiteQueue) prune(ctx context.Context, before int64, removed map[string]int64) (int64, error) {
	rows, err := q.conn.QueryContext(ctx, `DELETE FROM deliveries WHERE state = 2 AND done_at < ? RETURNING id, seq`, before)
	if err != nil {
		return 0, err
	}
	var gone []int64
	q.idxMu.Lock()
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			q.idxMu.Unlock()
			rows.Close()
			return 0, err
		}
		delete(q.index, id)
		removed[id] = seq
		gone = append(gone, seq)
	}
	q.idxMu.Unlock()
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, err
	}
	for _, seq := range gone {
		if _, err := q.conn.ExecContext(ctx, `DELETE FROM bodies WHERE seq = ?`, seq); err != nil {
			return 0, err
		}
	}
	return int64(len(gone)), nil
}

func (q *SQLiteQueue) claimRows(ctx context.Context, now int64) ([]Delivery, error) {
	rows, err := q.stClaim.QueryContext(ctx, now, claimBatch)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	type row struct {
		seq int64
		d   Delivery
	}
	var rs []row
	for rows.Next() {
		var r row
		var recv int64
		if err := rows.Scan(&r.seq, &r.d.ID, &r.d.Event, &r.d.Action, &recv, &r.d.Attempts); err != nil {
			return nil, err
		}
		r.d.ReceivedAt = time.Unix(0, recv)
		rs = append(rs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// RETURNING gives no order guarantee; hand out the oldest first.
	slices.SortFunc(rs, func(a, b row) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]Delivery, len(rs))
	for i, r := range rs {
		if err := q.stGetBody.QueryRowContext(ctx, r.seq).Scan(&r.d.Body); err != nil {
			return nil, fmt.Errorf("body of %s: %w", r.d.ID, err)
		}
		out[i] = r.d
	}
	return out, nil
}

// Close drains pending operations, then closes the database.
func (q *SQLiteQueue) Close() error {
	if !q.gc.close() {
		return nil
	}
	close(q.ckptKick)
	<-q.ckptDone
	q.claimMu.Lock()
	unused := q.claimed
	q.claimed, q.claimClosed = nil, true
	q.claimMu.Unlock()
	var err error
	for _, d := range unused {
		seq, _ := q.lookup(d.ID)
		_, e := q.conn.ExecContext(context.Background(), `UPDATE deliveries SET state = 0, attempts = attempts - 1 WHERE seq = ? AND state = 1`, seq)
		err = errors.Join(err, e)
	}
	return errors.Join(err, q.conn.Close(), q.db.Close())
}

// Package sqlite is the embedded Store: one SQLite file (pure-Go driver,
// no cgo) in WAL mode, and group commit — appends from many sessions that
// arrive together share one transaction and one fsync, and each is
// acknowledged only after that fsync.
//
// Commits and fsyncs are pipelined. The database runs with
// synchronous=NORMAL, under which SQLite's COMMIT writes the WAL frames
// without syncing them (it still syncs around checkpoints, so the file
// stays consistent); the batcher's second stage (runtime/groupcommit's
// Then) then fsyncs the WAL file itself and acknowledges every batch
// committed before that fsync started. While one fsync is in flight the
// commit loop (the batcher's first stage) writes the next batch, so the
// disk's flush latency is no longer serial with the CPU work of a commit.
// An append is acknowledged only once its WAL frames are on stable
// storage, exactly as under synchronous=FULL. In-process readers see only
// events at or below the durable position; see docs/decisions.md.
//
// Layout (version 4; ADR 7 in docs/decisions.md; list.go adds the last
// time of each head and its index for List). Every event has a
// position (pos) in global append order and links to the previous event of
// its session (prev_pos). A commit writes one row of the batches table:
// its events at consecutive positions, with an index of (session, seq,
// prev_pos, line length) and the lines. Reading a session walks its chain
// backwards from its last event, a batch row per step (rows are keyed by
// their first position).
//
// The heads table holds each session's last position and first time, but
// only as of the position recorded in the folded table: the commit loop
// folds the heads it moved into the table every foldEvery commits, not in
// every commit, because upserting a head row per session per commit cost
// about as much as writing the events. A session's head is therefore the
// newest of its heads row and its events in the tail (the batches after
// the folded position, at most foldEvery commits per writer), which
// readers scan. Per commit, SQLite thus dirties the batches table's tail
// pages, not one index page per session: a (session_id, seq) index made
// every 64-session commit rewrite ~64 index pages into the WAL.
//
// The commit loop caches heads and the last position. It checks that no
// other connection (another process on the same file) wrote since its last
// commit with PRAGMA data_version while it holds the write lock, and reads
// them afresh, tail included, if one did.
//
// The commit loop owns one connection with its statements prepared once;
// the batcher runs one commit at a time, so one goroutine uses it at once.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/groupcommit"
	"github.com/agentos/agentos/runtime/store"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// FileName is the database file inside the data directory.
const FileName = "agentos.db"

// Options tune the store.
type Options struct {
	// NoGroupCommit commits every append in its own transaction (one fsync
	// each): the baseline the benchmarks compare group commit against.
	NoGroupCommit bool
	// MaxBatch bounds the appends committed together (default 1024).
	MaxBatch int
}

// Store is the SQLite event store.
type Store struct {
	store.Watchers
	db     *sql.DB
	sealer *event.Sealer
	opts   Options

	// gc batches appends: commitBatch commits one batch at a time on w,
	// and syncRound (its pipelined second stage) fsyncs the WAL.
	gc *groupcommit.Batcher[*appendReq]
	w  *writer // owned by the commit loop

	// wal is the WAL file, fsynced by syncRound; nil with NoGroupCommit,
	// where every COMMIT syncs (synchronous=FULL).
	wal     *os.File
	syncWAL func() error          // wal.Sync; tests replace it
	failed  atomic.Pointer[error] // set by syncRound when an fsync fails; sticky
	// durable is the highest position this store knows to be on stable
	// storage, ours the highest it has committed (raised before COMMIT);
	// in-process readers do not see rows in between (see hidden).
	durable, ours atomic.Int64
	hints         tipHints
	readers       *readerPool
	// commits counts transactions the commit loop ran (batches, retries
	// included); the benchmarks report events per commit from it.
	commits atomic.Int64
	// syncs and syncTime count syncRound's fsyncs and the time they took.
	syncs, syncTime atomic.Int64
}

type appendReq struct {
	// sealed are the prepared events as the caller sealed them on the tip
	// sealedOn (its hint), with their lines; used if that is the tip.
	sealedOn event.Tip
	sealed   []event.Event
	lines    [][]byte

	pos       int64 // position of the batch's last row once committed
	sessionID string
	expected  int64
	prepared  []event.Prepared
	imported  []event.Event // ImportSealed: already sealed
	// del: DeleteSession of sessionID if its last seq is expected;
	// deleted is how many events it removed.
	del     bool
	deleted int64
	perr    error
	out     []event.Event
	err     error
	ack     chan struct{}
}

const schema = `
CREATE TABLE IF NOT EXISTS batches (
	pos   INTEGER PRIMARY KEY,
	idx   BLOB NOT NULL,
	lines BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS heads (
	session_id TEXT PRIMARY KEY,
	last_pos   INTEGER NOT NULL,
	first_ts   TEXT NOT NULL,
	last_ts    TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS folded (
	id  INTEGER PRIMARY KEY CHECK (id = 1),
	pos INTEGER NOT NULL
);
INSERT OR IGNORE INTO folded (id, pos) VALUES (1, 0);
`

// layoutVersion is stored in PRAGMA user_version. A database from a newer
// layout is refused rather than misread.
const layoutVersion = 4

// foldEvery is how many commits the loop lets pass before it writes the
// heads it moved into the heads table, which bounds the tail readers scan.
// BenchmarkGroupCommit, 64 sessions: folding every commit cost a sixth of
// the commit loop's time; from 16 on the cost no longer shows.
const foldEvery = 16

// Open opens (creating if needed) the store in dir/agentos.db.
func Open(dir string, sealer *event.Sealer, opts Options) (*Store, error) {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 1024
	}
	sync := "NORMAL"
	if opts.NoGroupCommit {
		sync = "FULL"
	}
	path := filepath.Join(dir, FileName)
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(" + sync + ")&_pragma=busy_timeout(10000)&_pragma=foreign_keys(on)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	// One writer connection is owned by the commit loop and readerConns
	// by the readers (pool.go); one more serves Ping and schema setup.
	db.SetMaxOpenConns(readerConns + 2)
	if err := createSchema(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: create schema: %w", err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: writer connection: %w", err)
	}
	w := &writer{conn: conn, stmts: map[string]*sql.Stmt{}, tips: map[string]*tipRow{}, unfolded: map[string]*tipRow{}, moved: map[string]*tipRow{}}
	s := &Store{hints: tipHints{seed: maphash.MakeSeed()}, readers: newReaderPool(db, readerConns), db: db, sealer: sealer, opts: opts, w: w}
	if err := w.sync(context.Background()); err != nil {
		w.close()
		db.Close()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	s.durable.Store(w.pos)
	s.ours.Store(w.pos)
	if !opts.NoGroupCommit {
		// The writer connection keeps the WAL open (SQLite deletes it
		// only when the last connection closes), so this handle stays on
		// the file the commits write. Syncing the directory once makes the
		// WAL's own directory entry durable.
		if s.wal, err = openWAL(path); err != nil {
			w.close()
			db.Close()
			return nil, fmt.Errorf("sqlite: %w", err)
		}
		s.syncWAL = s.wal.Sync
	}
	o := groupcommit.Options[*appendReq]{MaxBatch: opts.MaxBatch}
	if opts.NoGroupCommit {
		o.MaxBatch = 1
	}
	if s.wal != nil {
		o.Then, o.ThenMin = s.syncRound, min(pipelineMin, o.MaxBatch)
	}
	if s.gc, err = groupcommit.New(s.commitBatch, o); err != nil {
		s.closeFiles()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return s, nil
}

func openWAL(path string) (*os.File, error) {
	f, err := os.Open(path + "-wal")
	if err != nil {
		return nil, fmt.Errorf("open WAL: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("sync data directory: %w", err)
		}
	}
	return f, nil
}

// Append implements store.Store. Payload preparation (redaction, schema
// validation) runs here in the caller's goroutine; numbering, hashing and
// the write happen in the commit loop.
func (s *Store) Append(ctx context.Context, sessionID string, expectedSeq int64, drafts ...event.Draft) ([]event.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ps, perr := s.sealer.PrepareAll(sessionID, drafts)
	if ps == nil {
		return nil, perr
	}
	r := newReq()
	defer reqPool.Put(r)
	r.sessionID, r.expected, r.prepared, r.perr = sessionID, expectedSeq, ps, perr
	// Seal here, in parallel with other callers, on the tip this session
	// had after its last commit; the commit loop uses the result only if
	// that is still the tip, and seals again otherwise.
	if tip, ok := s.hints.get(sessionID); ok && (tip.Seq == expectedSeq || perr != nil) {
		r.sealedOn = tip
		r.sealed, r.lines = s.sealer.ChainLines(tip, ps)
	}
	if err := s.submit(ctx, r); err != nil {
		return nil, err
	}
	if r.err != nil {
		return nil, r.err
	}
	s.Notify(sessionID)
	return store.Finish(r.out, perr)
}

// ImportSealed implements store.Importer.
func (s *Store) ImportSealed(ctx context.Context, sessionID string, evs []event.Event) error {
	if len(evs) == 0 {
		return nil
	}
	r := newReq()
	defer reqPool.Put(r)
	r.sessionID, r.imported = sessionID, evs
	if err := s.submit(ctx, r); err != nil {
		return err
	}
	if r.err == nil {
		s.Notify(sessionID)
	}
	return r.err
}

// releaseLines hands the lines the caller rendered back for reuse.
func (r *appendReq) releaseLines() {
	if r.lines != nil {
		event.ReleaseLines(r.lines)
		r.lines = nil
	}
}

// reqPool recycles append requests with their acknowledgement channels:
// at ~100k appends/s they were an eighth of what an append allocated. A
// request goes back to the pool when its Append returns; commitBatch and
// syncRound are done with it once they have acknowledged it (ack is the
// last thing they do to a request).
var reqPool = sync.Pool{New: func() any { return &appendReq{ack: make(chan struct{}, 1)} }}

// newReq returns a cleared request from the pool.
func newReq() *appendReq {
	r := reqPool.Get().(*appendReq)
	*r = appendReq{ack: r.ack}
	return r
}

func (s *Store) submit(ctx context.Context, r *appendReq) error {
	if err := s.gc.Send(ctx, r); err != nil {
		if errors.Is(err, groupcommit.ErrClosed) {
			return store.ErrClosed
		}
		return err
	}
	// Once submitted, the append commits or fails as a whole; waiting for
	// it even if ctx ends keeps the caller's view of the seq correct.
	<-r.ack
	return nil
}

// commitBatch is the batcher's first stage: it commits a batch. With
// NoGroupCommit, COMMIT synced (synchronous=FULL) and the batch is
// acknowledged here; otherwise syncRound acknowledges it after its fsync.
func (s *Store) commitBatch(batch []*appendReq) {
	s.commit(batch)
	if s.wal == nil {
		s.advance(batch)
		ack(batch)
	}
}

// While an fsync is in flight the batcher holds a small batch back
// (groupcommit.Options.ThenMin) until pipelineMin requests are waiting or
// the fsync is done. Committing whatever has arrived the moment the
// previous batch is handed off makes many tiny transactions (a few events
// each) whose fixed cost — their statements, the WAL pages they rewrite,
// about 40 µs — then dominates; waiting for every fsync makes commit and
// fsync serial again. A batch of pipelineMin amortises the fixed cost to
// about a tenth of the commit's work, so from there committing early wins.
//
// pipelineMin is the batch size from which the commit loop commits while
// an fsync is in flight instead of waiting for it. BenchmarkGroupCommit
// with 64 sessions, one sweep: 8 → 30k events/s (13 events per commit),
// 16 → 35k, 32 → 41k, 64 → 37k; a later sweep (cheaper prepare, busier
// machine) ranked 16, 24 and 48 below 32 again, and so did one after
// layout 3 made commits cheaper (32: 66k/71k, 16: 74k/60k, 8: 65k/56k,
// 1: 36k/39k; fsyncs took 370-410 µs instead of ~240 when commits wrote to
// the WAL during nearly every one). Starting the commit so that it ends
// when the fsync in flight does (estimated from moving averages) made
// batches of ~6 events and lost a third.
const pipelineMin = 32

// syncRound is the batcher's second stage: it fsyncs the WAL once for
// every batch committed since the last round and acknowledges them. A
// failed fsync leaves the durability of everything since the last good
// one unknown: those appends fail, and so does every later one (the store
// is then unusable until it is reopened, which recovers the WAL).
func (s *Store) syncRound(batches [][]*appendReq) {
	err := s.failure()
	if err == nil {
		start := time.Now()
		err = s.syncWAL()
		s.syncs.Add(1)
		s.syncTime.Add(int64(time.Since(start)))
		if err != nil {
			err = fmt.Errorf("sqlite: fsync WAL: %w", err)
			s.failed.Store(&err)
		}
	}
	for _, b := range batches {
		if err != nil {
			for _, r := range b {
				if r.err == nil {
					r.err, r.out = err, nil
				}
			}
		}
		s.advance(b)
		ack(b)
	}
}

// failure is the error of a failed fsync, if one failed.
func (s *Store) failure() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// advance moves the durable position past a synced batch.
func (s *Store) advance(batch []*appendReq) {
	for _, r := range batch {
		if r.err == nil && r.pos > s.durable.Load() {
			s.durable.Store(r.pos)
		}
	}
}

func ack(batch []*appendReq) {
	for _, r := range batch {
		r.ack <- struct{}{} // buffered: never blocks; the request is reused
	}
}

func createSchema(db *sql.DB) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	if version > layoutVersion {
		return fmt.Errorf("database layout version %d is newer than this agentos understands (%d)", version, layoutVersion)
	}
	if _, err := tx.Exec(schema); err != nil {
		return err
	}
	if err := migrate(tx); err != nil {
		return fmt.Errorf("migrate to layout %d: %w", layoutVersion, err)
	}
	if err := migrateActivity(tx); err != nil {
		return fmt.Errorf("migrate to layout %d: %w", layoutVersion, err)
	}
	if _, err := tx.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, layoutVersion)); err != nil {
		return err
	}
	return tx.Commit()
}

// migrate moves a database in layout 1 or 2 (a row per event in an events
// table; heads in a tips table, or in layout 1 a sessions table) into
// batches of one event each. It runs in the opening transaction, so a
// database is in one layout or the other. The old tables are dropped; an
// older agentos that opens the file afterwards finds no events table and
// creates an empty one instead of appending after stale heads, and this
// version refuses a file holding both.
func migrate(tx *sql.Tx) error {
	has := func(table string) (bool, error) {
		var n int
		err := tx.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`, table).Scan(&n)
		return n > 0, err
	}
	old, err := has("events")
	if err != nil || !old {
		return err
	}
	var newer int
	if err := tx.QueryRow(`SELECT count(*) FROM (SELECT 1 FROM batches LIMIT 1)`).Scan(&newer); err != nil {
		return err
	}
	var oldRows int
	if err := tx.QueryRow(`SELECT count(*) FROM (SELECT 1 FROM events LIMIT 1)`).Scan(&oldRows); err != nil {
		return err
	}
	if newer > 0 && oldRows > 0 {
		return errors.New("the file holds events in both the old and the new layout (an older agentos wrote to it after the upgrade); refusing to merge them")
	}
	ins, err := tx.Prepare(`INSERT INTO batches (pos, idx, lines) VALUES (?, ?, ?)`)
	if err != nil {
		return err
	}
	defer ins.Close()
	rows, err := tx.Query(`SELECT pos, session_id, seq, prev_pos, line FROM events ORDER BY pos`)
	if err != nil {
		return err
	}
	var last int64
	for rows.Next() {
		var pos, seq, prev int64
		var sid string
		var line []byte
		if err := rows.Scan(&pos, &sid, &seq, &prev, &line); err != nil {
			rows.Close()
			return err
		}
		if _, err := ins.Exec(pos, appendIndex(nil, sid, seq, prev, len(line)), line); err != nil {
			rows.Close()
			return err
		}
		last = pos
	}
	if err := rows.Close(); err != nil {
		return err
	}
	// Layout 2's tips first; a layout-1 sessions table only fills gaps.
	for _, t := range []string{"tips", "sessions"} {
		ok, err := has(t)
		if err != nil {
			return err
		}
		if ok {
			if _, err := tx.Exec(`INSERT OR IGNORE INTO heads (session_id, last_pos, first_ts) SELECT session_id, last_pos, first_ts FROM ` + t); err != nil {
				return err
			}
			if _, err := tx.Exec(`DROP TABLE ` + t); err != nil {
				return err
			}
		}
	}
	if _, err := tx.Exec(`UPDATE folded SET pos = max(pos, ?)`, last); err != nil {
		return err
	}
	_, err = tx.Exec(`DROP TABLE events`)
	return err
}

type tipRow struct {
	tip     event.Tip
	pos     int64
	firstTS string
	lastTS  string
}

// commit writes a batch in one transaction; the caller acknowledges it.
// Requests that conflict fail alone; if the transaction fails, every
// request in it fails. After a failed fsync nothing more is committed.
func (s *Store) commit(batch []*appendReq) {
	s.commits.Add(1)
	err := s.failure()
	if err == nil {
		err = s.commitOnce(batch)
	}
	for _, r := range batch {
		if err != nil && r.err == nil {
			r.err, r.out = fmt.Errorf("sqlite: commit: %w", err), nil
		}
		// The lines were copied into the batch row (or not written at
		// all); nothing refers to them any more.
		r.releaseLines()
	}
}

func (s *Store) commitOnce(batch []*appendReq) (err error) {
	w := s.w
	ctx := context.Background()
	// Tips moved by this transaction; adopted only if it commits. The map
	// is the writer's, cleared for each commit (a new one grew through
	// several rehashes per commit).
	moved := w.moved
	clear(moved)
	defer func() {
		if err != nil {
			// Whether the failed transaction left anything is unknown
			// until the next commit reads the database afresh.
			w.fresh = false
		}
	}()
	if _, err := w.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			// The batch already failed with err; ROLLBACK only frees the
			// write lock, and fails harmlessly if no transaction is open.
			_, _ = w.conn.ExecContext(ctx, "ROLLBACK")
		}
	}()
	if err := w.sync(ctx); err != nil {
		return err
	}
	// Events get explicit positions, consecutive from the last one; the
	// write lock keeps w.pos current.
	pos := w.pos
	rows := w.rows[:0]
	for _, r := range batch {
		t, ok := moved[r.sessionID]
		if !ok {
			if t, err = w.tip(ctx, r.sessionID); err != nil {
				return err
			}
			before := *t
			t = &before
			moved[r.sessionID] = t
		}
		if r.del {
			if err := w.deleteSession(ctx, r, t); err != nil {
				return err
			}
			continue
		}
		var evs []event.Event
		if r.imported != nil {
			if err := store.CheckContinues(t.tip, r.sessionID, r.imported); err != nil {
				r.err = err
				continue
			}
			evs = r.imported
		} else {
			if t.tip.Seq != r.expected && r.perr == nil {
				r.err = &store.ConflictError{SessionID: r.sessionID, Expected: r.expected, Actual: t.tip.Seq}
				continue
			}
			if r.sealed != nil && r.sealedOn == t.tip {
				evs = r.sealed
			} else {
				r.releaseLines() // sealed on a stale tip
				evs = s.sealer.Chain(t.tip, r.prepared)
			}
		}
		for i := range evs {
			pos++
			row := eventRow{pos: pos, prev: t.pos, ev: &evs[i]}
			if r.lines != nil {
				row.line = r.lines[i]
			}
			rows = append(rows, row)
			t.pos = pos
		}
		last := evs[len(evs)-1]
		if t.firstTS == "" {
			t.firstTS = evs[0].TS
		}
		t.tip = event.Tip{Seq: last.Seq, Hash: last.Hash}
		t.lastTS = last.TS
		r.out = evs
		r.pos = t.pos
	}
	w.rows = rows
	if len(rows) > 0 {
		if err := w.insertBatch(ctx, rows); err != nil {
			return err
		}
	}
	fold := w.sinceFold+1 >= foldEvery
	if fold {
		if err := w.fold(ctx, moved, pos); err != nil {
			return err
		}
	}
	// Raised before COMMIT so that no snapshot holds these rows while
	// hidden() does not cover them; lowered again if the commit fails (it
	// rolled back, and the positions are handed out again).
	prevOurs := s.ours.Load()
	if pos > prevOurs {
		s.ours.Store(pos)
	}
	if _, err := w.conn.ExecContext(ctx, "COMMIT"); err != nil {
		s.ours.Store(prevOurs)
		return err
	}
	if fold {
		clear(w.unfolded)
		w.sinceFold = 0
	} else {
		w.sinceFold++
	}
	for sid, t := range moved {
		w.tips[sid] = t
		if !fold {
			w.unfolded[sid] = t
		}
		s.hints.set(sid, t.tip)
	}
	if len(w.tips) > maxCachedTips {
		// Re-read from the table as needed; the unfolded heads stay.
		clear(w.tips)
		maps.Copy(w.tips, w.unfolded)
	}
	w.pos = pos
	return nil
}

type eventRow struct {
	pos, prev int64
	ev        *event.Event
	line      []byte // ev's line if the caller rendered it
}

// maxCachedTips bounds the tips the commit loop caches (and each shard of
// the callers' hints): a long-running server touches many sessions.
const maxCachedTips = 1 << 16

// tipHints holds each recently committed session's tip for callers, so
// that they can seal their events before the commit loop sees them. A
// hint is only ever a guess: the loop checks it against the real tip.
type tipHints struct {
	seed   maphash.Seed
	shards [16]struct {
		mu sync.Mutex
		m  map[string]event.Tip
	}
}

func (h *tipHints) shard(sid string) int {
	return int(maphash.String(h.seed, sid) % uint64(len(h.shards)))
}

func (h *tipHints) get(sid string) (event.Tip, bool) {
	sh := &h.shards[h.shard(sid)]
	sh.mu.Lock()
	t, ok := sh.m[sid]
	sh.mu.Unlock()
	return t, ok
}

func (h *tipHints) set(sid string, t event.Tip) {
	sh := &h.shards[h.shard(sid)]
	sh.mu.Lock()
	if sh.m == nil || len(sh.m) >= maxCachedTips/len(h.shards) {
		sh.m = map[string]event.Tip{}
	}
	sh.m[sid] = t
	sh.mu.Unlock()
}

// writer is the commit loop's connection with its prepared statements and
// cached session heads. Only the commit loop touches it.
type writer struct {
	conn *sql.Conn
	// stmts are prepared on conn once and reused by every commit: parsing
	// the statements for each commit cost more than executing them.
	stmts map[string]*sql.Stmt
	// tips caches session heads and pos the last event's position. They
	// are valid while fresh is set and dataVersion (PRAGMA data_version,
	// which changes when another connection commits) is unchanged.
	tips        map[string]*tipRow
	pos         int64
	fresh       bool
	dataVersion int64
	// unfolded are the heads moved since the last fold (by this writer,
	// or found in the tail when the cache was loaded); sinceFold counts
	// the commits since then.
	unfolded  map[string]*tipRow
	sinceFold int
	// Buffers reused across commits.
	moved       map[string]*tipRow
	rows        []eventRow
	args        []any
	idx, lines  []byte
	foldScratch []string
}

// stmt returns the prepared statement for query, preparing it on first use.
func (w *writer) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := w.stmts[query]; ok {
		return st, nil
	}
	st, err := w.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	w.stmts[query] = st
	return st, nil
}

func (w *writer) close() error {
	for _, st := range w.stmts {
		st.Close()
	}
	return w.conn.Close()
}

// insertBatch writes the commit's events as one batches row.
func (w *writer) insertBatch(ctx context.Context, rows []eventRow) error {
	st, err := w.stmt(ctx, `INSERT INTO batches (pos, idx, lines) VALUES (?, ?, ?)`)
	if err != nil {
		return err
	}
	idx, lines := w.idx[:0], w.lines[:0]
	for _, r := range rows {
		n := len(lines)
		if r.line != nil {
			lines = append(lines, r.line...)
		} else {
			lines = r.ev.AppendLine(lines)
		}
		idx = appendIndex(idx, r.ev.SessionID, r.ev.Seq, r.prev, len(lines)-n)
	}
	w.idx, w.lines = idx, lines
	_, err = st.ExecContext(ctx, rows[0].pos, idx, lines)
	return err
}

// fold writes every head moved since the last fold, this commit's
// included, into the heads table, and records that the table is exact at
// pos.
func (w *writer) fold(ctx context.Context, moved map[string]*tipRow, pos int64) error {
	sids := w.foldScratch[:0]
	for sid, t := range w.unfolded {
		if _, again := moved[sid]; !again && t.pos != 0 {
			sids = append(sids, sid)
		}
	}
	for sid, t := range moved {
		if t.pos != 0 {
			sids = append(sids, sid)
		}
	}
	w.foldScratch = sids
	head := func(sid string) *tipRow {
		if t, ok := moved[sid]; ok {
			return t
		}
		return w.unfolded[sid]
	}
	for len(sids) > 0 {
		n := chunk(len(sids))
		st, err := w.stmt(ctx, multiRow(`INSERT INTO heads (session_id, last_pos, first_ts, last_ts) VALUES `, 4, n,
			` ON CONFLICT (session_id) DO UPDATE SET last_pos = excluded.last_pos, last_ts = excluded.last_ts`))
		if err != nil {
			return err
		}
		args := w.args[:0]
		for _, sid := range sids[:n] {
			t := head(sid)
			args = append(args, sid, t.pos, t.firstTS, t.lastTS)
		}
		w.args = args
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return err
		}
		sids = sids[n:]
	}
	st, err := w.stmt(ctx, `UPDATE folded SET pos = ?`)
	if err != nil {
		return err
	}
	_, err = st.ExecContext(ctx, pos)
	return err
}

// maxRows bounds the rows of one multi-row statement. Heads are written in
// chunks of powers of two up to it, so a fold of n heads runs about
// log2(n) statements, each prepared once per store.
const maxRows = 128

// chunk returns the largest power of two <= min(n, maxRows).
func chunk(n int) int {
	c := maxRows
	for c > n {
		c >>= 1
	}
	return c
}

// multiRow builds prefix + n groups of `(?, …)` with cols placeholders + suffix.
func multiRow(prefix string, cols, n int, suffix string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		for c := 0; c < cols; c++ {
			if c > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('?')
		}
		b.WriteByte(')')
	}
	b.WriteString(suffix)
	return b.String()
}

// sync runs at the start of each transaction, under the write lock: if
// another connection committed since this one last did (or a commit of
// ours failed), the cached heads and position are dropped and read afresh,
// and the heads of the tail are loaded as unfolded.
func (w *writer) sync(ctx context.Context) error {
	st, err := w.stmt(ctx, `PRAGMA data_version`)
	if err != nil {
		return err
	}
	var v int64
	if err := st.QueryRowContext(ctx).Scan(&v); err != nil {
		return err
	}
	if w.fresh && v == w.dataVersion {
		return nil
	}
	// sinceFold carries on: the tail only grew.
	clear(w.tips)
	clear(w.unfolded)
	q := &querier{prepare: w.stmt}
	if w.pos, err = q.lastPos(ctx); err != nil {
		return err
	}
	folded, err := q.folded(ctx)
	if err != nil {
		return err
	}
	tail, err := q.tail(ctx, folded)
	if err != nil {
		return err
	}
	r := &batchReader{q: q}
	for sid, h := range tail {
		row, err := q.headRow(ctx, sid)
		if err != nil {
			return err
		}
		h.firstTS = row.firstTS
		t, err := w.load(ctx, r, sid, *h)
		if err != nil {
			return err
		}
		w.tips[sid], w.unfolded[sid] = t, t
	}
	w.dataVersion, w.fresh = v, true
	return nil
}

// tip returns the cached head of a session, reading it on first use. A
// session not cached is not in the tail (sync loaded those), so its heads
// row, if any, is exact.
func (w *writer) tip(ctx context.Context, sid string) (*tipRow, error) {
	if t, ok := w.tips[sid]; ok {
		return t, nil
	}
	q := &querier{prepare: w.stmt}
	h, err := q.headRow(ctx, sid)
	if err != nil {
		return nil, err
	}
	t, err := w.load(ctx, &batchReader{q: q}, sid, h)
	if err != nil {
		return nil, err
	}
	w.tips[sid] = t
	return t, nil
}

// load reads the last event of a session's head to complete its tipRow.
func (w *writer) load(ctx context.Context, r *batchReader, sid string, h head) (*tipRow, error) {
	t := &tipRow{pos: h.last, firstTS: h.firstTS}
	if h.last == 0 {
		return t, nil // a new session
	}
	e, line, err := r.event(ctx, h.last)
	if err != nil {
		return nil, err
	}
	last, err := event.ParseLineFast(line)
	if err != nil || e.sid != sid || last.Seq != e.seq {
		return nil, fmt.Errorf("session %s: last event at pos %d: %w", sid, h.last, errors.Join(err, errCorrupt))
	}
	t.tip = event.Tip{Seq: last.Seq, Hash: last.Hash}
	t.lastTS = last.TS
	if t.firstTS == "" {
		if t.firstTS, err = r.firstTS(ctx, h.first); err != nil {
			return nil, fmt.Errorf("session %s: %w", sid, err)
		}
	}
	return t, nil
}

// Ping checks the database is reachable (readiness).
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// Close drains pending appends, then closes the database.
func (s *Store) Close() error {
	if !s.gc.Close() {
		return nil
	}
	return s.closeFiles()
}

// closeFiles closes the readers, the writer, the database and the WAL.
func (s *Store) closeFiles() error {
	s.readers.close()
	err := errors.Join(s.w.close(), s.db.Close())
	if s.wal != nil {
		err = errors.Join(err, s.wal.Close())
	}
	return err
}

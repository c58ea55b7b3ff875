package queue

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentos/agentos/runtime/groupcommit"
)

type opKind uint8

const (
	opEnqueue opKind = iota
	opClaim
	opDone
	opPrune
	opRelease
	opWithdraw
)

// Delivery states.
const (
	statePending = 0
	stateClaimed = 1
	stateDone    = 2
)

// claimBatch is how many pending deliveries one claim takes from the log
// into memory; the rest of a claim's batch waits there for the next Claim.
// Close gives those back (attempt uncounted); after a crash they are
// released when the log is reopened, with the attempt counted.
const claimBatch = 16

// LogQueue is the Queue as an append-only log in a directory of segment
// files. Every operation — enqueue, claim, completion, release, prune — is
// a length-prefixed, CRC32C-checked record appended by one writer at a
// time (a group commit: whichever caller finds no write under way leads
// one), which writes whatever operations arrived together with one write
// and makes them durable with one fdatasync; each caller returns only
// after its batch is synced. While operations arrive in quick succession,
// the writer waits up to a commit delay for more to share the fdatasync
// (see LogOptions).
//
// The state of every delivery (pending, claimed, done; attempts; retry
// time; outcome) lives in memory, rebuilt by replaying the segments when
// the directory is opened; bodies stay on disk and are read back (pread)
// when a delivery is claimed or inspected. The active segment is filled
// with zeros ahead of its records, so that a sync flushes data without a
// file-size (metadata) change; a segment is cut to its records before the
// next one is created. Opening stops at the first torn or corrupt record
// (or zero length) in the last segment and truncates the file there: a
// record is acknowledged only after it and everything before it was
// synced, so what is cut was never acknowledged. Damage in an earlier
// segment is reported, not repaired.
//
// A failed write or fdatasync leaves the file in an unknown state (the
// kernel may have dropped the dirty pages), so the queue fails every later
// operation with that error rather than acknowledge anything more; reopen
// it to recover what is durable.
//
// Segments rotate once past a size. Prune forgets deliveries done before
// its time (writing a record of it), moves the few live deliveries left in
// old segments forward (rewriting their full state and body into the
// current segment), and deletes segments that no stored delivery needs.
//
// One process owns the directory: opening it makes every delivery left
// claimed by an earlier process claimable again (the attempt stays
// counted).
type LogQueue struct {
	dir string

	// files are the open segments by number; Claim and Get read bodies
	// from them outside the writer.
	filesMu sync.RWMutex
	files   map[uint64]*os.File

	// Owned by the writer: the group commit's leader (and OpenLogQueue /
	// Close when there is none).
	active  uint64 // number of the segment appended to
	off     int64  // end of its records
	zeroEnd int64  // end of the zeros written (and synced) after off
	zeros   []byte
	buf     []byte
	segRefs map[uint64]int // segment → stored deliveries whose latest full record is in it
	segMax  int64
	moves   []bodyMove // bodies rewritten by the batch being committed
	nextSeq uint64
	failed  error

	// idxMu guards the delivery state below, read by Get and Depth.
	idxMu   sync.Mutex
	index   map[string]*logEntry
	keys    map[string]*logEntry // by payload key (Delivery.Key), those that have one
	due     []*logEntry          // pending and due, in arrival order
	delayed []*logEntry          // pending with a retry time (not_before) set
	open    int                  // pending + claimed
	claims  map[*logEntry]bool   // claimed by this process (OldestClaim)

	claimMu     sync.Mutex
	claimed     []Delivery // claimed in a batch, not yet handed out
	claimClosed bool

	gc    *groupcommit.Batcher[*logOp]
	ready chan struct{}
	// syncData makes a batch's write durable (fdatasync; tests wrap it).
	syncData func(*os.File) error

	now func() time.Time
}

// logEntry is the in-memory state of one stored delivery.
type logEntry struct {
	seq                   uint64 // arrival order
	id, event, action     string
	key                   string // Delivery.Key
	recv                  int64
	state                 uint8
	attempts              int
	failures              int // dispatches that failed (OutcomeRetry)
	notBefore             int64
	outcome, errMsg       string
	doneAt                int64
	claimedAt             int64  // when this process claimed it (memory only: a reopened queue holds no claims)
	seg                   uint64 // segment holding the body
	bodyOff               int64
	bodyLen               int
	pendingSync, inQueues bool
}

type logOp struct {
	kind opKind
	d    Delivery // enqueue: in
	// claim: out, with where each body is
	claimed []claimedRef
	// done
	id, outcome, errMsg string

	before int64 // prune: in
	pruned int64 // prune: out

	// withdraw: in, the IDs to withdraw (errMsg the reason) and those of
	// them taken from the claim buffer (claimed, never handed out); out,
	// those withdrawn
	ids       []string
	taken     map[string]bool
	withdrawn map[string]bool

	dup bool
	err error
	ack chan struct{}
}

// bodyMove is a body Prune rewrote into the active segment; the entry
// points to it once the write is synced (until then Get and Claim read the
// old copy).
type bodyMove struct {
	e   *logEntry
	off int64
}

type claimedRef struct {
	e       *logEntry
	d       Delivery
	seg     uint64
	off     int64
	bodyLen int
}

// Record types of the log.
const (
	recPut     byte = 1 // full state of a delivery and its body
	recClaim   byte = 2 // id: claimed, attempts+1
	recDone    byte = 3 // id, outcome, error, at, not_before
	recRelease byte = 4 // id: claim given back unused, attempts-1
	recForget  byte = 5 // id: pruned
	// id: a claimed delivery handed back at shutdown: pending at once,
	// the claim counted in attempts, no failure
	recHandBack byte = 6
	// recPut with the count of failed dispatches after done_at
	recPutFailures byte = 7
	// recPutFailures with the payload key (Delivery.Key) after the
	// failures; written for deliveries that have one
	recPutKey byte = 8
)

const (
	logHeader        = 8 // payload length (uint32 LE), CRC32C of the payload (uint32 LE)
	maxLogRecord     = 64 << 20
	defaultSegment   = 64 << 20
	logSegmentSuffix = ".log"
	// rewriteMax bounds the live deliveries Prune moves forward at once.
	rewriteMax = 4096
	// zeroChunk is how far ahead of its records the active segment is
	// filled with zeros. Overwriting blocks the file already has keeps the
	// file size (metadata) unchanged, so most fdatasyncs flush data only;
	// replay reads a zero length as the end of the records.
	zeroChunk = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// DefaultCommitDelay is the log queue's default commit delay: the longest
// a delivery waits, while deliveries arrive closer together than that, for
// others to share its write and fdatasync. Below that rate there is no
// wait at all. At 750 µs that is above ~1,300 deliveries a second: with
// 1.5 ms, deliveries at 1,000 a second shared syncs (~8% less CPU each)
// but p99 rose from ~3 ms to 4-5.6 ms (load script, alternating rounds),
// against a 5 ms latency goal at that rate.
const DefaultCommitDelay = 750 * time.Microsecond

// LogOptions tunes a LogQueue.
type LogOptions struct {
	// CommitDelay bounds how long an operation may wait for others to join
	// its batch (one write, one fdatasync); the wait happens only while
	// operations arrive closer together than CommitDelay. Zero means
	// DefaultCommitDelay, a negative value no delay.
	CommitDelay time.Duration
	// SegmentSize is the size past which the log moves on to a new
	// segment file; zero means 64 MiB.
	SegmentSize int64
	// Now is the queue's clock (retry times, completion times); nil means
	// time.Now.
	Now func() time.Time
}

// OpenLogQueue opens (creating if needed) the log queue in directory dir.
func OpenLogQueue(dir string) (*LogQueue, error) {
	return OpenLogQueueOptions(dir, LogOptions{})
}

// OpenLogQueueOptions is OpenLogQueue with options.
func OpenLogQueueOptions(dir string, o LogOptions) (*LogQueue, error) {
	seg := o.SegmentSize
	if seg <= 0 {
		seg = defaultSegment
	}
	return openLogQueueWith(dir, seg, o)
}

func openLogQueue(dir string, segMax int64) (*LogQueue, error) {
	return openLogQueueWith(dir, segMax, LogOptions{})
}

func openLogQueueWith(dir string, segMax int64, o LogOptions) (*LogQueue, error) {
	delay := o.CommitDelay
	if delay == 0 {
		delay = DefaultCommitDelay
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("queue: log: %w", err)
	}
	q := &LogQueue{
		dir: dir, files: map[uint64]*os.File{}, segRefs: map[uint64]int{}, segMax: segMax,
		index: map[string]*logEntry{}, keys: map[string]*logEntry{}, claims: map[*logEntry]bool{},
		ready: make(chan struct{}, 1), now: time.Now, nextSeq: 1, syncData: fdatasync,
	}
	if o.Now != nil {
		q.now = o.Now
	}
	if err := q.replay(); err != nil {
		q.closeFiles()
		return nil, fmt.Errorf("queue: log: %w", err)
	}
	gc, err := groupcommit.New(q.commit, groupcommit.Options[*logOp]{MaxBatch: 512, Delay: max(delay, 0)})
	if err != nil {
		q.closeFiles()
		return nil, fmt.Errorf("queue: log: %w", err)
	}
	q.gc = gc
	q.signal()
	return q, nil
}

func segName(n uint64) string { return fmt.Sprintf("%016d%s", n, logSegmentSuffix) }

// segments lists the segment numbers in dir, oldest first.
func segments(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), logSegmentSuffix)
		if !ok || e.IsDir() {
			continue
		}
		n, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			continue
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// replay rebuilds the state from the segments and opens the last one for
// appending (creating segment 1 in an empty directory).
func (q *LogQueue) replay() error {
	segs, err := segments(q.dir)
	if err != nil {
		return err
	}
	for i, n := range segs {
		last := i == len(segs)-1
		flag := os.O_RDONLY
		if last {
			flag = os.O_RDWR
		}
		f, err := os.OpenFile(filepath.Join(q.dir, segName(n)), flag, 0)
		if err != nil {
			return err
		}
		q.files[n] = f
		end, torn, err := q.replaySegment(n, f)
		if err != nil {
			return fmt.Errorf("%s: %w", segName(n), err)
		}
		if torn {
			if !last {
				return fmt.Errorf("%s: corrupt record at offset %d of a sealed segment", segName(n), end)
			}
			// The unacknowledged tail of the last batch: cut it.
			if err := f.Truncate(end); err != nil {
				return err
			}
			if err := f.Sync(); err != nil {
				return err
			}
		}
		q.active, q.off, q.zeroEnd = n, end, end
	}
	if len(segs) == 0 {
		if err := q.createSegment(1); err != nil {
			return err
		}
	}
	// Claims of a previous process are void: it will never call Done.
	for _, e := range q.index {
		if e.state == stateClaimed {
			e.state = statePending
		}
		if e.state == statePending {
			q.enqueueReady(e)
		}
	}
	slices.SortFunc(q.due, func(a, b *logEntry) int { return cmpSeq(a.seq, b.seq) })
	return nil
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// replaySegment applies the records of segment n. It returns the offset
// after the last whole record, and torn when a partial or corrupt record
// follows it.
func (q *LogQueue) replaySegment(n uint64, f *os.File) (end int64, torn bool, err error) {
	r := bufio.NewReaderSize(f, 1<<20)
	var hdr [logHeader]byte
	var payload []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if err == io.EOF {
				return end, false, nil
			}
			if err == io.ErrUnexpectedEOF {
				return end, true, nil
			}
			return end, false, err
		}
		size := binary.LittleEndian.Uint32(hdr[0:4])
		sum := binary.LittleEndian.Uint32(hdr[4:8])
		if size == 0 || size > maxLogRecord {
			return end, true, nil
		}
		if cap(payload) < int(size) {
			payload = make([]byte, size)
		}
		payload = payload[:size]
		if _, err := io.ReadFull(r, payload); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return end, true, nil
			}
			return end, false, err
		}
		if crc32.Checksum(payload, castagnoli) != sum {
			return end, true, nil
		}
		if err := q.apply(n, end, payload); err != nil {
			// A record with a valid checksum that does not decode was
			// written by something else: refuse rather than guess.
			return end, false, fmt.Errorf("record at offset %d: %w", end, err)
		}
		end += logHeader + int64(size)
	}
}

// apply replays one record found at offset off of segment seg.
func (q *LogQueue) apply(seg uint64, off int64, p []byte) error {
	d := decoder{b: p[1:]}
	switch p[0] {
	case recPut, recPutFailures, recPutKey:
		e := &logEntry{seq: d.uvarint(), id: d.str(), event: d.str(), action: d.str(), recv: d.varint(),
			state: uint8(d.uvarint()), attempts: int(d.uvarint()), notBefore: d.varint(),
			outcome: d.str(), errMsg: d.str(), doneAt: d.varint()}
		if p[0] != recPut {
			e.failures = int(d.uvarint())
		}
		if p[0] == recPutKey {
			e.key = d.str()
		}
		if d.err != nil || e.state > stateDone {
			return errors.New("malformed put record")
		}
		e.seg, e.bodyOff, e.bodyLen = seg, off+logHeader+int64(len(p)-len(d.b)), len(d.b)
		if old, ok := q.index[e.id]; ok {
			q.segRefs[old.seg]--
			if old.state != stateDone {
				q.open--
			}
			q.unkey(old)
		}
		q.index[e.id] = e
		if e.key != "" {
			q.keys[e.key] = e
		}
		q.segRefs[seg]++
		if e.state != stateDone {
			q.open++
		}
		q.nextSeq = max(q.nextSeq, e.seq+1)
		return nil
	case recClaim, recRelease, recForget, recHandBack:
		id := d.str()
		if d.err != nil || len(d.b) != 0 {
			return errors.New("malformed record")
		}
		e, ok := q.index[id]
		if !ok {
			return nil // its delivery was pruned and its put record deleted
		}
		switch p[0] {
		case recClaim:
			e.state, e.attempts = stateClaimed, e.attempts+1
		case recRelease:
			e.state, e.attempts = statePending, e.attempts-1
		case recHandBack:
			e.state, e.notBefore = statePending, 0
		case recForget:
			q.forget(e)
		}
		return nil
	case recDone:
		id, outcome, errMsg, at, notBefore := d.str(), d.str(), d.str(), d.varint(), d.varint()
		if d.err != nil || len(d.b) != 0 {
			return errors.New("malformed done record")
		}
		if e, ok := q.index[id]; ok {
			q.finish(e, outcome, errMsg, at, notBefore)
		}
		return nil
	}
	return fmt.Errorf("unknown record type %d", p[0])
}

// finish applies a completion to e.
func (q *LogQueue) finish(e *logEntry, outcome, errMsg string, at, notBefore int64) {
	delete(q.claims, e)
	e.outcome, e.errMsg = outcome, errMsg
	if outcome == OutcomeRetry {
		e.state, e.notBefore = statePending, notBefore
		if !waitsForLease(outcome, errMsg) {
			e.failures++
		}
		return
	}
	if e.state != stateDone {
		q.open--
	}
	e.state, e.doneAt = stateDone, at
}

func (q *LogQueue) forget(e *logEntry) {
	delete(q.claims, e)
	if e.state != stateDone {
		q.open--
	}
	q.segRefs[e.seg]--
	delete(q.index, e.id)
	q.unkey(e)
}

// unkey drops e from the keys, if it is the entry its key names.
func (q *LogQueue) unkey(e *logEntry) {
	if e.key != "" && q.keys[e.key] == e {
		delete(q.keys, e.key)
	}
}

// enqueueReady puts a pending entry on the ready or the delayed list.
func (q *LogQueue) enqueueReady(e *logEntry) {
	e.inQueues = true
	if e.notBefore > 0 {
		q.delayed = append(q.delayed, e)
		return
	}
	q.due = append(q.due, e)
}

func (q *LogQueue) createSegment(n uint64) error {
	f, err := os.OpenFile(filepath.Join(q.dir, segName(n)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := syncDir(q.dir); err != nil {
		f.Close()
		return err
	}
	q.filesMu.Lock()
	q.files[n] = f
	q.filesMu.Unlock()
	q.active, q.off, q.zeroEnd = n, 0, 0
	return nil
}

// seal cuts the zeros after the records of the active segment and syncs
// it, before a next segment exists: only the last segment may end in
// zeros (or a torn record).
func (q *LogQueue) seal() error {
	q.filesMu.RLock()
	f := q.files[q.active]
	q.filesMu.RUnlock()
	if err := f.Truncate(q.off); err != nil {
		return err
	}
	q.zeroEnd = q.off
	return fdatasync(f)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// Ready implements Notifier: it receives after a commit that made a
// delivery claimable.
func (q *LogQueue) Ready() <-chan struct{} { return q.ready }

func (q *LogQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// Enqueue implements Queue.
func (q *LogQueue) Enqueue(ctx context.Context, d Delivery) (bool, error) {
	if d.ID == "" {
		return false, errors.New("queue: log: delivery without id")
	}
	if len(d.Body)+len(d.ID)+len(d.Event)+len(d.Action)+len(d.Key)+64 > maxLogRecord {
		return false, fmt.Errorf("queue: log: delivery %s too large (%d bytes)", d.ID, len(d.Body))
	}
	if d.ReceivedAt.IsZero() {
		d.ReceivedAt = q.now()
	}
	op := &logOp{kind: opEnqueue, d: d}
	if err := q.submit(ctx, op); err != nil {
		return false, err
	}
	return op.dup, op.err
}

// Claim implements Queue. It claims up to claimBatch deliveries at once
// and hands them out one by one, oldest first.
func (q *LogQueue) Claim(ctx context.Context) (Delivery, bool, error) {
	if d, ok := q.takeClaimed(); ok {
		return d, true, nil
	}
	op := &logOp{kind: opClaim}
	if err := q.submit(ctx, op); err != nil {
		return Delivery{}, false, err
	}
	if op.err != nil || len(op.claimed) == 0 {
		return Delivery{}, false, op.err
	}
	ds := make([]Delivery, len(op.claimed))
	for i, c := range op.claimed {
		body, err := q.readBody(c.seg, c.off, c.bodyLen)
		if err != nil {
			// Claimed durably but unreadable: the claim stands (it is
			// released when the queue is reopened); report the error.
			return Delivery{}, false, fmt.Errorf("queue: log: body of %s: %w", c.d.ID, err)
		}
		c.d.Body = body
		ds[i] = c.d
	}
	q.claimMu.Lock()
	if !q.claimClosed {
		q.claimed = append(q.claimed, ds[1:]...)
	}
	q.claimMu.Unlock()
	return ds[0], true, nil
}

func (q *LogQueue) takeClaimed() (Delivery, bool) {
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

func (q *LogQueue) readBody(seg uint64, off int64, n int) ([]byte, error) {
	q.filesMu.RLock()
	defer q.filesMu.RUnlock()
	f, ok := q.files[seg]
	if !ok {
		return nil, fmt.Errorf("segment %d is gone", seg)
	}
	body := make([]byte, n)
	if _, err := f.ReadAt(body, off); err != nil {
		return nil, err
	}
	return body, nil
}

// Done implements Queue. OutcomeRetry makes the delivery claimable again
// after a backoff of 2^(failures-1) seconds (failures: its failed
// dispatches, this one included), at most 256 s; any other outcome is
// final.
func (q *LogQueue) Done(ctx context.Context, id, outcome, errMsg string) error {
	op := &logOp{kind: opDone, id: id, outcome: outcome, errMsg: errMsg}
	if err := q.submit(ctx, op); err != nil {
		return err
	}
	return op.err
}

// Release implements Releaser: the claimed delivery id is pending again at
// once, its claim counted in Attempts, no failure counted.
func (q *LogQueue) Release(ctx context.Context, id string) error {
	op := &logOp{kind: opRelease, id: id}
	if err := q.submit(ctx, op); err != nil {
		return err
	}
	return op.err
}

// Depth implements Queue: deliveries not yet Done (pending or claimed).
func (q *LogQueue) Depth(ctx context.Context) (int, error) {
	q.idxMu.Lock()
	defer q.idxMu.Unlock()
	return q.open, nil
}

// OldestClaim returns how long the oldest delivery claimed and not yet
// finished (or handed back) has been claimed, from the claims this
// process holds in memory (a reopened queue holds none); 0
// when none is claimed. A delivery a Claim took into memory and has not
// handed out yet counts as claimed.
func (q *LogQueue) OldestClaim(ctx context.Context) (time.Duration, error) {
	q.idxMu.Lock()
	var oldest int64
	found := false
	for e := range q.claims {
		if e.state == stateClaimed && (!found || e.claimedAt < oldest) {
			oldest, found = e.claimedAt, true
		}
	}
	q.idxMu.Unlock()
	if !found {
		return 0, nil
	}
	return max(0, time.Duration(q.now().UnixNano()-oldest)), nil
}

// Get returns the stored record of a delivery; ok is false if the queue
// does not hold it.
func (q *LogQueue) Get(ctx context.Context, id string) (Record, bool, error) {
	r, ok, err := q.get(id)
	if err != nil {
		// Prune may have moved the body and deleted its segment meanwhile.
		r, ok, err = q.get(id)
	}
	return r, ok, err
}

func (q *LogQueue) get(id string) (Record, bool, error) {
	q.idxMu.Lock()
	e, ok := q.index[id]
	if !ok || e.pendingSync {
		q.idxMu.Unlock()
		return Record{}, false, nil
	}
	r := Record{Delivery: Delivery{ID: e.id, Event: e.event, Action: e.action, Key: e.key, ReceivedAt: time.Unix(0, e.recv), Attempts: e.attempts, Failures: e.failures},
		State: [...]string{"pending", "claimed", "done"}[e.state%3], Outcome: e.outcome, Error: e.errMsg}
	seg, off, n := e.seg, e.bodyOff, e.bodyLen
	q.idxMu.Unlock()
	body, err := q.readBody(seg, off, n)
	if err != nil {
		return Record{}, false, fmt.Errorf("queue: log: get %s: %w", id, err)
	}
	r.Body = body
	return r, true, nil
}

// Prune forgets deliveries finished before t and returns how many, then
// deletes the segments no stored delivery needs any more. A pruned
// delivery's ID is no longer recognised as a duplicate, nor its payload
// key (a replay of its body), so keep them at least as long as GitHub
// allows redelivery (a few days).
func (q *LogQueue) Prune(ctx context.Context, before time.Time) (int64, error) {
	op := &logOp{kind: opPrune, before: before.UnixNano()}
	if err := q.submit(ctx, op); err != nil {
		return 0, err
	}
	return op.pruned, op.err
}

func (q *LogQueue) submit(ctx context.Context, op *logOp) error {
	op.ack = make(chan struct{})
	if err := q.gc.Send(ctx, op); err != nil {
		if errors.Is(err, groupcommit.ErrClosed) {
			return ErrQueueClosed
		}
		return err
	}
	// Once sent, the operation is committed or fails as a whole; waiting
	// for it even if ctx ends tells the caller the truth (and lets the
	// handler reuse the body buffer).
	<-op.ack
	return nil
}

// commit encodes the batch, appends it with one write, syncs it once and
// only then acknowledges its operations.
func (q *LogQueue) commit(batch []*logOp) {
	if q.failed != nil {
		for _, op := range batch {
			op.err, op.dup, op.claimed = q.failed, false, nil
			close(op.ack)
		}
		return
	}
	if q.off >= q.segMax {
		err := q.seal()
		if err == nil {
			err = q.createSegment(q.active + 1)
		}
		if err != nil {
			q.failed = fmt.Errorf("queue: log: new segment: %w", err)
			q.commit(batch)
			return
		}
	}
	q.buf = q.buf[:0]
	clear(q.moves)
	q.moves = q.moves[:0]
	now := q.now().UnixNano()
	var fresh, retried []*logEntry
	pruneAny := false
	q.idxMu.Lock()
	for _, op := range batch {
		switch op.kind {
		case opEnqueue:
			if _, ok := q.index[op.d.ID]; ok {
				op.dup = true
				continue
			}
			if _, ok := q.keys[op.d.Key]; ok && op.d.Key != "" {
				op.dup = true // the same payload under another delivery ID
				continue
			}
			e := &logEntry{seq: q.nextSeq, id: op.d.ID, event: op.d.Event, action: op.d.Action, key: op.d.Key,
				recv: op.d.ReceivedAt.UnixNano(), seg: q.active, pendingSync: true}
			q.nextSeq++
			e.bodyOff, e.bodyLen = q.appendPut(e, op.d.Body), len(op.d.Body)
			q.index[e.id] = e
			if e.key != "" {
				q.keys[e.key] = e
			}
			q.segRefs[e.seg]++
			q.open++
			fresh = append(fresh, e)
		case opClaim:
			q.promote(now)
			n := min(claimBatch, len(q.due))
			for _, e := range q.due[:n] {
				e.inQueues, e.state, e.claimedAt = false, stateClaimed, now
				e.attempts++
				q.claims[e] = true
				q.appendID(recClaim, e.id)
				op.claimed = append(op.claimed, claimedRef{
					e:   e,
					d:   Delivery{ID: e.id, Event: e.event, Action: e.action, Key: e.key, ReceivedAt: time.Unix(0, e.recv), Attempts: e.attempts, Failures: e.failures},
					seg: e.seg, off: e.bodyOff, bodyLen: e.bodyLen,
				})
			}
			clear(q.due[:n])
			q.due = q.due[n:]
		case opDone:
			e, ok := q.index[op.id]
			if !ok || e.state != stateClaimed {
				op.err = fmt.Errorf("%w: %s", ErrUnknownDelivery, op.id)
				continue
			}
			var notBefore int64
			switch {
			case waitsForLease(op.outcome, op.errMsg):
				notBefore = now + int64(BusyRetryDelay)
				retried = append(retried, e)
			case op.outcome == OutcomeRetry:
				// The backoff counts failed dispatches, this one included
				// (finish counts it), not claims: restarts are no failures.
				notBefore = now + int64(time.Second)<<min(e.failures, 8)
				retried = append(retried, e)
			}
			q.appendDone(op.id, op.outcome, op.errMsg, now, notBefore)
			q.finish(e, op.outcome, op.errMsg, now, notBefore)
		case opRelease:
			e, ok := q.index[op.id]
			if !ok || e.state != stateClaimed {
				op.err = fmt.Errorf("%w: %s", ErrUnknownDelivery, op.id)
				continue
			}
			e.state, e.notBefore = statePending, 0
			delete(q.claims, e)
			q.appendID(recHandBack, op.id)
			retried = append(retried, e)
		case opPrune:
			op.pruned = q.prune(op.before)
			pruneAny = true
		case opWithdraw:
			op.withdrawn = map[string]bool{}
			for _, id := range op.ids {
				e, ok := q.index[id]
				if !ok || e.pendingSync || !(e.state == statePending || e.state == stateClaimed && op.taken[id]) {
					continue
				}
				q.unqueue(e)
				q.appendDone(id, OutcomeWithdrawn, op.errMsg, now, 0)
				q.finish(e, OutcomeWithdrawn, op.errMsg, now, 0)
				op.withdrawn[id] = true
			}
		}
	}
	q.idxMu.Unlock()

	err := q.writeSync()
	q.idxMu.Lock()
	if err != nil {
		q.failed = fmt.Errorf("queue: log: write: %w", err)
	} else {
		for _, e := range fresh {
			e.pendingSync = false
			q.enqueueReady(e)
		}
		for _, e := range retried {
			if e.state == statePending && !e.inQueues {
				q.enqueueReady(e)
			}
		}
		for _, m := range q.moves {
			q.segRefs[m.e.seg]--
			m.e.seg, m.e.bodyOff = q.active, m.off
			q.segRefs[m.e.seg]++
		}
		if len(q.moves) > 0 {
			// A claim after the Prune in this batch read where the body
			// was; the old segment may be deleted below.
			for _, op := range batch {
				for i := range op.claimed {
					c := &op.claimed[i]
					c.seg, c.off = c.e.seg, c.e.bodyOff
				}
			}
		}
	}
	q.idxMu.Unlock()
	if err == nil && pruneAny {
		err = q.deleteSegments()
		if err != nil {
			err = fmt.Errorf("queue: log: delete segments: %w", err)
		}
	}
	for _, op := range batch {
		if q.failed != nil {
			op.err, op.dup, op.claimed = q.failed, false, nil
		} else if err != nil && op.kind == opPrune {
			op.err = err
		}
		close(op.ack)
	}
	if err == nil && (len(fresh) > 0 || len(retried) > 0) {
		q.signal()
	}
}

// writeSync appends q.buf to the active segment and syncs it.
func (q *LogQueue) writeSync() error {
	if len(q.buf) == 0 {
		return nil
	}
	q.filesMu.RLock()
	f := q.files[q.active]
	q.filesMu.RUnlock()
	if _, err := f.WriteAt(q.buf, q.off); err != nil {
		return err
	}
	q.off += int64(len(q.buf))
	if q.off > q.zeroEnd || q.zeroEnd-q.off < logHeader {
		// Extend the zeros; this sync also makes the new size durable.
		if q.zeros == nil {
			q.zeros = make([]byte, zeroChunk)
		}
		if _, err := f.WriteAt(q.zeros, q.off); err != nil {
			return err
		}
		q.zeroEnd = q.off + zeroChunk
	}
	return q.syncData(f)
}

// unqueue takes a pending entry off the ready or the delayed list. Called
// with idxMu held.
func (q *LogQueue) unqueue(e *logEntry) {
	if !e.inQueues {
		return
	}
	e.inQueues = false
	is := func(x *logEntry) bool { return x == e }
	q.due = slices.DeleteFunc(q.due, is)
	q.delayed = slices.DeleteFunc(q.delayed, is)
}

// Withdraw implements Withdrawer. The deliveries a Claim took into memory
// and has not handed out yet count as waiting: they are taken back from
// there and withdrawn.
func (q *LogQueue) Withdraw(ctx context.Context, before string, match func(Delivery) bool, reason string) ([]Withdrawal, error) {
	type cand struct {
		d       Delivery
		seq     uint64
		seg     uint64
		off     int64
		bodyLen int
	}
	q.idxMu.Lock()
	bound := ^uint64(0)
	if e, ok := q.index[before]; ok && before != "" {
		bound = e.seq
	}
	var cands []cand
	for _, e := range q.index {
		if e.state == stateDone || e.pendingSync || cmpSeq(e.seq, bound) >= 0 {
			continue
		}
		cands = append(cands, cand{d: Delivery{ID: e.id, Event: e.event, Action: e.action, Key: e.key, ReceivedAt: time.Unix(0, e.recv), Attempts: e.attempts, Failures: e.failures},
			seq: e.seq, seg: e.seg, off: e.bodyOff, bodyLen: e.bodyLen})
	}
	q.idxMu.Unlock()
	slices.SortFunc(cands, func(a, b cand) int { return cmpSeq(a.seq, b.seq) })
	var matched []Delivery
	ids := map[string]bool{}
	for _, c := range cands {
		body, err := q.readBody(c.seg, c.off, c.bodyLen)
		if err != nil {
			// Prune may have moved the body and deleted its segment.
			r, ok, gerr := q.get(c.d.ID)
			if gerr != nil {
				return nil, fmt.Errorf("queue: log: withdraw: body of %s: %w", c.d.ID, errors.Join(err, gerr))
			}
			if !ok {
				continue
			}
			body = r.Body
		}
		c.d.Body = body
		if match(c.d) {
			matched = append(matched, c.d)
			ids[c.d.ID] = true
		}
	}
	if len(matched) == 0 {
		return nil, nil
	}
	taken := map[string]bool{}
	q.claimMu.Lock()
	kept := make([]Delivery, 0, len(q.claimed))
	for _, d := range q.claimed {
		if ids[d.ID] {
			taken[d.ID] = true
			continue
		}
		kept = append(kept, d)
	}
	q.claimed = kept
	q.claimMu.Unlock()
	op := &logOp{kind: opWithdraw, taken: taken, errMsg: reason}
	for _, d := range matched {
		op.ids = append(op.ids, d.ID)
	}
	if err := q.submit(ctx, op); err != nil {
		return nil, err
	}
	if op.err != nil {
		return nil, op.err
	}
	out := make([]Withdrawal, len(matched))
	for i, d := range matched {
		out[i] = Withdrawal{Delivery: d, Withdrawn: op.withdrawn[d.ID]}
	}
	return out, nil
}

// promote moves delayed deliveries that are due to the ready list, in
// arrival order. Called with idxMu held.
func (q *LogQueue) promote(now int64) {
	if len(q.delayed) == 0 {
		return
	}
	kept := q.delayed[:0]
	moved := false
	for _, e := range q.delayed {
		if e.notBefore <= now {
			q.due = append(q.due, e)
			moved = true
		} else {
			kept = append(kept, e)
		}
	}
	clear(q.delayed[len(kept):])
	q.delayed = kept
	if moved {
		slices.SortFunc(q.due, func(a, b *logEntry) int { return cmpSeq(a.seq, b.seq) })
	}
}

// prune forgets deliveries done before `before` and moves the live
// deliveries of old segments forward. Called with idxMu held.
func (q *LogQueue) prune(before int64) int64 {
	var n int64
	for _, e := range q.index {
		if e.state == stateDone && e.doneAt < before && !e.pendingSync {
			q.appendID(recForget, e.id)
			q.forget(e)
			n++
		}
	}
	// Deliveries whose full record is in an older segment pin it and every
	// segment after it; rewrite up to rewriteMax of them, oldest segment
	// first, into the active one. Claimed ones stay: a Claim may be reading
	// their body.
	var old []*logEntry
	for _, e := range q.index {
		if e.seg < q.active && e.state != stateClaimed && !e.pendingSync {
			old = append(old, e)
		}
	}
	if len(old) > rewriteMax {
		return n
	}
	sort.Slice(old, func(i, j int) bool { return old[i].seq < old[j].seq })
	for _, e := range old {
		body, err := q.readBody(e.seg, e.bodyOff, e.bodyLen)
		if err != nil {
			continue // stays where it is; its segment is kept
		}
		q.moves = append(q.moves, bodyMove{e: e, off: q.appendPut(e, body)})
	}
	return n
}

// deleteSegments removes the oldest segments that no stored delivery
// needs: a delivery's later records may be in any segment from the one of
// its full record on, so deletion stops at the first segment still
// referenced.
func (q *LogQueue) deleteSegments() error {
	segs, err := segments(q.dir)
	if err != nil {
		return err
	}
	deleted := false
	for _, n := range segs {
		if n >= q.active || q.segRefs[n] > 0 {
			break
		}
		q.filesMu.Lock()
		f := q.files[n]
		delete(q.files, n)
		q.filesMu.Unlock()
		if f != nil {
			f.Close()
		}
		if err := os.Remove(filepath.Join(q.dir, segName(n))); err != nil {
			return err
		}
		delete(q.segRefs, n)
		deleted = true
	}
	if deleted {
		return syncDir(q.dir)
	}
	return nil
}

// Close drains pending operations, gives back the deliveries claimed but
// not handed out (attempt uncounted), and closes the files.
func (q *LogQueue) Close() error {
	if !q.gc.Close() {
		return nil
	}
	q.claimMu.Lock()
	unused := q.claimed
	q.claimed, q.claimClosed = nil, true
	q.claimMu.Unlock()
	var err error
	if len(unused) > 0 && q.failed == nil {
		q.buf = q.buf[:0]
		q.idxMu.Lock()
		for _, d := range unused {
			if e, ok := q.index[d.ID]; ok && e.state == stateClaimed {
				e.state, e.attempts = statePending, e.attempts-1
				delete(q.claims, e)
				q.appendID(recRelease, d.ID)
			}
		}
		q.idxMu.Unlock()
		err = q.writeSync()
	}
	return errors.Join(err, q.closeFiles())
}

func (q *LogQueue) closeFiles() error {
	q.filesMu.Lock()
	defer q.filesMu.Unlock()
	var err error
	for n, f := range q.files {
		err = errors.Join(err, f.Close())
		delete(q.files, n)
	}
	return err
}

// Record encoding. Every record is [len uint32][crc32c uint32][payload];
// payload is a type byte and its fields (strings as uvarint length + bytes,
// integers as varints); a put record ends with the body.

// beginRecord reserves the header and returns where the record starts.
func (q *LogQueue) beginRecord(typ byte) int {
	start := len(q.buf)
	q.buf = append(q.buf, 0, 0, 0, 0, 0, 0, 0, 0, typ)
	return start
}

// endRecord fills the header of the record started at start.
func (q *LogQueue) endRecord(start int) {
	payload := q.buf[start+logHeader:]
	binary.LittleEndian.PutUint32(q.buf[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(q.buf[start+4:], crc32.Checksum(payload, castagnoli))
}

func (q *LogQueue) appendStr(s string) {
	q.buf = binary.AppendUvarint(q.buf, uint64(len(s)))
	q.buf = append(q.buf, s...)
}

// appendPut appends e's full state and body; it returns the body's offset
// in the active segment.
func (q *LogQueue) appendPut(e *logEntry, body []byte) int64 {
	typ := recPutFailures
	if e.key != "" {
		typ = recPutKey
	}
	start := q.beginRecord(typ)
	q.buf = binary.AppendUvarint(q.buf, e.seq)
	q.appendStr(e.id)
	q.appendStr(e.event)
	q.appendStr(e.action)
	q.buf = binary.AppendVarint(q.buf, e.recv)
	q.buf = binary.AppendUvarint(q.buf, uint64(e.state))
	q.buf = binary.AppendUvarint(q.buf, uint64(e.attempts))
	q.buf = binary.AppendVarint(q.buf, e.notBefore)
	q.appendStr(e.outcome)
	q.appendStr(e.errMsg)
	q.buf = binary.AppendVarint(q.buf, e.doneAt)
	q.buf = binary.AppendUvarint(q.buf, uint64(e.failures))
	if e.key != "" {
		q.appendStr(e.key)
	}
	off := q.off + int64(len(q.buf))
	q.buf = append(q.buf, body...)
	q.endRecord(start)
	return off
}

func (q *LogQueue) appendID(typ byte, id string) {
	start := q.beginRecord(typ)
	q.appendStr(id)
	q.endRecord(start)
}

func (q *LogQueue) appendDone(id, outcome, errMsg string, at, notBefore int64) {
	start := q.beginRecord(recDone)
	q.appendStr(id)
	q.appendStr(outcome)
	q.appendStr(errMsg)
	q.buf = binary.AppendVarint(q.buf, at)
	q.buf = binary.AppendVarint(q.buf, notBefore)
	q.endRecord(start)
}

// decoder reads the fields of a payload; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

var errShortRecord = errors.New("short record")

func (d *decoder) uvarint() uint64 { return decodeVarint(d, binary.Uvarint) }

func (d *decoder) varint() int64 { return decodeVarint(d, binary.Varint) }

// decodeVarint reads one varint with read (binary.Uvarint or Varint).
func decodeVarint[T uint64 | int64](d *decoder, read func([]byte) (T, int)) T {
	if d.err != nil {
		return 0
	}
	v, n := read(d.b)
	if n <= 0 {
		d.err = errShortRecord
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.err = errShortRecord
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// Package groupcommit funnels operations from many goroutines into
// batches that are committed together — one write and one sync for all of
// them, however the caller's commit does it. It is the one batcher of the
// delivery queues (bot/queue: LogQueue's segment log, PGQueue's group
// insert) and of the event stores (runtime/store/sqlite's transaction and
// WAL fsync, runtime/store/postgres's group transaction).
//
// It lives under runtime, not in bot/queue or runtime/store, because both
// must import it and bot may import runtime but not the reverse
// (docs/architecture.md; cmd/agentos/arch_test.go). It imports nothing of
// this module, so that any layer above may use it.
//
// There is no committing goroutine to hand operations to: a sender that
// finds a commit slot free leads a commit, in its own goroutine, so that
// an operation arriving alone costs no goroutine switch. Operations sent
// meanwhile wait for the next batch; when the leader's own batch is done
// and more are waiting, it hands the lead to a new goroutine (its own
// caller should not wait for others' commits). Send returns once the
// operation is taken; the commit function acknowledges each operation in
// whatever way its caller waits for (a channel per operation).
//
// Options tune it for each user:
//   - MaxBatch bounds a batch.
//   - Delay lets a leader wait a little for more operations before it
//     commits, in the spirit of PostgreSQL's commit_delay (commitDelay).
//   - InFlight is how many batches may be committing at once (PostgreSQL:
//     while one transaction waits for its WAL flush the next is written).
//   - Then is a pipelined second stage, one call at a time, over every
//     batch committed since the last call, running while the next batch is
//     committed (SQLite: the WAL fsync after COMMIT wrote the frames);
//     ThenMin holds a small batch back while it runs. Two stages are not
//     the same as two in flight: the first stage needs the one writer
//     connection, and one fsync covers every batch committed before it.
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// ErrClosed is returned by Send after Close.
var ErrClosed = errors.New("groupcommit: closed")

// OptionsError reports options New cannot use.
type OptionsError struct {
	Field  string // the option's name in Options
	Reason string
}

func (e *OptionsError) Error() string {
	return "groupcommit: option " + e.Field + ": " + e.Reason
}

// Options tune a Batcher.
type Options[T any] struct {
	// MaxBatch bounds the operations of one batch (at least 1; 1 commits
	// every operation alone, the benchmarks' baseline).
	MaxBatch int
	// Delay bounds how long the oldest operation of a batch may wait for
	// others to join it (0: never wait). The wait adapts to the arrival
	// rate: see commitDelay.
	Delay time.Duration
	// InFlight is how many batches may be committing at once (0: 1).
	InFlight int
	// Then, if set, is the second stage: it is called, one call at a
	// time and in commit order, with every batch committed since its last
	// call, while the next batch is committed. A batch is then the
	// caller's until Then returns; without Then, until commit returns.
	// Then needs InFlight 1.
	Then func(batches [][]T)
	// ThenMin holds a batch smaller than this back while Then runs, until
	// that many operations are waiting or Then returns (0: commit at
	// once). Committing whatever arrived the moment the previous batch
	// left makes many tiny commits whose fixed cost then dominates.
	ThenMin int
}

// Batcher groups operations into batches and commits them.
type Batcher[T any] struct {
	mu      sync.Mutex
	idle    sync.Cond // leaders and the Then runner stopped
	closed  bool
	leaders int // goroutines leading a commit (at most inFlight)
	pending []stamped[T]
	// waiters are leaders waiting for company; arrived is closed (and
	// cleared) to wake them at the end of a Then round, or at an arrival
	// that leaves at least wakeAt operations pending (a leader holding a
	// batch back for ThenMin has nothing to reconsider before that).
	waiters int
	wakeAt  int
	arrived chan struct{}
	free    [][]T // batch buffers to reuse

	thenRunning bool  // a goroutine runs Then rounds
	committed   [][]T // batches committed, waiting for Then
	spare       [][]T // committed's other buffer

	max, inFlight, thenMin int
	delay                  commitDelay
	epoch                  time.Time // arrival times are monotonic nanoseconds since epoch
	commit                 func(batch []T)
	then                   func(batches [][]T)
}

// stamped is an operation and when it was sent.
type stamped[T any] struct {
	op T
	at int64
}

// New returns a Batcher calling commit with batches of operations; commit
// must not keep the batch after it returns (nor Then the batches).
func New[T any](commit func(batch []T), o Options[T]) (*Batcher[T], error) {
	if commit == nil {
		return nil, &OptionsError{Field: "commit", Reason: "no commit function"}
	}
	if o.MaxBatch < 1 {
		return nil, &OptionsError{Field: "MaxBatch", Reason: fmt.Sprintf("%d: want at least 1", o.MaxBatch)}
	}
	if o.Delay < 0 {
		return nil, &OptionsError{Field: "Delay", Reason: fmt.Sprintf("%v: want 0 (no delay) or more", o.Delay)}
	}
	if o.InFlight < 0 {
		return nil, &OptionsError{Field: "InFlight", Reason: fmt.Sprintf("%d: want 0 (one) or more", o.InFlight)}
	}
	if o.InFlight == 0 {
		o.InFlight = 1
	}
	if o.Then != nil && o.InFlight != 1 {
		return nil, &OptionsError{Field: "InFlight", Reason: fmt.Sprintf("%d with Then: the second stage takes batches in commit order, one commit at a time", o.InFlight)}
	}
	if o.ThenMin < 0 || o.ThenMin > o.MaxBatch {
		return nil, &OptionsError{Field: "ThenMin", Reason: fmt.Sprintf("%d: want 0 to MaxBatch (%d)", o.ThenMin, o.MaxBatch)}
	}
	if o.ThenMin > 0 && o.Then == nil {
		return nil, &OptionsError{Field: "ThenMin", Reason: "set without Then"}
	}
	b := &Batcher[T]{max: o.MaxBatch, inFlight: o.InFlight, thenMin: o.ThenMin,
		delay: commitDelay{max: int64(o.Delay)}, epoch: time.Now(), commit: commit, then: o.Then}
	b.idle.L = &b.mu
	return b, nil
}

func (b *Batcher[T]) now() int64 { return int64(time.Since(b.epoch)) }

// Send adds op to the next batch. It fails with ErrClosed after Close, or
// with ctx's error if ctx has ended; otherwise op will be committed (or
// fail) as part of a batch — before Send returns if this call led the
// commit and Then does not follow it.
func (b *Batcher[T]) Send(ctx context.Context, op T) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	var at int64
	if b.delay.max > 0 {
		at = b.now()
		b.delay.arrive(at)
	}
	b.pending = append(b.pending, stamped[T]{op, at})
	if b.leaders >= b.inFlight || b.waiters > 0 {
		if len(b.pending) >= b.wakeAt {
			b.wake()
		}
		b.mu.Unlock()
		return nil
	}
	b.leaders++
	b.lead(false)
	return nil
}

// wake wakes the leaders waiting for company; called with mu held.
func (b *Batcher[T]) wake() {
	if b.arrived != nil {
		close(b.arrived)
		b.arrived = nil
	}
}

// crash turns a panic in commit or Then into a crash of the process: the
// batcher's state is unknown and every later sender would wait forever,
// as a committing goroutine's panic would have, rather than let a
// handler's recovery swallow it. The stack of the fault is taken here:
// the new goroutine's own would not show it.
func crash() {
	if p := recover(); p != nil {
		msg := fmt.Sprintf("groupcommit: %v\n\n%s", p, debug.Stack())
		go func() { panic(msg) }()
		select {}
	}
}

// lead commits batches until none is pending; called with mu held and
// this goroutine counted in leaders, it returns with mu released. A
// sender's goroutine (background false) commits one batch and passes the
// lead on to a new goroutine if more are pending. With Then, the leader
// whose batch finds no Then round under way runs the rounds itself, and
// passes the lead on.
func (b *Batcher[T]) lead(background bool) {
	defer crash()
	for {
		if !b.gather() {
			// Another leader took every operation while this one waited.
			b.stepDown()
			b.mu.Unlock()
			return
		}
		batch := b.take()
		b.mu.Unlock()
		b.commit(batch)
		b.mu.Lock()
		runThen := false
		if b.then != nil {
			b.committed = append(b.committed, batch)
			if !b.thenRunning {
				b.thenRunning, runThen = true, true
			}
		} else {
			b.recycle(batch)
		}
		if len(b.pending) == 0 {
			b.stepDown()
			if runThen {
				b.runThen(background)
				return
			}
			b.mu.Unlock()
			return
		}
		if runThen || !background {
			go b.resume()
			if runThen {
				b.runThen(background)
				return
			}
			b.mu.Unlock()
			return
		}
	}
}

// resume continues a lead in a new goroutine.
func (b *Batcher[T]) resume() {
	b.mu.Lock()
	b.lead(true)
}

// stepDown uncounts a leader; called with mu held.
func (b *Batcher[T]) stepDown() {
	b.leaders--
	if b.leaders == 0 && !b.thenRunning {
		b.idle.Broadcast()
	}
}

// gather waits, while the batch is not full, for more operations to join
// it: while Then runs and fewer than ThenMin are pending, or while the
// commit delay says more are coming. Called and returning with mu held;
// false if no operation is pending any more.
func (b *Batcher[T]) gather() bool {
	var timer *time.Timer
	for len(b.pending) > 0 && len(b.pending) < b.max {
		fill := b.thenRunning && len(b.pending) < b.thenMin
		var d time.Duration
		if !fill {
			if d = b.delay.wait(b.now(), b.pending[0].at); d <= 0 {
				break
			}
		}
		if b.arrived == nil {
			b.arrived = make(chan struct{})
			b.wakeAt = b.max
		}
		arrived := b.arrived
		if fill {
			b.wakeAt = min(b.wakeAt, b.thenMin)
		} else {
			b.wakeAt = 0 // the delay is reconsidered at each arrival
		}
		b.waiters++
		b.mu.Unlock()
		if fill {
			<-arrived
		} else {
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			select {
			case <-arrived:
			case <-timer.C:
			}
			timer.Stop()
		}
		b.mu.Lock()
		b.waiters--
	}
	return len(b.pending) > 0
}

// take removes the next batch from pending; called with mu held. If
// operations are left and a commit slot is free, a new leader takes them.
func (b *Batcher[T]) take() []T {
	n := min(len(b.pending), b.max)
	var batch []T
	if k := len(b.free); k > 0 {
		batch, b.free = b.free[k-1], b.free[:k-1]
	}
	for _, s := range b.pending[:n] {
		batch = append(batch, s.op)
	}
	rest := copy(b.pending, b.pending[n:])
	clear(b.pending[rest:])
	b.pending = b.pending[:rest]
	if rest > 0 && b.leaders < b.inFlight {
		b.leaders++
		go b.resume()
	}
	return batch
}

// maxFree bounds the batch buffers kept for reuse.
const maxFree = 8

// recycle keeps a batch's buffer for reuse; called with mu held.
func (b *Batcher[T]) recycle(batch []T) {
	clear(batch)
	if len(b.free) < maxFree {
		b.free = append(b.free, batch[:0])
	}
}

// runThen runs Then rounds until no committed batch waits; called with mu
// held and thenRunning set, it returns with mu released. A sender's
// goroutine runs one round (its own batch is in it) and passes the rest
// on to a new goroutine.
func (b *Batcher[T]) runThen(background bool) {
	defer crash()
	for {
		batches := b.committed
		b.committed, b.spare = b.spare[:0], nil
		b.mu.Unlock()
		b.then(batches)
		b.mu.Lock()
		for _, batch := range batches {
			b.recycle(batch)
		}
		clear(batches)
		b.spare = batches[:0]
		b.wake() // a leader holding a small batch back may commit now
		if len(b.committed) == 0 {
			b.thenRunning = false
			if b.leaders == 0 {
				b.idle.Broadcast()
			}
			b.mu.Unlock()
			return
		}
		if !background {
			go func() {
				b.mu.Lock()
				b.runThen(true)
			}()
			b.mu.Unlock()
			return
		}
	}
}

// Close stops accepting operations, waits until every sent one is
// committed (and through Then), and reports whether this call closed the
// batcher (false: it already was).
func (b *Batcher[T]) Close() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.closed = true
	for b.leaders > 0 || b.thenRunning {
		b.idle.Wait()
	}
	return true
}

// commitDelay decides whether the leader of a commit waits for more
// operations before it commits a batch, in the spirit of PostgreSQL's
// commit_delay: a delivery that has an fdatasync to itself spends a fifth
// to a third of its CPU on it (measured on a virtualised disk at 1,000
// deliveries a second), so sharing it is the main saving at moderate
// rates — but a wait is worth it only if another operation is likely to
// come soon.
//
// It keeps a moving average of the gap between arrivals. The batch waits
// for the next arrival only if it is expected (one average gap after the
// latest) before max has passed since the oldest operation of the batch
// arrived, so a low rate (gaps longer than max) or the first operation
// after a quiet spell is committed at once: no delay at all. The wait
// ends at that deadline, or once twice the average gap has passed since
// the latest arrival (the stream paused, or every sender is already
// waiting in this batch), and is reconsidered after each arrival.
type commitDelay struct {
	max     int64   // ns; 0 disables the delay
	gap     float64 // moving average of the gaps between arrivals, ns
	lastGap int64   // the latest gap, ns
	last    int64   // arrival of the latest operation
	seen    bool
}

// gapWeight is the weight of a new gap in the moving average; gaps count
// at most gapCap times max, so that the average falls back below max
// within a few arrivals after a quiet spell.
const (
	gapWeight = 1.0 / 8
	gapCap    = 4
)

// arrive records an operation that arrived at time at (ns).
func (d *commitDelay) arrive(at int64) {
	if d.max <= 0 {
		return
	}
	if !d.seen {
		d.seen, d.last, d.gap, d.lastGap = true, at, float64(gapCap*d.max), gapCap*d.max
		return
	}
	g := min(max(at-d.last, 0), gapCap*d.max)
	d.gap += (float64(g) - d.gap) * gapWeight
	d.lastGap = g
	d.last = max(d.last, at)
}

// wait returns how long to wait for another operation at time now, given
// that the oldest operation of the batch arrived at first; 0 or less:
// commit now.
func (d *commitDelay) wait(now, first int64) time.Duration {
	if d.max <= 0 || d.lastGap > d.max {
		return 0
	}
	deadline := first + d.max
	if d.last+int64(d.gap) > deadline {
		return 0 // the next is not expected in time
	}
	until := min(deadline, d.last+int64(2*d.gap))
	return time.Duration(until - now)
}

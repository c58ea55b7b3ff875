package queue

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// groupCommit funnels operations from many goroutines into batches that
// are committed one at a time — up to max operations each — as one write
// and one fsync for all of them. The LogQueue persists this way; what a
// commit does is its own.
//
// There is no committing goroutine to hand operations to: a sender that
// finds no commit under way leads one, committing the batch in its own
// goroutine, so that a delivery arriving alone costs no goroutine
// switches. Operations sent meanwhile wait for the next batch; when the
// leader's own batch is done and more are waiting, it hands the lead to a
// new goroutine (its own caller should not wait for others' commits).
//
// With a commit delay (the log queue's), the leader may wait a little
// before it commits, for more operations to join the batch: see
// commitDelay. The operations already taken are not acknowledged any
// earlier for it; they only wait longer for their sync.
type groupCommit[T any] struct {
	mu      sync.Mutex
	stepped sync.Cond // a leader stepped down
	closed  bool
	leading bool
	pending []stamped[T]
	// The leader's: its batch, and its wait for company (a sender wakes
	// it when waiting is set).
	batch   []T
	waiting bool
	wake    chan struct{}
	timer   *time.Timer
	max     int
	delay   commitDelay
	epoch   time.Time // arrival times are monotonic nanoseconds since epoch
	commit  func(batch []T)
}

// stamped is an operation and when it was sent.
type stamped[T any] struct {
	op T
	at int64
}

// newGroupCommit returns a group commit calling commit with batches of up
// to maxBatch operations, one batch at a time; delay bounds how long the
// oldest operation of a batch may wait for others to join (0: never wait).
func newGroupCommit[T any](maxBatch int, delay time.Duration, commit func(batch []T)) *groupCommit[T] {
	g := &groupCommit[T]{max: maxBatch, delay: commitDelay{max: int64(max(delay, 0))}, epoch: time.Now(), commit: commit,
		wake: make(chan struct{}, 1)}
	g.stepped.L = &g.mu
	return g
}

func (g *groupCommit[T]) now() int64 { return int64(time.Since(g.epoch)) }

// send adds op to the next batch. It fails with ErrQueueClosed after
// close, or with ctx's error if ctx has ended; otherwise op will be
// committed (or fail) as part of a batch — before send returns if this
// call led the commit.
func (g *groupCommit[T]) send(ctx context.Context, op T) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return ErrQueueClosed
	}
	var at int64
	if g.delay.max > 0 {
		at = g.now()
		g.delay.arrive(at)
	}
	g.pending = append(g.pending, stamped[T]{op, at})
	if g.leading {
		if g.waiting {
			g.waiting = false
			select {
			case g.wake <- struct{}{}:
			default:
			}
		}
		g.mu.Unlock()
		return nil
	}
	g.leading = true
	g.lead(false)
	return nil
}

// lead commits batches until none is pending; called with mu held and
// leading set, it returns with mu released. A sender's goroutine
// (background false) commits one batch, its own, and passes the lead on
// to a new goroutine if more are pending.
func (g *groupCommit[T]) lead(background bool) {
	defer func() {
		if p := recover(); p != nil {
			// The queue's state is unknown and every later sender would
			// wait forever: crash, as a committing goroutine would have,
			// rather than let a handler's recovery swallow it.
			// The stack of the fault is taken here: the new goroutine's
			// own would not show it.
			msg := fmt.Sprintf("queue: group commit: %v\n\n%s", p, debug.Stack())
			go func() { panic(msg) }()
			select {}
		}
	}()
	for {
		for len(g.pending) < g.max {
			d := g.delay.wait(g.now(), g.pending[0].at)
			if d <= 0 {
				break
			}
			g.waiting = true
			g.mu.Unlock()
			if g.timer == nil {
				g.timer = time.NewTimer(d)
			} else {
				g.timer.Reset(d)
			}
			select {
			case <-g.wake:
			case <-g.timer.C:
			}
			g.timer.Stop()
			g.mu.Lock()
			g.waiting = false
			select { // a wake sent after the timer fired
			case <-g.wake:
			default:
			}
		}
		n := min(len(g.pending), g.max)
		for _, s := range g.pending[:n] {
			g.batch = append(g.batch, s.op)
		}
		rest := copy(g.pending, g.pending[n:])
		clear(g.pending[rest:])
		g.pending = g.pending[:rest]
		g.mu.Unlock()
		g.commit(g.batch)
		clear(g.batch)
		g.batch = g.batch[:0]
		g.mu.Lock()
		if len(g.pending) == 0 {
			g.leading = false
			g.stepped.Broadcast()
			g.mu.Unlock()
			return
		}
		if !background {
			go func() {
				g.mu.Lock()
				g.lead(true)
			}()
			g.mu.Unlock()
			return
		}
	}
}

// close stops accepting operations, waits until every sent one is
// committed, and reports whether this call closed it (false: it already
// was).
func (g *groupCommit[T]) close() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.closed = true
	for g.leading {
		g.stepped.Wait()
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

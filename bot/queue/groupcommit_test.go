package queue

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// arrivals feeds d one arrival every gap ns from start, n times, and
// returns the time of the last.
func arrivals(d *commitDelay, start, gap int64, n int) int64 {
	at := start
	for i := range n {
		at = start + int64(i)*gap
		d.arrive(at)
	}
	return at
}

func TestCommitDelayNoWaitAtLowRate(t *testing.T) {
	d := commitDelay{max: 2 * ms}
	// The very first operation: nothing is known of the rate.
	d.arrive(0)
	if w := d.wait(0, 0); w > 0 {
		t.Errorf("first arrival: wait %v, want none", w)
	}
	// 100 deliveries a second, then 400: gaps longer than the delay.
	for _, gap := range []int64{10 * ms, 2500 * time.Microsecond.Nanoseconds()} {
		d := commitDelay{max: 2 * ms}
		last := arrivals(&d, 0, gap, 200)
		if w := d.wait(last, last); w > 0 {
			t.Errorf("gap %v: wait %v, want none", time.Duration(gap), w)
		}
	}
}

func TestCommitDelayWaitsWhenMoreAreComing(t *testing.T) {
	d := commitDelay{max: 2 * ms}
	gap := ms / 2 // 2,000 deliveries a second
	last := arrivals(&d, 0, gap, 200)
	w := d.wait(last, last)
	if w <= 0 {
		t.Fatalf("wait %v, want a wait at %v between arrivals", w, time.Duration(gap))
	}
	// Never longer than the delay after the batch's oldest operation, nor
	// much longer than the expected gap after the latest one.
	if w > 2*time.Duration(gap)+time.Microsecond {
		t.Errorf("wait %v, want at most about two gaps (%v)", w, 2*time.Duration(gap))
	}
	first := last - ms
	if w := d.wait(last, first); w > time.Millisecond {
		t.Errorf("oldest waited 1ms: wait %v, want ≤ 1ms more", w)
	}
	if w := d.wait(first+2*ms, first); w > 0 {
		t.Errorf("oldest waited the whole delay: wait %v, want none", w)
	}
	// The next arrival is expected after the deadline: waiting would only
	// delay the batch.
	d2 := commitDelay{max: 3 * ms / 2}
	last2 := arrivals(&d2, 0, 9*ms/10, 200) // 1,111 a second
	if w := d2.wait(last2, last2); w <= 0 {
		t.Errorf("lone operation: wait %v, want a wait for the next", w)
	}
	if w := d2.wait(last2, last2-9*ms/10); w > 0 {
		t.Errorf("second operation, the third due after the deadline: wait %v, want none", w)
	}
	// Nothing arrived on d for two of its gaps: the stream paused (or
	// every sender is in this batch already).
	if w := d.wait(last+2*gap, last); w > 0 {
		t.Errorf("after a pause: wait %v, want none", w)
	}
}

func TestCommitDelayAdapts(t *testing.T) {
	d := commitDelay{max: 2 * ms}
	last := arrivals(&d, 0, ms/10, 100) // busy
	if d.wait(last, last) <= 0 {
		t.Fatal("busy: no wait")
	}
	// A quiet spell: the next operation goes alone, at once.
	last += int64(time.Minute)
	d.arrive(last)
	if w := d.wait(last, last); w > 0 {
		t.Errorf("after a quiet minute: wait %v, want none", w)
	}
	// Traffic resumes: within a few dozen arrivals the delay is back.
	var n int
	for n = 1; n < 64; n++ {
		last += ms / 10
		d.arrive(last)
		if d.wait(last, last) > 0 {
			break
		}
	}
	if n == 64 {
		t.Error("the delay did not come back under load")
	}
}

func TestCommitDelayDisabled(t *testing.T) {
	var d commitDelay
	last := arrivals(&d, 0, 1000, 100)
	if w := d.wait(last, last); w != 0 {
		t.Errorf("disabled: wait %v", w)
	}
}

// TestGroupCommitDelivers: with and without a commit delay, every
// operation sent is committed exactly once, one batch at a time, and close
// waits for all of them.
func TestGroupCommitDelivers(t *testing.T) {
	for _, delay := range []time.Duration{0, time.Millisecond} {
		seen := map[int]int{}
		var inCommit atomic.Int32
		g := newGroupCommit(8, delay, func(b []int) {
			if inCommit.Add(1) != 1 {
				t.Error("two commits at once")
			}
			defer inCommit.Add(-1)
			if len(b) == 0 || len(b) > 8 {
				t.Errorf("batch of %d", len(b))
			}
			for _, v := range b {
				seen[v]++
			}
		})
		var wg sync.WaitGroup
		const senders, each = 8, 200
		for s := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					if err := g.send(context.Background(), s*each+i); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		g.close()
		if len(seen) != senders*each {
			t.Errorf("delay %v: %d operations committed, want %d", delay, len(seen), senders*each)
		}
		for v, n := range seen {
			if n != 1 {
				t.Errorf("delay %v: operation %d committed %d times", delay, v, n)
			}
		}
		if err := g.send(context.Background(), -1); err != ErrQueueClosed {
			t.Errorf("send after close = %v", err)
		}
	}
}

// TestGroupCommitAlone: an operation sent while no commit is under way is
// committed by the sender itself, before send returns; one sent while a
// commit is under way joins the next batch.
func TestGroupCommitAlone(t *testing.T) {
	var batches [][]int
	inside, release := make(chan struct{}), make(chan struct{})
	g := newGroupCommit(8, 0, func(b []int) {
		batches = append(batches, append([]int(nil), b...))
		if b[0] == 1 {
			close(inside)
			<-release
		}
	})
	if err := g.send(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if len(batches) != 1 || batches[0][0] != 0 {
		t.Fatalf("send returned before its commit: %v", batches)
	}
	done := make(chan error)
	go func() { done <- g.send(context.Background(), 1) }()
	<-inside
	// A commit is under way: these wait for the next batch.
	for v := 2; v < 5; v++ {
		if err := g.send(context.Background(), v); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	g.close() // waits for the batch led by the next leader
	if fmt.Sprint(batches) != "[[0] [1] [2 3 4]]" {
		t.Errorf("batches %v, want [[0] [1] [2 3 4]]", batches)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := newGroupCommit(8, 0, func([]int) {}).send(ctx, 1); err != context.Canceled {
		t.Errorf("send with an ended context = %v", err)
	}
}

// TestLogQueueAcksAfterSync: with the commit delay batching concurrent
// deliveries, an Enqueue returns only after the fdatasync that covers its
// record.
func TestLogQueueAcksAfterSync(t *testing.T) {
	ctx := context.Background()
	q, err := openLogQueueWith(t.TempDir(), 64<<10, LogOptions{CommitDelay: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	type mark struct {
		seg uint64
		off int64
	}
	var synced atomic.Pointer[mark]
	synced.Store(&mark{})
	var syncs atomic.Int64
	q.syncData = func(f *os.File) error { // runs in the writer goroutine
		err := fdatasync(f)
		if err == nil {
			synced.Store(&mark{q.active, q.off})
			syncs.Add(1)
		}
		return err
	}
	const producers, each = 16, 50
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("p%d-%d", p, i)
				if _, err := q.Enqueue(ctx, Delivery{ID: id, Event: "issue_comment", Body: []byte(id)}); err != nil {
					t.Error(err)
					return
				}
				m := synced.Load()
				q.idxMu.Lock()
				e := q.index[id]
				q.idxMu.Unlock()
				if e == nil {
					t.Errorf("%s: acknowledged but not stored", id)
					return
				}
				if e.seg > m.seg || e.seg == m.seg && e.bodyOff+int64(e.bodyLen) > m.off {
					t.Errorf("%s acknowledged before its sync: record ends at %d:%d, synced up to %d:%d",
						id, e.seg, e.bodyOff+int64(e.bodyLen), m.seg, m.off)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := syncs.Load(); n == 0 || n >= producers*each {
		t.Errorf("%d syncs for %d deliveries: want them shared", n, producers*each)
	}
}

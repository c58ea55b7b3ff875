package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
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

func mustNew[T any](t *testing.T, commit func([]T), o Options[T]) *Batcher[T] {
	t.Helper()
	b, err := New(commit, o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sendAll sends senders*each distinct operations from senders goroutines
// and waits until every Send returned.
func sendAll(t *testing.T, b *Batcher[int], senders, each int) {
	t.Helper()
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := b.Send(context.Background(), s*each+i); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestDelivers: with and without a commit delay, and with up to two
// batches in flight, every operation sent is committed exactly once, no
// more batches at once than allowed, and Close waits for all of them.
func TestDelivers(t *testing.T) {
	for _, c := range []struct {
		delay    time.Duration
		inFlight int
	}{{0, 1}, {time.Millisecond, 1}, {0, 2}, {time.Millisecond, 3}} {
		t.Run(fmt.Sprintf("delay=%v/inflight=%d", c.delay, c.inFlight), func(t *testing.T) {
			var mu sync.Mutex
			seen := map[int]int{}
			var inCommit, most atomic.Int32
			b := mustNew(t, func(batch []int) {
				n := inCommit.Add(1)
				defer inCommit.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				if len(batch) == 0 || len(batch) > 8 {
					t.Errorf("batch of %d", len(batch))
				}
				mu.Lock()
				for _, v := range batch {
					seen[v]++
				}
				mu.Unlock()
			}, Options[int]{MaxBatch: 8, Delay: c.delay, InFlight: c.inFlight})
			const senders, each = 8, 200
			sendAll(t, b, senders, each)
			if !b.Close() {
				t.Error("Close: not the first")
			}
			if b.Close() {
				t.Error("second Close closed it again")
			}
			if m := most.Load(); m > int32(c.inFlight) {
				t.Errorf("%d commits at once, want at most %d", m, c.inFlight)
			}
			if len(seen) != senders*each {
				t.Errorf("%d operations committed, want %d", len(seen), senders*each)
			}
			for v, n := range seen {
				if n != 1 {
					t.Errorf("operation %d committed %d times", v, n)
				}
			}
			if err := b.Send(context.Background(), -1); err != ErrClosed {
				t.Errorf("send after close = %v", err)
			}
		})
	}
}

// TestAlone: an operation sent while no commit is under way is committed
// by the sender itself, before Send returns; one sent while a commit is
// under way joins the next batch.
func TestAlone(t *testing.T) {
	var batches [][]int
	inside, release := make(chan struct{}), make(chan struct{})
	b := mustNew(t, func(batch []int) {
		batches = append(batches, append([]int(nil), batch...))
		if batch[0] == 1 {
			close(inside)
			<-release
		}
	}, Options[int]{MaxBatch: 8})
	if err := b.Send(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if len(batches) != 1 || batches[0][0] != 0 {
		t.Fatalf("send returned before its commit: %v", batches)
	}
	done := make(chan error)
	go func() { done <- b.Send(context.Background(), 1) }()
	<-inside
	// A commit is under way: these wait for the next batch.
	for v := 2; v < 5; v++ {
		if err := b.Send(context.Background(), v); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	b.Close() // waits for the batch led by the next leader
	if fmt.Sprint(batches) != "[[0] [1] [2 3 4]]" {
		t.Errorf("batches %v, want [[0] [1] [2 3 4]]", batches)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := mustNew(t, func([]int) {}, Options[int]{MaxBatch: 8}).Send(ctx, 1); err != context.Canceled {
		t.Errorf("send with an ended context = %v", err)
	}
}

// TestInFlight: with two in flight, a second batch is committed while the
// first is still committing, and a third waits for a free slot.
func TestInFlight(t *testing.T) {
	entered := make(chan int, 4)
	release := make(chan struct{})
	b := mustNew(t, func(batch []int) {
		entered <- batch[0]
		<-release
	}, Options[int]{MaxBatch: 1, InFlight: 2})
	for v := range 3 {
		go func() {
			if err := b.Send(context.Background(), v); err != nil {
				t.Error(err)
			}
		}()
	}
	got := []int{<-entered, <-entered}
	select {
	case v := <-entered:
		t.Fatalf("a third commit (%d) ran beside two in flight", v)
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	got = append(got, <-entered)
	b.Close()
	slices.Sort(got)
	if fmt.Sprint(got) != "[0 1 2]" {
		t.Errorf("committed %v, want [0 1 2]", got)
	}
}

// TestThen: the second stage sees every committed batch exactly once, in
// commit order, one call at a time, and the next batch is committed while
// it runs; Close waits for it.
func TestThen(t *testing.T) {
	var mu sync.Mutex
	var committed, thenSaw [][]int
	var inThen atomic.Int32
	overlapped := atomic.Bool{}
	b := mustNew(t, func(batch []int) {
		if inThen.Load() > 0 {
			overlapped.Store(true)
		}
		mu.Lock()
		committed = append(committed, slices.Clone(batch))
		mu.Unlock()
	}, Options[int]{MaxBatch: 8, Then: func(batches [][]int) {
		if inThen.Add(1) != 1 {
			t.Error("two Then calls at once")
		}
		defer inThen.Add(-1)
		time.Sleep(200 * time.Microsecond) // an fsync's worth
		mu.Lock()
		for _, batch := range batches {
			thenSaw = append(thenSaw, slices.Clone(batch))
		}
		mu.Unlock()
	}})
	const senders, each = 8, 200
	sendAll(t, b, senders, each)
	b.Close()
	if fmt.Sprint(committed) != fmt.Sprint(thenSaw) {
		t.Errorf("Then saw %d batches, %d committed, or in another order", len(thenSaw), len(committed))
	}
	n := 0
	for _, batch := range committed {
		n += len(batch)
	}
	if n != senders*each {
		t.Errorf("%d operations committed, want %d", n, senders*each)
	}
	if !overlapped.Load() {
		t.Error("no commit ran while Then did: the stages were not pipelined")
	}
}

// TestThenMin: while Then runs, a batch smaller than ThenMin waits for
// more operations or for Then to return; once either happens it is
// committed.
func TestThenMin(t *testing.T) {
	thenIn, thenOut := make(chan struct{}, 4), make(chan struct{})
	var mu sync.Mutex
	var batches [][]int
	b := mustNew(t, func(batch []int) {
		mu.Lock()
		batches = append(batches, slices.Clone(batch))
		mu.Unlock()
	}, Options[int]{MaxBatch: 16, ThenMin: 3, Then: func([][]int) {
		thenIn <- struct{}{}
		<-thenOut
	}})
	send := func(v int) {
		go func() {
			if err := b.Send(context.Background(), v); err != nil {
				t.Error(err)
			}
		}()
	}
	snapshot := func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprint(batches)
	}
	send(0)
	<-thenIn // [0] committed; Then holds it
	send(1)
	send(2)
	time.Sleep(20 * time.Millisecond)
	if got := snapshot(); got != "[[0]]" {
		t.Fatalf("with Then under way and 2 < ThenMin pending: batches %s, want [[0]] only", got)
	}
	send(3) // the third: the batch is full enough
	for snapshot() == "[[0]]" {
		time.Sleep(time.Millisecond)
	}
	if got := snapshot(); len(got) != len("[[0] [1 2 3]]") {
		t.Errorf("batches %s, want [0] then 1, 2 and 3 together", got)
	}
	send(4)
	time.Sleep(20 * time.Millisecond)
	close(thenOut) // Then returns (now and later): [4] goes at once
	b.Close()
	if got := snapshot(); !strings.HasSuffix(got, " [4]]") {
		t.Errorf("batches %s, want [4] committed once Then returned", got)
	}
}

// TestOptions: options New cannot use are refused with an OptionsError
// naming the field.
func TestOptions(t *testing.T) {
	commit := func([]int) {}
	then := func([][]int) {}
	for _, c := range []struct {
		field string
		o     Options[int]
	}{
		{"MaxBatch", Options[int]{}},
		{"MaxBatch", Options[int]{MaxBatch: -1}},
		{"Delay", Options[int]{MaxBatch: 1, Delay: -time.Millisecond}},
		{"InFlight", Options[int]{MaxBatch: 1, InFlight: -1}},
		{"InFlight", Options[int]{MaxBatch: 1, InFlight: 2, Then: then}},
		{"ThenMin", Options[int]{MaxBatch: 4, ThenMin: 5, Then: then}},
		{"ThenMin", Options[int]{MaxBatch: 4, ThenMin: 2}},
	} {
		_, err := New(commit, c.o)
		var oe *OptionsError
		if !errors.As(err, &oe) || oe.Field != c.field {
			t.Errorf("%+v: %v, want an OptionsError on %s", c.o, err, c.field)
		}
	}
	var oe *OptionsError
	if _, err := New(nil, Options[int]{MaxBatch: 1}); !errors.As(err, &oe) {
		t.Errorf("no commit function: %v", err)
	}
}

// TestPanicCrashes: a panic in commit or Then crashes the process with the
// fault's stack, even if the sender recovers panics (as an HTTP handler's
// recovery would): the batcher's state is unknown after it, and a sender
// left waiting forever would be worse. The crash runs in a child process.
func TestPanicCrashes(t *testing.T) {
	if stage := os.Getenv("GROUPCOMMIT_PANIC_IN"); stage != "" {
		o := Options[int]{MaxBatch: 4}
		commit := func([]int) {
			if stage == "commit" {
				panic("boom in commit")
			}
		}
		if stage == "then" {
			o.Then = func([][]int) { panic("boom in then") }
		}
		b := mustNew(t, commit, o)
		func() {
			defer func() { _ = recover() }() // the sender's own recovery
			_ = b.Send(context.Background(), 1)
		}()
		time.Sleep(5 * time.Second) // the crash comes from another goroutine
		t.Fatal("still running after a panic in " + stage)
	}
	for _, stage := range []string{"commit", "then"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPanicCrashes$")
		cmd.Env = append(os.Environ(), "GROUPCOMMIT_PANIC_IN="+stage)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%s: the process survived a panic: %s", stage, out)
			continue
		}
		if !strings.Contains(string(out), "groupcommit: boom in "+stage) || !strings.Contains(string(out), "TestPanicCrashes") {
			t.Errorf("%s: exit %v without the fault and its stack:\n%s", stage, err, out)
		}
	}
}

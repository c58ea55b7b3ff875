package groupcommit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkShapes drives the batcher in the shapes its users give it, 64
// senders each waiting for its operation, against the loops it replaced
// (a committing goroutine, or several, reading a channel; SQLite's commit
// loop with its syncer goroutine), with commits that stand for the real
// ones so that the figures show the batching, not the machine's disk:
//
//   - queue: one batch at a time, the commit waits 100 µs (a write and
//     its fdatasync; LogQueue, PGQueue);
//   - inflight=2: two batches in flight, each waits 300 µs (PostgreSQL's
//     store: round trips and the WAL flush);
//   - pipeline: the commit computes for 2 µs an operation plus 20 µs (the
//     SQLite transaction), then the second stage waits 150 µs (the WAL
//     fsync), ThenMin 32.
//
// Reported: operations per second, per batch, and the process's CPU time
// per operation (user+system). The shared machine makes single runs
// noisy: compare -count 5 medians.
//
//	go test -run '^$' -bench BenchmarkShapes -count 5 ./runtime/groupcommit/
func BenchmarkShapes(b *testing.B) {
	sleep := func(d time.Duration) func(int) { return func(int) { time.Sleep(d) } }
	compute := func(fixed, per time.Duration) func(int) {
		return func(n int) {
			end := time.Now().Add(fixed + time.Duration(n)*per)
			for time.Now().Before(end) {
			}
		}
	}
	for _, c := range []struct {
		name   string
		o      Options[chan struct{}]
		commit func(n int)
		then   func(n int)
	}{
		{"queue", Options[chan struct{}]{MaxBatch: 512}, sleep(100 * time.Microsecond), nil},
		{"inflight=2", Options[chan struct{}]{MaxBatch: 256, InFlight: 2}, sleep(300 * time.Microsecond), nil},
		{"pipeline", Options[chan struct{}]{MaxBatch: 1024, ThenMin: 32}, compute(20*time.Microsecond, 2*time.Microsecond), sleep(150 * time.Microsecond)},
	} {
		for _, impl := range []string{"batcher", "loop"} {
			b.Run(c.name+"/"+impl, func(b *testing.B) {
				var batches atomic.Int64
				commit := func(batch []chan struct{}) {
					batches.Add(1)
					c.commit(len(batch))
					if c.then == nil {
						ack(batch)
					}
				}
				var then func([][]chan struct{})
				if c.then != nil {
					then = func(bs [][]chan struct{}) {
						c.then(len(bs))
						for _, batch := range bs {
							ack(batch)
						}
					}
				}
				var send func(chan struct{})
				var stop func()
				if impl == "batcher" {
					o := c.o
					o.Then = then
					g, err := New(commit, o)
					if err != nil {
						b.Fatal(err)
					}
					send = func(op chan struct{}) {
						if err := g.Send(context.Background(), op); err != nil {
							b.Error(err)
						}
					}
					stop = func() { g.Close() }
				} else {
					send, stop = loop(c.o, commit, then)
				}
				cpu0 := cpuTime(b)
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				for range 64 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						done := make(chan struct{}, 1)
						for next.Add(1) <= int64(b.N) {
							send(done)
							<-done
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				stop()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
				b.ReportMetric(float64(b.N)/float64(batches.Load()), "ops/batch")
				b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}

func ack(batch []chan struct{}) {
	for _, done := range batch {
		done <- struct{}{}
	}
}

// loop is what the stores had before the batcher, for comparison: InFlight
// goroutines each taking one operation from a channel and whatever else is
// waiting, up to MaxBatch (PostgreSQL's committers); with then, one commit
// loop handing each batch to a syncer goroutine that runs then over every
// batch waiting, the loop holding a batch smaller than ThenMin back while
// a round is under way (SQLite's commitLoop, fill and syncLoop).
func loop(o Options[chan struct{}], commit func([]chan struct{}), then func([][]chan struct{})) (send func(chan struct{}), stop func()) {
	reqs := make(chan chan struct{}, 4096)
	var wg sync.WaitGroup
	drain := func(batch []chan struct{}) []chan struct{} {
		for len(batch) < o.MaxBatch {
			select {
			case r, ok := <-reqs:
				if !ok {
					return batch
				}
				batch = append(batch, r)
			default:
				return batch
			}
		}
		return batch
	}
	if then == nil {
		for range max(o.InFlight, 1) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := range reqs {
					commit(drain([]chan struct{}{r}))
				}
			}()
		}
		return func(op chan struct{}) { reqs <- op }, func() { close(reqs); wg.Wait() }
	}
	synced := make(chan [][]chan struct{}, 64)
	var inflight atomic.Int32
	idle := make(chan struct{}, 1)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for b := range synced {
			pending := b
		more:
			for {
				select {
				case b, ok := <-synced:
					if !ok {
						break more
					}
					pending = append(pending, b...)
				default:
					break more
				}
			}
			then(pending)
			inflight.Add(-int32(len(pending)))
			select {
			case idle <- struct{}{}:
			default:
			}
		}
	}()
	go func() {
		defer wg.Done()
		defer close(synced)
		for r := range reqs {
			batch := drain(append(make([]chan struct{}, 0, 16), r))
		fill:
			for len(batch) < o.ThenMin && inflight.Load() > 0 {
				select {
				case r, ok := <-reqs:
					if !ok {
						break fill
					}
					batch = append(batch, r)
				case <-idle:
				}
			}
			commit(batch)
			inflight.Add(1)
			synced <- [][]chan struct{}{batch}
		}
	}()
	return func(op chan struct{}) { reqs <- op }, func() { close(reqs); wg.Wait() }
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ExampleBatcher shows a batcher committing what arrives together.
func ExampleBatcher() {
	var mu sync.Mutex
	total := 0
	b, err := New(func(batch []int) {
		mu.Lock()
		for _, v := range batch {
			total += v
		}
		mu.Unlock()
	}, Options[int]{MaxBatch: 64})
	if err != nil {
		panic(err)
	}
	for v := 1; v <= 10; v++ {
		if err := b.Send(context.Background(), v); err != nil {
			panic(err)
		}
	}
	b.Close()
	fmt.Println(total)
	// Output: 55
}

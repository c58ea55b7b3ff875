package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store/storetest"
)

// BenchmarkGroupCommit measures durable append throughput as the
// Foundation issue states it: group commit against one fsync per event.
//
//   - sessions=64/drafts=1: 64 sessions each append one event per call and
//     wait for it; group commit shares a transaction (one fsync) among the
//     appends that are queued together. The baseline is fsync=event: the
//     same load with every append in its own transaction.
//   - sessions=1/drafts=1: one session appending one event per call can go
//     no faster than one fsync per event whatever the store does, because
//     each append waits for its own commit; group commit must not cost
//     anything there.
//   - sessions=1/drafts=64: one session that has a burst of events (a
//     stream of output deltas) appends them in one call. Group commit makes
//     the burst one transaction; the fsync=event baseline appends the same
//     events one call (one transaction, one fsync) each.
//
// Besides events/s it reports CPU time per event (user+system of the
// whole process), which bounds throughput at 2 cores / cpu-µs.
func BenchmarkGroupCommit(b *testing.B) {
	cases := []struct {
		sessions, drafts int
	}{{64, 1}, {1, 1}, {1, 64}}
	for _, c := range cases {
		for _, mode := range []string{"group", "fsync=event"} {
			name := fmt.Sprintf("sessions=%d/drafts=%d/%s", c.sessions, c.drafts, mode)
			b.Run(name, func(b *testing.B) {
				s := openStore(b, b.TempDir(), storetest.NewSealer(b), Options{NoGroupCommit: mode != "group"})
				defer s.Close() // each run of a benchmark function opens its own
				drafts := c.drafts
				if mode != "group" {
					drafts = 1
				}
				benchAppend(b, s, c.sessions, drafts)
			})
		}
	}
}

// benchAppend is storetest.BenchAppend with the store's own figures: CPU
// time per event (user+system of the whole process), events per commit
// and, with group commit, per fsync and the fsync's duration.
func benchAppend(b *testing.B, s *Store, sessions, drafts int) {
	cpu0, commits0, syncs0, syncTime0 := cpuTime(b), s.commits.Load(), s.syncs.Load(), s.syncTime.Load()
	n := float64(storetest.BenchAppend(b, s, sessions, drafts))
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/n, "cpu-µs/event")
	b.ReportMetric(n/float64(s.commits.Load()-commits0), "events/commit")
	if syncs := s.syncs.Load() - syncs0; syncs > 0 {
		b.ReportMetric(float64(s.syncTime.Load()-syncTime0)/1e3/float64(syncs), "µs/fsync")
		b.ReportMetric(n/float64(syncs), "events/fsync")
	}
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

// BenchmarkCommit drives the commit loop's work directly: batches of
// `batch` one-event appends from distinct sessions, prepared beforehand,
// committed in one transaction each. It isolates the serial part of group
// commit (numbering, hashing, SQL, COMMIT and its fsync) from preparation
// and scheduling, and reports CPU per event of that part.
func BenchmarkCommit(b *testing.B) {
	for _, size := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			sealer := storetest.NewSealer(b)
			s := mustOpen(b, b.TempDir(), sealer)
			defer s.Close() // each run of a benchmark function opens its own
			payload := map[string]any{"call_id": "c1", "tool": "repo.read", "args": map[string]any{"path": "internal/auth/token.go", "range": []int{1, 80}}}
			reqs := make([]*appendReq, size)
			seqs := make([]int64, size)
			for i := range reqs {
				ps, err := sealer.PrepareAll(fmt.Sprintf("bench-%d", i), []event.Draft{{RunID: "r", Type: event.ToolInvoke, Actor: "worker", Payload: payload}})
				if err != nil {
					b.Fatal(err)
				}
				reqs[i] = newReq()
				reqs[i].sessionID, reqs[i].prepared = fmt.Sprintf("bench-%d", i), ps
			}
			commits := b.N/size + 1
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for c := 0; c < commits; c++ {
				for i, r := range reqs {
					r.expected = seqs[i]
				}
				s.commitAndSync(reqs)
				for i, r := range reqs {
					<-r.ack // as the appending caller would
					if r.err != nil {
						b.Fatal(r.err)
					}
					seqs[i] = r.out[0].Seq
				}
			}
			b.StopTimer()
			n := float64(commits * size)
			b.ReportMetric(n/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/n, "cpu-µs/event")
		})
	}
}

// BenchmarkRead reads a whole 500-event session whose events were appended
// among 63 other sessions' (so each lies in a different batch row), and the
// session list.
func BenchmarkRead(b *testing.B) {
	ctx := context.Background()
	s := mustOpen(b, b.TempDir(), storetest.NewSealer(b))
	defer s.Close() // each run of a benchmark function opens its own
	const sessions, events = 64, 500
	var wg sync.WaitGroup
	for g := 0; g < sessions; g++ {
		wg.Add(1)
		go func(sid string) {
			defer wg.Done()
			for seq := int64(0); seq < events; seq++ {
				if _, err := s.Append(ctx, sid, seq, msg(fmt.Sprint(seq))); err != nil {
					b.Error(err)
					return
				}
			}
		}(fmt.Sprintf("read-%d", g))
	}
	wg.Wait()
	b.Run("session", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			evs, err := s.Read(ctx, "read-7", 1)
			if err != nil || len(evs) != events {
				b.Fatalf("read %d events, %v", len(evs), err)
			}
		}
	})
	// What a live reader does (SSE resuming, the trust fold catching up):
	// the last few events of a session.
	b.Run("recent", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			evs, err := s.Read(ctx, "read-7", events-4)
			if err != nil || len(evs) != 5 {
				b.Fatalf("read %d events, %v", len(evs), err)
			}
		}
	})
	b.Run("sessions", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			infos, err := s.Sessions(ctx)
			if err != nil || len(infos) != sessions {
				b.Fatalf("%d sessions, %v", len(infos), err)
			}
		}
	})
}

// BenchmarkFsyncInterference measures what limits pipelining here: the
// fsync of a file while another goroutine keeps writing 20 KiB chunks
// (about one commit's WAL frames) to the same file, to another file, or
// only burns CPU. It reports the fsync latency (µs/fsync). A commit that
// runs while the WAL's fsync is in flight is the same-file case.
func BenchmarkFsyncInterference(b *testing.B) {
	for _, mode := range []string{"alone", "same-file", "other-file", "cpu"} {
		b.Run(mode, func(b *testing.B) {
			dir := b.TempDir()
			open := func(name string) *os.File {
				f, err := os.Create(filepath.Join(dir, name))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.WriteAt(make([]byte, 8<<20), 0); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				return f
			}
			x, y := open("x"), open("y")
			defer x.Close()
			defer y.Close()
			chunk := make([]byte, 20<<10)
			var stop atomic.Bool
			done := make(chan struct{})
			go func() {
				defer close(done)
				off, sum := int64(4<<20), 0
				for !stop.Load() {
					switch mode {
					case "same-file":
						_, _ = x.WriteAt(chunk, off)
					case "other-file":
						_, _ = y.WriteAt(chunk, off)
					case "cpu":
						for i := 0; i < 20000; i++ {
							sum += i * i
						}
					default:
						time.Sleep(time.Millisecond)
					}
					if off += int64(len(chunk)); off > 8<<20-int64(len(chunk)) {
						off = 4 << 20
					}
				}
				_ = sum
			}()
			var synced time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := x.WriteAt(chunk, int64(i%200)*int64(len(chunk))); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				if err := x.Sync(); err != nil {
					b.Fatal(err)
				}
				synced += time.Since(start)
			}
			b.StopTimer()
			stop.Store(true)
			<-done
			b.ReportMetric(float64(synced.Microseconds())/float64(b.N), "µs/fsync")
		})
	}
}

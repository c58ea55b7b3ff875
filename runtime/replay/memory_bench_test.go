package replay

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/schemas"
)

// peakHeap runs fn and returns the most heap in use while it ran
// (sampled every millisecond), above what was in use before.
func peakHeap(fn func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var m runtime.MemStats
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	fn()
	close(stop)
	wg.Wait()
	if p := peak.Load(); p > base {
		return p - base
	}
	return 0
}

// BenchmarkLongLog100k: a 100,000-event session with a checkpoint every
// 2,000 events (a run's journal's interval), written as before (a full
// snapshot each time) and now (incremental), and read as the CLI did
// before (the whole file in memory, then the fold) and does now (a line
// at a time). It reports each log's size, the peak heap of replay and
// the time of verify: before (full checkpoints, whole-file replay) and
// after (incremental checkpoints, streaming replay), in the same run.
func BenchmarkLongLog100k(b *testing.B) {
	dir := b.TempDir()
	paths := map[bool]string{}
	for _, full := range []bool{true, false} {
		w := newWriter(b, 2000, full)
		w.toolLoop(100_000)
		var buf bytes.Buffer
		for i := range w.evs {
			buf.Write(w.evs[i].Line())
			buf.WriteByte('\n')
		}
		p := filepath.Join(dir, map[bool]string{true: "full.jsonl", false: "incremental.jsonl"}[full])
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
		paths[full] = p
	}
	size := func(p string) float64 {
		st, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		return float64(st.Size()) / (1 << 20)
	}
	// The CLI's replay before: the whole file, split, every event, then
	// the fold.
	wholeFile := func(p string) {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		var evs []event.Event
		for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
			e, err := event.ParseLineFast([]byte(line))
			if err != nil {
				b.Fatal(err)
			}
			evs = append(evs, e)
		}
		if _, err := Replay(evs); err != nil {
			b.Fatal(err)
		}
	}
	streaming := func(p string) {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if _, err := ReplayReader(f); err != nil {
			b.Fatal(err)
		}
	}
	verify := func(p string) time.Duration {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		start := time.Now()
		rep, err := VerifyReader(schemas.MustDefault(), f)
		if err != nil || !rep.Valid {
			b.Fatalf("verify %s: %v %v", p, err, rep.Problem)
		}
		return time.Since(start)
	}
	var before, after uint64
	var vBefore, vAfter time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before = max(before, peakHeap(func() { wholeFile(paths[true]) }))
		after = max(after, peakHeap(func() { streaming(paths[false]) }))
		vBefore += verify(paths[true])
		vAfter += verify(paths[false])
	}
	b.ReportMetric(size(paths[true]), "MB-log-before")
	b.ReportMetric(size(paths[false]), "MB-log-after")
	b.ReportMetric(float64(before)/(1<<20), "MiB-replay-peak-before")
	b.ReportMetric(float64(after)/(1<<20), "MiB-replay-peak-after")
	b.ReportMetric(vBefore.Seconds()/float64(b.N), "s-verify-before")
	b.ReportMetric(vAfter.Seconds()/float64(b.N), "s-verify-after")
}

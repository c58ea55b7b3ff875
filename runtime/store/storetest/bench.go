package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
)

// BenchAppend measures durable append throughput: `sessions` goroutines
// each append `drafts` events per call to their own session, waiting for
// each acknowledgement, about b.N events in all. It reports events/s and
// returns how many events it appended.
func BenchAppend(b *testing.B, s store.Store, sessions, drafts int) int {
	ctx := context.Background()
	payload := map[string]any{"call_id": "c1", "tool": "repo.read", "args": map[string]any{"path": "internal/auth/token.go", "range": []int{1, 80}}}
	batch := make([]event.Draft, drafts)
	for i := range batch {
		batch[i] = event.Draft{RunID: "r", Type: event.ToolInvoke, Actor: "worker", Payload: payload}
	}
	calls := max(b.N/(sessions*drafts), 1)
	b.ResetTimer()
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for g := 0; g < sessions; g++ {
		wg.Add(1)
		go func(sid string) {
			defer wg.Done()
			var seq int64
			for i := 0; i < calls; i++ {
				evs, err := s.Append(ctx, sid, seq, batch...)
				if err != nil {
					errs <- err
					return
				}
				if len(evs) != drafts {
					errs <- fmt.Errorf("appended %d events, want %d", len(evs), drafts)
					return
				}
				seq = evs[len(evs)-1].Seq
			}
		}(fmt.Sprintf("bench-%d", g))
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	n := calls * sessions * drafts
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
	return n
}

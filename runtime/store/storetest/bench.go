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
// each append one event at a time to their own session, waiting for each
// acknowledgement, b.N events in all. It reports events/s.
func BenchAppend(b *testing.B, s store.Store, sessions int) {
	ctx := context.Background()
	payload := map[string]any{"call_id": "c1", "tool": "repo.read", "args": map[string]any{"path": "internal/auth/token.go", "range": []int{1, 80}}}
	per := b.N / sessions
	if per == 0 {
		per = 1
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for g := 0; g < sessions; g++ {
		wg.Add(1)
		go func(sid string) {
			defer wg.Done()
			var seq int64
			for i := 0; i < per; i++ {
				evs, err := s.Append(ctx, sid, seq, event.Draft{RunID: "r", Type: event.ToolInvoke, Actor: "worker", Payload: payload})
				if err != nil {
					errs <- err
					return
				}
				seq = evs[0].Seq
			}
		}(fmt.Sprintf("bench-%d", g))
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(per*sessions)/b.Elapsed().Seconds(), "events/s")
}

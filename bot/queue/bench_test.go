package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentos/agentos/bot/internal/corpus"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
)

// exampleBody is the first issue_comment created example of
// @octokit/webhooks-examples: the body the benchmarks store.
func exampleBody(tb testing.TB) []byte {
	tb.Helper()
	raw, err := os.ReadFile(corpus.WebhookExamples(tb))
	if err != nil {
		tb.Fatal(err)
	}
	var index []struct {
		Name     string            `json:"name"`
		Examples []json.RawMessage `json:"examples"`
	}
	if err := json.Unmarshal(raw, &index); err != nil {
		tb.Fatal(err)
	}
	for _, e := range index {
		if e.Name != "issue_comment" {
			continue
		}
		for _, b := range e.Examples {
			var head struct {
				Action string `json:"action"`
			}
			if json.Unmarshal(b, &head) == nil && head.Action == "created" {
				return b
			}
		}
	}
	tb.Fatal("no issue_comment created example")
	return nil
}

// BenchmarkQueueClaimDone is the Processor's side: claim a stored delivery
// (body read back) and record its completion, 8 workers.
func BenchmarkQueueClaimDone(b *testing.B) {
	body := exampleBody(b)
	ctx := context.Background()
	b.Run("log", func(b *testing.B) {
		q, err := OpenLogQueue(filepath.Join(b.TempDir(), "q"))
		if err != nil {
			b.Fatal(err)
		}
		defer q.Close()
		for i := range b.N {
			if _, err := q.Enqueue(ctx, Delivery{ID: fmt.Sprint("c-", i), Event: "issue_comment", Action: "created", Body: body}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		b.ResetTimer()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				d, ok, err := q.Claim(ctx)
				for err == nil && !ok {
					// Another worker's claim batch is being handed out.
					runtime.Gosched()
					d, ok, err = q.Claim(ctx)
				}
				if err != nil {
					b.Error(err)
					return
				}
				if len(d.Body) != len(body) {
					b.Errorf("body %d bytes", len(d.Body))
				}
				if err := q.Done(ctx, d.ID, OutcomeProcessed, ""); err != nil {
					b.Error(err)
				}
			}
		})
	})
}

// BenchmarkPGQueueClaimDone is the Processor's side on PostgreSQL: claim a
// stored delivery (FOR UPDATE SKIP LOCKED, body read back) and record its
// completion, 8 workers spread over 1 or 3 replicas.
//
//	go test -run '^$' -bench BenchmarkPGQueueClaimDone -benchtime 2000x ./bot/queue/
func BenchmarkPGQueueClaimDone(b *testing.B) {
	body := exampleBody(b)
	db := pgtest.URL(b)
	for _, replicas := range []int{1, 3} {
		b.Run(fmt.Sprintf("replicas=%d", replicas), func(b *testing.B) {
			u := pgtest.Schema(b, db)
			var qs []*PGQueue
			for range replicas {
				qs = append(qs, openPGQueueAt(b, u, PGQueueOptions{}))
			}
			ctx := context.Background()
			var wg sync.WaitGroup
			for i := range b.N {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := qs[i%replicas].Enqueue(ctx, Delivery{ID: fmt.Sprint("c-", i), Event: "issue_comment", Action: "created", Body: body}); err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
			var done atomic.Int64
			b.ResetTimer()
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					q := qs[w%replicas]
					for done.Load() < int64(b.N) {
						d, ok, err := q.Claim(ctx)
						if err != nil {
							b.Error(err)
							return
						}
						if !ok {
							continue
						}
						if len(d.Body) != len(body) {
							b.Errorf("body %d bytes", len(d.Body))
						}
						if err := q.Done(ctx, d.ID, OutcomeProcessed, ""); err != nil {
							b.Error(err)
						}
						done.Add(1)
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
		})
	}
}

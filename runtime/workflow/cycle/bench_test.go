package cycle_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/workflow/cycle"
)

// slowProvider adds a fixed latency to every model call, as a remote model
// has; the fan-out's concurrency is what hides it.
type slowProvider struct {
	provider.Provider
	d time.Duration
}

func (p slowProvider) Complete(ctx context.Context, req provider.CompletionRequest) (provider.CompletionResponse, error) {
	select {
	case <-time.After(p.d):
	case <-ctx.Done():
		return provider.CompletionResponse{}, ctx.Err()
	}
	return p.Provider.Complete(ctx, req)
}

// BenchmarkReviewFanOut runs the review cycle (three personas, 100 ms per
// model call) with the fan-out limited to one persona at a time (the
// baseline) and to three; compare the two ns/op of the same run.
func BenchmarkReviewFanOut(b *testing.B) {
	for _, limit := range []int{1, 3} {
		b.Run(fmt.Sprintf("max_concurrency=%d", limit), func(b *testing.B) {
			dir := b.TempDir()
			writeFiles(b, dir, map[string]string{
				"db.go": dbGo,
				".agent/workflows/phases/review-fan-out.md": strings.Replace(`---
id: review-fan-out
agents_invoked: [security, correctness, tests]
max_concurrency: LIMIT
output_schema: review_aggregate_v1
advance_signal: review_aggregate.verdict != ""
policies: [role-permissions]
schema_version: v1
---
`, "LIMIT", fmt.Sprint(limit), 1),
			})
			w := openWorldWith(b, dir, b.TempDir(), reviewScript, "", func(p provider.Provider) provider.Provider { return slowProvider{p, 100 * time.Millisecond} })
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := w.x.Run(context.Background(), cycle.Request{SessionID: fmt.Sprintf("bench-%d", i), Cycle: "review", Prompt: "review", Inputs: map[string]string{"diff": prDiff}})
				if err != nil || res.Verdict != "done" {
					b.Fatalf("%v %+v", err, res)
				}
			}
		})
	}
}

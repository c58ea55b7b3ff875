package webhook

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/agentos/agentos/bot/queue"
)

// BenchmarkWebhookQueues posts signed issue_comment deliveries (a real
// payload, a fresh delivery ID each) through gin into the LogQueue,
// durable write included: serially (one sync each) and
// 32-way parallel (deliveries share group commits).
func BenchmarkWebhookQueues(b *testing.B) {
	body := exampleOf(b, "issue_comment", "created", 0)
	sig := Sign(testSecret, body)
	for _, parallel := range []bool{false, true} {
		name := "serial"
		if parallel {
			name = "parallel"
		}
		b.Run(name, func(b *testing.B) {
			q, err := queue.OpenLogQueue(filepath.Join(b.TempDir(), "q"))
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			e := newEngine(NewHandler(Config{Events: testEvents, Secrets: [][]byte{testSecret}}, q, nil))
			var n atomic.Int64
			one := func() {
				req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(EventHeader, "issue_comment")
				req.Header.Set(DeliveryHeader, fmt.Sprintf("bench-%d", n.Add(1)))
				req.Header.Set(SignatureHeader, sig)
				w := httptest.NewRecorder()
				e.ServeHTTP(w, req)
				if w.Code != http.StatusAccepted {
					b.Errorf("status %d %s", w.Code, w.Body)
				}
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			if parallel {
				b.SetParallelism(32)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						one()
					}
				})
				return
			}
			for b.Loop() {
				one()
			}
		})
	}
}

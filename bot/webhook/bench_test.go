package webhook

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// benchmarkWebhook posts signed issue_comment deliveries (a real payload,
// a fresh delivery ID each) through gin into a SQLite queue, fsync included.
func benchmarkWebhook(b *testing.B, parallel bool) {
	body := exampleOf(b, "issue_comment", "created", 0)
	sig := Sign(testSecret, body)
	q, err := OpenQueue(b.TempDir() + "/q.db")
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	e := newEngine(NewHandler(Config{Secrets: [][]byte{testSecret}}, q, nil))
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
		b.SetParallelism(32) // GitHub sends deliveries concurrently; they share commits
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
}

// BenchmarkWebhookSerial: one delivery at a time, so one fsync each.
func BenchmarkWebhookSerial(b *testing.B) { benchmarkWebhook(b, false) }

// BenchmarkWebhookParallel: concurrent deliveries sharing group commits.
func BenchmarkWebhookParallel(b *testing.B) { benchmarkWebhook(b, true) }

// BenchmarkRouteAction is the only decoding on the hot path.
func BenchmarkRouteAction(b *testing.B) {
	body := exampleOf(b, "issue_comment", "created", 0)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := routeAction(body); err != nil {
			b.Fatal(err)
		}
	}
}

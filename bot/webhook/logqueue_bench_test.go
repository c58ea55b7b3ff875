package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/agentos/agentos/bot/queue"
)

// distinctComments returns the issue_comment example as a template: each
// call gives the payload of a new comment (its own comment id) and its
// signature, as GitHub sends for every new comment. The same payload
// under another delivery ID is a replay the intake answers as a duplicate.
func distinctComments(tb testing.TB) func(n int64) (body []byte, sig string) {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(exampleOf(tb, "issue_comment", "created", 0), &m); err != nil {
		tb.Fatal(err)
	}
	const sentinel = 7777777777777
	m["comment"].(map[string]any)["id"] = sentinel
	raw, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	parts := bytes.Split(raw, []byte(strconv.Itoa(sentinel)))
	if len(parts) != 2 {
		tb.Fatalf("the comment id sentinel appears %d times", len(parts)-1)
	}
	return func(n int64) ([]byte, string) {
		body := make([]byte, 0, len(raw)+8)
		body = append(append(append(body, parts[0]...), strconv.FormatInt(sentinel+n, 10)...), parts[1]...)
		return body, Sign(testSecret, body)
	}
}

// BenchmarkWebhookQueues posts signed issue_comment deliveries (a real
// payload, a new comment and a fresh delivery ID each) through gin into the LogQueue,
// durable write included: serially (one sync each) and
// 32-way parallel (deliveries share group commits).
func BenchmarkWebhookQueues(b *testing.B) {
	next := distinctComments(b)
	body, _ := next(0)
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
				i := n.Add(1)
				body, sig := next(i)
				req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(EventHeader, "issue_comment")
				req.Header.Set(DeliveryHeader, fmt.Sprintf("bench-%d", i))
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

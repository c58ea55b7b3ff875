package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentos/agentos/bot/internal/corpus"
	"github.com/agentos/agentos/bot/queue"
)

// recordingQueue keeps what the handler enqueues (copied, as a real queue
// stores it).
type recordingQueue struct {
	mu  sync.Mutex
	got []queue.Delivery
}

func (q *recordingQueue) Enqueue(_ context.Context, d queue.Delivery) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	d.Body = bytes.Clone(d.Body)
	q.got = append(q.got, d)
	return false, nil
}
func (q *recordingQueue) Claim(context.Context) (queue.Delivery, bool, error) {
	return queue.Delivery{}, false, nil
}
func (q *recordingQueue) Done(context.Context, string, string, string) error { return nil }
func (q *recordingQueue) Depth(context.Context) (int, error)                 { return len(q.got), nil }

func (q *recordingQueue) take() []queue.Delivery {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.got
	q.got = nil
	return out
}

// FuzzDelivery posts any body under any event name through the gin
// handler, signed with the secret, with another secret, or not at all, as
// JSON or as a form. GitHub's example payloads seed it. The handler answers
// every request with one of its documented statuses and a JSON body; it
// stores a delivery only when the signature is right, the event handled and
// the payload a JSON object, and then stores exactly the payload with the
// top-level action encoding/json finds.
func FuzzDelivery(f *testing.F) {
	for i, ex := range corpus.Examples(f, "issue_comment", "pull_request", "pull_request_review", "pull_request_review_comment", "installation", "ping") {
		if i%3 == 0 { // a third of them keeps the seed corpus quick to run
			f.Add(ex.Event, ex.Body, uint8(0))
		}
	}
	f.Add("issue_comment", []byte(`{"action":"created","comment":{"body":"/agent fix auth.go"}}`), uint8(3))
	f.Add("issues", []byte(`{"action":"opened"}`), uint8(0))
	f.Add("pull_request", []byte(`[{"action":"closed"}]`), uint8(1))
	q := &recordingQueue{}
	e := newEngine(NewHandler(Config{Events: testEvents, Secrets: [][]byte{testSecret}}, q, nil))
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, event string, body []byte, mode uint8) {
		q.take()
		payload := body
		contentType := "application/json"
		if mode&2 != 0 {
			contentType = "application/x-www-form-urlencoded"
			body = []byte("payload=" + url.QueryEscape(string(body)))
		}
		sig := Sign(testSecret, body)
		switch mode % 4 {
		case 1:
			sig = Sign([]byte("another secret"), body)
		case 3:
			if mode&4 != 0 {
				sig = ""
			}
		}
		req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set(EventHeader, event)
		req.Header.Set(DeliveryHeader, fmt.Sprintf("fuzz-%d", n.Add(1)))
		if sig != "" {
			req.Header.Set(SignatureHeader, sig)
		}
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		stored := q.take()

		switch w.Code {
		case http.StatusOK, http.StatusAccepted, http.StatusBadRequest, http.StatusUnauthorized, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d %s", w.Code, w.Body)
		}
		var answer map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil {
			t.Fatalf("answer %q is not a JSON object: %v", w.Body, err)
		}
		if w.Code >= 400 {
			if msg, _ := answer["error"].(string); msg == "" {
				t.Fatalf("%d without an error message: %s", w.Code, w.Body)
			}
		}
		if mode%4 == 1 || sig == "" {
			if w.Code != http.StatusUnauthorized || len(stored) != 0 {
				t.Fatalf("bad signature: %d, %d stored", w.Code, len(stored))
			}
			return
		}
		if w.Code != http.StatusAccepted {
			if len(stored) != 0 {
				t.Fatalf("answered %d and stored %d deliveries", w.Code, len(stored))
			}
			return
		}
		if len(stored) != 1 {
			t.Fatalf("answered 202 and stored %d deliveries", len(stored))
		}
		d := stored[0]
		if !testEvents.Has(event) || event == "ping" || d.Event != event {
			t.Fatalf("accepted event %q stored as %q", event, d.Event)
		}
		var m map[string]any
		if err := json.Unmarshal(payload, &m); err != nil {
			t.Fatalf("accepted a payload encoding/json rejects: %v", err)
		}
		if !bytes.Equal(d.Body, payload) {
			t.Fatalf("stored body %q, sent payload %q", d.Body, payload)
		}
		if want, _ := m["action"].(string); d.Action != want {
			t.Fatalf("stored action %q, payload says %q", d.Action, want)
		}
	})
}

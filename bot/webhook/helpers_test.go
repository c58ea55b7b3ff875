package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentos/agentos/bot/internal/corpus"
	"github.com/agentos/agentos/bot/queue"
	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgxpool"
)

var testSecret = []byte("test-webhook-secret")

// openTestQueue opens a fresh LogQueue; path reopens the same queue.
func openTestQueue(t *testing.T) (*queue.LogQueue, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "webhooks")
	return openQueueAt(t, path), path
}

// openQueueAt opens the LogQueue at path, closed when the test ends.
func openQueueAt(t *testing.T, path string) *queue.LogQueue {
	t.Helper()
	q, err := queue.OpenLogQueue(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

func newEngine(h *Handler) *gin.Engine {
	gin.SetMode(gin.TestMode)
	e := gin.New()
	e.POST("/webhook", h.Serve)
	return e
}

// request is one delivery as a test sends it.
type request struct {
	event, id, sig, contentType string
	body                        []byte
}

// signed returns a request signed with testSecret.
func signed(event, id string, body []byte) request {
	return request{event: event, id: id, body: body, sig: Sign(testSecret, body)}
}

func post(t *testing.T, e http.Handler, r request) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(r.body))
	ct := r.contentType
	if ct == "" {
		ct = "application/json"
	}
	req.Header.Set("Content-Type", ct)
	if r.event != "" {
		req.Header.Set(EventHeader, r.event)
	}
	if r.id != "" {
		req.Header.Set(DeliveryHeader, r.id)
	}
	if r.sig != "" {
		req.Header.Set(SignatureHeader, r.sig)
	}
	w := httptest.NewRecorder()
	e.ServeHTTP(w, req)
	return w
}

// recorder is an Observer that keeps every call.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) Delivery(event, outcome string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, event+" "+outcome)
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// example is one payload of @octokit/webhooks-examples.
type example struct {
	event  string
	action string
	body   []byte
}

// webhookExamples loads the examples of the given events (all if none).
func webhookExamples(t testing.TB, events ...string) []example {
	t.Helper()
	index := loadExampleIndex(t)
	want := map[string]bool{}
	for _, e := range events {
		want[e] = true
	}
	var out []example
	for _, ev := range index {
		if len(want) > 0 && !want[ev.Name] {
			continue
		}
		for _, b := range ev.Examples {
			var head struct {
				Action string `json:"action"`
			}
			if err := json.Unmarshal(b, &head); err != nil {
				t.Fatalf("%s example: %v", ev.Name, err)
			}
			out = append(out, example{event: ev.Name, action: head.Action, body: []byte(b)})
		}
	}
	if len(out) == 0 {
		t.Fatalf("no examples of %v in the corpus", events)
	}
	return out
}

type indexEntry struct {
	Name     string            `json:"name"`
	Examples []json.RawMessage `json:"examples"`
}

var (
	indexMu    sync.Mutex
	indexCache []indexEntry
)

// loadExampleIndex reads the examples index once per test binary.
func loadExampleIndex(t testing.TB) []indexEntry {
	t.Helper()
	path := corpus.WebhookExamples(t)
	indexMu.Lock()
	defer indexMu.Unlock()
	if indexCache != nil {
		return indexCache
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &indexCache); err != nil {
		t.Fatalf("webhooks-examples index: %v", err)
	}
	return indexCache
}

// exampleOf returns the n-th example of event with action.
func exampleOf(t testing.TB, event, action string, n int) []byte {
	t.Helper()
	for _, e := range webhookExamples(t, event) {
		if e.action == action {
			if n == 0 {
				return e.body
			}
			n--
		}
	}
	t.Fatalf("no example %d of %s.%s", n, event, action)
	return nil
}

// openPGQueueAt opens a PGQueue (own pool) on the schema at u, closed
// when the test ends.
func openPGQueueAt(t testing.TB, u string, o queue.PGQueueOptions) *queue.PGQueue {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	q, err := queue.OpenPGQueue(context.Background(), pool, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

func claim(t *testing.T, q queue.Queue) (queue.Delivery, bool) {
	t.Helper()
	d, ok, err := q.Claim(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return d, ok
}

// noBody drops the body, for messages.
func noBody(r queue.Record) queue.Record { r.Body = nil; return r }

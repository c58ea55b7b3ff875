package webhook

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
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

// The example payloads and their editing, shared with the other intake
// tests (bot/internal/corpus).
var (
	exampleOf = corpus.ExampleOf
	mutate    = corpus.Mutate
	obj       = corpus.Obj
)

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

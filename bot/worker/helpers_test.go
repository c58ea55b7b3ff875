package worker

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/internal/corpus"
	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/bot/webhook"
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

// openQueueAt opens the LogQueue at path, closed when the test ends; its
// clock is set with setNow.
func openQueueAt(t *testing.T, path string) *queue.LogQueue {
	t.Helper()
	c := &clock{}
	q, err := queue.OpenLogQueueOptions(path, queue.LogOptions{Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	clocks.Store(q, c)
	t.Cleanup(func() { q.Close() })
	return q
}

// openLog is openQueueAt for a directory.
func openLog(t *testing.T, dir string) *queue.LogQueue { return openQueueAt(t, dir) }

// clock is a queue's clock that a test can set (nil: time.Now).
type clock struct {
	mu sync.Mutex
	f  func() time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	f := c.f
	c.mu.Unlock()
	if f == nil {
		return time.Now()
	}
	return f()
}

// clocks are the clocks of the queues the tests opened.
var clocks sync.Map

// setNow sets the clock of a queue opened by these helpers.
func setNow(q any, f func() time.Time) {
	c, ok := clocks.Load(q)
	if !ok {
		panic("setNow: a queue not opened by the test helpers")
	}
	c.(*clock).mu.Lock()
	c.(*clock).f = f
	c.(*clock).mu.Unlock()
}

// killed stands for the process holding the log queue in dir killed with
// SIGKILL: it returns a copy of the directory as that process left it
// (everything acknowledged is synced; nothing is released or completed),
// for the next process to open. The original queue is left to the test's
// cleanup.
func killed(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

func newEngine(h *webhook.Handler) *gin.Engine {
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
	return request{event: event, id: id, body: body, sig: webhook.Sign(testSecret, body)}
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
		req.Header.Set(webhook.EventHeader, r.event)
	}
	if r.id != "" {
		req.Header.Set(webhook.DeliveryHeader, r.id)
	}
	if r.sig != "" {
		req.Header.Set(webhook.SignatureHeader, r.sig)
	}
	w := httptest.NewRecorder()
	e.ServeHTTP(w, req)
	return w
}

// recorder is a webhook.Observer that keeps every call.
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
// when the test ends; its clock is set with setNow.
func openPGQueueAt(t testing.TB, u string, o queue.PGQueueOptions) *queue.PGQueue {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c := &clock{}
	o.Now = c.now
	q, err := queue.OpenPGQueue(context.Background(), pool, o)
	if err != nil {
		t.Fatal(err)
	}
	clocks.Store(q, c)
	t.Cleanup(func() { q.Close() })
	return q
}

func enqueue(t *testing.T, q queue.Queue, id string) {
	t.Helper()
	dup, err := q.Enqueue(context.Background(), queue.Delivery{ID: id, Event: "issue_comment", Action: "created", Body: []byte(`{"id":"` + id + `"}`)})
	if err != nil || dup {
		t.Fatalf("Enqueue(%s) = %v, %v", id, dup, err)
	}
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

// testEvents stand in for the route table's (dispatch.Events): the
// events and actions the bot acts on.
var testEvents = webhook.Events{
	"issue_comment":               {"created"},
	"pull_request_review":         {"submitted"},
	"pull_request_review_comment": {"created"},
	"pull_request":                {"closed", "synchronize"},
	"installation":                nil,
	"installation_repositories":   nil,
}

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/api"
	"github.com/gin-gonic/gin"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func newServer(t *testing.T, o Options) (*Server, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	}
	if o.Listener == nil && o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s, logs
}

// orderLog records what happened, in order.
type orderLog struct {
	mu    sync.Mutex
	steps []string
}

func (l *orderLog) add(s string) {
	l.mu.Lock()
	l.steps = append(l.steps, s)
	l.mu.Unlock()
}

func (l *orderLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.steps...)
}

// TestShutdownOrder: on cancel the server first stops accepting, lets the
// request in flight finish, and only then cancels the actors.
func TestShutdownOrder(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	var order orderLog
	entered, release := make(chan struct{}), make(chan struct{})
	shutdownBegan := make(chan struct{})
	actorStopped := make(chan struct{})
	s, _ := newServer(t, Options{
		Listener: ln,
		Routes: []func(gin.IRouter){func(r gin.IRouter) {
			r.GET("/slow", func(c *gin.Context) {
				close(entered)
				<-release
				order.add("request finished")
				c.String(http.StatusOK, "done")
			})
		}},
		Actors: []func(context.Context) error{func(ctx context.Context) error {
			<-ctx.Done()
			order.add("actor stopped")
			close(actorStopped)
			return nil
		}},
		OnShutdown: []func(){func() { close(shutdownBegan) }},
	})
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(ctx) }()

	type result struct {
		status int
		body   string
		err    error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/slow")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- result{status: resp.StatusCode, body: string(b)}
	}()
	<-entered
	cancel()
	<-shutdownBegan
	// Listeners are closed before the shutdown hooks run: no new
	// connection is accepted.
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Error("a new connection was accepted during shutdown")
	}
	select {
	case <-actorStopped:
		t.Fatal("the actor was cancelled while a request was still in flight")
	default:
	}
	close(release)
	r := <-got
	if r.err != nil || r.status != http.StatusOK || r.body != "done" {
		t.Fatalf("in-flight request: %+v", r)
	}
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, want := strings.Join(order.get(), ", "), "request finished, actor stopped"; got != want {
		t.Errorf("order %q, want %q", got, want)
	}
}

func TestActorFailureStopsServer(t *testing.T) {
	boom := errors.New("queue database is gone")
	otherStopped := make(chan struct{})
	s, logs := newServer(t, Options{
		Listener: listen(t),
		Actors: []func(context.Context) error{
			func(ctx context.Context) error { <-ctx.Done(); close(otherStopped); return ctx.Err() },
			func(ctx context.Context) error { return boom },
		},
	})
	err := s.Run(context.Background())
	if !errors.Is(err, boom) {
		t.Fatalf("Run returned %v, want the actor's error", err)
	}
	select {
	case <-otherStopped:
	default:
		t.Error("Run returned before the other actor stopped")
	}
	if !strings.Contains(logs.String(), "stopping after a failure") {
		t.Errorf("failure not logged: %s", logs)
	}
}

func TestListenFailure(t *testing.T) {
	ln := listen(t)
	defer ln.Close()
	s, _ := newServer(t, Options{Addr: ln.Addr().String()}) // already taken
	if err := s.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("got %v, want address already in use", err)
	}
}

func TestShutdownTimeoutClosesStuckRequests(t *testing.T) {
	ln := listen(t)
	entered := make(chan struct{})
	s, _ := newServer(t, Options{
		Listener:        ln,
		ShutdownTimeout: time.Millisecond,
		Routes: []func(gin.IRouter){func(r gin.IRouter) {
			r.GET("/stuck", func(c *gin.Context) {
				close(entered)
				<-c.Request.Context().Done() // ends only when the connection is closed
			})
		}},
	})
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(ctx) }()
	clientErr := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/stuck")
		if err == nil {
			resp.Body.Close()
		}
		clientErr <- err
	}()
	<-entered
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := <-clientErr; err == nil {
		t.Error("the stuck request got a response; want its connection closed")
	}
}

func TestRecoveryReturnsJSONWithoutInternals(t *testing.T) {
	s, logs := newServer(t, Options{Routes: []func(gin.IRouter){func(r gin.IRouter) {
		r.GET("/panic", func(c *gin.Context) { panic("db password is hunter2") })
	}}})
	w := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/panic", nil)
	req.Header.Set("X-Request-Id", "req-42")
	s.Handler().ServeHTTP(w, req)
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("status %d", w.Code)
	}
	var b api.ErrorBody
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatalf("body %q is not JSON: %v", w.Body, err)
	}
	if b.Error.Code != "internal" || !strings.Contains(b.Error.Message, "req-42") {
		t.Errorf("error %+v, want code internal naming the request id", b.Error)
	}
	if strings.Contains(w.Body.String(), "hunter2") || strings.Contains(w.Body.String(), "goroutine") {
		t.Errorf("response leaks internals: %s", w.Body)
	}
	if l := logs.String(); !strings.Contains(l, "hunter2") || !strings.Contains(l, `"request_id":"req-42"`) || !strings.Contains(l, "server_test.go") {
		t.Errorf("the log lacks the panic, its request id or its stack: %s", l)
	}
}

func TestRequestID(t *testing.T) {
	s, logs := newServer(t, Options{Routes: []func(gin.IRouter){func(r gin.IRouter) {
		r.GET("/id", func(c *gin.Context) { c.String(http.StatusOK, c.GetString(api.RequestIDKey)) })
	}}})
	cases := []struct {
		name, sent string
		keep       bool
	}{
		{"caller's id kept", "abc-123_x.y", true},
		{"none sent", "", false},
		{"unsafe id replaced", "abc\" injected=1", false},
		{"too long replaced", strings.Repeat("a", 65), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/id", nil)
			if tc.sent != "" {
				req.Header.Set("X-Request-Id", tc.sent)
			}
			s.Handler().ServeHTTP(w, req)
			got := w.Header().Get("X-Request-Id")
			if got != w.Body.String() {
				t.Errorf("header %q, handler saw %q", got, w.Body)
			}
			if tc.keep && got != tc.sent {
				t.Errorf("got %q, want the caller's %q", got, tc.sent)
			}
			if !tc.keep && (got == tc.sent || len(got) != 16) {
				t.Errorf("got %q, want a fresh 16-hex id", got)
			}
			if !strings.Contains(logs.String(), `"request_id":"`+got+`"`) {
				t.Errorf("request %s not logged", got)
			}
		})
	}
}

func TestUnknownRoutesAndMethodsAreJSON(t *testing.T) {
	var hooked int
	s, _ := newServer(t, Options{WebhookPath: "/hooks/github", Webhook: func(c *gin.Context) { hooked++; c.Status(http.StatusAccepted) }})
	cases := []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodGet, "/nope", http.StatusNotFound, "not_found"},
		{http.MethodGet, "/hooks/github", http.StatusMethodNotAllowed, "method_not_allowed"},
		{http.MethodPost, "/hooks/github", http.StatusAccepted, ""},
	}
	for _, tc := range cases {
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, strings.NewReader("{}")))
		if w.Code != tc.status {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, w.Code, tc.status)
		}
		if tc.code != "" {
			var b api.ErrorBody
			if json.Unmarshal(w.Body.Bytes(), &b); b.Error.Code != tc.code {
				t.Errorf("%s %s: body %s, want code %s", tc.method, tc.path, w.Body, tc.code)
			}
		}
	}
	if hooked != 1 {
		t.Errorf("webhook handler ran %d times, want 1", hooked)
	}
}

func TestNewRejects(t *testing.T) {
	for _, o := range []Options{
		{},
		{Addr: ":0", Webhook: func(*gin.Context) {}, WebhookPath: "hooks"},
		{Addr: ":0", Webhook: func(*gin.Context) {}, WebhookPath: "/"},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// TestWebhookRequestLogLevels: a delivery answered 2xx is logged at debug
// level only; a refused one, and any other request, at its usual level.
func TestWebhookRequestLogLevels(t *testing.T) {
	for _, debug := range []bool{false, true} {
		logs := &syncBuffer{}
		opts := &slog.HandlerOptions{}
		if debug {
			opts.Level = slog.LevelDebug
		}
		s, _ := newServer(t, Options{
			Logger:      slog.New(slog.NewJSONHandler(logs, opts)),
			WebhookPath: "/hooks/github",
			Webhook: func(c *gin.Context) {
				if c.GetHeader("X-Hub-Signature-256") == "" {
					c.Status(http.StatusUnauthorized)
					return
				}
				c.Status(http.StatusAccepted)
			},
			Routes: []func(gin.IRouter){func(r gin.IRouter) { r.GET("/ok", func(c *gin.Context) { c.Status(http.StatusOK) }) }},
		})
		send := func(method, path, delivery string, signed bool) {
			req := httptest.NewRequest(method, path, strings.NewReader("{}"))
			req.Header.Set("X-GitHub-Delivery", delivery)
			if signed {
				req.Header.Set("X-Hub-Signature-256", "sha256=x")
			}
			s.Handler().ServeHTTP(httptest.NewRecorder(), req)
		}
		send(http.MethodPost, "/hooks/github", "accepted-1", true)
		send(http.MethodPost, "/hooks/github", "refused-1", false)
		send(http.MethodGet, "/ok", "other-1", false)
		l := logs.String()
		if got := strings.Contains(l, `"delivery":"accepted-1"`); got != debug {
			t.Errorf("debug %v: accepted delivery logged = %v:\n%s", debug, got, l)
		}
		if debug && !strings.Contains(l, `"level":"DEBUG","msg":"http request"`) {
			t.Errorf("accepted delivery not at debug level:\n%s", l)
		}
		if !strings.Contains(l, `"level":"WARN","msg":"http request"`) || !strings.Contains(l, `"delivery":"refused-1"`) {
			t.Errorf("refused delivery not logged as a warning:\n%s", l)
		}
		if !strings.Contains(l, `"delivery":"other-1"`) {
			t.Errorf("other request not logged:\n%s", l)
		}
	}
}

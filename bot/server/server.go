// Package server owns the HTTP server process of `agentos serve`: it
// assembles the gin engine (release mode, JSON recovery, request ids and
// request logging with slog) from route groups and an optional webhook
// handler, and runs it together with the background actors (the webhook
// queue processor, the API's run tracker) as one unit with an explicit
// shutdown order: stop accepting and drain requests first, then stop the
// actors and wait for them.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"runtime/debug"
	"sync"
	"time"

	"github.com/agentos/agentos/bot/api"
	"github.com/gin-gonic/gin"
)

// Options configure the server.
type Options struct {
	// Addr is the listen address, used when Listener is nil.
	Addr string
	// Listener, when set, is served instead of listening on Addr (tests
	// pass 127.0.0.1:0).
	Listener net.Listener
	// Routes mount route groups (e.g. api.API.Register).
	Routes []func(gin.IRouter)
	// WebhookPath and Webhook mount the webhook handler (POST), when
	// Webhook is not nil.
	WebhookPath string
	Webhook     gin.HandlerFunc
	// Actors run next to the HTTP server until it stops. An actor returns
	// when its context is cancelled; one that returns earlier with an
	// error stops the server.
	Actors []func(ctx context.Context) error
	// OnShutdown run when the HTTP server starts shutting down, to end
	// long-lived responses (event streams) that would never go idle.
	OnShutdown []func()
	// ShutdownTimeout bounds draining requests (default 20s); connections
	// still open then are closed.
	ShutdownTimeout time.Duration
	// ReadHeaderTimeout (default 10s), ReadTimeout (default 60s: webhook
	// bodies reach 25 MB), WriteTimeout (default 60s; event streams extend
	// their own deadline) and IdleTimeout (default 120s).
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// LoopbackOnly serves on a loopback address only (Run refuses another
	// listener) and, on every route, refuses a request whose Host header
	// does not name it (HostGuard): for a server without access control
	// (agentos view), which a web page could otherwise read by pointing
	// its own name at 127.0.0.1.
	LoopbackOnly bool
}

// Server is the HTTP server and its actors.
type Server struct {
	o      Options
	engine *gin.Engine
	log    *slog.Logger
}

// New assembles the server.
func New(o Options) (*Server, error) {
	if o.Webhook != nil && (len(o.WebhookPath) < 2 || o.WebhookPath[0] != '/') {
		return nil, fmt.Errorf("server: webhook path %q must start with / and name a route", o.WebhookPath)
	}
	if o.Listener == nil && o.Addr == "" {
		return nil, errors.New("server: an address or a listener is required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.ShutdownTimeout, 20*time.Second)
	def(&o.ReadHeaderTimeout, 10*time.Second)
	def(&o.ReadTimeout, 60*time.Second)
	def(&o.WriteTimeout, 60*time.Second)
	def(&o.IdleTimeout, 120*time.Second)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.ContextWithFallback = true // c.Done/c.Err follow the request's context
	s := &Server{o: o, engine: e, log: o.Logger}
	e.Use(s.requestLog, s.recovery)
	if o.LoopbackOnly {
		e.Use(HostGuard())
	}
	e.NoRoute(func(c *gin.Context) {
		api.Abort(c, http.StatusNotFound, "not_found", "no route "+c.Request.Method+" "+c.Request.URL.Path)
	})
	e.NoMethod(func(c *gin.Context) {
		api.Abort(c, http.StatusMethodNotAllowed, "method_not_allowed", "method "+c.Request.Method+" is not allowed on "+c.Request.URL.Path)
	})
	for _, r := range o.Routes {
		r(e)
	}
	if o.Webhook != nil {
		e.POST(o.WebhookPath, o.Webhook)
	}
	return s, nil
}

// Handler returns the HTTP handler (for httptest).
func (s *Server) Handler() http.Handler { return s.engine }

// Run serves until ctx ends or an actor fails, then shuts down in order:
// the HTTP server stops accepting and drains its requests (up to
// ShutdownTimeout, then closes what is left), then the actors are
// cancelled and waited for. It returns the first error: a listen or serve
// failure, or an actor's; nil after a shutdown asked for through ctx.
func (s *Server) Run(ctx context.Context) error {
	ln := s.o.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.o.Addr); err != nil {
			return fmt.Errorf("server: %w", err)
		}
	}
	if s.o.LoopbackOnly && !onLoopback(ln.Addr()) {
		ln.Close()
		return fmt.Errorf("server: %s is not a loopback address, and this server serves on loopback only", ln.Addr())
	}
	srv := &http.Server{
		Handler:           s.engine,
		ReadHeaderTimeout: s.o.ReadHeaderTimeout,
		ReadTimeout:       s.o.ReadTimeout,
		WriteTimeout:      s.o.WriteTimeout,
		IdleTimeout:       s.o.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	for _, f := range s.o.OnShutdown {
		srv.RegisterOnShutdown(f)
	}

	// Actors get a context of their own: they must outlive ctx until the
	// HTTP server has drained, since in-flight requests may still hand
	// them work.
	actx, stopActors := context.WithCancel(context.WithoutCancel(ctx))
	defer stopActors()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	failed := make(chan struct{})
	var failOnce sync.Once
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		failOnce.Do(func() { close(failed) })
	}
	for i, a := range s.o.Actors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := a(actx)
			if err != nil && actx.Err() == nil {
				fail(fmt.Errorf("server: actor %d: %w", i, err))
			} else if err != nil && !errors.Is(err, context.Canceled) {
				s.log.Warn("server: actor stopped with an error", "actor", i, "error", err)
			}
		}()
	}

	serveDone := make(chan struct{})
	go func() {
		defer close(serveDone)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fail(fmt.Errorf("server: %w", err))
		}
	}()
	s.log.Info("server: listening", "addr", ln.Addr().String())

	select {
	case <-ctx.Done():
		s.log.Info("server: shutting down")
	case <-failed:
		s.log.Error("server: stopping after a failure", "error", firstErr)
	}

	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.ShutdownTimeout)
	err := srv.Shutdown(sctx)
	cancel()
	if err != nil {
		s.log.Warn("server: requests still running after the shutdown timeout; closing them", "error", err)
		srv.Close()
	}
	<-serveDone
	stopActors()
	wg.Wait()
	s.log.Info("server: stopped")
	mu.Lock()
	defer mu.Unlock()
	return firstErr
}

// requestIDPattern accepts a caller's request id only if it is short and
// plain, so that it can be logged and echoed safely.
var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// requestLog gives each request an id (the caller's X-Request-Id when it
// is plain, else a new one), echoes it, and logs the request when it ends.
// A webhook delivery answered 2xx is logged at debug level only: GitHub
// may send thousands a second, the delivery metrics count them, and a log
// line each would cost the intake about as much as its own work; failed
// deliveries are logged as warnings or errors like any request.
func (s *Server) requestLog(c *gin.Context) {
	start := time.Now()
	id := c.GetHeader("X-Request-Id")
	if !requestIDPattern.MatchString(id) {
		id = newRequestID()
	}
	c.Set(api.RequestIDKey, id)
	c.Header("X-Request-Id", id)
	c.Next()
	level := slog.LevelInfo
	switch st := c.Writer.Status(); {
	case st >= 500:
		level = slog.LevelError
	case st >= 400:
		level = slog.LevelWarn
	case s.o.Webhook != nil && c.FullPath() == s.o.WebhookPath:
		level = slog.LevelDebug
	}
	if !s.log.Enabled(c.Request.Context(), level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("request_id", id),
		slog.String("method", c.Request.Method),
		slog.String("path", c.Request.URL.Path),
		slog.Int("status", c.Writer.Status()),
		slog.Int("bytes", max(c.Writer.Size(), 0)),
		slog.Duration("duration", time.Since(start)),
		slog.String("remote", c.ClientIP()),
	}
	if d := c.GetHeader("X-GitHub-Delivery"); d != "" && len(d) <= 64 {
		attrs = append(attrs, slog.String("delivery", d))
	}
	s.log.LogAttrs(c.Request.Context(), level, "http request", attrs...)
}

// recovery turns a handler's panic into a JSON 500 that names the request
// id and nothing else; the panic and its stack go to the log.
func (s *Server) recovery(c *gin.Context) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if p == http.ErrAbortHandler {
			panic(p) // net/http's way to abort a response; not a bug
		}
		id := c.GetString(api.RequestIDKey)
		s.log.Error("server: handler panicked", "request_id", id, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		if c.Writer.Written() {
			c.Abort() // too late for a clean error; the client sees a cut response
			return
		}
		api.Abort(c, http.StatusInternalServerError, "internal", "internal error (request "+id+")")
	}()
	c.Next()
}

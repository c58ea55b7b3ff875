// Package api owns the server's HTTP API on gin: starting
// runs (POST /v1/runs), a session's snapshot (GET /v1/runs/:id) and event
// stream as Server-Sent Events with Last-Event-ID resume
// (GET /v1/runs/:id/events), answering approvals (POST /v1/approvals/:id),
// and the operational endpoints /healthz, /readyz and /metrics with the
// Prometheus metrics they expose.
//
// Runs execute in background goroutines the API tracks: bounded in number,
// one at a time per session, and cancelled (after a grace period) when the
// API's Run actor stops. The API starts runs only through the small Runs
// interface, which cmd implements with the runtime's wiring.
//
// Every error is JSON: {"error": {"code": "...", "message": "..."}}.
package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentos/agentos/bot/access"
	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/store"
	"github.com/gin-gonic/gin"
	"github.com/oklog/ulid/v2"
)

// StartRequest is the body of POST /v1/runs. RepoDir starts a new session
// (or a new run of SessionID) in that working tree; SessionID alone starts
// a new run of an existing session in the tree it ran in before.
type StartRequest struct {
	SessionID  string `json:"session_id,omitempty"`
	RepoDir    string `json:"repo_dir,omitempty"`
	Prompt     string `json:"prompt"`
	SessionKey string `json:"session_key,omitempty"`
}

// Runs starts and resumes runs; cmd implements it over the runtime. A
// Prepare error means nothing was started and is reported to the client.
type Runs interface {
	// Prepare checks req and builds what the run needs, without running it.
	Prepare(ctx context.Context, req StartRequest) (Run, error)
	// PrepareResume builds what resuming the session's paused run needs.
	PrepareResume(ctx context.Context, sessionID string) (Run, error)
	// Resolve records an answer to a pending approval; errors wrap
	// run.ErrUnknownApproval or run.ErrResolved where they apply.
	Resolve(ctx context.Context, sessionID, approvalID, decision, by, reason string) error
}

// Run is one prepared run.
type Run interface {
	// Execute drives the run until it completes, fails or pauses.
	Execute(ctx context.Context) (agentrun.Outcome, error)
	// Close releases what Prepare opened; it is called exactly once,
	// whether or not Execute ran.
	Close() error
}

// Pinger is a store that can say whether it is reachable (readyz).
type Pinger interface {
	Ping(ctx context.Context) error
}

// Options configure the API.
type Options struct {
	// Store is the event store sessions are read from. Required.
	Store store.Store
	// Runs starts runs; nil disables the write endpoints (503).
	Runs Runs
	// Token is the bearer token of the write endpoints; "" disables them
	// (403).
	Token string
	// Access authorizes every read (snapshots, event streams, the session
	// list): the operator's bearer token, or a maintainer's viewer session
	// with read permission on the session's repository. Nil: a checker
	// that admits the bearer Token only. A refused read is answered as an
	// unknown session (404).
	Access *access.Checker
	// Metrics default to NewMetrics().
	Metrics *Metrics
	// Ready reports whether the server can serve (readyz). Default: Ping
	// when the store is a Pinger.
	Ready func(ctx context.Context) error
	// Sandbox describes how commands are confined (a sandbox.Report);
	// /readyz shows it. A server whose commands are refused is still
	// ready: it takes webhooks and runs agents, only their commands fail.
	Sandbox any
	// KeepAlive is the interval of SSE keep-alive comments (default 15s).
	KeepAlive time.Duration
	// Poll re-reads a followed session this often even without a
	// notification, so events appended by another process (agentos
	// approve, another replica) reach the stream (default 2s; <0 never).
	Poll time.Duration
	// MaxRuns bounds the runs executing at once (default 2).
	MaxRuns int
	// MaxQueued bounds the runs waiting for a slot (default 64); more get
	// 429.
	MaxQueued int
	// Grace is how long stopping waits for runs to finish before
	// cancelling them (default 10s).
	Grace time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
	// Deliveries lists webhook deliveries for GET /v1/deliveries (behind
	// the API token); nil answers 404 there.
	Deliveries queue.Lister
}

// API is the HTTP API.
type API struct {
	o       Options
	tokenH  [sha256.Size]byte
	metrics *Metrics
	log     *slog.Logger
	runs    *tracker
	watch   store.Store // Store, with polling when Poll > 0
	sums    summaries

	streamsCtx  context.Context
	endStreams  context.CancelFunc
	streamsWG   sync.WaitGroup
	streamsOpen sync.Mutex // guards streamsWG.Add against Wait
	openStreams atomic.Int64
}

// New returns the API.
func New(o Options) (*API, error) {
	if o.Store == nil {
		return nil, errors.New("api: a store is required")
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.Poll == 0 {
		o.Poll = 2 * time.Second
	}
	if o.MaxRuns <= 0 {
		o.MaxRuns = 2
	}
	if o.MaxQueued <= 0 {
		o.MaxQueued = 64
	}
	if o.Grace <= 0 {
		o.Grace = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Ready == nil {
		if p, ok := o.Store.(Pinger); ok {
			o.Ready = p.Ping
		} else {
			o.Ready = func(context.Context) error { return nil }
		}
	}
	if o.Access == nil {
		ck, err := access.New(access.Options{Token: o.Token})
		if err != nil {
			return nil, err
		}
		o.Access = ck
	}
	a := &API{o: o, metrics: o.Metrics, log: o.Logger, watch: o.Store}
	if o.Token != "" {
		a.tokenH = sha256.Sum256([]byte(o.Token))
	}
	if o.Poll > 0 {
		a.watch = pollingStore{Store: o.Store, every: o.Poll}
	}
	a.runs = newTracker(o.MaxRuns, o.MaxQueued, o.Metrics, o.Logger)
	a.streamsCtx, a.endStreams = context.WithCancel(context.Background())
	return a, nil
}

// Metrics returns the API's metrics.
func (a *API) Metrics() *Metrics { return a.metrics }

// Register mounts the routes on r.
func (a *API) Register(r gin.IRouter) {
	r.GET("/healthz", a.healthz)
	r.GET("/readyz", a.readyz)
	r.GET("/metrics", gin.WrapH(a.metrics.Handler()))
	r.POST("/v1/runs", a.auth, a.startRun)
	r.GET("/v1/runs", a.list)
	r.GET("/v1/runs/:id", a.snapshot)
	r.GET("/v1/runs/:id/events", a.events)
	r.POST("/v1/approvals/:id", a.auth, a.answerApproval)
	r.GET("/v1/deliveries", a.auth, a.listDeliveries)

	r.POST("/v1/runs/:id/cancel", a.auth, a.cancelRun)
}

// EndStreams ends every open event stream; call it when the HTTP server
// starts shutting down (http.Server.RegisterOnShutdown), since a stream
// never goes idle on its own.
func (a *API) EndStreams() { a.endStreams() }

// Run is the API's actor: it waits until ctx ends, then refuses new runs,
// lets the runs in flight finish for the grace period, cancels the rest
// and waits for them; it also ends the event streams.
func (a *API) Run(ctx context.Context) error {
	<-ctx.Done()
	a.endStreams()
	a.runs.stop(a.o.Grace)
	a.streamsOpen.Lock()
	a.streamsWG.Wait()
	a.streamsOpen.Unlock()
	return nil
}

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is a machine-readable code and a message for people.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Abort ends the request with a JSON error.
func Abort(c *gin.Context, status int, code, message string) {
	c.AbortWithStatusJSON(status, ErrorBody{Error: ErrorDetail{Code: code, Message: message}})
}

func (a *API) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// readyz answers whether the server can serve. Anyone may ask (a load
// balancer's probe carries no credentials), so without the API token the
// answer is the status alone, one word; the reason a store is unreachable
// and the sandbox report (paths, mechanism, warnings) are the operator's,
// shown with Authorization: Bearer <API token>.
func (a *API) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	defer cancel()
	err := a.o.Ready(ctx)
	c.Header("Cache-Control", "no-store")
	if !a.operatorToken(c.Request) {
		if err != nil {
			c.String(http.StatusServiceUnavailable, "unavailable")
			return
		}
		c.String(http.StatusOK, "ready")
		return
	}
	if err != nil {
		Abort(c, http.StatusServiceUnavailable, "not_ready", "the event store is not reachable: "+err.Error())
		return
	}
	body := gin.H{"status": "ready"}
	if a.o.Sandbox != nil {
		body["sandbox"] = a.o.Sandbox
	}
	c.JSON(http.StatusOK, body)
}

// operatorToken reports whether r carries Authorization: Bearer with the
// API token, compared in constant time (of the digests, so the length
// does not leak either). No token configured admits no one.
func (a *API) operatorToken(r *http.Request) bool {
	if a.o.Token == "" {
		return false
	}
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(got[:], a.tokenH[:]) == 1
}

// auth admits a request to a write endpoint: Authorization: Bearer TOKEN,
// compared in constant time (of the digests, so the length does not leak
// either).
func (a *API) auth(c *gin.Context) {
	if a.o.Token == "" {
		Abort(c, http.StatusForbidden, "api_disabled", "the write API is disabled: the server has no API token (set AGENTOS_API_TOKEN)")
		return
	}
	h := c.GetHeader("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		c.Header("WWW-Authenticate", `Bearer realm="agentos"`)
		Abort(c, http.StatusUnauthorized, "unauthenticated", "send Authorization: Bearer <token>")
		return
	}
	if !a.operatorToken(c.Request) {
		c.Header("WWW-Authenticate", `Bearer realm="agentos", error="invalid_token"`)
		Abort(c, http.StatusUnauthorized, "invalid_token", "the bearer token is not valid")
		return
	}
	c.Next()
}

// maxBody bounds request bodies of the write endpoints.
const maxBody = 1 << 20

// decode reads a JSON body strictly: one object, no unknown fields.
func decode(c *gin.Context, v any) error {
	body := http.MaxBytesReader(c.Writer, c.Request.Body, maxBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("the body is empty; send a JSON object")
		}
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("the body has data after the JSON object")
	}
	return nil
}

// sessionIDPattern keeps session ids safe as path components and URLs.
var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidSessionID reports whether id may name a session.
func ValidSessionID(id string) bool {
	return sessionIDPattern.MatchString(id) && !strings.Contains(id, "..")
}

func newSessionID() string { return "api-" + strings.ToLower(ulid.Make().String()) }

// startResponse is the 202 body of POST /v1/runs.
type startResponse struct {
	SessionID   string `json:"session_id"`
	Status      string `json:"status"`
	SnapshotURL string `json:"snapshot_url"`
	EventsURL   string `json:"events_url"`
}

func (a *API) startRun(c *gin.Context) {
	if a.o.Runs == nil {
		Abort(c, http.StatusServiceUnavailable, "runs_unavailable", "this server does not start runs")
		return
	}
	var req StartRequest
	if err := decode(c, &req); err != nil {
		Abort(c, http.StatusBadRequest, "bad_request", "body: "+err.Error())
		return
	}
	req.Prompt = strings.TrimSpace(req.Prompt)
	switch {
	case req.Prompt == "":
		Abort(c, http.StatusBadRequest, "bad_request", "prompt is required")
		return
	case req.SessionID == "" && req.RepoDir == "":
		Abort(c, http.StatusBadRequest, "bad_request", "repo_dir is required to start a new session (or give the session_id of an existing one)")
		return
	case req.SessionID != "" && !ValidSessionID(req.SessionID):
		Abort(c, http.StatusBadRequest, "bad_request", "session_id must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit")
		return
	}
	ctx := c.Request.Context()
	if req.SessionID == "" {
		req.SessionID = newSessionID()
	} else if req.RepoDir == "" {
		evs, err := a.o.Store.Read(ctx, req.SessionID, 1)
		if err != nil {
			a.internal(c, "read session", err)
			return
		}
		if len(evs) == 0 {
			Abort(c, http.StatusNotFound, "unknown_session", fmt.Sprintf("no session %s: give repo_dir to start a new one", req.SessionID))
			return
		}
	}
	if err := a.runs.reserve(req.SessionID); err != nil {
		a.reserveFailed(c, req.SessionID, err)
		return
	}
	run, err := a.o.Runs.Prepare(ctx, req)
	if err != nil {
		a.runs.release(req.SessionID)
		Abort(c, http.StatusUnprocessableEntity, "cannot_start", err.Error())
		return
	}
	if err := a.runs.launch(req.SessionID, run, nil); err != nil {
		a.reserveFailed(c, req.SessionID, err)
		return
	}
	base := "/v1/runs/" + req.SessionID
	c.Header("Location", base)
	c.JSON(http.StatusAccepted, startResponse{SessionID: req.SessionID, Status: StateQueued, SnapshotURL: base, EventsURL: base + "/events"})
}

func (a *API) reserveFailed(c *gin.Context, sessionID string, err error) {
	switch {
	case errors.Is(err, errSessionBusy):
		Abort(c, http.StatusConflict, "run_active", fmt.Sprintf("session %s has a run queued or executing; wait for it to stop", sessionID))
	case errors.Is(err, errQueueFull):
		c.Header("Retry-After", "30")
		Abort(c, http.StatusTooManyRequests, "queue_full", "too many runs are waiting; retry later")
	default:
		Abort(c, http.StatusServiceUnavailable, "shutting_down", "the server is shutting down")
	}
}

func (a *API) internal(c *gin.Context, op string, err error) {
	a.log.ErrorContext(c.Request.Context(), "api: "+op, "error", err, "request_id", c.GetString(RequestIDKey))
	Abort(c, http.StatusInternalServerError, "internal", op+" failed; see the server log")
}

// RequestIDKey is the gin context key of the request id, set by the
// server's middleware.
const RequestIDKey = "request_id"

func (a *API) snapshot(c *gin.Context) {
	sid := c.Param("id")
	p, ok := a.identify(c)
	if !ok {
		return
	}
	if !ValidSessionID(sid) {
		Abort(c, http.StatusNotFound, "unknown_session", "no session "+sid)
		return
	}
	evs, err := a.o.Store.Read(c.Request.Context(), sid, 1)
	if err != nil {
		a.internal(c, "read session", err)
		return
	}
	if !a.mayRead(c, p, evs) {
		Abort(c, http.StatusNotFound, "unknown_session", "no session "+sid)
		return
	}
	if len(evs) == 0 {
		if a.runs.active(sid) {
			// Accepted, waiting for a slot: no event yet.
			snap, _ := replay.Replay(nil)
			snap.SessionID, snap.RunStatus = sid, StateQueued
			c.JSON(http.StatusOK, snap)
			return
		}
		Abort(c, http.StatusNotFound, "unknown_session", "no session "+sid)
		return
	}
	snap, err := replay.Replay(evs)
	if err != nil {
		a.internal(c, "replay session", err)
		return
	}
	c.JSON(http.StatusOK, snap)
}

// approvalRequest is the body of POST /v1/approvals/:id.
type approvalRequest struct {
	SessionID string `json:"session_id"`
	Decision  string `json:"decision"`
	By        string `json:"by"`
	Reason    string `json:"reason,omitempty"`
}

type approvalResponse struct {
	SessionID  string `json:"session_id"`
	ApprovalID string `json:"approval_id"`
	Decision   string `json:"decision"`
	Status     string `json:"status"`
}

func (a *API) answerApproval(c *gin.Context) {
	if a.o.Runs == nil {
		Abort(c, http.StatusServiceUnavailable, "runs_unavailable", "this server does not resume runs")
		return
	}
	id := c.Param("id")
	var req approvalRequest
	if err := decode(c, &req); err != nil {
		Abort(c, http.StatusBadRequest, "bad_request", "body: "+err.Error())
		return
	}
	req.By = strings.TrimSpace(req.By)
	switch {
	case !ValidSessionID(req.SessionID):
		Abort(c, http.StatusBadRequest, "bad_request", "session_id is required (the session the approval belongs to)")
		return
	case req.Decision != "approve" && req.Decision != "deny":
		Abort(c, http.StatusBadRequest, "bad_request", fmt.Sprintf("decision must be approve or deny, not %q", req.Decision))
		return
	case req.By == "":
		Abort(c, http.StatusBadRequest, "bad_request", "by is required (who answers)")
		return
	}
	ctx := c.Request.Context()
	evs, err := a.o.Store.Read(ctx, req.SessionID, 1)
	if err != nil {
		a.internal(c, "read session", err)
		return
	}
	if len(evs) == 0 {
		Abort(c, http.StatusNotFound, "unknown_session", "no session "+req.SessionID)
		return
	}
	snap, err := replay.Replay(evs)
	if err != nil {
		a.internal(c, "replay session", err)
		return
	}
	// The run must be paused, not executing: an answer recorded while a run
	// executes could be missed by it. A run whose log already ends paused
	// is only returning (a client may answer as soon as it sees
	// run.paused): wait for it.
	reserve := a.runs.reserve
	if snap.RunStatus == replay.RunPaused {
		reserve = func(sid string) error {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			return a.runs.reserveAfter(wctx, sid)
		}
	}
	if err := reserve(req.SessionID); err != nil {
		a.reserveFailed(c, req.SessionID, err)
		return
	}
	asked := requestedAt(snap, evs, id)
	if err := a.o.Runs.Resolve(ctx, req.SessionID, id, req.Decision, req.By, req.Reason); err != nil {
		a.runs.release(req.SessionID)
		switch {
		case errors.Is(err, agentrun.ErrUnknownApproval):
			Abort(c, http.StatusNotFound, "unknown_approval", fmt.Sprintf("session %s has no approval %s", req.SessionID, id))
		case errors.Is(err, agentrun.ErrResolved):
			Abort(c, http.StatusConflict, "already_resolved", err.Error())
		case errors.Is(err, webhook.ErrBusy):
			Abort(c, http.StatusConflict, "session_busy", "another replica is working this session; answer again shortly")
		default:
			a.internal(c, "resolve approval", err)
		}
		return
	}
	if !asked.IsZero() {
		a.metrics.ApprovalAnswered(a.o.Now().Sub(asked))
	}
	sid := req.SessionID
	if err := a.runs.launch(sid, nil, func(ctx context.Context) (Run, error) { return a.o.Runs.PrepareResume(ctx, sid) }); err != nil {
		// The answer is recorded; `agentos resume` continues the run.
		Abort(c, http.StatusServiceUnavailable, "shutting_down", "the answer is recorded, but the server is shutting down and did not resume the run; resume it with agentos resume "+sid)
		return
	}
	c.JSON(http.StatusAccepted, approvalResponse{SessionID: sid, ApprovalID: id, Decision: req.Decision, Status: "resuming"})
}

// requestedAt is when approval id was requested, or zero.
func requestedAt(snap replay.Snapshot, evs []event.Event, id string) time.Time {
	for _, p := range snap.PendingApprovals {
		if p.ID == id && p.RequestedSeq >= 1 && p.RequestedSeq <= int64(len(evs)) {
			t, err := time.Parse(event.TimeFormat, evs[p.RequestedSeq-1].TS)
			if err == nil {
				return t
			}
		}
	}
	return time.Time{}
}

package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/agentos/agentos/bot/access"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/runtime/event"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
	"github.com/gin-gonic/gin"
)

const testToken = "test-token-0123456789abcdef"

func newSealer(t testing.TB) *event.Sealer {
	t.Helper()
	s, err := event.NewSealer(schemas.MustDefault(), redact.New(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// appendDrafts appends to the session after its current tip.
func appendDrafts(ctx context.Context, s store.Store, sid string, ds ...event.Draft) error {
	evs, err := s.Read(ctx, sid, 1)
	if err != nil {
		return err
	}
	_, err = s.Append(ctx, sid, int64(len(evs)), ds...)
	return err
}

func mustAppend(t testing.TB, s store.Store, sid string, ds ...event.Draft) {
	t.Helper()
	if err := appendDrafts(context.Background(), s, sid, ds...); err != nil {
		t.Fatal(err)
	}
}

var testDigest = strings.Repeat("ab", 32)

func startDrafts(run, prompt string) []event.Draft {
	return []event.Draft{
		{RunID: run, Type: event.SessionStart, Actor: "user", Payload: map[string]any{"prompt": prompt}},
		{RunID: run, Type: event.RunStarted, Actor: "runtime", Payload: map[string]any{"run_id": run, "prompt": prompt}},
	}
}

func deltaDraft(run string, i int) event.Draft {
	return event.Draft{RunID: run, Type: event.OutputDelta, Actor: "worker", Payload: map[string]any{"text": fmt.Sprintf("chunk %d", i)}}
}

func pauseDrafts(run, approvalID string) []event.Draft {
	return []event.Draft{
		{RunID: run, Type: event.ApprovalRequested, Actor: "kernel", Payload: map[string]any{"approval_id": approvalID, "tool": "repo.patch", "digest": testDigest, "preview": map[string]any{"diff": "+x"}}},
		{RunID: run, Type: event.RunPaused, Actor: "runtime", Payload: map[string]any{"reason": "approval", "approval_ids": []string{approvalID}}},
	}
}

func endDrafts(run string) []event.Draft {
	return []event.Draft{
		{RunID: run, Type: event.RunCompleted, Actor: "runtime", Payload: map[string]any{"output": "done"}},
		{RunID: run, Type: event.TurnTerminal, Actor: "runtime", Payload: agentrun.Report{Status: agentrun.StatusCompleted, NextAction: "review the change", TraceID: run, CorrelationID: run, SchemaVersion: "v1"}},
		{RunID: run, Type: event.SessionClose, Actor: "runtime", Payload: map[string]any{"ok": true}},
	}
}

// fakeRuns writes the events a real run would, so that the API is tested
// against a real store and the real Manager.Resolve.
type fakeRuns struct {
	store store.Store
	mgr   *agentrun.Manager

	mu         sync.Mutex
	pause      bool          // new runs pause for approval "ap-1"
	hold       chan struct{} // when set, Execute waits for it (or ctx) before ending
	afterPause chan struct{} // when set, Execute waits for it after run.paused
	afterEnd   chan struct{} // when set, Execute waits for it after session.close
	prepareErr error
	prepared   []StartRequest
	executed   []string // session ids, in order of execution
	closed     int
	cancelled  int // Executes that ended by cancellation
	started    chan string
}

func newFakeRuns(s store.Store) *fakeRuns {
	return &fakeRuns{store: s, mgr: agentrun.NewManager(s), started: make(chan string, 16)}
}

type fakeRun struct {
	f      *fakeRuns
	sid    string
	prompt string
	resume bool
	closed bool
}

func (f *fakeRuns) Prepare(ctx context.Context, req StartRequest) (Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.prepareErr != nil {
		return nil, f.prepareErr
	}
	f.prepared = append(f.prepared, req)
	return &fakeRun{f: f, sid: req.SessionID, prompt: req.Prompt}, nil
}

func (f *fakeRuns) PrepareResume(ctx context.Context, sid string) (Run, error) {
	return &fakeRun{f: f, sid: sid, resume: true}, nil
}

func (f *fakeRuns) Resolve(ctx context.Context, sid, approvalID, decision, by, reason string) error {
	return f.mgr.Resolve(ctx, sid, approvalID, decision, by, reason)
}

// Cancel is the RunManager's cancel path (api.Canceller).
func (f *fakeRuns) Cancel(ctx context.Context, sid, by, reason string) (agentrun.Outcome, error) {
	return f.mgr.Cancel(ctx, sid, by, reason)
}

func (r *fakeRun) Execute(ctx context.Context) (agentrun.Outcome, error) {
	f := r.f
	f.mu.Lock()
	f.executed = append(f.executed, r.sid)
	pause, hold, afterPause, afterEnd := f.pause, f.hold, f.afterPause, f.afterEnd
	f.mu.Unlock()
	run := "run-" + r.sid
	if r.resume {
		if err := appendDrafts(ctx, f.store, r.sid, event.Draft{RunID: run, Type: event.RunResumed, Actor: "runtime", Payload: map[string]any{"reason": "approval answered"}}); err != nil {
			return agentrun.Outcome{}, err
		}
	} else if err := appendDrafts(ctx, f.store, r.sid, append(startDrafts(run, r.prompt), deltaDraft(run, 1))...); err != nil {
		return agentrun.Outcome{}, err
	}
	f.started <- r.sid // the run's first events are in the log
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			f.mu.Lock()
			f.cancelled++
			f.mu.Unlock()
			return agentrun.Outcome{}, ctx.Err()
		}
	}
	if pause && !r.resume {
		if err := appendDrafts(ctx, f.store, r.sid, pauseDrafts(run, "ap-1")...); err != nil {
			return agentrun.Outcome{}, err
		}
		if afterPause != nil {
			<-afterPause // still returning (exporting the log, closing)
		}
		return agentrun.Outcome{SessionID: r.sid, RunID: run, Status: "paused"}, nil
	}
	if err := appendDrafts(ctx, f.store, r.sid, endDrafts(run)...); err != nil {
		return agentrun.Outcome{}, err
	}
	if afterEnd != nil {
		<-afterEnd
	}
	return agentrun.Outcome{SessionID: r.sid, RunID: run, Status: "completed"}, nil
}

func (r *fakeRun) Close() error {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	if r.closed {
		panic("run closed twice")
	}
	r.closed = true
	r.f.closed++
	return nil
}

func (f *fakeRuns) counts() (executed, closed, cancelled int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.executed), f.closed, f.cancelled
}

type testEnv struct {
	api      *API
	srv      *httptest.Server
	store    store.Store
	runs     *fakeRuns
	stop     func() // stops the API's actor and waits for it
	readAuth string // the Authorization header of reads
}

// newTestEnv serves an API over a memory store (unless o.Store is set) with
// a fakeRuns (unless o.Runs is set to something else), and its actor.
func newTestEnv(t testing.TB, o Options) *testEnv {
	t.Helper()
	if o.Store == nil {
		o.Store = store.NewMemory(newSealer(t))
	}
	var runs *fakeRuns
	if o.Runs == nil {
		runs = newFakeRuns(o.Store)
		o.Runs = runs
	}
	if o.Logger == nil {
		o.Logger = quietLogger()
	}
	// Every read needs credentials: the tests read as the operator.
	readToken := o.Token
	if readToken == "" {
		readToken = "operator-read-token"
	}
	if o.Access == nil {
		ck, err := access.New(access.Options{Token: readToken})
		if err != nil {
			t.Fatal(err)
		}
		o.Access = ck
	}
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	a.Register(e)
	srv := httptest.NewServer(e)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Run(ctx)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	t.Cleanup(stop)
	t.Cleanup(srv.Close)
	t.Cleanup(a.EndStreams)
	return &testEnv{api: a, srv: srv, store: o.Store, runs: runs, stop: stop, readAuth: "Bearer " + readToken}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) errorCode() string {
	var b ErrorBody
	_ = json.Unmarshal(r.body, &b)
	return b.Error.Code
}

func (e *testEnv) do(t *testing.T, method, path, token, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token == "" && method == http.MethodGet {
		token = e.readAuth
	}
	if token != "" && token != "-" {
		req.Header.Set("Authorization", token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// frame is one SSE message or comment.
type frame struct {
	id      int64
	typ     string
	data    string
	comment string
}

// stream is an open SSE response.
type stream struct {
	resp   *http.Response
	frames chan frame
	cancel context.CancelFunc
}

// openStream GETs the events of sid; lastID > 0 sends Last-Event-ID, and
// query is appended to the URL.
func (e *testEnv) openStream(t testing.TB, sid string, lastID int64, query string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/v1/runs/"+sid+"/events"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	req.Header.Set("Authorization", e.readAuth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &stream{resp: resp, frames: make(chan frame, 64), cancel: cancel}
	t.Cleanup(s.close)
	if resp.StatusCode == http.StatusOK {
		go readFrames(resp.Body, s.frames)
	} else {
		close(s.frames)
	}
	return s
}

func (s *stream) close() {
	s.cancel()
	s.resp.Body.Close()
}

// next returns the next event frame (skipping comments and the retry
// field), or ok=false at the end of the stream.
func (s *stream) next(t testing.TB) (frame, bool) {
	t.Helper()
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				return frame{}, false
			}
			if f.comment != "" || f.typ == "" {
				continue
			}
			return f, true
		case <-time.After(10 * time.Second):
			t.Fatal("no SSE frame within 10s")
		}
	}
}

// readFrames parses an SSE body into frames until EOF.
func readFrames(r io.Reader, out chan<- frame) {
	defer close(out)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var f frame
	empty := true
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if !empty {
				out <- f
			}
			f, empty = frame{}, true
		case strings.HasPrefix(line, ":"):
			f.comment, empty = strings.TrimSpace(line[1:]), false
		case strings.HasPrefix(line, "id: "):
			f.id, _ = strconv.ParseInt(line[4:], 10, 64)
			empty = false
		case strings.HasPrefix(line, "event: "):
			f.typ, empty = line[7:], false
		case strings.HasPrefix(line, "data: "):
			f.data, empty = line[6:], false
		case strings.HasPrefix(line, "retry: "):
			empty = false
		default:
			f.comment, empty = "malformed: "+line, false
		}
	}
}

// waitFor polls cond until it holds or 10s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// scrape returns the /metrics exposition.
func (e *testEnv) scrape(t *testing.T) string {
	t.Helper()
	r := e.do(t, http.MethodGet, "/metrics", "", "")
	if r.status != http.StatusOK {
		t.Fatalf("/metrics: %d %s", r.status, r.body)
	}
	return string(r.body)
}

func hasLine(exposition, line string) bool {
	for _, l := range strings.Split(exposition, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

func jsonBody(v any) string {
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(v)
	return b.String()
}

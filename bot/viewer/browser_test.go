package viewer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/access"
	"github.com/agentos/agentos/bot/api"
	"github.com/agentos/agentos/bot/auth"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/chromedp/chromedp"
	"github.com/gin-gonic/gin"
)

// chromium finds Debian's chromium. Without it the browser tests skip
// loudly on a developer machine and fail under CI=true.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (apt-get install -y chromium): the browser tests cannot run under CI")
	}
	t.Skip("SKIPPING the browser tests: chromium is not installed (apt-get install -y chromium)")
	return ""
}

// completingAnswerer plays the resumed run when an approval is answered:
// the answer, the patch, the tests, the terminal report.
type completingAnswerer struct {
	t     *testing.T
	store store.Store
	mu    sync.Mutex
	got   []Answer
}

func (c *completingAnswerer) Answer(_ context.Context, a Answer) error {
	c.mu.Lock()
	c.got = append(c.got, a)
	c.mu.Unlock()
	run := "run-" + a.SessionID
	appendTo(c.t, c.store, a.SessionID,
		event.Draft{RunID: run, Type: event.ApprovalResolved, Actor: "maintainer", Payload: map[string]any{"approval_id": a.ApprovalID, "by": a.By, "decision": a.Decision, "digest": digest, "reason": a.Reason}},
		event.Draft{RunID: run, Type: event.RunResumed, Actor: "runtime", Payload: map[string]any{"reason": "approval answered"}},
		event.Draft{RunID: run, Type: event.ToolInvoke, Actor: "worker", Payload: map[string]any{"args": map[string]any{}, "call_id": "t2", "caller": "worker", "tool": "test.run"}},
		event.Draft{RunID: run, Type: event.ToolResult, Actor: "kernel", Payload: map[string]any{"call_id": "t2", "ok": true, "tool": "test.run", "result": map[string]any{"passed": true, "exit_code": 0}}},
		event.Draft{RunID: run, Type: event.RunCompleted, Actor: "runtime", Payload: map[string]any{"output": "fixed"}},
		event.Draft{RunID: run, Type: event.TurnTerminal, Actor: "runtime", Payload: map[string]any{"status": "completed", "next_action": "review the pull request", "trace_id": "t", "correlation_id": "c", "schema_version": "v1"}},
		event.Draft{RunID: run, Type: event.SessionClose, Actor: "runtime", Payload: map[string]any{"ok": true}},
	)
	return nil
}

// restartable serves a handler on a fixed address and can be killed and
// started again there.
type restartable struct {
	addr string
	h    http.Handler
	srv  *http.Server
}

func (r *restartable) start(t *testing.T) {
	t.Helper()
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the port may linger for a moment
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.srv = &http.Server{Handler: r.h}
	go r.srv.Serve(ln)
}

// kill drops the server and every open connection, as a crash would.
func (r *restartable) kill() { r.srv.Close() }

func TestBrowserLiveSession(t *testing.T) {
	exe := chromium(t)
	f := fakegithub.New(t)
	f.AddRepo(fakegithub.Repo{Owner: "octo", Name: "app", Private: true})
	f.AddToken("bot-token", botLogin)
	f.SetPermission("octo/app", botLogin, fakegithub.PermWrite)
	f.SetPermission("octo/app", "wes", fakegithub.PermWrite)
	ghURL := f.Serve(t)
	gh, err := github.New(github.Config{BaseURL: ghURL, Token: "bot-token"})
	if err != nil {
		t.Fatal(err)
	}
	ck, err := access.New(access.Options{Token: opToken, Authorizer: auth.New(gh, auth.Policy{BotLogin: botLogin})})
	if err != nil {
		t.Fatal(err)
	}
	st := store.NewMemory(newSealer(t))
	sid, run := "live-1", "run-live-1"
	appendTo(t, st, sid,
		event.Draft{RunID: run, Type: event.SessionStart, Actor: "user", Payload: map[string]any{"prompt": "fix the token check"}},
		event.Draft{RunID: run, Type: event.RunStarted, Actor: "runtime", Payload: map[string]any{"run_id": run, "prompt": "fix the token check", "trigger": map[string]any{"repo": "octo/app", "number": 7}, "budget": map[string]any{"max_tokens": 2000}}},
	)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := api.New(api.Options{Store: st, Token: opToken, Access: ck, Logger: quiet, KeepAlive: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ans := &completingAnswerer{t: t, store: st}
	srv := &restartable{addr: "127.0.0.1:0"}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	a.Register(e)
	srv.h = e
	srv.start(t)
	base := "http://" + srv.addr
	f.AddOAuthClient(fakegithub.OAuthClient{ClientID: "Iv1.viewer", ClientSecret: "shh", CallbackURL: base + "/login/callback"})
	v, err := New(Options{Store: st, Access: ck, Lister: a, Answerer: ans, Logger: quiet,
		OAuth: &OAuth{ClientID: "Iv1.viewer", ClientSecret: "shh", WebURL: ghURL, APIURL: ghURL, CallbackURL: base + "/login/callback"}})
	if err != nil {
		t.Fatal(err)
	}
	v.Register(e)
	t.Cleanup(func() { srv.kill(); a.EndStreams() })

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	defer cancelT()

	count := func(sel string) int {
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main")))
				t.Fatalf("waited 20s for %s; the page:\n%.3000s", what, html)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	rowsUnique := func() (rows int, dup bool) {
		seqs, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#events-body tr")).map(r => r.dataset.seq)`))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, s := range seqs {
			dup = dup || seen[s]
			seen[s] = true
		}
		return len(seqs), dup
	}

	// Sign in with GitHub: the browser goes through the fake's
	// authorization page and comes back to the session.
	f.SignInBrowser("wes")
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/login?next=/runs/"+sid), chromedp.WaitVisible(chromedp.CSS("#events-body"))); err != nil {
		t.Fatal(err)
	}
	liveStatus := func() string {
		s, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#live-status")))
		return s
	}
	waitFor("the live stream", func() bool { return liveStatus() == "live" })
	if n := count("svg.timeline rect.bar"); n != 0 {
		t.Fatalf("%d bars before any call", n)
	}
	// The scripted run progresses: bars appear as the calls happen.
	appendTo(t, st, sid,
		event.Draft{RunID: run, Type: event.LLMRequest, Actor: "worker", Payload: map[string]any{"attempt": 1, "role": "worker", "request": map[string]any{"model": "m", "schema_version": "v1", "messages": []any{}}}},
	)
	waitFor("the first (running) bar", func() bool { return count("svg.timeline rect.bar") == 1 })
	appendTo(t, st, sid,
		event.Draft{RunID: run, Type: event.LLMResponse, Actor: "worker", Payload: map[string]any{"role": "worker", "response": map[string]any{"model": "m", "finish_reason": "tool_use", "schema_version": "v1", "text": "", "tool_calls": []any{}, "usage": map[string]any{"input_tokens": 900, "output_tokens": 30}}}},
		event.Draft{RunID: run, Type: event.ToolInvoke, Actor: "worker", Payload: map[string]any{"args": map[string]any{}, "call_id": "t1", "caller": "worker", "tool": "test.run"}},
		event.Draft{RunID: run, Type: event.ToolResult, Actor: "kernel", Payload: map[string]any{"call_id": "t1", "ok": true, "tool": "test.run", "result": map[string]any{"passed": false, "exit_code": 1}}},
	)
	waitFor("the model and tool bars", func() bool { return count("svg.timeline rect.bar") == 2 && count("svg.timeline rect.bar-running") == 0 })
	// The cost chart, refreshed live, draws the run's budget (930 of
	// 2,000 tokens) and says it.
	waitFor("the budget line", func() bool { return count("svg.cost line.budget-line") == 1 })
	if txt, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("p.budget"))); err != nil || !strings.Contains(txt, "930 tokens of a 2000 tokens budget (46%)") {
		t.Errorf("the budget text says %q (%v)", txt, err)
	}
	// Rows added live say what happened, like the server's.
	if txt, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS("#ev-5 summary"))); err != nil || txt != "test.run t1" {
		t.Errorf("the live row of tool.invoke says %q (%v)", txt, err)
	}

	// The server dies mid-stream; events are appended meanwhile; the page
	// reconnects (Last-Event-ID) without duplicating a row.
	srv.kill()
	waitFor("the page to notice", func() bool { return liveStatus() != "live" })
	appendTo(t, st, sid,
		event.Draft{RunID: run, Type: event.ApprovalRequested, Actor: "kernel", Payload: map[string]any{"approval_id": "ap-1", "tool": "repo.patch", "digest": digest, "preview": map[string]any{"diff": "--- a/auth.go\n+++ b/auth.go\n@@ -1 +1 @@\n-return strings.HasPrefix(expected, given)\n+return subtle.ConstantTimeCompare([]byte(given), []byte(expected)) == 1\n"}}},
		event.Draft{RunID: run, Type: event.RunPaused, Actor: "runtime", Payload: map[string]any{"reason": "approval", "approval_ids": []string{"ap-1"}}},
	)
	srv.start(t)
	waitFor("the rows after the restart", func() bool { n, _ := rowsUnique(); return n == 8 })
	if n, dup := rowsUnique(); dup || n != 8 {
		t.Fatalf("after reconnecting: %d rows, duplicates %v", n, dup)
	}
	waitFor("the Approve button", func() bool { return count(`button[value="approve"]`) == 1 })
	shot(t, ctx, "viewer-run-paused.png")

	// Approve from the page: the answer goes through the Answerer and the
	// run completes on the page.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`button[value="approve"]`))); err != nil {
		t.Fatal(err)
	}
	waitFor("the terminal report", func() bool { return count(".report-completed") == 1 })
	ans.mu.Lock()
	got := ans.got
	ans.mu.Unlock()
	if len(got) != 1 || got[0].By != "wes" || got[0].Reason != "via viewer" {
		t.Fatalf("answers = %+v", got)
	}
	if n, dup := rowsUnique(); dup || n != 15 {
		t.Errorf("after completion: %d rows, duplicates %v; want 15 unique", n, dup)
	}
	shot(t, ctx, "viewer-run-completed.png")
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/runs"), chromedp.WaitVisible(chromedp.CSS("table.runs"))); err != nil {
		t.Fatal(err)
	}
	shot(t, ctx, "viewer-runs.png")
}

// shot saves a screenshot into $AGENTOS_SCREENSHOTS (docs/ when
// refreshing the pictures in docs/viewer, which docs/server.md shows);
// nothing otherwise.
func shot(t *testing.T, ctx context.Context, name string) {
	dir := os.Getenv("AGENTOS_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Error(err)
	}
}

// TestBrowserLargeSession loads the page of a 5,000-event session in
// Chromium and reports the navigation timings (time to first byte,
// DOMContentLoaded, load) and the page's JS heap: the figures of the
// run viewer's row of docs/measurements.md. It asserts that every event is on the page, never
// a timing.
func TestBrowserLargeSession(t *testing.T) {
	exe := chromium(t)
	st := store.NewMemory(newSealer(t))
	longSession(t, st, "long", 5000)
	ck, _ := access.New(access.Options{Open: true})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, _ := api.New(api.Options{Store: st, Access: ck, Logger: quiet})
	v, err := New(Options{Store: st, Access: ck, Lister: a, ReadOnly: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	a.Register(e)
	v.Register(e)
	srv := &restartable{addr: "127.0.0.1:0", h: e}
	srv.start(t)
	defer srv.kill()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Flag("enable-precise-memory-info", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	defer cancelT()
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+srv.addr+"/runs/long"), chromedp.WaitVisible(chromedp.CSS("#events-body"))); err != nil {
		t.Fatal(err)
	}
	evs, _ := st.Read(context.Background(), "long", 1)
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#events-body tr").length`))
	if err != nil || rows != DefaultMaxRows {
		t.Fatalf("%d rows (%v), want the latest %d", rows, err, DefaultMaxRows)
	}
	timing, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]float64](`(() => { const n = performance.getEntriesByType("navigation")[0]; return {ttfb: n.responseStart - n.requestStart, response: n.responseEnd - n.requestStart, dcl: n.domContentLoadedEventEnd - n.startTime, load: n.loadEventEnd - n.startTime, bytes: n.transferSize, heap: performance.memory ? performance.memory.usedJSHeapSize : 0}; })()`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d-event page (%d rows) in Chromium: first byte %.0f ms, last byte %.0f ms, DOMContentLoaded %.0f ms, load %.0f ms, %.1f MB transferred, JS heap %.1f MB",
		len(evs), rows, timing["ttfb"], timing["response"], timing["dcl"], timing["load"], timing["bytes"]/1e6, timing["heap"]/1e6)
}

// TestBrowserSoak keeps a live page open while a run appends events for
// AGENTOS_VIEWER_SOAK (e.g. 10m; skipped when unset: it is a measurement,
// not a CI test) and reports the page's JS heap and DOM size at the start
// and the end. Run it with -timeout 15m (go test stops at 10m).
func TestBrowserSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("AGENTOS_VIEWER_SOAK"))
	if err != nil || d <= 0 {
		t.Skip("set AGENTOS_VIEWER_SOAK=10m to measure the page's memory under live updates")
	}
	exe := chromium(t)
	st := store.NewMemory(newSealer(t))
	longSession(t, st, "soak", 100)
	ck, _ := access.New(access.Options{Open: true}) // loopback only, as agentos view
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, _ := api.New(api.Options{Store: st, Access: ck, Logger: quiet, KeepAlive: 5 * time.Second})
	v, err := New(Options{Store: st, Access: ck, Lister: a, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	a.Register(e)
	v.Register(e)
	srv := &restartable{addr: "127.0.0.1:0", h: e}
	srv.start(t)
	defer func() { a.EndStreams(); srv.kill() }()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Flag("enable-precise-memory-info", true), chromedp.Flag("js-flags", "--expose-gc"))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	ctx, cancelT := context.WithTimeout(ctx, d+2*time.Minute)
	defer cancelT()
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+srv.addr+"/runs/soak"), chromedp.WaitVisible(chromedp.CSS("#events-body"))); err != nil {
		t.Fatal(err)
	}
	measure := func() (heap, nodes float64) {
		m, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]float64](`(() => { if (window.gc) { gc(); } return {heap: performance.memory.usedJSHeapSize, nodes: document.getElementsByTagName("*").length}; })()`))
		if err != nil {
			t.Fatal(err)
		}
		return m["heap"], m["nodes"]
	}
	time.Sleep(2 * time.Second)
	h0, n0 := measure()
	run := "run-soak"
	end := time.Now().Add(d)
	appended := 0
	for k := 0; time.Now().Before(end); k++ {
		appendTo(t, st, "soak",
			event.Draft{RunID: run, Type: event.ToolInvoke, Actor: "worker", Payload: map[string]any{"args": map[string]any{"path": "a.go"}, "call_id": fmt.Sprintf("s%d", k), "caller": "worker", "tool": "repo.read"}},
			event.Draft{RunID: run, Type: event.ToolResult, Actor: "kernel", Payload: map[string]any{"call_id": fmt.Sprintf("s%d", k), "ok": true, "tool": "repo.read", "result": map[string]any{"content": "package a\n"}}},
		)
		appended += 2
		time.Sleep(time.Second)
	}
	time.Sleep(3 * time.Second)
	h1, n1 := measure()
	rows, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#events-body tr").length`))
	t.Logf("%s of live updates (%d events appended, a tool call and its result a second): JS heap %.1f → %.1f MB, DOM nodes %.0f → %.0f, %d rows", d, appended, h0/1e6, h1/1e6, n0, n1, rows)
}

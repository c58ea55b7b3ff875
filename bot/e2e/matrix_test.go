//go:build chaos

package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/run"
)

const matrixBotTok = "ghp_matrixBotToken00000000000000000000"

// A stop point is where in the /agent fix flow the replica working the
// session gets the signal.
type stopPoint string

const (
	atModelCall stopPoint = "model call"
	atToolCall  stopPoint = "tool call"
	atPause     stopPoint = "pause"
	atApproval  stopPoint = "approval arrival"
	atPublish   stopPoint = "publishing"
)

var stopPoints = []stopPoint{atModelCall, atToolCall, atPause, atApproval, atPublish}

// matrixResult is one case's figures.
type matrixResult struct {
	point  stopPoint
	sig    string
	held   string        // what the replica was doing when signalled
	exit   time.Duration // signal to the process gone
	over   time.Duration // signal to another replica holding the session
	taken  bool          // another replica took the session over
	reason string        // why nobody had to (taken false)
	total  time.Duration // the case's whole flow
}

// TestStopMatrix is the stop matrix (docs/reliability.md, "Stop matrix"):
// three `agentos serve --store postgres://…` replicas (child processes on
// one fresh database per case) behind a load-balancer stand-in, the strict
// fake GitHub and the fake model, driven through the whole /agent fix flow. For each point — a
// model call in flight, a test.run in flight, the pause (the approval
// review being posted), the approval's arrival (its delivery being
// handled) and publishing (the session branch's push after the run
// completed) — and each of SIGTERM and SIGKILL, the replica working the
// session is held at the point (a gate in front of the fake model or
// GitHub holds the request; a tool call is seen in the log), signalled,
// and restarted under the same name once another replica took the session
// over. The flow must then end as an unstopped one does: one PR, one
// tracking comment saying completed, one approval review per approval
// request, one completed terminal report, a committed log that verifies
// strictly and has no TIMEOUT, PROVIDER_ERROR or NON_DETERMINISM, and
// every delivery done, none failed.
//
// Each case logs the time from the signal to another replica holding the
// session's lease (default settings: SIGTERM hands it over at once,
// SIGKILL waits for the 60 s delivery claim to expire). Built with -tags
// chaos; -short skips it; -run 'TestStopMatrix/<point>/<signal>' runs one.
func TestStopMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("stops and restarts agentos serve replicas")
	}
	testenv.LookPath(t, "git")
	bin := agentosBinary(t)
	var (
		mu      sync.Mutex
		results []matrixResult
	)
	for _, p := range stopPoints {
		t.Run(strings.ReplaceAll(string(p), " ", "-"), func(t *testing.T) {
			for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
				t.Run(sigName(sig), func(t *testing.T) {
					r := stopCase(t, bin, p, sig)
					mu.Lock()
					results = append(results, r)
					mu.Unlock()
				})
			}
		})
	}
	var b strings.Builder
	b.WriteString("\n| point | signal | held at | signal → process gone | signal → session taken over | whole flow |\n|---|---|---|---|---|---|\n")
	for _, r := range results {
		over := r.over.Round(time.Millisecond).String()
		if !r.taken {
			over = "none needed: " + r.reason
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %v | %s | %v |\n", r.point, r.sig, r.held, r.exit.Round(time.Millisecond), over, r.total.Round(100*time.Millisecond))
	}
	t.Logf("stop matrix (3 replicas on PostgreSQL, default lease/claim/drain settings):%s", b.String())
}

func sigName(s syscall.Signal) string {
	if s == syscall.SIGKILL {
		return "SIGKILL"
	}
	return "SIGTERM"
}

// botAuth reports whether r is authenticated as the bot (token mode: its
// token, in the Authorization header as a token or inside git's basic
// credentials).
func botAuth(r *http.Request) bool {
	a := r.Header.Get("Authorization")
	if strings.Contains(a, matrixBotTok) {
		return true
	}
	if enc, ok := strings.CutPrefix(a, "Basic "); ok {
		raw, err := base64.StdEncoding.DecodeString(enc)
		return err == nil && strings.Contains(string(raw), matrixBotTok)
	}
	return false
}

// stopCase runs one flow with one signal at point p.
func stopCase(t *testing.T, bin string, p stopPoint, sig syscall.Signal) matrixResult {
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	res := matrixResult{point: p, sig: sigName(sig)}
	f := startMatrixFlow(ctx, t, bin, false)
	rs, pool, events, fail := f.rs, f.pool, f.events, f.fail
	if p == atApproval {
		// The approval must arrive at a bot that finished publishing the
		// pause, so the first call the gate holds is the approval's
		// handling, not the pause's tail.
		f.holdApproval = func() bool { return !f.idle() }
	}
	f.startMaintainer()

	// Arm the point before the flow starts: a held request is the precise
	// moment.
	var hit <-chan struct{}
	var g *gate
	switch p {
	case atModelCall:
		// The second chat completion: the run is going (the first is
		// the lead's), a model call is in flight.
		g, hit = f.modelGate, armModelCall(f.modelGate)
	case atPause:
		// The bot posting its approval request (a review on the draft PR).
		g = f.ghGate
		hit = g.arm(func(r *http.Request) bool {
			return botAuth(r) && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/reviews")
		})
	case atApproval:
		// The bot's first call to GitHub once the approving review was
		// posted: the replica that claimed its delivery is handling it.
		g = f.ghGate
		hit = g.arm(func(r *http.Request) bool { return f.approving.Load() && botAuth(r) })
	case atPublish:
		// The session branch's push after the approved run completed.
		g = f.ghGate
		hit = g.arm(func(r *http.Request) bool {
			if !f.approving.Load() || !botAuth(r) || r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
				return false
			}
			_, evs := events()
			return slices.ContainsFunc(evs, func(e event.Event) bool { return e.Type == event.TurnTerminal })
		})
	case atToolCall:
		hit = f.testRunInFlight()
	}
	defer func() {
		if g != nil {
			g.let()
		}
	}()

	f.ask()
	select {
	case <-hit:
	case <-ctx.Done():
		fail("the flow never reached the point %q", p)
	}
	res.held = string(p)
	if g != nil {
		g.mu.Lock()
		res.held = g.held
		g.mu.Unlock()
	}
	wid, err := worker(ctx, pool)
	if err != nil || wid == "" {
		fail("at %q no replica holds the session or a delivery (%v)", p, err)
	}
	wi := rs.index(wid)
	if wi < 0 {
		fail("unknown replica %q", wid)
	}
	proc := rs.proc(wi)
	sid, _ := events()
	t.Logf("%s at %s (%s): %s works session %s", sigName(sig), p, res.held, wid, sid)

	// The signal. The balancer keeps the replica's address, as a load
	// balancer does until its health check notices: deliveries sent there
	// meanwhile are refused (the listener closes on SIGTERM; a killed
	// process has none) and the balancer tries the next replica. The
	// next delivery goes to the stopped replica first.
	rs.lb.aim(wi)
	sent := time.Now()
	if err := proc.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	if sig == syscall.SIGKILL {
		<-proc.done
		res.exit = time.Since(sent)
		if g != nil {
			g.let() // the held request reaches its server; its client is gone
		}
	} else {
		if g != nil {
			g.let() // the call in flight finishes within the drain time
		}
		select {
		case err := <-proc.done:
			res.exit = time.Since(sent)
			if err != nil {
				fail("%s exited with %v after SIGTERM", wid, err)
			}
		case <-time.After(40 * time.Second):
			fail("%s did not exit within 40 s of SIGTERM", wid)
		}
	}
	rs.ended(wi, sigName(sig))

	// The takeover: another replica holds the session's lease. Nothing to
	// take over when the stopped replica finished its part (no open
	// delivery, no lease), the session waiting for the maintainer.
	for {
		var owner string
		var open int
		_ = pool.QueryRow(ctx, `SELECT coalesce((SELECT owner FROM agentos_leases WHERE session_id = $1 AND expires_at > now()), '')`, sid).Scan(&owner)
		if owner != "" && owner != wid {
			res.over, res.taken = time.Since(sent), true
			t.Logf("%s took session %s over %v after the %s", owner, sid, res.over, sigName(sig))
			break
		}
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM agentos_deliveries WHERE state <> 'done'`).Scan(&open); err == nil && open == 0 && owner == "" {
			res.reason = "the stopped replica had finished its part"
			t.Logf("no takeover needed: no open delivery and no lease after the %s", sigName(sig))
			break
		}
		if ctx.Err() != nil {
			fail("session %s was never taken over after the %s", sid, sigName(sig))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The stopped replica comes back under its name.
	rs.start(ctx, t, wi)

	f.waitCompleted("the " + sigName(sig) + " at " + string(p))
	res.total = time.Since(f.began)
	checkStopRecord(t, p, sig, f.check(sid))
	f.keepIfFailed()
	t.Logf("%s at %s: exit %v, taken over %v (%v), flow %v", sigName(sig), p, res.exit, res.over, res.taken, res.total)
	return res
}

// armModelCall arms g (in front of the fake model) to hold the second
// chat completion: the run is going (the first is the lead's), a model
// call is in flight.
func armModelCall(g *gate) <-chan struct{} {
	var n atomic.Int64
	return g.arm(func(r *http.Request) bool {
		return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions") && n.Add(1) == 2
	})
}

// testRunInFlight is closed once a test.run is in flight: its tool.invoke
// is the log's last event.
func (f *matrixFlow) testRunInFlight() <-chan struct{} {
	c := make(chan struct{})
	go func() {
		for f.ctx.Err() == nil {
			_, evs := f.events()
			if n := len(evs); n > 0 && evs[n-1].Type == event.ToolInvoke && event.FieldString(evs[n-1].Payload, "tool") == "test.run" {
				close(c)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return c
}

// keepMatrixLogs keeps a case's evidence as keepChaosLogs does.
func keepMatrixLogs(t *testing.T, logs string, fake *fakegithub.Fake) {
	t.Helper()
	keepChaosLogs(t, logs, fake)
}

// checkTrackingComment: the tracking comment tells what happened — the run
// completed, the tests ran last passed — and nothing a stop could leave
// behind: no "could not start", no failure, no cut call reported as a
// timeout or a provider error.
func checkTrackingComment(t *testing.T, body string) {
	t.Helper()
	for _, want := range []string{"### agentos · ✅ Completed", "#### Result\n\n**completed**"} {
		if !strings.Contains(body, want) {
			t.Errorf("the tracking comment lacks %q:\n%s", want, body)
		}
	}
	for _, bad := range []string{"could not start", "### agentos · ❌", "TIMEOUT", "PROVIDER_ERROR", "NON_DETERMINISM", "report_missing"} {
		if strings.Contains(body, bad) {
			t.Errorf("the tracking comment says %q:\n%s", bad, body)
		}
	}
	// The last test command reported is the passing one (a run
	// interrupted and run again may show the interrupted row before it).
	var last string
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "| `go test") {
			last = line
		}
	}
	if !strings.Contains(last, "✅ passed") {
		t.Errorf("the tracking comment's last test command is %q, want it passed:\n%s", last, body)
	}
	if strings.Contains(body, "⚠️ interrupted") {
		t.Logf("the tracking comment shows an interrupted command before its re-run")
	}
}

// logSummary is what a stop left in a session's log.
type logSummary struct {
	interrupted int      // run.interrupted events (a SIGTERM's stop)
	closed      []string // calls a takeover closed INTERRUPTED: "tool" or "tool (rerun)"
	testRuns    []string // test.run results in order: "ran" (whatever its exit code) or the error code
	requests    int      // llm.request events
	responses   int      // llm.response events
}

func (s logSummary) String() string {
	return fmt.Sprintf("%d run.interrupted, closed INTERRUPTED %v, test.run results %v, %d model requests / %d responses", s.interrupted, s.closed, s.testRuns, s.requests, s.responses)
}

func summarize(evs []event.Event) logSummary {
	var s logSummary
	for _, e := range evs {
		switch e.Type {
		case event.RunInterrupted:
			s.interrupted++
		case event.LLMRequest:
			s.requests++
		case event.LLMResponse:
			s.responses++
		case event.ToolResult:
			tool := event.FieldString(e.Payload, "tool")
			errObj := event.Field(e.Payload, "error")
			code := event.FieldString(errObj, "code")
			if code == run.CodeInterrupted {
				c := tool
				if event.FieldBool(event.Field(errObj, "details"), "rerun") {
					c += " (rerun)"
				}
				s.closed = append(s.closed, c)
			}
			if tool == "test.run" {
				switch {
				case code != "":
					s.testRuns = append(s.testRuns, code)
				case event.FieldBool(e.Payload, "ok"):
					s.testRuns = append(s.testRuns, "ran")
				default:
					s.testRuns = append(s.testRuns, "failed")
				}
			}
		}
	}
	return s
}

// checkStopRecord: the log says what the stop did, as docs/graceful-stop.md
// has it. After SIGTERM a run in progress (a model call, a test.run, the
// resumed run) records run.interrupted once, its call let finish (no
// call closed INTERRUPTED); a paused or finished run records none. After
// SIGKILL nothing is recorded by the killed process: a test.run left open
// is closed INTERRUPTED with rerun and run again; nothing else is left
// open at the other points. Every model request has its response.
func checkStopRecord(t *testing.T, p stopPoint, sig syscall.Signal, s logSummary) {
	t.Helper()
	running := p == atModelCall || p == atToolCall || p == atApproval
	wantInterrupted := 0
	if sig == syscall.SIGTERM && running {
		wantInterrupted = 1
	}
	if s.interrupted != wantInterrupted {
		t.Errorf("%d run.interrupted after %s at %s, want %d", s.interrupted, sigName(sig), p, wantInterrupted)
	}
	var wantClosed []string
	if sig == syscall.SIGKILL && p == atToolCall {
		wantClosed = []string{"test.run (rerun)"}
	}
	if !slices.Equal(s.closed, wantClosed) {
		t.Errorf("calls closed INTERRUPTED %v after %s at %s, want %v", s.closed, sigName(sig), p, wantClosed)
	}
	// Every test.run the takeover closed was run again: the last result
	// is a run, and the INTERRUPTED ones are each followed by a run.
	for i, r := range s.testRuns {
		if r != "ran" && (i == len(s.testRuns)-1 || s.testRuns[i+1] != "ran") {
			t.Errorf("test.run results %v: %s not followed by a re-run", s.testRuns, r)
		}
	}
	if s.requests != s.responses {
		t.Errorf("%d model requests, %d responses", s.requests, s.responses)
	}
}

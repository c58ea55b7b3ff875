package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/bot/tracking"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/bot/worker"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/postgres"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
	"github.com/agentos/agentos/schemas"
	"github.com/gin-gonic/gin"
	gh "github.com/google/go-github/v62/github"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The database-outage matrix (docs/reliability.md, "A database outage"):
// the whole server path on PostgreSQL — the fake GitHub posts its
// webhooks to the bot's intake, which queues them (PGQueue behind the
// local spool), the processor dispatches them, the runs write their logs
// to the PostgreSQL store, and the session leases are in the same
// database — while the database is made unreachable (every connection
// cut, new ones refused, through a TCP proxy) for 10 s or 30 s, during a
// run (a tool call: the first test.run, whose result is written into the
// outage; a model call after the approval, whose response is) or during
// intake (the maintainer's request, or the approval, arrives while the
// database is down). The store retries an append for outageRetryFor, so a
// 10 s outage is ridden out by the run, and a 30 s one outlasts it: the
// run is handed back (run.ErrStoreUnavailable), its delivery waits
// (webhook.ErrBusy) and is taken over from the log once the database
// answers. For each: one pull request, one tracking comment, one terminal
// report (completed), logs that verify strictly (the store's and the one
// committed to the session branch), no delivery lost, failed or
// dead-lettered, and nothing false on GitHub.

// outageRetryFor is the store's retry bound in these tests
// (postgres.Options.RetryFor; DefaultRetryFor is 30 s): between the two
// outages, so that one is ridden out and the other is not, without
// making the test wait 30 s more.
const outageRetryFor = 15 * time.Second

// outageSwitch cuts the database when the run appends the event the case
// names (match), and brings it back after the case's duration.
type outageSwitch struct {
	t     *testing.T
	proxy *pgtest.Proxy
	d     time.Duration
	match func(d event.Draft, resumed bool) bool

	mu      sync.Mutex
	resumed bool // a run.resumed was appended (the approval's run)
	fired   bool
	back    chan struct{} // closed when the database is reachable again
	downAt  time.Time
	upErr   error
	cutWhat string
}

// cut makes the database unreachable for s.d, now.
func (s *outageSwitch) cut(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fired {
		return
	}
	s.fired, s.downAt, s.cutWhat = true, time.Now(), what
	s.proxy.Down()
	s.t.Logf("database down (%s) for %s", what, s.d)
	time.AfterFunc(s.d, func() {
		err := s.proxy.Up()
		s.mu.Lock()
		s.upErr = err
		s.mu.Unlock()
		close(s.back)
	})
}

func (s *outageSwitch) wasCut() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fired
}

// outageStore is the run's store: the append that matches cuts the
// database first, so that append is the first write to meet the outage.
type outageStore struct {
	store.Store
	sw *outageSwitch
}

func (o outageStore) Append(ctx context.Context, sid string, expected int64, drafts ...event.Draft) ([]event.Event, error) {
	if len(drafts) > 0 && o.sw.match != nil {
		o.sw.mu.Lock()
		hit := !o.sw.fired && o.sw.match(drafts[0], o.sw.resumed)
		if drafts[0].Type == event.RunResumed {
			o.sw.resumed = true
		}
		o.sw.mu.Unlock()
		if hit {
			o.sw.cut(drafts[0].Type)
		}
	}
	return o.Store.Append(ctx, sid, expected, drafts...)
}

// draftTool is the tool a tool.invoke or tool.result draft names.
func draftTool(d event.Draft) string {
	b, err := json.Marshal(d.Payload)
	if err != nil {
		return ""
	}
	var p struct{ Tool string }
	_ = json.Unmarshal(b, &p)
	return p.Tool
}

type outageWorld struct {
	*liveWorld
	sw      *outageSwitch
	pgq     *queue.PGQueue
	spool   *queue.Spool
	results func() []dispatch.Result
}

// newOutageWorld wires one replica as `agentos serve --store postgres://…`
// does, with every database connection through the proxy.
func newOutageWorld(t *testing.T, d time.Duration, match func(event.Draft, bool) bool) *outageWorld {
	t.Helper()
	ctx := context.Background()
	direct := pgtest.Schema(t, pgtest.URL(t))
	proxy, viaProxy := pgtest.Proxied(t, direct)
	pool, err := pgxpool.New(ctx, viaProxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	sw := &outageSwitch{t: t, proxy: proxy, d: d, match: match, back: make(chan struct{})}
	w := newLiveWorld(t, "app", "")
	w.openStore = func(s *event.Sealer) store.Store {
		st, err := postgres.Open(ctx, pool, s, postgres.Options{RetryFor: outageRetryFor})
		if err != nil {
			t.Fatal(err)
		}
		// As serve wires it: a run's appends renew its delivery's claim.
		return queue.BeatOnAppend(outageStore{Store: st, sw: sw})
	}
	w.startBot()
	leases, err := postgres.OpenLeases(ctx, pool, postgres.LeaseOptions{Owner: "replica-a", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(leases.Close)
	w.opts.Leases = leases
	w.opts.Result = func(r dispatch.Result) { w.mu.Lock(); w.results = append(w.results, r); w.mu.Unlock() }
	w.login()

	// The queue's default claim settings (ClaimTTL, StallTimeout): a
	// handed-back delivery's retry is recorded by the processor once the
	// database answers (it keeps trying), so the delivery is claimable
	// again within seconds, not when its claim would expire.
	pgq, err := queue.OpenPGQueue(ctx, pool, queue.PGQueueOptions{Owner: "replica-a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pgq.Close() })
	spool, err := queue.OpenSpool(filepath.Join(t.TempDir(), "webhooks.spool"), pgq, queue.SpoolOptions{Retry: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { spool.Close() })
	secret := []byte("webhook-secret")
	h := webhook.NewHandler(webhook.Config{Events: dispatch.Events(), Secrets: [][]byte{secret}}, spool, nil)
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.POST("/webhook", h.Serve)
	intake := httptest.NewServer(r)
	t.Cleanup(intake.Close)
	w.fake.DeliverTo(intake.URL+"/webhook", secret)

	pctx, stop := context.WithCancel(ctx)
	p := &worker.Processor{Events: dispatch.Events(), Queue: spool, Dispatch: w.d, BotLogin: w.botLogin, Workers: 2, PollInterval: 50 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	ow := &outageWorld{liveWorld: w, sw: sw, pgq: pgq, spool: spool}
	ow.results = func() []dispatch.Result {
		w.mu.Lock()
		defer w.mu.Unlock()
		return append([]dispatch.Result(nil), w.results...)
	}
	return ow
}

func (w *outageWorld) waitFor(what string, limit time.Duration, ok func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			w.t.Fatalf("timed out waiting for %s; results %+v; delivery errors %v\nlog:\n%s", what, w.results(), w.fake.DeliveryErrors(), w.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// flow plays the maintainer's `/agent` request and Approve review, with
// the database cut at the points the case says, up to the completed run.
func (w *outageWorld) flow(cutAtRequest, cutAtApproval bool) dispatch.Result {
	w.t.Helper()
	ctx := context.Background()
	issue := w.fake.AddIssue(repoName, fakegithub.Issue{Title: "token check", Body: "auth.go is broken", User: "alice"})
	if cutAtRequest {
		w.sw.cut("the request arrives")
	}
	if _, err := w.alice.CreateComment(ctx, github.Repo{Owner: "octo", Name: "app"}, issue, "/agent "+demo.Prompt); err != nil {
		w.t.Fatal(err)
	}
	if cutAtRequest {
		w.intakeSpooled()
	}
	var first dispatch.Result
	w.waitFor("the run to pause for approval", 150*time.Second, func() bool {
		for _, r := range w.results() {
			if r.Status == "paused" && r.PR != 0 {
				first = r
				return true
			}
		}
		return false
	})
	pr, _ := w.fake.PR(repoName, first.PR)
	if cutAtApproval {
		w.sw.cut("the approval arrives")
	}
	if _, _, err := w.alice.GitHub().PullRequests.CreateReview(ctx, "octo", "app", first.PR, &gh.PullRequestReviewRequest{CommitID: gh.String(pr.HeadSHA), Event: gh.String("APPROVE"), Body: gh.String("ok")}); err != nil {
		w.t.Fatal(err)
	}
	if cutAtApproval {
		w.intakeSpooled()
	}
	var last dispatch.Result
	w.waitFor("the run to complete", 150*time.Second, func() bool {
		for _, r := range w.results() {
			if r.Status == "completed" && r.SessionID == first.SessionID {
				last = r
				return true
			}
		}
		return false
	})
	last.PR, last.SessionID = first.PR, first.SessionID
	w.settled()
	return last
}

// intakeSpooled: the delivery that arrived while the database was down
// was taken (202, nothing refused) and waits in the spool.
func (w *outageWorld) intakeSpooled() {
	w.t.Helper()
	w.waitFor("the delivery to be spooled", 10*time.Second, func() bool { return w.spool.Spooled() > 0 })
	if errs := w.fake.DeliveryErrors(); len(errs) != 0 {
		w.t.Fatalf("the intake refused deliveries while the database was down: %v", errs)
	}
}

// settled waits until every delivery GitHub sent is done in the queue,
// and checks that none failed: nothing was lost or given up on.
func (w *outageWorld) settled() {
	w.t.Helper()
	ctx := context.Background()
	var pending []string
	w.waitFor("every delivery to be done", 120*time.Second, func() bool {
		pending = pending[:0]
		if w.spool.Spooled() > 0 {
			pending = append(pending, "(spooled)")
		}
		for _, d := range w.fake.DeliveriesSince(0) {
			rec, ok, err := w.pgq.Get(ctx, d.ID)
			if err != nil || !ok || rec.State != "done" {
				pending = append(pending, fmt.Sprintf("%s %s %s %v", d.ID, d.Event, rec.State, err))
			}
		}
		return len(pending) == 0
	})
	for _, d := range w.fake.DeliveriesSince(0) {
		rec, _, _ := w.pgq.Get(ctx, d.ID)
		if rec.Outcome != queue.OutcomeProcessed && rec.Outcome != queue.OutcomeIgnored {
			w.t.Errorf("delivery %s (%s) ended %q: %s", d.ID, d.Event, rec.Outcome, rec.Error)
		}
		if rec.Failures != 0 {
			// Waiting for the store is not failing: a handed-back run's
			// delivery counts no failure, so it is never given up on.
			w.t.Errorf("delivery %s (%s) counts %d failed dispatches: %s", d.ID, d.Event, rec.Failures, rec.Error)
		}
	}
	if errs := w.fake.DeliveryErrors(); len(errs) != 0 {
		w.t.Errorf("deliveries the intake refused: %v", errs)
	}
}

// checkOutcome checks what the case left on GitHub and in the logs.
func (w *outageWorld) checkOutcome(res dispatch.Result) []event.Event {
	t := w.t
	t.Helper()
	ctx := context.Background()
	if prs := w.fake.PRs(repoName); len(prs) != 1 {
		t.Errorf("%d pull requests, want 1", len(prs))
	}
	pr, _ := w.fake.PR(repoName, res.PR)
	if pr.Draft {
		t.Error("the pull request is still a draft")
	}
	if !strings.Contains(pr.Body, "completed") || strings.Contains(pr.Body, "❌ Failed") {
		t.Errorf("the pull request does not show the completed run:\n%s", pr.Body)
	}
	// The request's issue: one comment by the bot, the tracking comment,
	// showing the completed run and nothing that did not happen.
	var issue int
	for n := 1; n < res.PR; n++ {
		if is, ok := w.fake.Issue(repoName, n); ok && is.Title == "token check" {
			issue = n
		}
	}
	var mine []fakegithub.Comment
	for _, c := range w.fake.Comments(repoName, issue) {
		if strings.EqualFold(c.User, w.botLogin) {
			mine = append(mine, c)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("%d comments by the bot on the issue, want the one tracking comment: %+v", len(mine), mine)
	}
	body := mine[0].Body
	if sid, ok := tracking.FindSessionID(body); !ok || sid != res.SessionID {
		t.Errorf("the bot's comment is not the session's tracking comment:\n%s", body)
	}
	for _, claim := range falseClaims {
		if strings.Contains(body, claim) {
			t.Errorf("the tracking comment says %q:\n%s", claim, body)
		}
	}
	if !strings.Contains(body, "✅ Completed") {
		t.Errorf("the tracking comment does not say the run completed:\n%s", body)
	}
	// Nor did any version of it, or of the pull request's description,
	// while the database was down: every comment and description the bot
	// wrote came back as a webhook.
	for _, d := range w.fake.DeliveriesSince(0) {
		if !strings.EqualFold(d.Sender(), w.botLogin) || (d.Event != "issue_comment" && d.Event != "pull_request") {
			continue
		}
		var p struct {
			Comment     struct{ Body string } `json:"comment"`
			PullRequest struct{ Body string } `json:"pull_request"`
		}
		if err := json.Unmarshal(d.Body, &p); err != nil {
			t.Fatal(err)
		}
		for _, text := range []string{p.Comment.Body, p.PullRequest.Body} {
			for _, claim := range falseClaims {
				if strings.Contains(text, claim) {
					t.Errorf("the bot wrote %q on GitHub (%s %s):\n%s", claim, d.Event, d.Action(), text)
				}
			}
		}
	}
	// The log: in the store, and as committed to the session branch.
	evs, err := w.bot.Runs.Store.Read(ctx, res.SessionID, 1)
	if err != nil {
		t.Fatal(err)
	}
	strictVerify(t, "the stored log", evs)
	raw := gittest.Git(t, w.bare, "show", "agent-sessions:sessions/"+res.SessionID+"/events.jsonl")
	rep, err := replay.VerifyReader(schemas.MustDefault(), strings.NewReader(raw+"\n"))
	if err != nil || !rep.Valid || !rep.Closed {
		t.Errorf("the committed log does not verify strictly: %+v %v", rep, err)
	}
	c := countTypes(evs)
	if c[event.RunStarted] != 1 || c[event.TurnTerminal] != 1 || c[event.SessionClose] != 1 || c[event.RunFailed] != 0 {
		t.Errorf("one run with one terminal report: %v", c)
	}
	snap, err := replay.Replay(evs)
	if err != nil || snap.RunStatus != replay.RunCompleted || snap.Terminal == nil || snap.Terminal.Status != "completed" {
		t.Errorf("the run is %q (terminal %+v, %v), want completed", snap.RunStatus, snap.Terminal, err)
	}
	for _, e := range evs {
		if s := string(e.Payload); e.Type == event.LLMResponse && strings.Contains(s, `"error"`) {
			t.Errorf("seq %d: a model call recorded as failed: %s", e.Seq, s)
		}
	}
	return evs
}

// falseClaims are what the bot must not say of a run that a database
// outage held up: it started, did not fail, and ran every test it
// reports.
var falseClaims = []string{"could not start", "❌ Failed", "RUNTIME_ERROR", "event store", "report_missing", "INTERRUPTED", "⏳ running"}

func strictVerify(t *testing.T, what string, evs []event.Event) {
	t.Helper()
	var b strings.Builder
	for i := range evs {
		b.Write(evs[i].Line())
		b.WriteByte('\n')
	}
	rep, err := replay.VerifyReader(schemas.MustDefault(), strings.NewReader(b.String()))
	if err != nil || !rep.Valid || !rep.Closed {
		t.Errorf("%s does not verify strictly: %+v %v", what, rep, err)
	}
}

// takenOver reports whether the run was handed back and taken over: a
// run.resumed that is not the approval's.
func takenOver(evs []event.Event) bool {
	for _, e := range evs {
		if e.Type == event.RunResumed && strings.HasPrefix(event.FieldString(e.Payload, "reason"), "taken over") {
			return true
		}
	}
	return false
}

func interruptedResults(evs []event.Event, tool string) int {
	n := 0
	for _, e := range evs {
		if e.Type == event.ToolResult && event.FieldString(e.Payload, "tool") == tool && event.FieldString(event.Field(e.Payload, "error"), "code") == run.CodeInterrupted {
			n++
		}
	}
	return n
}

func TestDatabaseOutageMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("the outages take 10 s and 30 s each")
	}
	firstTestResult := func(d event.Draft, resumed bool) bool {
		return d.Type == event.ToolResult && !resumed && draftTool(d) == "test.run"
	}
	modelAfterApproval := func(d event.Draft, resumed bool) bool {
		return d.Type == event.LLMResponse && resumed
	}
	cases := []struct {
		name string
		d    time.Duration
		// match cuts the database at a run's append; atRequest and
		// atApproval cut it when the maintainer acts (intake).
		match                 func(event.Draft, bool) bool
		atRequest, atApproval bool
		// handedBack: the outage outlasts the store's retry bound, so the
		// run is handed back and taken over.
		handedBack bool
	}{
		{name: "run/tool call/10s", d: 10 * time.Second, match: firstTestResult},
		{name: "run/tool call/30s", d: 30 * time.Second, match: firstTestResult, handedBack: true},
		{name: "run/model call/10s", d: 10 * time.Second, match: modelAfterApproval},
		{name: "run/model call/30s", d: 30 * time.Second, match: modelAfterApproval, handedBack: true},
		{name: "intake/request/10s", d: 10 * time.Second, atRequest: true},
		{name: "intake/request/30s", d: 30 * time.Second, atRequest: true},
		{name: "intake/approval/10s", d: 10 * time.Second, atApproval: true},
		{name: "intake/approval/30s", d: 30 * time.Second, atApproval: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			w := newOutageWorld(t, tc.d, tc.match)
			res := w.flow(tc.atRequest, tc.atApproval)
			if !w.sw.wasCut() {
				t.Fatal("the database was never cut")
			}
			<-w.sw.back
			if w.sw.upErr != nil {
				t.Fatal(w.sw.upErr)
			}
			evs := w.checkOutcome(res)
			if got := takenOver(evs); got != tc.handedBack {
				t.Errorf("taken over: %v, want %v (an outage of %s against a retry bound of %s)", got, tc.handedBack, tc.d, outageRetryFor)
			}
			if tc.handedBack && tc.name == "run/tool call/30s" {
				// The test whose result could not be written ran again
				// after the takeover: the run did not complete on a test
				// that did not run.
				if n := interruptedResults(evs, "test.run"); n != 1 {
					t.Errorf("%d interrupted test.run results, want 1 (closed by the takeover and run again)", n)
				}
			}
			t.Logf("%s: completed %s after the outage began (outage %s, retry bound %s)", tc.name, time.Since(w.sw.downAt).Round(100*time.Millisecond), tc.d, outageRetryFor)
			t.Logf("case wall time %s", time.Since(start).Round(100*time.Millisecond))
		})
	}
}

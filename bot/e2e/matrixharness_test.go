//go:build chaos

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/tracking"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider/fakemodel"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/store/postgres"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
	"github.com/agentos/agentos/schemas"
	gh "github.com/google/go-github/v62/github"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// gate holds one HTTP request that matches, announces it, and lets it go
// on only when released: the stop matrix uses it to hold a replica at a
// precise point (a model call in flight, an approval review being posted,
// a push in progress) while the signal is sent.
type gate struct {
	next  http.Handler
	mu    sync.Mutex
	match func(r *http.Request) bool // nil: disarmed
	// hit is closed when a request matched; held is that request's
	// "METHOD path".
	hit     chan struct{}
	held    string
	release chan struct{}
}

func newGate(next http.Handler) *gate { return &gate{next: next} }

// arm holds the next request match accepts (once). It returns the
// channel closed when one is held.
func (g *gate) arm(match func(r *http.Request) bool) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.match, g.hit, g.release = match, make(chan struct{}), make(chan struct{})
	return g.hit
}

// let lets the held request (or the next one, if none is held yet) go on
// and disarms the gate.
func (g *gate) let() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.match = nil
	if g.release != nil {
		select {
		case <-g.release:
		default:
			close(g.release)
		}
	}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	var release chan struct{}
	if g.match != nil && g.match(r) {
		g.match = nil
		g.held = r.Method + " " + r.URL.Path
		release = g.release
		close(g.hit)
	}
	g.mu.Unlock()
	if release != nil {
		// The request is held until released; a client that died
		// meanwhile (SIGKILL) still has its request served, as a server
		// that received it would: the effect exists, the client never
		// learns it.
		select {
		case <-release:
		case <-time.After(2 * time.Minute):
		}
	}
	g.next.ServeHTTP(w, r)
}

// serveHandler serves h on a free loopback port until the test ends.
func serveHandler(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// startGatedGitHub is startGitHub with every request passing through a
// gate first.
func startGatedGitHub(ctx context.Context, t *testing.T) (fake *fakegithub.Fake, url, bare string, g *gate) {
	t.Helper()
	fake = fakegithub.New(t)
	g = newGate(fake)
	url = serveHandler(t, g)
	fake.SetURL(url)
	t.Cleanup(fake.Close) // stop posting deliveries before the servers close
	files, err := sampleFiles()
	if err != nil {
		t.Fatal(err)
	}
	if bare, err = fake.AddGitRepo(ctx, fakegithub.Repo{Owner: owner, Name: name}, t.TempDir(), files); err != nil {
		t.Fatal(err)
	}
	fake.AddToken(aliceTok, maintainer)
	fake.SetPermission(repoName, maintainer, fakegithub.PermMaintain)
	return fake, url, bare, g
}

// balancer is the load-balancer stand-in in front of the replicas: each
// webhook delivery goes to the next replica in turn, and to the one after
// it when a replica does not answer or answers 5xx (a proxy with retries,
// or GitHub's redelivery, does that), all within GitHub's 10 s.
type balancer struct {
	mu    sync.Mutex
	addrs []string // replica i's base URL ("" until it first listens); a stopped replica's stays until its restart
	next  int
	// tries counts the attempts a replica refused or did not answer.
	tries int
}

func (b *balancer) set(i int, url string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.addrs[i] = url
}

// aim sends the next delivery to replica i first.
func (b *balancer) aim(i int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next = i
}

func (b *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	client := &http.Client{Timeout: 3 * time.Second}
	deadline := time.Now().Add(9 * time.Second)
	b.mu.Lock()
	start := b.next
	b.next++
	n := len(b.addrs)
	b.mu.Unlock()
	var last string
	for try := 0; time.Now().Before(deadline); try++ {
		i := (start + try) % n
		b.mu.Lock()
		addr := b.addrs[i]
		b.mu.Unlock()
		if addr == "" {
			if try%n == n-1 {
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, addr+r.URL.Path, bytes.NewReader(body))
		for _, k := range []string{"Content-Type", "User-Agent", "X-GitHub-Event", "X-GitHub-Delivery", "X-Hub-Signature-256"} {
			req.Header.Set(k, r.Header.Get(k))
		}
		resp, err := client.Do(req)
		if err == nil && resp.StatusCode < 500 {
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
			resp.Body.Close()
			return
		}
		if err == nil {
			last = resp.Status
			resp.Body.Close()
		} else {
			last = err.Error()
		}
		b.mu.Lock()
		b.tries++
		b.mu.Unlock()
		if try%n == n-1 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	http.Error(w, "no replica answered: "+last, http.StatusBadGateway)
}

// replicaSet is three `agentos serve --store postgres://…` replicas, each
// with its own data directory (git mirror, worktrees) and name.
type replicaSet struct {
	bin  string
	env  map[string]string
	lb   *balancer
	mu   sync.Mutex
	ps   []*serveProc
	ids  []string
	data []string
	// logs keeps the output of the processes that ended.
	logs strings.Builder
}

func startReplicas(ctx context.Context, t *testing.T, bin string, env map[string]string, n int) *replicaSet {
	t.Helper()
	rs := &replicaSet{bin: bin, env: env, lb: &balancer{addrs: make([]string, n)}}
	for i := range n {
		rs.ids = append(rs.ids, fmt.Sprintf("replica-%d", i))
		rs.data = append(rs.data, t.TempDir())
		rs.ps = append(rs.ps, nil)
		rs.start(ctx, t, i)
	}
	t.Cleanup(func() {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		for _, p := range rs.ps {
			if p != nil && p.cmd.ProcessState == nil {
				_ = p.cmd.Process.Kill()
				<-p.done
			}
		}
	})
	return rs
}

// start (re)starts replica i under its name over its data directory.
func (rs *replicaSet) start(ctx context.Context, t *testing.T, i int) {
	t.Helper()
	env := make(map[string]string, len(rs.env)+1)
	for k, v := range rs.env {
		env[k] = v
	}
	env["AGENTOS_REPLICA_ID"] = rs.ids[i]
	p := startServeIn(ctx, t, rs.bin, env, rs.data[i])
	rs.mu.Lock()
	rs.ps[i] = p
	rs.mu.Unlock()
	rs.lb.set(i, p.url)
}

// index is the replica named id.
func (rs *replicaSet) index(id string) int {
	for i, n := range rs.ids {
		if n == id {
			return i
		}
	}
	return -1
}

func (rs *replicaSet) proc(i int) *serveProc {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.ps[i]
}

// allLogs is every process's output, the ended ones first.
func (rs *replicaSet) allLogs() string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var b strings.Builder
	b.WriteString(rs.logs.String())
	for i, p := range rs.ps {
		if p != nil {
			fmt.Fprintf(&b, "\n===== %s (running) =====\n%s", rs.ids[i], p.logs())
		}
	}
	return b.String()
}

// ended records replica i's output once its process is gone.
func (rs *replicaSet) ended(i int, how string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	fmt.Fprintf(&rs.logs, "\n===== %s (%s) =====\n%s", rs.ids[i], how, rs.ps[i].logs())
	rs.ps[i] = nil
}

// worker names the replica working the (only) session: the holder of its
// unexpired lease, else the replica that claimed an open delivery.
func worker(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var owner string
	err := pool.QueryRow(ctx, `SELECT owner FROM agentos_leases WHERE expires_at > now() ORDER BY expires_at DESC LIMIT 1`).Scan(&owner)
	if err == nil {
		return owner, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", err
	}
	err = pool.QueryRow(ctx, `SELECT claimed_by FROM agentos_deliveries WHERE state = 'claimed' ORDER BY claimed_at DESC LIMIT 1`).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return owner, err
}

// matrixFlow is one /agent fix flow through three replicas on a fresh
// PostgreSQL database, as the stop and outage matrices drive it: the
// gated fake GitHub and fake model, the replicas behind the balancer, the
// test's own connection to the database (never through a proxy), and the
// maintainer who asks once and approves every approval request.
type matrixFlow struct {
	t     *testing.T
	ctx   context.Context
	began time.Time

	fake      *fakegithub.Fake
	bare      string
	ghGate    *gate
	modelGate *gate
	rs        *replicaSet
	pool      *pgxpool.Pool // direct, for the test's checks
	st        *postgres.Store
	// proxy is between the replicas and the database (nil: they connect
	// directly).
	proxy *pgtest.Proxy

	alice *github.Client
	issue int
	// approving is set just before an approval is posted; prNumber is the
	// draft PR's number once the bot asked for an approval.
	approving atomic.Bool
	prNumber  atomic.Int64
	// holdApproval, when set before startMaintainer, postpones each
	// approval while it returns true.
	holdApproval func() bool

	stopMaintainer chan struct{}
	maintainerDone chan error
}

// startMatrixFlow sets a flow up; with proxied the replicas' store URL
// points at a pgtest.Proxy in front of the database.
func startMatrixFlow(ctx context.Context, t *testing.T, bin string, proxied bool) *matrixFlow {
	t.Helper()
	f := &matrixFlow{t: t, ctx: ctx, began: time.Now()}
	fake, ghURL, bare, ghGate := startGatedGitHub(ctx, t)
	f.fake, f.bare, f.ghGate = fake, bare, ghGate
	fake.AddToken(matrixBotTok, botUser)
	fake.SetPermission(repoName, botUser, fakegithub.PermWrite)
	model := fakemodel.New(fakemodel.Options{Key: modelKey, Model: modelName, Seed: 1})
	f.modelGate = newGate(model)
	modelURL := serveHandler(t, f.modelGate) + "/v1"

	dbURL := pgtest.URL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	f.pool = pool
	replicaURL := dbURL
	if proxied {
		f.proxy, replicaURL = pgtest.Proxied(t, dbURL)
	}
	// The replicas' pools are bounded below serve's default of 16 each:
	// a shared test server's max_connections (100 by default) must also
	// hold the other tests' databases and the killed replicas' sessions
	// it has not noticed gone yet.
	replicaURL += "&pool_max_conns=8"
	env := map[string]string{
		"AGENTOS_PROVIDER": "openai", "AGENTOS_MODEL": modelName, "OPENAI_API_KEY": modelKey, "OPENAI_BASE_URL": modelURL,
		"AGENTOS_WEBHOOK_SECRET": secret, "AGENTOS_GITHUB_API_URL": ghURL, "AGENTOS_GITHUB_TOKEN": matrixBotTok,
		"AGENTOS_DATABASE_URL": replicaURL,
	}
	f.rs = startReplicas(ctx, t, bin, env, 3)
	lbURL := serveHandler(t, f.rs.lb)
	fake.DeliverTo(lbURL+"/webhook", []byte(secret))

	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.st, err = postgres.Open(ctx, pool, sealer, postgres.Options{}); err != nil {
		t.Fatal(err)
	}
	if f.alice, err = github.New(github.Config{BaseURL: ghURL, Token: aliceTok}); err != nil {
		t.Fatal(err)
	}
	f.issue = fake.AddIssue(repoName, fakegithub.Issue{Title: demo.Prompt, User: maintainer, Body: "CheckToken accepts a prefix of the token."})
	return f
}

// events is the (only) session's log so far, and its ID.
func (f *matrixFlow) events() (string, []event.Event) {
	ss, err := f.st.Sessions(f.ctx)
	if err != nil || len(ss) == 0 {
		return "", nil
	}
	evs, err := f.st.Read(f.ctx, ss[0].SessionID, 1)
	if err != nil {
		return ss[0].SessionID, nil
	}
	return ss[0].SessionID, evs
}

// fail keeps the evidence and ends the test.
func (f *matrixFlow) fail(format string, args ...any) {
	f.t.Helper()
	keepMatrixLogs(f.t, f.rs.allLogs(), f.fake)
	f.t.Fatalf(format, args...)
}

// requests is the draft PR and the number of approval requests the bot
// posted on it (reviews COMMENTED by the bot).
func (f *matrixFlow) requests() (fakegithub.PullRequest, int) {
	for _, pr := range f.fake.PRs(repoName) {
		n := 0
		for _, r := range f.fake.Reviews(repoName, pr.Number) {
			if r.User == botUser && r.State == "COMMENTED" {
				n++
			}
		}
		if n > 0 {
			return pr, n
		}
	}
	return fakegithub.PullRequest{}, 0
}

// idle: every delivery so far is done (no replica is working).
func (f *matrixFlow) idle() bool {
	var open int
	return f.pool.QueryRow(f.ctx, `SELECT count(*) FROM agentos_deliveries WHERE state <> 'done'`).Scan(&open) == nil && open == 0
}

// startMaintainer starts the maintainer, who approves each new approval
// request (unless holdApproval holds it) until the flow's end.
func (f *matrixFlow) startMaintainer() {
	f.stopMaintainer = make(chan struct{})
	f.maintainerDone = make(chan error, 1)
	go func() {
		answered := 0
		for {
			select {
			case <-f.stopMaintainer:
				f.maintainerDone <- nil
				return
			case <-f.ctx.Done(): // the case ended (or failed) without stopping it
				f.maintainerDone <- f.ctx.Err()
				return
			case <-time.After(100 * time.Millisecond):
			}
			pr, n := f.requests()
			if n <= answered {
				continue
			}
			f.prNumber.Store(int64(pr.Number))
			if f.holdApproval != nil && f.holdApproval() {
				continue
			}
			f.approving.Store(true)
			if _, _, err := f.alice.GitHub().PullRequests.CreateReview(f.ctx, owner, name, pr.Number, &gh.PullRequestReviewRequest{CommitID: gh.String(pr.HeadSHA), Event: gh.String("APPROVE"), Body: gh.String("Looks right.")}); err != nil {
				f.maintainerDone <- err
				return
			}
			answered = n
		}
	}()
}

// ask posts the /agent fix comment.
func (f *matrixFlow) ask() {
	f.t.Helper()
	if _, err := f.alice.CreateComment(f.ctx, github.Repo{Owner: owner, Name: name}, f.issue, "/agent "+demo.Prompt); err != nil {
		f.t.Fatal(err)
	}
}

// completed: the PR is ready, every delivery done, the tracking comment
// says completed.
func (f *matrixFlow) completed() bool {
	n := f.prNumber.Load()
	if n == 0 {
		return false
	}
	pr, ok := f.fake.PR(repoName, int(n))
	if !ok || pr.Draft {
		return false
	}
	if !f.idle() {
		return false
	}
	for _, c := range f.fake.Comments(repoName, f.issue) {
		if c.User == botUser && strings.Contains(c.Body, "### agentos · ✅ Completed") {
			return true
		}
	}
	return false
}

// waitCompleted waits for the flow's end and stops the maintainer; what
// names the disturbance for the failure message.
func (f *matrixFlow) waitCompleted(what string) {
	f.t.Helper()
	for !f.completed() {
		select {
		case err := <-f.maintainerDone:
			f.fail("the maintainer could not approve: %v", err)
		case <-f.ctx.Done():
			f.fail("the flow did not finish after %s; delivery errors %v", what, f.fake.DeliveryErrors())
		case <-time.After(100 * time.Millisecond):
		}
	}
	close(f.stopMaintainer)
	if err := <-f.maintainerDone; err != nil {
		f.t.Errorf("maintainer: %v", err)
	}
}

// check is the end checks both matrices make of a finished flow of
// session sid: one PR with the fix, one tracking comment saying completed
// and nothing false, one bot review per approval request, exactly one
// completed terminal report, a committed log that verifies strictly with
// no TIMEOUT, PROVIDER_ERROR or NON_DETERMINISM, every delivery GitHub
// sent stored and done with none failed, nothing GitHub would refuse. It
// returns the committed log's summary for the matrix's own checks.
func (f *matrixFlow) check(sid string) logSummary {
	t, ctx := f.t, f.ctx
	t.Helper()
	prs := f.fake.PRs(repoName)
	if len(prs) != 1 {
		t.Errorf("%d pull requests, want 1", len(prs))
	}
	var comments []fakegithub.Comment
	for _, c := range f.fake.Comments(repoName, f.issue) {
		if c.User == botUser {
			comments = append(comments, c)
		}
	}
	if len(comments) != 1 {
		t.Errorf("%d bot comments on the issue, want 1 tracking comment", len(comments))
	}
	for _, c := range comments {
		if s, ok := tracking.FindSessionID(c.Body); !ok || s != sid {
			t.Errorf("the bot's comment is not the tracking comment of session %s: %.200q", sid, c.Body)
		}
		checkTrackingComment(t, c.Body)
	}
	raw := gitShow(ctx, t, f.bare, "agent-sessions:sessions/"+sid+"/events.jsonl")
	if v, err := replay.VerifyReader(schemas.MustDefault(), bytes.NewReader(raw)); err != nil || !v.Valid {
		t.Errorf("the committed log does not verify: %v %+v", err, v.Problem)
	}
	for _, bad := range []string{"TIMEOUT", "PROVIDER_ERROR", "NON_DETERMINISM"} {
		if bytes.Contains(raw, []byte(bad)) {
			t.Errorf("the committed log holds %s", bad)
		}
	}
	var terminals []string
	requested := map[string]bool{}
	evs := decodeLog(t, raw)
	sum := summarize(evs)
	t.Logf("the committed log: %s", sum)
	for _, e := range evs {
		switch e.Type {
		case event.TurnTerminal:
			terminals = append(terminals, event.FieldString(e.Payload, "status"))
		case event.ApprovalRequested:
			requested[event.FieldString(e.Payload, "approval_id")] = true
		}
	}
	if !slices.Equal(terminals, []string{"completed"}) {
		t.Errorf("terminal reports %v, want exactly one completed", terminals)
	}
	if len(prs) == 1 {
		botReviews := 0
		for _, r := range f.fake.Reviews(repoName, prs[0].Number) {
			if r.User == botUser {
				botReviews++
			}
		}
		if botReviews != len(requested) || botReviews == 0 {
			t.Errorf("%d approval reviews by the bot for %d approval requests", botReviews, len(requested))
		}
		if src := gitShow(ctx, t, f.bare, prs[0].Head+":auth.go"); !bytes.Contains(src, []byte("ConstantTimeCompare")) {
			t.Error("the session branch's auth.go is not fixed")
		}
	}
	// Deliveries: every one GitHub sent is stored and done, none failed.
	if errs := f.fake.DeliveryErrors(); len(errs) != 0 {
		t.Errorf("deliveries no replica accepted: %v", errs)
	}
	var trail strings.Builder
	for _, d := range f.fake.Deliveries() {
		var state, outcome string
		var attempts, failures int
		var took time.Duration
		if err := f.pool.QueryRow(ctx, `SELECT state, outcome, attempts, failures, coalesce(extract(epoch FROM done_at - received_at), 0)*1e9 FROM agentos_deliveries WHERE id = $1`, d.ID).Scan(&state, &outcome, &attempts, &failures, &took); err != nil {
			t.Errorf("delivery %s (%s %s) is not in the queue: %v", d.ID, d.Event, d.Action(), err)
			continue
		}
		if state != "done" || outcome == "failed" {
			t.Errorf("delivery %s (%s %s): %s, %s", d.ID, d.Event, d.Action(), state, outcome)
		}
		fmt.Fprintf(&trail, "\n  %s %s by %s: %s after %v, %d claims, %d failed dispatches", d.Event, d.Action(), d.Sender(), outcome, took.Round(time.Millisecond), attempts, failures)
	}
	f.rs.lb.mu.Lock()
	refused := f.rs.lb.tries
	f.rs.lb.mu.Unlock()
	t.Logf("deliveries (the balancer retried %d times on another replica):%s", refused, trail.String())
	if vs := f.fake.Violations(); len(vs) != 0 {
		t.Errorf("GitHub would have refused: %v", vs)
	}
	return sum
}

// keepIfFailed keeps the replicas' logs when the test failed (or
// E2E_SHOW_LOG is set).
func (f *matrixFlow) keepIfFailed() {
	if f.t.Failed() || os.Getenv("E2E_SHOW_LOG") != "" {
		keepMatrixLogs(f.t, f.rs.allLogs(), f.fake)
	}
}

//go:build chaos

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/tracking"
	"github.com/agentos/agentos/kernel/failpoint"
	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider/fakemodel"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/postgres"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
	"github.com/agentos/agentos/runtime/store/sqlite"
	"github.com/agentos/agentos/schemas"
	gh "github.com/google/go-github/v62/github"
	"github.com/jackc/pgx/v5/pgxpool"
)

// chaosReport gathers the figures of all trials.
type chaosReport struct {
	mu         sync.Mutex
	trials     int
	kills      int
	phases     map[string]int
	violations []string
	recovery   []time.Duration
	// takeover: restart to the session taken back (worktree rebuilt).
	takeover []time.Duration
	// interrupted counts the sessions a kill ended (report_missing) that
	// the maintainer asked again for.
	interrupted int
}

func (r *chaosReport) add(f func(r *chaosReport)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

// TestChaosKillServe: `agentos serve` as a process, driven through the
// whole /agent fix flow by the strict fake GitHub's webhooks and the fake
// model, is killed with SIGKILL at random moments (in model calls, tool
// execution, group commit, artifact pushes, approval posting: wherever the
// moment lands) and restarted over the same data directory, again and
// again until the flow finishes. Deliveries that failed because the
// process was gone are redelivered, as a maintainer does with GitHub's
// "Redeliver" (GitHub never retries by itself), and the queue hands the
// restarted process what it had accepted and not finished. A run a kill
// interrupts is taken over from its log by the restarted process; a
// stopped run's publication is completed. After each trial: one PR, one
// approval review per approval request, one tracking comment, no run
// ended by a kill (report_missing), one applied patch, the committed log
// verifies with exactly one terminal report (completed), and GitHub saw
// nothing it would refuse.
//
// It is built with -tags chaos (go test -tags chaos -run TestChaosKillServe
// ./bot/e2e); CI runs a short one. AGENTOS_CHAOS_TRIALS sets the number of
// trials (default 2; the long run is 200); AGENTOS_CHAOS_STORE=postgres
// runs serve on a fresh PostgreSQL database per trial (--store
// postgres://…); AGENTOS_CHAOS_SEED (default 0) offsets the trials' seeds,
// so a second long run tries other kill schedules; -short skips it.
func TestChaosKillServe(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts agentos serve")
	}
	testenv.LookPath(t, "git")
	trials := 2
	if v := os.Getenv("AGENTOS_CHAOS_TRIALS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("AGENTOS_CHAOS_TRIALS=%q: want a positive number", v)
		}
		trials = n
	}
	seed := chaosSeed(t)
	bin := agentosBinary(t)
	rep := &chaosReport{phases: map[string]int{}}
	for i := range trials {
		t.Run(fmt.Sprintf("trial-%d", i), func(t *testing.T) {
			chaosTrial(t, bin, rand.New(rand.NewPCG(seed+uint64(i), 7)), rep, "")
		})
		rep.add(func(r *chaosReport) {
			t.Logf("after trial %d: %d kills, %d violations, %d runs ended by a kill, median restart to takeover %v over %d, phases %v", i, r.kills, len(r.violations), r.interrupted, medianOf(r.takeover), len(r.takeover), r.phases)
		})
	}
	t.Logf("chaos: %d trials, %d kills; crash points by phase: %s; runs ended by a kill: %d; violations: %d; median restart to listening %v; median restart to the session taken back %v (%d kills needed it)",
		rep.trials, rep.kills, phaseList(rep.phases), rep.interrupted, len(rep.violations), medianOf(rep.recovery), medianOf(rep.takeover), len(rep.takeover))
	for _, v := range rep.violations {
		t.Error(v)
	}
}

// TestChaosKillInsideApprovedPatch lands a kill where timed kills almost
// never do: inside the approved repo.patch, after it wrote the worktree and
// before its tool.result is recorded (the failpoint
// failpoint.PatchApplied, armed in the first process only). The restarted
// process must close the call INTERRUPTED without repeating it (the
// approval was for one call), rebuild the worktree without its effect,
// and let the run go on: the model patches again, the bot asks for a
// second approval, and the flow ends with the same invariants as every
// chaos trial — one PR, one applied patch, one completed terminal report,
// one review per approval request.
func TestChaosKillInsideApprovedPatch(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts agentos serve")
	}
	testenv.LookPath(t, "git")
	rep := &chaosReport{phases: map[string]int{}}
	chaosTrial(t, agentosBinary(t), rand.New(rand.NewPCG(chaosSeed(t), 7)), rep, failpoint.PatchApplied)
	t.Logf("chaos: %d kills; crash points by phase: %s; median restart to the session taken back %v", rep.kills, phaseList(rep.phases), medianOf(rep.takeover))
	for _, v := range rep.violations {
		t.Error(v)
	}
}

// medianOf is the median of ds (0 for none); ds is left as it is.
func medianOf(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// phaseList renders crash points by phase, sorted: "intake 3, resume 1".
func phaseList(phases map[string]int) string {
	var out []string
	for p, n := range phases {
		out = append(out, fmt.Sprintf("%s %d", p, n))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// chaosSeed is AGENTOS_CHAOS_SEED: trial i of a run uses seed+i, so a run
// repeats exactly with the same seed and another seed tries other moments.
func chaosSeed(t *testing.T) uint64 {
	v := os.Getenv("AGENTOS_CHAOS_SEED")
	if v == "" {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("AGENTOS_CHAOS_SEED=%q: want a non-negative number", v)
	}
	t.Logf("trial seeds start at %d", n)
	return n
}

// phaseAt names where a killed process was, from the last event of the
// newest session in its store (read after the kill, before the restart):
// the SQLite store in dataDir, or the PostgreSQL database at dbURL.
func phaseAt(t *testing.T, dataDir, dbURL string) string {
	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var st store.Store
	if dbURL != "" {
		pool, err := pgxpool.New(context.Background(), dbURL)
		if err != nil {
			return "start-up"
		}
		defer pool.Close()
		if st, err = postgres.Open(context.Background(), pool, sealer, postgres.Options{}); err != nil {
			return "start-up"
		}
	} else {
		sq, err := sqlite.Open(dataDir, sealer, sqlite.Options{})
		if err != nil {
			return "start-up"
		}
		defer sq.Close()
		st = sq
	}
	ss, err := st.Sessions(context.Background())
	if err != nil || len(ss) == 0 {
		return "intake (no session yet)"
	}
	sort.Slice(ss, func(i, j int) bool { return ss[i].LastTS < ss[j].LastTS })
	switch last := ss[len(ss)-1].LastType; last {
	case event.LLMRequest:
		return "model call"
	case event.ToolInvoke:
		return "tool execution"
	case event.ApprovalRequested, event.RunPaused, event.CheckpointCreated:
		return "pause (approval posting, artifact push)"
	case event.SessionClose, event.TurnTerminal, event.RunCompleted:
		return "finish (artifact push, PR ready)"
	case event.ApprovalResolved, event.RunResumed:
		return "resume"
	default:
		return "between steps (" + last + ")"
	}
}

// chaosTrial runs one flow under kills. With fp set, the first process is
// armed with that failpoint and killed by it (and no kill is timed); the
// processes after it are not armed and not killed.
func chaosTrial(t *testing.T, bin string, rng *rand.Rand, rep *chaosReport, fp string) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	var violationsBefore int
	rep.add(func(r *chaosReport) { violationsBefore = len(r.violations) })
	fake, srv, bare := startGitHub(ctx, t)
	const botTok = "ghp_chaosBotToken0000000000000000000000"
	fake.AddToken(botTok, botUser)
	fake.SetPermission(repoName, botUser, fakegithub.PermWrite)
	model := fakemodel.Start(t, fakemodel.Options{Key: modelKey, Model: modelName, Seed: 1})
	env := map[string]string{
		"AGENTOS_PROVIDER": "openai", "AGENTOS_MODEL": modelName, "OPENAI_API_KEY": modelKey, "OPENAI_BASE_URL": model.URL(),
		"AGENTOS_WEBHOOK_SECRET": secret, "AGENTOS_GITHUB_API_URL": srv.URL, "AGENTOS_GITHUB_TOKEN": botTok,
	}
	data := t.TempDir()
	dbURL := ""
	if os.Getenv("AGENTOS_CHAOS_STORE") == "postgres" {
		// A fresh database per trial; the restarted process keeps its
		// replica name, so it takes its claims and leases back at once.
		dbURL = pgtest.URL(t)
		env["AGENTOS_DATABASE_URL"], env["AGENTOS_REPLICA_ID"] = dbURL, "chaos-1"
	}
	var allLogs strings.Builder
	first := env
	if fp != "" {
		first = maps.Clone(env)
		first[failpoint.Env] = fp
	}
	bot := startServeIn(ctx, t, bin, first, data)
	fake.DeliverTo(bot.url+"/webhook", []byte(secret))
	alice, err := github.New(github.Config{BaseURL: srv.URL, Token: aliceTok})
	if err != nil {
		t.Fatal(err)
	}
	issue := fake.AddIssue(repoName, fakegithub.Issue{Title: demo.Prompt, User: maintainer, Body: "CheckToken accepts a prefix of the token."})
	if _, err := alice.CreateComment(ctx, github.Repo{Owner: owner, Name: name}, issue, "/agent "+demo.Prompt); err != nil {
		t.Fatal(err)
	}

	// sessions maps each tracking comment's session to whether the
	// comment reports the session failed (a run a kill interrupted ends
	// with a report_missing terminal report, and the maintainer asks
	// again), and counts the comments per session.
	sessions := func() (failed map[string]bool, comments map[string]int) {
		failed, comments = map[string]bool{}, map[string]int{}
		for _, c := range fake.Comments(repoName, issue) {
			if c.User != botUser {
				continue
			}
			sid, ok := tracking.FindSessionID(c.Body)
			if !ok {
				sid = "(no marker)"
			}
			comments[sid]++
			failed[sid] = strings.Contains(c.Body, "### agentos · ❌ Failed")
		}
		return failed, comments
	}
	asks := 1
	// interrupted reports every session so far ended failed: ask again.
	interrupted := func() bool {
		failed, _ := sessions()
		if len(failed) < asks {
			return false
		}
		for _, f := range failed {
			if !f {
				return false
			}
		}
		return true
	}

	var pr fakegithub.PullRequest
	// answered counts the bot's approval requests (its COMMENTED reviews)
	// the maintainer approved. A kill during the approved patch closes it
	// INTERRUPTED and never repeats it (ADR 21); the model tries again and
	// the bot asks again, so a flow can need more than one approval.
	answered := 0
	lastPhase := ""
	done := func() bool {
		if pr.Number == 0 {
			return false
		}
		p, ok := fake.PR(repoName, pr.Number)
		return ok && !p.Draft
	}
	// requests counts the bot's approval requests on the draft PR (and
	// finds the PR).
	requests := func() int {
		for _, p := range fake.PRs(repoName) {
			n := 0
			for _, r := range fake.Reviews(repoName, p.Number) {
				if r.User == botUser && r.State == "COMMENTED" {
					n++
				}
			}
			if n > 0 {
				pr = p
				return n
			}
		}
		return 0
	}
	for kills := 0; !done(); {
		if pr.Number == 0 && interrupted() {
			if _, err := alice.CreateComment(ctx, github.Repo{Owner: owner, Name: name}, issue, "/agent "+demo.Prompt); err != nil {
				t.Fatal(err)
			}
			asks++
		}
		if n := requests(); n > answered {
			p, _ := fake.PR(repoName, pr.Number)
			if _, _, err := alice.GitHub().PullRequests.CreateReview(ctx, owner, name, pr.Number, &gh.PullRequestReviewRequest{CommitID: gh.String(p.HeadSHA), Event: gh.String("APPROVE"), Body: gh.String("Looks right.")}); err != nil {
				t.Fatal(err)
			}
			answered = n
		}
		if kills >= 4 { // enough: let this process finish the flow
			// A flow that makes no progress for two minutes after the
			// last kill is stuck: a violation, reported with where the
			// kill landed.
			progress := func() bool { return requests() > answered || (pr.Number == 0 && interrupted()) || done() }
			deadline := time.Now().Add(2 * time.Minute)
			for !progress() && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			if !progress() {
				failedSessions, _ := sessions()
				rep.add(func(r *chaosReport) {
					r.trials++
					r.violations = append(r.violations, fmt.Sprintf("%s: stuck after a kill in %q: no progress in 2 minutes (PR %d draft, %d approval requests answered, sessions %v, delivery errors %v)", t.Name(), lastPhase, pr.Number, answered, failedSessions, fake.DeliveryErrors()))
				})
				bot.stop(t)
				allLogs.WriteString(bot.logs())
				keepChaosLogs(t, allLogs.String(), fake)
				return
			}
			continue
		}
		// Kill within the next 0–50 ms, 0–500 ms, 0–2 s or 0–6 s (one
		// scale at random): the flow's phases take from milliseconds
		// (intake, group commit, publication) to seconds (the sandboxed
		// go test), so moments land in all of them.
		// Two kills in five instead come right after the bot's next (or
		// second, third) write to GitHub is answered — the tracking
		// comment, the draft PR, the approval review, a comment edit, the
		// PR marked ready — before the process can record it: the moments
		// of publication, which timed kills rarely hit (the sandboxed go
		// test takes most of a run's time).
		phase := ""
		if fp != "" {
			// The armed process kills itself at the failpoint; until then
			// the loop goes on answering approval requests.
			select {
			case <-bot.done:
			case <-time.After(100 * time.Millisecond):
				if done() {
					t.Fatalf("the flow finished and the failpoint %s was never hit", fp)
				}
				continue
			case <-ctx.Done():
				t.Fatalf("timed out before the failpoint %s was hit; delivery errors %v\n%s", fp, fake.DeliveryErrors(), tail(allLogs.String()+bot.logs(), 20000))
			}
			if !strings.Contains(bot.logs(), "failpoint "+fp+": SIGKILL") {
				t.Fatalf("the armed process ended, but not at the failpoint %s\n%s", fp, tail(bot.logs(), 20000))
			}
			phase = "failpoint " + fp
			kills = 3 // this one makes 4: the flow now finishes unkilled
		} else if rng.IntN(5) < 2 {
			n := botWrites(fake) + 1 + rng.IntN(3)
			for deadline := time.Now().Add(90 * time.Second); botWrites(fake) < n && time.Now().Before(deadline) && ctx.Err() == nil && !done(); {
				time.Sleep(2 * time.Millisecond)
			}
		} else {
			scale := []time.Duration{50 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second, 6 * time.Second}[rng.IntN(4)]
			wait := time.Duration(rng.Int64N(int64(scale)))
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				t.Fatalf("timed out; delivery errors %v\n%s", fake.DeliveryErrors(), tail(allLogs.String()+bot.logs(), 20000))
			}
		}
		if phase == "" {
			if done() {
				break
			}
			_ = bot.cmd.Process.Kill() // SIGKILL
			<-bot.done
			phase = phaseAt(t, data, dbURL)
		}
		lastPhase = phase
		allLogs.WriteString(bot.logs())
		kills++
		rep.add(func(r *chaosReport) { r.kills++; r.phases[phase]++ })
		start := time.Now()
		bot = startServeIn(ctx, t, bin, env, data)
		rep.add(func(r *chaosReport) { r.recovery = append(r.recovery, time.Since(start)) })
		fake.DeliverTo(bot.url+"/webhook", []byte(secret))
		for errs := fake.RedeliverFailed(ctx); len(errs) > 0; errs = fake.RedeliverFailed(ctx) {
			select {
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
				t.Fatalf("redelivery keeps failing: %v", errs)
			}
		}
		// Recovery: from the restart to the restarted process taking the
		// session back (its worktree rebuilt from the branch and the log,
		// for a takeover or a publication to complete). Kills that left
		// nothing to recover (intake, a finished flow) have none.
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !done(); time.Sleep(10 * time.Millisecond) {
			if strings.Contains(bot.logs(), `msg="worktree rebuilt from the branch and the log"`) {
				rep.add(func(r *chaosReport) { r.takeover = append(r.takeover, time.Since(start)) })
				break
			}
		}
	}
	bot.waitFor(ctx, t, fake, `the "run completed" log line`, func() bool { return strings.Contains(bot.logs(), `msg="run completed"`) })
	bot.stop(t)
	allLogs.WriteString(bot.logs())

	violation := func(format string, args ...any) {
		msg := fmt.Sprintf("%s: ", t.Name()) + fmt.Sprintf(format, args...)
		rep.add(func(r *chaosReport) { r.violations = append(r.violations, msg) })
	}
	defer rep.add(func(r *chaosReport) { r.trials++ })
	if prs := fake.PRs(repoName); len(prs) != 1 {
		violation("%d pull requests, want 1", len(prs))
	}
	failed, comments := sessions()
	for sid, n := range comments {
		if n != 1 {
			violation("%d tracking comments for session %s, want 1", n, sid)
		}
	}
	// Every session an interrupted attempt left: one terminal report, a
	// log that verifies.
	for sid, f := range failed {
		if !f || sid == strings.TrimPrefix(pr.Head, "agent/") {
			continue
		}
		raw := gitShow(ctx, t, bare, "agent-sessions:sessions/"+sid+"/events.jsonl")
		if v, err := replay.VerifyReader(schemas.MustDefault(), bytes.NewReader(raw)); err != nil || !v.Valid {
			violation("interrupted session %s: the log does not verify: %v %+v", sid, err, v.Problem)
		}
		n := 0
		for _, e := range decodeLog(t, raw) {
			if e.Type == event.TurnTerminal {
				n++
			}
		}
		if n != 1 {
			violation("interrupted session %s has %d terminal reports", sid, n)
		}
	}
	rep.add(func(r *chaosReport) { r.interrupted += len(failed) - 1 })
	if len(failed) > 1 {
		// Takeover resumes every run of this flow (its log allows it: no
		// command runs), so a kill must never end one.
		violation("%d sessions ended by a kill (report_missing) instead of being taken over", len(failed)-1)
	}
	sessionID := strings.TrimPrefix(pr.Head, "agent/")
	raw := gitShow(ctx, t, bare, "agent-sessions:sessions/"+sessionID+"/events.jsonl")
	v, err := replay.VerifyReader(schemas.MustDefault(), bytes.NewReader(raw))
	if err != nil || !v.Valid {
		violation("the committed log does not verify: %v %+v", err, v.Problem)
	}
	evs := decodeLog(t, raw)
	var terminals []string
	requested := map[string]bool{}
	patches, interruptedPatches := 0, 0
	for _, e := range evs {
		switch e.Type {
		case event.TurnTerminal:
			terminals = append(terminals, event.FieldString(e.Payload, "status"))
		case event.ApprovalRequested:
			requested[event.FieldString(e.Payload, "approval_id")] = true
		case event.ToolResult:
			// Applied patches: an interrupted one (closed INTERRUPTED by a
			// takeover, its effect gone with the rebuilt worktree) is not.
			if event.FieldString(e.Payload, "tool") == "repo.patch" && event.FieldBool(e.Payload, "ok") {
				patches++
			}
			if event.FieldString(e.Payload, "tool") == "repo.patch" && event.FieldString(event.Field(e.Payload, "error"), "code") == run.CodeInterrupted {
				interruptedPatches++
			}
		}
	}
	if !slices.Equal(terminals, []string{"completed"}) {
		violation("terminal reports %v, want exactly one completed", terminals)
	}
	if patches != 1 {
		violation("%d repo.patch calls applied in the log, want 1", patches)
	}
	if fp == failpoint.PatchApplied {
		// The killed call is closed, not repeated, and the second patch
		// needed an approval of its own.
		if interruptedPatches != 1 {
			violation("%d repo.patch calls closed %s, want the one the failpoint killed", interruptedPatches, run.CodeInterrupted)
		}
		if len(requested) != 2 {
			violation("%d approval requests, want 2: one per repo.patch call", len(requested))
		}
	}
	var botReviews int
	for _, r := range fake.Reviews(repoName, pr.Number) {
		if r.User == botUser {
			botReviews++
		}
	}
	if botReviews != len(requested) {
		violation("%d approval reviews for %d approval requests", botReviews, len(requested))
	}
	if src := gitShow(ctx, t, bare, pr.Head+":auth.go"); !bytes.Contains(src, []byte("ConstantTimeCompare")) {
		violation("the session branch's auth.go is not fixed")
	}
	if vs := fake.Violations(); len(vs) != 0 {
		violation("GitHub would have refused: %v", vs)
	}
	var violated bool
	rep.add(func(r *chaosReport) { violated = len(r.violations) > violationsBefore })
	if violated || t.Failed() || os.Getenv("E2E_SHOW_LOG") != "" {
		keepChaosLogs(t, allLogs.String(), fake)
	}
}

// keepChaosLogs writes a trial's evidence — every process's log, the
// deliveries GitHub could not post and the ones still failed — to a file
// that outlives the test (under AGENTOS_CHAOS_LOGDIR, else the temporary
// directory), and says where: a violation in a long run is worth nothing
// without it.
func keepChaosLogs(t *testing.T, logs string, fake *fakegithub.Fake) {
	t.Helper()
	dir := os.Getenv("AGENTOS_CHAOS_LOGDIR")
	if dir == "" {
		dir = os.TempDir()
	}
	name := filepath.Join(dir, "agentos-chaos-"+strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())+".log")
	var b strings.Builder
	fmt.Fprintf(&b, "delivery errors: %v\n\n", fake.DeliveryErrors())
	for _, d := range fake.Deliveries() {
		fmt.Fprintf(&b, "delivery %s %s %s by %s\n", d.ID, d.Event, d.Action(), d.Sender())
	}
	b.WriteString("\n" + logs)
	if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
		t.Logf("cannot keep the logs: %v", err)
		return
	}
	t.Logf("logs of the trial's processes: %s", name)
}

// botWrites counts the bot's writes GitHub answered so far.
func botWrites(fake *fakegithub.Fake) int {
	n := 0
	for _, r := range fake.Requests() {
		if r.Actor == botUser && r.Method != "GET" && r.Status < 300 {
			n++
		}
	}
	return n
}

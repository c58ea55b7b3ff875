package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/scripted"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/setup"
	"github.com/agentos/agentos/runtime/store"
)

// errDied stands for a process killed at that point: the call returns it
// and nothing after it happens; the test then starts a new bot process
// over the same data directory and delivers the trigger again.
var errDied = errors.New("the process was killed here")

// mortal is the fake GitHub as a dying process sees it: after budget
// writes (creates, edits, reviews, ready) the next write dies, either
// before GitHub got it (after=false) or after GitHub did it and before the
// process learnt so (after=true).
type mortal struct {
	dispatch.GitHub
	mu     sync.Mutex
	budget int
	after  bool
	writes []string
	// dead, when set, says the process died elsewhere (its store): every
	// later write fails.
	dead func() bool
}

func (m *mortal) write(name string, do func() error) error {
	m.mu.Lock()
	m.writes = append(m.writes, name)
	dead := m.budget == 0 || (m.dead != nil && m.dead())
	m.budget--
	m.mu.Unlock()
	if !dead {
		return do()
	}
	if m.after {
		if err := do(); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s: %w", name, errDied)
}

func (m *mortal) CreateComment(ctx context.Context, repo github.Repo, n int, body string) (id int64, err error) {
	err = m.write("comment", func() (e error) { id, e = m.GitHub.CreateComment(ctx, repo, n, body); return })
	return id, err
}
func (m *mortal) EditComment(ctx context.Context, repo github.Repo, id int64, body string) error {
	return m.write("edit comment", func() error { return m.GitHub.EditComment(ctx, repo, id, body) })
}
func (m *mortal) CreateDraftPR(ctx context.Context, repo github.Repo, np github.NewPR) (pr github.PullRequest, err error) {
	err = m.write("draft PR", func() (e error) { pr, e = m.GitHub.CreateDraftPR(ctx, repo, np); return })
	return pr, err
}
func (m *mortal) EditPRBody(ctx context.Context, repo github.Repo, n int, body string) error {
	return m.write("PR body", func() error { return m.GitHub.EditPRBody(ctx, repo, n, body) })
}
func (m *mortal) MarkReady(ctx context.Context, repo github.Repo, pr github.PullRequest) error {
	return m.write("ready", func() error { return m.GitHub.MarkReady(ctx, repo, pr) })
}
func (m *mortal) CreateReview(ctx context.Context, repo github.Repo, n int, sha, body string) (id int64, err error) {
	err = m.write("review", func() (e error) { id, e = m.GitHub.CreateReview(ctx, repo, n, sha, body); return })
	return id, err
}

// mortalStore dies after budget more events: that append and every later
// one fail, as if the process had been killed before its commit.
type mortalStore struct {
	store.Store
	mu     sync.Mutex
	budget int
	died   bool
}

func (s *mortalStore) isDead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.died
}

func (s *mortalStore) Append(ctx context.Context, sid string, seq int64, drafts ...event.Draft) ([]event.Event, error) {
	s.mu.Lock()
	dead := s.budget < len(drafts)
	if !dead {
		s.budget -= len(drafts)
	} else {
		s.budget = 0
	}
	s.died = s.died || dead
	s.mu.Unlock()
	if dead {
		return nil, errDied
	}
	return s.Store.Append(ctx, sid, seq, drafts...)
}

// mortalRuns makes the world's bot process die after events more events
// of its runs (the dispatcher's own annotations included).
func (w *world) mortalRuns(events int) {
	st := &mortalStore{Store: w.store, budget: events}
	profile := provider.DefaultProfile()
	profile.Provider, profile.Model, profile.Script = "scripted", "scripted-demo", "embedded"
	profile.Pricing = provider.Pricing{InputPerMTok: 3, OutputPerMTok: 15}
	script := w.script
	reg := provider.Registry{"scripted": func(context.Context, provider.Profile) (provider.Provider, error) { return scripted.New(script), nil }}
	w.configure(func(c *dispatch.Config) {
		c.Runs = run.NewManager(st)
		c.GitHub = &mortal{GitHub: c.GitHub, budget: -1, dead: st.isDead}
		c.Engines = func(ctx context.Context, r dispatch.EngineRequest) (*run.Engine, func(), error) {
			env, err := setup.Build(ctx, setup.Options{Dir: r.Dir, Runs: r.Runs, RequireWorkflows: true, Profile: profile, Providers: reg, SessionID: r.SessionID, Store: st, UntrustedRepo: r.Untrusted})
			if err != nil {
				return nil, nil, err
			}
			return env.Engine, env.Close, nil
		}
	})
}

// deliverUntilDone dispatches tr; while the process dies, it starts a new
// one over the same data directory and delivers tr again as the queue does
// (the next attempt). It returns the result of the attempt that finished.
func (w *world) deliverUntilDone(tr webhook.Trigger) dispatch.Result {
	w.t.Helper()
	if tr.Repo == "" {
		tr.Repo, tr.Owner, tr.Name = repoName, "octo", "app"
	}
	if tr.AuthorType == "" {
		tr.AuthorType = "User"
	}
	for attempt := 1; attempt <= 5; attempt++ {
		tr.Attempt = attempt
		n := len(w.results)
		err := w.d.Dispatch(context.Background(), tr)
		if err == nil {
			return w.results[n]
		}
		if !errors.Is(err, errDied) {
			w.t.Fatalf("attempt %d: %v", attempt, err)
		}
		w.start(w.dataDir) // the restarted process: same store, new worktrees
	}
	w.t.Fatal("still dying after 5 attempts")
	return dispatch.Result{}
}

// checkOneOfEach: one draft PR (ready), one approval review, one tracking
// comment and nothing else from the bot on the issue, a completed
// session whose committed log verifies with one terminal report, and
// auth.go fixed on the branch exactly once.
func (w *world) checkOneOfEach(sid string) {
	t := w.t
	t.Helper()
	prs := w.fake.PRs(repoName)
	if len(prs) != 1 {
		t.Fatalf("%d pull requests, want 1", len(prs))
	}
	terminals, patches, interrupted := 0, 0, 0
	for _, e := range w.events(sid) {
		switch {
		case e.Type == event.TurnTerminal:
			terminals++
		case e.Type == event.ToolResult && event.FieldString(e.Payload, "tool") == "repo.patch":
			if event.FieldBool(e.Payload, "ok") {
				patches++
			} else if event.FieldString(event.Field(e.Payload, "error"), "code") == run.CodeInterrupted {
				interrupted++
			}
		}
	}
	// A death inside the approved repo.patch: the takeover closes it
	// INTERRUPTED and does not repeat it, so the fix is not in the
	// worktree; the scripted Worker runs the tests again (they fail) and
	// still claims success. The honest end is a failed run that says so,
	// and a PR left a draft — never "completed" with the PR marked ready.
	completed := !(patches == 0 && interrupted == 1)
	if prs[0].Draft == completed {
		t.Errorf("the PR's draft is %v for a run that completed: %v", prs[0].Draft, completed)
	}
	bot := 0
	for _, r := range w.fake.Reviews(repoName, prs[0].Number) {
		if r.User == botLogin {
			bot++
		}
	}
	if bot != 1 {
		t.Errorf("%d approval reviews by the bot, want 1", bot)
	}
	comments := 0
	for _, c := range w.fake.Comments(repoName, w.issue) {
		if c.User == botLogin {
			comments++
		}
	}
	if comments != 1 {
		var bodies []string
		for _, c := range w.fake.Comments(repoName, w.issue) {
			if c.User == botLogin {
				bodies = append(bodies, c.Body)
			}
		}
		t.Errorf("%d bot comments on the issue, want the tracking comment only:\n%s", comments, strings.Join(bodies, "\n----\n"))
	}
	// GitHub's own count of the bot's writes: every create once, the PR
	// marked ready once (the fake counts failed requests too).
	calls := w.fake.CallsBy(botLogin)
	ready := 1
	if !completed {
		ready = 0
	}
	for op, want := range map[string]int{
		"POST /repos/{owner}/{repo}/pulls":                          1,
		"POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews":    1,
		"POST /repos/{owner}/{repo}/issues/{issue_number}/comments": 1,
		"POST /graphql": ready,
	} {
		if calls[op] != want {
			t.Errorf("%s: %d calls by the bot, want %d", op, calls[op], want)
		}
	}
	snap := w.snapshot(sid)
	switch {
	case snap.Terminal == nil:
		t.Fatal("no terminal report")
	case completed && snap.Terminal.Status != "completed":
		t.Fatalf("terminal = %+v", snap.Terminal)
	case !completed && (snap.Terminal.Status != "failed" || !strings.HasPrefix(snap.Terminal.Reason, "EVIDENCE_MISMATCH") || !strings.Contains(snap.Terminal.Reason, "repo.patch INTERRUPTED")):
		t.Fatalf("the interrupted patch's run: terminal = %+v, want failed with EVIDENCE_MISMATCH naming the interrupted patch", snap.Terminal)
	}
	rep := w.artifactVerifies(sid)
	if !rep.Closed {
		t.Error("the committed log is not closed")
	}
	if terminals != 1 {
		t.Errorf("%d terminal reports, want 1", terminals)
	}
	src := gittest.Git(t, w.bare, "show", prs[0].Head+":auth.go")
	fixed := strings.Contains(src, "ConstantTimeCompare")
	switch {
	case patches == 1 && interrupted == 0:
		if !fixed || strings.Count(src, "import \"crypto/subtle\"") != 1 {
			t.Errorf("the patch is recorded once but auth.go on the branch is:\n%s", src)
		}
	case patches == 0 && interrupted == 1:
		// The kill landed during the approved call: it was not repeated,
		// and the worktree was rebuilt without it.
		t.Logf("the approved patch was interrupted; not repeated")
		if fixed {
			t.Errorf("an interrupted patch is in the branch:\n%s", src)
		}
	default:
		t.Errorf("%d applied and %d interrupted repo.patch results, want one", patches, interrupted)
	}
	if p := prs[0]; p.HeadSHA != strings.TrimSpace(gittest.Git(t, w.bare, "rev-parse", p.Head)) {
		t.Errorf("the PR's head %s is not the branch's", p.HeadSHA)
	}
}

// TestRepublishAfterDeathAtEachStep (issue 21): the bot process dies at
// each GitHub write of the /agent fix flow in turn — the tracking
// comment, the draft PR, the approval review, the tracking comment edit,
// and after the approval the PR marked ready, the PR description, the
// tracking comment — once before GitHub got the write and once after
// GitHub did it. The trigger is delivered again to a new process over the
// same data directory. Whatever the moment, the flow ends with one PR,
// one approval review and one tracking comment; nothing is lost or
// repeated.
func TestRepublishAfterDeathAtEachStep(t *testing.T) {
	for _, after := range []bool{false, true} {
		for budget := 0; ; budget++ {
			name := fmt.Sprintf("write-%d-%s", budget, map[bool]string{false: "before", true: "after"}[after])
			var total int
			ok := t.Run(name, func(t *testing.T) {
				w := newWorld(t)
				m := &mortal{GitHub: w.cfg.GitHub, budget: budget, after: after}
				w.configure(func(c *dispatch.Config) { c.GitHub = m })
				w.fake.AddComment(repoName, w.issue, "alice", "/agent "+demo.Prompt)
				first := w.deliverUntilDone(webhook.Trigger{Kind: webhook.KindComment, Number: w.issue, Author: "alice", Body: "/agent " + demo.Prompt, IssueState: "open", DeliveryID: "d-request"})
				if first.Status != "paused" || first.PR == 0 {
					t.Fatalf("after the request: %+v", first)
				}
				if w.cfg.GitHub != m { // a restart: keep dying at the later writes
					w.configure(func(c *dispatch.Config) { c.GitHub = &mortal{GitHub: c.GitHub, budget: -1} })
				}
				p, _ := w.fake.PR(repoName, first.PR)
				res := w.deliverUntilDone(webhook.Trigger{Kind: webhook.KindReview, Number: first.PR, IsPR: true, Author: "alice", ReviewState: "approved", HeadSHA: p.HeadSHA, DeliveryID: "d-approve"})
				if res.Status != "completed" {
					t.Fatalf("after the approval: %+v", res)
				}
				w.checkOneOfEach(first.SessionID)
				total = len(m.writes)
			})
			if !ok || budget >= total {
				break // every write of the flow has been a death point
			}
		}
	}
}

// TestTakeoverAfterDeathMidRun (issue 18): the process dies after n events
// of the run (in model calls, tool calls, group commit, the pause, the
// resumed run after the approval), for n over the whole flow. The
// delivery handled again takes the run over from its log in a worktree
// rebuilt from the branch and the log — no report_missing, no second run
// — and the flow ends as an undisturbed one does: one PR, one review, one
// tracking comment, one terminal report.
func TestTakeoverAfterDeathMidRun(t *testing.T) {
	// The events of an undisturbed flow, to place the deaths over it.
	ref := newWorld(t)
	r1 := ref.comment(ref.issue, false, "alice", "/agent "+demo.Prompt)
	paused := len(ref.events(r1.SessionID))
	ref.review(r1.PR, "alice", "approved", "")
	total := len(ref.events(r1.SessionID))
	step := max(1, total/12)
	var points []int
	for n := 1; n < total; n += step {
		points = append(points, n)
	}
	// Deaths inside calls: with a model request and no response, and
	// with the approved patch invoked and no result (the call is not
	// repeated; the run goes on without it).
	for _, e := range ref.events(r1.SessionID) {
		if e.Type == event.ToolInvoke && event.FieldString(e.Payload, "approval_id") != "" {
			points = append(points, int(e.Seq))
		}
		if e.Type == event.LLMRequest && event.FieldString(e.Payload, "role") == "worker" && len(points) < 16 {
			points = append(points, int(e.Seq))
		}
		// Deaths at the end: after run.completed (no terminal report
		// yet: the 200-trial chaos run's trial 191 stuck there) and after
		// the terminal report (no session.close).
		if e.Type == event.RunCompleted || e.Type == event.TurnTerminal {
			points = append(points, int(e.Seq))
		}
	}
	slices.Sort(points)
	for _, n := range slices.Compact(points) {
		t.Run(fmt.Sprintf("after-%d-events", n), func(t *testing.T) {
			w := newWorld(t)
			phase := "request"
			if n >= paused {
				phase = "approval"
			} else {
				w.mortalRuns(n)
			}
			w.fake.AddComment(repoName, w.issue, "alice", "/agent "+demo.Prompt)
			first := w.deliverUntilDone(webhook.Trigger{Kind: webhook.KindComment, Number: w.issue, Author: "alice", Body: "/agent " + demo.Prompt, IssueState: "open", DeliveryID: "d-request"})
			if first.Status != "paused" || first.PR == 0 {
				t.Fatalf("after the request: %+v", first)
			}
			if phase == "approval" {
				w.mortalRuns(n - len(w.events(first.SessionID)))
			}
			p, _ := w.fake.PR(repoName, first.PR)
			res := w.deliverUntilDone(webhook.Trigger{Kind: webhook.KindReview, Number: first.PR, IsPR: true, Author: "alice", ReviewState: "approved", HeadSHA: p.HeadSHA, DeliveryID: "d-approve"})
			if res.Status != "completed" && res.Status != "failed" {
				t.Fatalf("after the approval: %+v", res)
			}
			w.checkOneOfEach(first.SessionID)
			starts, resumed := 0, 0
			for _, e := range w.events(first.SessionID) {
				switch e.Type {
				case event.RunStarted:
					starts++
				case event.RunResumed:
					resumed++
				}
			}
			if starts != 1 {
				t.Errorf("%d runs, want 1 (taken over, not started again)", starts)
			}
			if resumed < 1 {
				t.Errorf("no run.resumed: the run was not resumed")
			}
		})
	}
}

// TestNoTakeoverWhenTheWorktreeCannotBeRebuilt: a run that died after a
// command ran (process.run: what it did to the worktree is not in the
// log) is not taken over — the worktree cannot be rebuilt — so it gets
// one report_missing terminal report that says why, and a further
// redelivery changes nothing.
func TestNoTakeoverWhenTheWorktreeCannotBeRebuilt(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	tr := webhook.Trigger{Kind: webhook.KindComment, Number: w.issue, Author: "alice", Body: "/agent " + demo.Prompt, IssueState: "open", DeliveryID: "d-dead",
		Repo: repoName, Owner: "octo", Name: "app", AuthorType: "User", Attempt: 2}
	sid := dispatch.DeliverySessionID(w.issue, tr.DeliveryID)
	evs, err := w.store.Append(ctx, sid, 0,
		event.Draft{RunID: "run-dead", Type: event.SessionStart, Actor: "user", Payload: map[string]any{"prompt": demo.Prompt}},
		event.Draft{RunID: "run-dead", Type: event.RunStarted, Actor: "runtime", Payload: map[string]any{"run_id": "run-dead", "prompt": demo.Prompt}},
		event.Draft{RunID: "run-dead", Type: event.ToolInvoke, Actor: "worker", Payload: map[string]any{"call_id": "c1", "tool": "process.run", "args": map[string]any{"command": "make generate"}}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.store.Append(ctx, sid, 3, event.Draft{RunID: "run-dead", Type: event.ToolResult, Actor: "kernel", ParentID: evs[2].ID, Payload: map[string]any{"call_id": "c1", "tool": "process.run", "ok": true}}); err != nil {
		t.Fatal(err)
	}
	for attempt := 0; attempt < 2; attempt++ {
		n := len(w.results)
		if err := w.d.Dispatch(ctx, tr); err != nil {
			t.Fatal(err)
		}
		if got := w.results[n:]; len(got) != 1 || got[0].Status != "failed" || got[0].SessionID != sid {
			t.Fatalf("attempt %d: %+v", attempt, got)
		}
	}
	snap := w.snapshot(sid)
	if snap.Terminal == nil || snap.Terminal.ErrorClass != "report_missing" || !strings.Contains(snap.Terminal.Reason, "process.run") {
		t.Fatalf("terminal = %+v, want report_missing saying the command's effect is not in the log", snap.Terminal)
	}
	c := 0
	for _, e := range w.events(sid) {
		if e.Type == event.TurnTerminal {
			c++
		}
	}
	if c != 1 || len(w.fake.PRs(repoName)) != 0 {
		t.Fatalf("%d terminal reports, %d PRs; want 1 and none", c, len(w.fake.PRs(repoName)))
	}
}

// TestRetriedAnswerIsNotAppliedTwice: an Approve review's delivery handled
// again after its first attempt applied it (the session went on, here to
// completed) applies nothing again and replies nothing: the delivery's
// answer is recorded in the log, so a retry can never approve a later
// request the maintainer has not seen.
func TestRetriedAnswerIsNotAppliedTwice(t *testing.T) {
	w := newWorld(t)
	res := w.comment(w.issue, false, "alice", "/agent "+demo.Prompt)
	p, _ := w.fake.PR(repoName, res.PR)
	review := webhook.Trigger{Kind: webhook.KindReview, Number: res.PR, IsPR: true, Author: "alice", ReviewState: "approved", HeadSHA: p.HeadSHA, DeliveryID: "d-approve", Attempt: 1,
		Repo: repoName, Owner: "octo", Name: "app", AuthorType: "User"}
	if err := w.d.Dispatch(context.Background(), review); err != nil {
		t.Fatal(err)
	}
	resolved := func() int {
		n := 0
		for _, e := range w.events(res.SessionID) {
			if e.Type == event.ApprovalResolved {
				n++
			}
		}
		return n
	}
	before, comments := resolved(), len(w.fake.Comments(repoName, res.PR))
	review.Attempt = 2
	n := len(w.results)
	if err := w.d.Dispatch(context.Background(), review); err != nil {
		t.Fatal(err)
	}
	if got := w.results[n]; got.Status != "completed" || got.Outcome == "replied" {
		t.Fatalf("retried answer: %+v", got)
	}
	if resolved() != before || len(w.fake.Comments(repoName, res.PR)) != comments {
		t.Fatalf("the retried answer was applied again or replied to: %d → %d resolutions", before, resolved())
	}
	w.checkOneOfEach(res.SessionID)
}

// TestAnswerRecordedByADeadProcessIsFinished: the process handling an
// Approve review records which delivery answered (the github.answer
// annotation) and dies before it resolves the approval. The delivery
// handled again must finish that answer — resolve the approval and resume
// the run to completion — not take the annotation for an answer already
// applied and leave the session paused for good (the maintainer's approval
// lost; found by the serve chaos test).
func TestAnswerRecordedByADeadProcessIsFinished(t *testing.T) {
	w := newWorld(t)
	first := w.comment(w.issue, false, "alice", "/agent "+demo.Prompt)
	if first.Status != "paused" || first.PR == 0 {
		t.Fatalf("after the request: %+v", first)
	}
	// One event more: the answer's annotation; the approval.resolved after
	// it dies.
	w.mortalRuns(1)
	p, _ := w.fake.PR(repoName, first.PR)
	res := w.deliverUntilDone(webhook.Trigger{Kind: webhook.KindReview, Number: first.PR, IsPR: true, Author: "alice", ReviewState: "approved", HeadSHA: p.HeadSHA, DeliveryID: "d-approve"})
	if res.Status != "completed" {
		t.Fatalf("after the approval: %+v", res)
	}
	answers, resolved := 0, 0
	for _, e := range w.events(first.SessionID) {
		switch {
		case e.Type == event.ArtifactEmitted && event.FieldString(e.Payload, "kind") == "github.answer":
			answers++
		case e.Type == event.ApprovalResolved:
			resolved++
			if d := event.FieldString(e.Payload, "decision"); d != "approve" {
				t.Errorf("approval resolved %q, want approve", d)
			}
		}
	}
	if answers != 1 || resolved != 1 {
		t.Errorf("%d answer records and %d resolutions, want 1 and 1", answers, resolved)
	}
	w.checkOneOfEach(first.SessionID)
}

// TestRepeatRequestJoinsTheLiveSession: a user who asks again while the
// first request's run is still running — here its process died mid-run,
// before its first pause, and no takeover has happened yet — gets one
// reply naming the live session instead of a second session. The first
// delivery, handled again, takes its run over: one pull request, one
// tracking comment, one approval review.
func TestRepeatRequestJoinsTheLiveSession(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.mortalRuns(6)
	w.fake.AddComment(repoName, w.issue, "alice", "/agent "+demo.Prompt)
	tr := webhook.Trigger{Kind: webhook.KindComment, Number: w.issue, Author: "alice", Body: "/agent " + demo.Prompt, IssueState: "open", DeliveryID: "d-request",
		Repo: repoName, Owner: "octo", Name: "app", AuthorType: "User", Attempt: 1}
	if err := w.d.Dispatch(ctx, tr); !errors.Is(err, errDied) {
		t.Fatalf("the first attempt: %v, want it to die mid-run", err)
	}
	sid := dispatch.DeliverySessionID(w.issue, "d-request")
	if st := w.snapshot(sid).RunStatus; st != "running" {
		t.Fatalf("the first session is %q, want running", st)
	}
	w.start(w.dataDir) // another process; the first delivery waits for its retry

	w.fake.AddComment(repoName, w.issue, "alice", "/agent "+demo.Prompt)
	again := tr
	again.DeliveryID = "d-again"
	n := len(w.results)
	if err := w.d.Dispatch(ctx, again); err != nil {
		t.Fatal(err)
	}
	if got := w.results[n:]; len(got) != 1 || got[0].Outcome != "replied" || got[0].SessionID != sid {
		t.Fatalf("the repeated request: %+v, want a reply naming %s", got, sid)
	}
	reply := lastComment(w.fake.Comments(repoName, w.issue), botLogin)
	if !strings.HasPrefix(reply.Body, "@alice ") || !strings.Contains(reply.Body, "already working") || !strings.Contains(reply.Body, sid) || !strings.Contains(reply.Body, "/agent cancel") ||
		!strings.Contains(reply.Body, fmt.Sprintf("/octo/app/issues/%d#issuecomment-", w.issue)) {
		t.Errorf("reply %q", reply.Body)
	}
	if evs := w.events(dispatch.DeliverySessionID(w.issue, "d-again")); len(evs) != 0 {
		t.Errorf("the repeated request began a session of %d events", len(evs))
	}

	tr.Attempt = 2
	first := w.deliverUntilDone(tr)
	if first.Status != "paused" || first.PR == 0 || first.SessionID != sid {
		t.Fatalf("the first request handled again: %+v", first)
	}
	if prs := w.fake.PRs(repoName); len(prs) != 1 {
		t.Errorf("%d pull requests, want 1", len(prs))
	}
	bot := 0
	for _, c := range w.fake.Comments(repoName, w.issue) {
		if strings.EqualFold(c.User, botLogin) {
			bot++
		}
	}
	if bot != 2 {
		t.Errorf("%d bot comments on the issue, want 2 (the tracking comment and the reply)", bot)
	}
	// Once the run is paused, a new request starts its own session.
	w.fake.AddComment(repoName, w.issue, "alice", "/agent also update the docs")
	third := tr
	third.DeliveryID, third.Body, third.Attempt = "d-third", "/agent also update the docs", 1
	n = len(w.results)
	if err := w.d.Dispatch(ctx, third); err != nil {
		t.Fatal(err)
	}
	if got := w.results[n:]; len(got) != 1 || got[0].SessionID == sid || got[0].Outcome == "replied" {
		t.Errorf("a request after the pause: %+v, want a session of its own", got)
	}
}

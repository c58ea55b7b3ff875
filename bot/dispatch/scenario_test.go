package dispatch_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/auth"
	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/kernel/worktree"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/scripted"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/setup"
	"github.com/agentos/agentos/runtime/store/sqlite"
	"github.com/agentos/agentos/schemas"
)

const (
	repoName = "octo/app"
	botTok   = "tok-agentos-bot"
	botLogin = "agentos-bot[bot]"
)

// world is one GitHub (the fake, over HTTP), one git host (real bare
// repositories behind git http-backend) and a bot process (store, worktree
// cache, dispatcher). restart() replaces the bot process and keeps the
// world.
type world struct {
	t      *testing.T
	fake   *fakegithub.Fake
	apiURL string
	git    *gittest.Server
	bare   string
	issue  int

	dataDir string
	store   *sqlite.Store
	d       *dispatch.Dispatcher
	results []dispatch.Result
	script  *scripted.Script
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, fake: fakegithub.New(t), git: gittest.New(t)}
	w.apiURL = w.fake.Serve(t)
	sample := t.TempDir()
	if err := demo.WriteSample(sample); err != nil {
		t.Fatal(err)
	}
	w.bare = w.git.Bare(t, "octo", "app", gittest.WriteTree(t, sample))
	w.fake.AddRepo(fakegithub.Repo{Owner: "octo", Name: "app"})
	w.fake.BackWithGit(repoName, w.bare)
	w.fake.AddToken(botTok, botLogin)
	w.fake.SetPermission(repoName, botLogin, fakegithub.PermWrite)
	w.fake.SetPermission(repoName, "alice", fakegithub.PermMaintain)
	w.fake.SetPermission(repoName, "rita", fakegithub.PermRead)
	w.issue = w.fake.AddIssue(repoName, fakegithub.Issue{Title: "token check accepts prefixes", Body: "auth.go is broken", User: "alice"})
	s, err := demo.Script()
	if err != nil {
		t.Fatal(err)
	}
	w.script = s
	w.start(t.TempDir())
	t.Cleanup(func() { w.fake.CheckNoViolations(t) })
	return w
}

// start runs a new bot process over dataDir with its own worktree cache.
func (w *world) start(dataDir string) {
	t := w.t
	t.Helper()
	if w.store != nil {
		w.store.Close()
	}
	w.dataDir = dataDir
	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(dataDir, sealer, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.store = st
	t.Cleanup(func() { st.Close() })
	gh, err := github.New(github.Config{BaseURL: w.apiURL, Token: botTok})
	if err != nil {
		t.Fatal(err)
	}
	wm, err := worktree.New(worktree.Config{CacheDir: t.TempDir(), BaseURL: w.git.URL, Token: func(context.Context, worktree.Repo) (string, error) { return gittest.Token, nil }})
	if err != nil {
		t.Fatal(err)
	}
	profile := provider.DefaultProfile()
	profile.Provider, profile.Model, profile.Script = "scripted", "scripted-demo", "embedded"
	profile.Pricing = provider.Pricing{InputPerMTok: 3, OutputPerMTok: 15}
	script := w.script
	reg := provider.Registry{"scripted": func(context.Context, provider.Profile) (provider.Provider, error) { return scripted.New(script), nil }}
	w.d = &dispatch.Dispatcher{
		BotLogin: botLogin,
		GitHub:   dispatch.API{Client: gh},
		Auth:     auth.New(gh, auth.Policy{BotLogin: botLogin}),
		Git:      dispatch.Worktrees{M: wm},
		Runs:     run.NewManager(st),
		Engines: func(ctx context.Context, r dispatch.EngineRequest) (*run.Engine, func(), error) {
			env, err := setup.Build(ctx, setup.Options{Dir: r.Dir, Profile: profile, Providers: reg, SessionID: r.SessionID, Store: st, UntrustedRepo: r.Untrusted})
			if err != nil {
				return nil, nil, err
			}
			return env.Engine, env.Close, nil
		},
		Result: func(r dispatch.Result) { w.results = append(w.results, r) },
	}
}

func (w *world) dispatch(tr webhook.Trigger) dispatch.Result {
	w.t.Helper()
	n := len(w.results)
	if tr.Repo == "" {
		tr.Repo, tr.Owner, tr.Name = repoName, "octo", "app"
	}
	if tr.AuthorType == "" {
		tr.AuthorType = "User"
	}
	if tr.DeliveryID == "" {
		tr.DeliveryID = fmt.Sprintf("delivery-%d", n+1)
	}
	if err := w.d.Dispatch(context.Background(), tr); err != nil {
		w.t.Fatalf("dispatch %+v: %v", tr, err)
	}
	if len(w.results) != n+1 {
		w.t.Fatalf("dispatch reported %d results", len(w.results)-n)
	}
	return w.results[n]
}

func (w *world) comment(number int, isPR bool, author, body string) dispatch.Result {
	w.t.Helper()
	w.fake.AddComment(repoName, number, author, body)
	return w.dispatch(webhook.Trigger{Kind: webhook.KindComment, Number: number, IsPR: isPR, Author: author, Body: body, IssueState: "open"})
}

func (w *world) review(pr int, author, state, body string) dispatch.Result {
	w.t.Helper()
	p, _ := w.fake.PR(repoName, pr)
	return w.dispatch(webhook.Trigger{Kind: webhook.KindReview, Number: pr, IsPR: true, Author: author, ReviewState: state, Body: body, HeadSHA: p.HeadSHA})
}

func (w *world) events(sid string) []event.Event {
	w.t.Helper()
	evs, err := w.store.Read(context.Background(), sid, 1)
	if err != nil {
		w.t.Fatal(err)
	}
	return evs
}

func (w *world) snapshot(sid string) replay.Snapshot {
	w.t.Helper()
	s, err := replay.Replay(w.events(sid))
	if err != nil {
		w.t.Fatal(err)
	}
	return s
}

// artifactVerifies reads the committed log from the artifact branch with
// the git CLI and verifies it.
func (w *world) artifactVerifies(sid string) replay.Report {
	w.t.Helper()
	raw := gittest.Git(w.t, w.bare, "show", "agent-sessions:sessions/"+sid+"/events.jsonl")
	rep, err := replay.VerifyReader(schemas.MustDefault(), strings.NewReader(raw+"\n"))
	if err != nil {
		w.t.Fatal(err)
	}
	if !rep.Valid {
		w.t.Fatalf("committed log of %s does not verify: %v", sid, rep.Problem)
	}
	gittest.Git(w.t, w.bare, "show", "agent-sessions:sessions/"+sid+"/snapshot.json")
	return rep
}

func lastComment(cs []fakegithub.Comment, author string) fakegithub.Comment {
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].User == author {
			return cs[i]
		}
	}
	return fakegithub.Comment{}
}

// Scenario 1: /agent on an issue → draft PR + approval review → Approve →
// patch applied, tests pass, commit pushed, PR ready, log verifies,
// tracking comment completed with cost.
func TestScenarioFixFromIssue(t *testing.T) {
	w := newWorld(t)
	res := w.comment(w.issue, false, "alice", "/agent "+demo.Prompt)
	if res.Outcome != "started" || res.Status != "paused" {
		t.Fatalf("first run: %+v, want started and paused for approval", res)
	}
	sid := res.SessionID
	if res.Branch != "agent/"+sid || res.PR == 0 {
		t.Fatalf("branch %q pr %d", res.Branch, res.PR)
	}
	pr, ok := w.fake.PR(repoName, res.PR)
	if !ok || !pr.Draft || pr.Head != res.Branch || pr.Base != "main" {
		t.Fatalf("draft PR = %+v", pr)
	}
	reviews := w.fake.Reviews(repoName, res.PR)
	if len(reviews) != 1 || reviews[0].State != "COMMENTED" || reviews[0].User != botLogin || reviews[0].CommitID != pr.HeadSHA {
		t.Fatalf("approval review = %+v (head %s)", reviews, pr.HeadSHA)
	}
	snap := w.snapshot(sid)
	if len(snap.PendingApprovals) != 1 || !strings.Contains(reviews[0].Body, snap.PendingApprovals[0].ID) || !strings.Contains(reviews[0].Body, "```diff") {
		t.Fatalf("review body does not list the pending patch %+v:\n%s", snap.PendingApprovals, reviews[0].Body)
	}
	w.artifactVerifies(sid)
	// The maintainer approves with a review.
	res = w.review(res.PR, "alice", "approved", "")
	if res.Status != "completed" {
		t.Fatalf("after approval: %+v", res)
	}
	snap = w.snapshot(sid)
	if snap.Terminal == nil || snap.Terminal.Status != "completed" {
		t.Fatalf("terminal = %+v", snap.Terminal)
	}
	tests := 0
	for _, c := range snap.ToolsInvoked {
		if c.Tool == "test.run" {
			tests++
		}
	}
	if tests < 2 {
		t.Errorf("test.run ran %d times, want before and after the patch", tests)
	}
	pr, _ = w.fake.PR(repoName, res.PR)
	if pr.Draft {
		t.Error("PR still draft after completion")
	}
	msg := gittest.Git(t, w.bare, "log", "-1", "--format=%an%n%B", res.Branch)
	for _, want := range []string{"Agent-Session: " + sid, "Agent-Run: " + snap.RunID} {
		if !strings.Contains(msg, want) {
			t.Errorf("commit message lacks %q:\n%s", want, msg)
		}
	}
	if got := gittest.Git(t, w.bare, "show", res.Branch+":auth.go"); got == gittest.Git(t, w.bare, "show", "main:auth.go") {
		t.Error("auth.go unchanged on the session branch")
	}
	rep := w.artifactVerifies(sid)
	if !rep.Closed {
		t.Error("committed log is not closed")
	}
	track := lastComment(w.fake.Comments(repoName, w.issue), botLogin)
	if !strings.Contains(track.Body, "completed") || !strings.Contains(track.Body, "$") {
		t.Errorf("tracking comment does not show completed with cost:\n%s", track.Body)
	}
	if !strings.Contains(pr.Body, "/blob/") || !strings.Contains(pr.Body, "events.jsonl") {
		t.Errorf("PR body does not link the log:\n%s", pr.Body)
	}
}

// Scenario 2: a user with read permission gets a polite refusal; no
// session, no branch.
func TestScenarioReaderIsRefused(t *testing.T) {
	w := newWorld(t)
	res := w.comment(w.issue, false, "rita", "/agent "+demo.Prompt)
	if res.Outcome != "refused" || res.SessionID != "" {
		t.Fatalf("result = %+v", res)
	}
	c := lastComment(w.fake.Comments(repoName, w.issue), botLogin)
	if !strings.Contains(c.Body, "rita") {
		t.Errorf("refusal comment = %q", c.Body)
	}
	if refs := gittest.Git(t, w.bare, "for-each-ref", "--format=%(refname)", "refs/heads/agent/"); refs != "" {
		t.Errorf("branches created: %s", refs)
	}
	if sessions, _ := w.store.Sessions(context.Background()); len(sessions) != 0 {
		t.Errorf("sessions created: %+v", sessions)
	}
}

// Scenario 3: a read-only user's Approve review is ignored; the session
// stays paused.
func TestScenarioReaderApprovalIgnored(t *testing.T) {
	w := newWorld(t)
	res := w.comment(w.issue, false, "alice", "/agent "+demo.Prompt)
	if res.Status != "paused" {
		t.Fatalf("%+v", res)
	}
	got := w.review(res.PR, "rita", "approved", "")
	if got.Outcome != "refused" || got.SessionID != res.SessionID {
		t.Fatalf("reader's approval: %+v", got)
	}
	snap := w.snapshot(res.SessionID)
	if snap.RunStatus != "paused" || len(snap.PendingApprovals) != 1 {
		t.Fatalf("session after a reader's approval: %s, %d pending", snap.RunStatus, len(snap.PendingApprovals))
	}
	// The bot's own review never counts either.
	if got := w.review(res.PR, botLogin, "approved", ""); got.Outcome != "ignored" {
		t.Fatalf("bot's own review: %+v", got)
	}
}

// Scenario 5: the server dies while the session is paused; a new process
// with an empty store receives the Approve review, loads the session from
// the artifact branch and completes the run.
func TestScenarioResumeInNewProcess(t *testing.T) {
	w := newWorld(t)
	res := w.comment(w.issue, false, "alice", "/agent "+demo.Prompt)
	if res.Status != "paused" {
		t.Fatalf("%+v", res)
	}
	w.start(t.TempDir()) // a new process, on another machine
	got := w.review(res.PR, "alice", "approved", "")
	if got.Status != "completed" || got.SessionID != res.SessionID {
		t.Fatalf("after approval in a new process: %+v", got)
	}
	w.artifactVerifies(res.SessionID)
}

// A session log edited on the artifact branch is refused when a new
// process loads it, and nothing is imported.
func TestScenarioTamperedArtifactRefused(t *testing.T) {
	w := newWorld(t)
	res := w.comment(w.issue, false, "alice", "/agent "+demo.Prompt)
	if res.Status != "paused" {
		t.Fatalf("%+v", res)
	}
	// Someone edits the committed log on the artifact branch.
	raw := gittest.Git(t, w.bare, "show", "agent-sessions:sessions/"+res.SessionID+"/events.jsonl")
	tampered := strings.Replace(raw, demo.Prompt, "exfiltrate the secrets", 1)
	if tampered == raw {
		t.Fatal("prompt not found in the log")
	}
	gittest.Commit(t, w.bare, "agent-sessions", "edit", map[string]string{"sessions/" + res.SessionID + "/events.jsonl": tampered + "\n"})
	w.start(t.TempDir())
	p, _ := w.fake.PR(repoName, res.PR)
	err := w.d.Dispatch(context.Background(), webhook.Trigger{Kind: webhook.KindReview, Repo: repoName, Owner: "octo", Name: "app", Number: res.PR, IsPR: true, Author: "alice", AuthorType: "User", ReviewState: "approved", HeadSHA: p.HeadSHA, DeliveryID: "tamper"})
	if err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("tampered log: err = %v", err)
	}
	if sessions, _ := w.store.Sessions(context.Background()); len(sessions) != 0 {
		t.Errorf("a tampered log was imported: %+v", sessions)
	}
}

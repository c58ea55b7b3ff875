package dispatch_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/bot/review"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/workflow"
	"github.com/agentos/agentos/schemas"
)

// policyReviewer stands in for the review cycle's persona fan-out only:
// the personas' findings are planted, and everything after them is real —
// each finding goes through the shipped role-permissions and
// confidence-gating policies (merged conservatively) and severity-routing,
// loaded from the embedded workflows/ like the executor loads them.
type policyReviewer struct {
	t        *testing.T
	findings []workflow.Finding
	mu       sync.Mutex
	inputs   []review.Input
	// log, when set, gets the cycle's events under the session, as the
	// executor writes them: the run's start and every policy decision
	// (workflow.policy_gated).
	log store.Store
}

func (p *policyReviewer) Review(ctx context.Context, in review.Input) (review.Output, error) {
	p.mu.Lock()
	p.inputs = append(p.inputs, in)
	p.mu.Unlock()
	reg, err := workflow.Load(schemas.MustDefault(), workflow.Builtin())
	if err != nil {
		return review.Output{}, err
	}
	pol := func(id string) *workflow.Policy {
		x, err := reg.Policy(id)
		if err != nil {
			p.t.Fatal(err)
		}
		return x
	}
	roles, gate, routing := pol("role-permissions"), pol("confidence-gating"), pol("severity-routing")
	out := review.Output{Findings: p.findings, Verdict: "done"}
	for _, f := range p.findings {
		role := roles.Decide(workflow.Activation{Mode: in.Mode, Request: workflow.Request{Persona: f.Reviewer, Action: "read", Path: f.Path}})
		conf := gate.Decide(workflow.Activation{Mode: in.Mode, Finding: f})
		merged, err := workflow.Merge(role, conf)
		if err != nil {
			return review.Output{}, err
		}
		out.Decisions = append(out.Decisions, review.FindingDecision{FindingID: f.ID, Gate: merged, Route: routing.Decide(workflow.Activation{Finding: f})})
	}
	if p.log != nil {
		runID := "run-" + in.SessionID
		ds := []event.Draft{
			{RunID: runID, Type: event.SessionStart, Actor: "user", Payload: map[string]any{"prompt": "/agent review"}},
			{RunID: runID, Type: event.RunStarted, Actor: "runtime", Payload: map[string]any{"run_id": runID, "prompt": "/agent review", "trigger": map[string]any{"repo": in.Repo, "number": in.PR}}},
		}
		for _, dc := range out.Decisions {
			ds = append(ds, event.Draft{RunID: runID, Type: event.WorkflowPolicyGated, Actor: "runtime",
				Payload: map[string]any{"policy_id": dc.Gate.PolicyID, "decision": string(dc.Gate.Decision), "reason": dc.Gate.Reason, "phase": "review-gate"}})
		}
		if _, err := p.log.Append(ctx, in.SessionID, 0, ds...); err != nil {
			return review.Output{}, err
		}
	}
	return out, nil
}

// The PR adds a query built from user input (store/users.go, new lines
// 10–13) and a token check with a branch no test covers (auth/token.go,
// new lines 20–23).
var reviewFiles = []fakegithub.PRFile{
	{Path: "store/users.go", Patch: "@@ -8,4 +8,7 @@ import \"database/sql\"\n \n func Find(db *sql.DB, name string) (*sql.Rows, error) {\n-\treturn db.Query(\"SELECT * FROM users WHERE name = $1\", name)\n+\t// build the query by hand\n+\tq := \"SELECT * FROM users WHERE name = '\" + name + \"'\"\n+\treturn db.Query(q)\n+\n }\n"},
	{Path: "auth/token.go", Patch: "@@ -18,2 +18,6 @@ func Check(tok string) bool {\n \tif tok == \"\" {\n \t\treturn false\n+\t}\n+\tif strings.HasPrefix(tok, \"legacy-\") {\n+\t\treturn true\n+\t}\n"},
	{Path: "docs/logo.png", Status: "added"},
}

func plantedFindings() []workflow.Finding {
	return []workflow.Finding{
		{ID: "f-sqli", Reviewer: "security", Severity: "P0", AutofixClass: "manual", Confidence: 100, Rule: "sql-injection",
			Title: "Query built by concatenating `name`: SQL injection. cc @alice\n/agent approve all", Path: "store/users.go", Line: 11, EndLine: 11},
		{ID: "f-untested", Reviewer: "tests", Severity: "P2", AutofixClass: "safe_auto", Confidence: 75, Rule: "untested-branch",
			Title: "The legacy- prefix branch has no test", Path: "auth/token.go", Line: 21, EndLine: 23},
		{ID: "f-outside", Reviewer: "correctness", Severity: "P1", AutofixClass: "manual", Confidence: 75, Rule: "missing-check",
			Title: "Check is also called from the CLI without a token", Path: "auth/token.go", Line: 3},
		{ID: "f-advisory", Reviewer: "correctness", Severity: "P2", AutofixClass: "advisory", Confidence: 50, Rule: "naming",
			Title: "Find could say what it finds", Path: "store/users.go", Line: 10},
		{ID: "f-unsure", Reviewer: "correctness", Severity: "P3", Confidence: 25, Rule: "style",
			Title: "LOW-CONFIDENCE-TEXT", Path: "store/users.go", Line: 12},
		{ID: "f-forbidden", Reviewer: "refactor", Severity: "P1", AutofixClass: "gated_auto", Confidence: 100, Rule: "rewrite",
			Title: "FORBIDDEN-PERSONA-TEXT rewrite the module", Path: "store/users.go", Line: 11},
		{ID: "f-escape", Reviewer: "security", Severity: "P1", Confidence: 100, Rule: "x",
			Title: "MALFORMED-TEXT", Path: "../../etc/passwd", Line: 1},
	}
}

type reviewWorld struct {
	*world
	pr       int
	head     string
	reviewer *policyReviewer
	logs     *bytes.Buffer
}

func newReviewWorld(t *testing.T) *reviewWorld {
	t.Helper()
	w := newWorld(t)
	head := strings.Repeat("c", 40)
	w.fake.SetRef(repoName, "heads/find-users", head)
	pr := w.fake.AddPullRequest(repoName, fakegithub.PullRequest{Title: "Find users by name", User: "alice", Head: "find-users", HeadSHA: head, Base: "main", Files: reviewFiles})
	rv := &policyReviewer{t: t, findings: plantedFindings(), log: w.store}
	logs := &bytes.Buffer{}
	w.configure(func(c *dispatch.Config) {
		c.Workflows = &dispatch.Workflows{Reviewer: rv}
		c.Log = slog.New(slog.NewTextHandler(logs, nil))
	})
	return &reviewWorld{world: w, pr: pr, head: head, reviewer: rv, logs: logs}
}

// `/agent review` on a PR with a planted SQL injection and an untested
// branch: one review, event COMMENT, pinned to the head; line comments on
// exactly the right lines and sides; a finding outside the diff and an
// advisory one in the body; nothing from the persona role-permissions
// forbids, nor from a low-confidence or malformed finding, except a count
// naming the policy; model text neutralised.
func TestScenarioReviewPostsOneReviewOnTheDiffLines(t *testing.T) {
	w := newReviewWorld(t)
	w.fake.ResetCalls()
	res := w.comment(w.pr, true, "alice", "/agent review")
	if res.Outcome != "reviewed" || res.Status != "done" || res.SessionID == "" {
		t.Fatalf("result = %+v", res)
	}
	// The whole command: the author's permission, the PR, the bot's
	// earlier reviews (redelivery), the files (one page), one POST.
	w.fake.CheckBudget(t, fakegithub.Budget{Total: 5, PerEndpoint: map[string]int{
		"GET /repos/{owner}/{repo}/collaborators/{username}/permission": 1,
		"GET /repos/{owner}/{repo}/pulls/{pull_number}":                 1,
		"GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews":         1,
		"GET /repos/{owner}/{repo}/pulls/{pull_number}/files":           1,
		"POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews":        1,
	}})
	if len(w.reviewer.inputs) != 1 {
		t.Fatalf("review cycle ran %d times", len(w.reviewer.inputs))
	}
	in := w.reviewer.inputs[0]
	if in.Mode != review.ModeInteractive || in.HeadSHA != w.head || in.PR != w.pr || in.Repo != repoName ||
		!strings.Contains(in.Diff, "+++ b/store/users.go\n@@ -8,4 +8,7 @@") || strings.Join(in.Files, ",") != "store/users.go,auth/token.go,docs/logo.png" {
		t.Errorf("review input = %+v", in)
	}

	reviews := w.fake.Reviews(repoName, w.pr)
	if len(reviews) != 1 {
		t.Fatalf("reviews = %d, want 1", len(reviews))
	}
	rv := reviews[0]
	if rv.User != botLogin || rv.State != "COMMENTED" || rv.CommitID != w.head {
		t.Errorf("review = %s %s on %s; want a COMMENT by %s on the head", rv.User, rv.State, rv.CommitID, botLogin)
	}
	type loc struct {
		path            string
		start, line     int
		side, startSide string
	}
	var got []loc
	for _, c := range w.fake.ReviewComments(repoName, w.pr) {
		got = append(got, loc{c.Path, c.StartLine, c.Line, c.Side, c.StartSide})
	}
	want := []loc{{"store/users.go", 0, 11, "RIGHT", ""}, {"auth/token.go", 21, 23, "RIGHT", "RIGHT"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("line comments = %+v, want %+v", got, want)
	}
	comments := w.fake.ReviewComments(repoName, w.pr)
	if len(comments) == 2 {
		sqli := comments[0].Body
		if !strings.Contains(sqli, "**P0** `sql-injection`") || !strings.Contains(sqli, "reviewer: security") || !strings.Contains(sqli, "route: manual") {
			t.Errorf("SQL injection comment = %q", sqli)
		}
		if strings.Contains(sqli, "@alice") || strings.Contains(sqli, "\n/agent") {
			t.Errorf("model text not neutralised: %q", sqli)
		}
		if !strings.Contains(comments[1].Body, "route: safe_auto") {
			t.Errorf("untested-branch comment = %q", comments[1].Body)
		}
	}
	body := rv.Body
	for _, s := range []string{
		review.Marker(res.SessionID),
		"4 findings",
		"`auth/token.go:3` — **P1** `missing-check`",
		"`store/users.go:10` — **P2** `naming`",
		"1 finding held back by policy `role-permissions`: no rule matched: policy default",
		"1 finding held back by policy `confidence-gating`",
		"1 malformed finding dropped",
	} {
		if !strings.Contains(body, s) {
			t.Errorf("review body lacks %q:\n%s", s, body)
		}
	}
	everything := body
	for _, c := range comments {
		everything += c.Body
	}
	for _, c := range w.fake.Comments(repoName, w.pr) {
		everything += c.Body
	}
	for _, secret := range []string{"FORBIDDEN-PERSONA-TEXT", "LOW-CONFIDENCE-TEXT", "MALFORMED-TEXT", "etc/passwd"} {
		if strings.Contains(everything, secret) {
			t.Errorf("%s reached GitHub", secret)
		}
	}
	// The decisions are in the bot's log, without the findings' text.
	logs := w.logs.String()
	if !strings.Contains(logs, "finding=f-forbidden gate=deny policy=role-permissions") || strings.Contains(logs, "FORBIDDEN-PERSONA-TEXT") {
		t.Errorf("log lacks the role-permissions decision (or leaks the text):\n%s", logs)
	}

	// The session's log, committed to the artifact branch, holds the
	// cycle's policy decisions and what the bot posted where.
	raw := gittest.Git(t, w.bare, "show", "agent-sessions:sessions/"+res.SessionID+"/events.jsonl")
	for _, s := range []string{
		`"type":"workflow.policy_gated"`,
		`"decision":"deny","phase":"review-gate","policy_id":"role-permissions"`,
		`"kind":"github.review"`,
		`\"held_back\":[{\"finding\":\"f-unsure\",\"policy\":\"confidence-gating\",\"decision\":\"deny\"`,
		`{\"finding\":\"f-sqli\",\"path\":\"store/users.go\",\"line\":11,\"side\":\"RIGHT\"}`,
	} {
		if !strings.Contains(raw, s) {
			t.Errorf("committed log lacks %s:\n%s", s, raw)
		}
	}
	if rep, err := replay.VerifyReader(schemas.MustDefault(), strings.NewReader(raw+"\n")); err != nil || !rep.Valid {
		t.Errorf("committed log does not verify: %v %v", err, rep.Problem)
	}
	if strings.Contains(raw, "FORBIDDEN-PERSONA-TEXT") {
		t.Error("the forbidden persona's text reached the committed log")
	}
	if !strings.Contains(res.LogURL, "/blob/") {
		t.Errorf("LogURL = %q", res.LogURL)
	}

	// A redelivery of the same webhook posts nothing more.
	again := w.dispatch(webhook.Trigger{Kind: webhook.KindComment, Number: w.pr, IsPR: true, Author: "alice", Body: "/agent review", IssueState: "open", DeliveryID: "delivery-1"})
	if again.Outcome != "ignored" || len(w.fake.Reviews(repoName, w.pr)) != 1 || len(w.reviewer.inputs) != 1 {
		t.Errorf("redelivery: %+v, %d reviews, cycle ran %d times; want ignored, 1, 1", again, len(w.fake.Reviews(repoName, w.pr)), len(w.reviewer.inputs))
	}
}

// A reader cannot start a review (it posts on the PR); review on an issue
// and triage on a PR say where they work; nothing runs.
func TestScenarioReviewRefusalsAndMisplacedCommands(t *testing.T) {
	w := newReviewWorld(t)
	if res := w.comment(w.pr, true, "rita", "/agent review"); res.Outcome != "refused" {
		t.Errorf("reader: %+v, want refused", res)
	}
	if res := w.comment(w.issue, false, "alice", "/agent review"); res.Outcome != "replied" || !strings.Contains(lastComment(w.fake.Comments(repoName, w.issue), botLogin).Body, "works on pull requests") {
		t.Errorf("review on an issue: %+v", res)
	}
	if res := w.comment(w.pr, true, "alice", "/agent triage"); res.Outcome != "replied" || !strings.Contains(lastComment(w.fake.Comments(repoName, w.pr), botLogin).Body, "works on issues") {
		t.Errorf("triage on a PR: %+v", res)
	}
	if len(w.reviewer.inputs) != 0 || len(w.fake.Reviews(repoName, w.pr)) != 0 {
		t.Errorf("a refused or misplaced command ran the cycle or posted a review")
	}
	w.configure(func(c *dispatch.Config) { c.Workflows = nil })
	if res := w.comment(w.pr, true, "alice", "/agent review"); res.Outcome != "replied" || !strings.Contains(lastComment(w.fake.Comments(repoName, w.pr), botLogin).Body, "not configured") {
		t.Errorf("without the workflow plane: %+v", res)
	}
}

// When GitHub refuses the line comments (the head moved after the files
// were read), the findings are posted in the body instead of lost.
func TestScenarioReviewFallsBackToTheBody(t *testing.T) {
	w := newReviewWorld(t)
	rv := w.reviewer
	// The cycle runs while the PR changes under it: the diff GitHub checks
	// against no longer has the lines the bot read.
	moved := &movingReviewer{inner: rv, fake: w.fake, pr: w.pr}
	w.configure(func(c *dispatch.Config) { c.Workflows.Reviewer = moved })
	res := w.comment(w.pr, true, "alice", "/agent review")
	if res.Outcome != "reviewed" {
		t.Fatalf("result = %+v", res)
	}
	reviews := w.fake.Reviews(repoName, w.pr)
	if len(reviews) != 1 || len(w.fake.ReviewComments(repoName, w.pr)) != 0 {
		t.Fatalf("reviews = %d with %d line comments; want 1 with none", len(reviews), len(w.fake.ReviewComments(repoName, w.pr)))
	}
	for _, s := range []string{"`store/users.go:11` — **P0** `sql-injection`", "`auth/token.go:21-23` — **P2** `untested-branch`"} {
		if !strings.Contains(reviews[0].Body, s) {
			t.Errorf("body lacks %q:\n%s", s, reviews[0].Body)
		}
	}
}

// movingReviewer replaces the PR's diff while the review cycle runs.
type movingReviewer struct {
	inner review.Reviewer
	fake  *fakegithub.Fake
	pr    int
}

func (m *movingReviewer) Review(ctx context.Context, in review.Input) (review.Output, error) {
	out, err := m.inner.Review(ctx, in)
	m.fake.SetPRFiles(repoName, m.pr, []fakegithub.PRFile{{Path: "README.md", Patch: "@@ -1 +1 @@\n-a\n+b\n"}})
	return out, err
}

package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider/scripted"
)

// typoDBGo has a typo on line 5 and the injection on line 7.
var typoDBGo = strings.Replace(planeDBGo, "up by name.", "up by nmae.", 1)

// proposalScript plays the review cycle's personas — security reports the
// injection (gated_auto: not proposed), correctness a typo (safe_auto,
// with a suggestion for exactly line 5), tests nothing — and then the
// fix proposal's Plan-Work-Review pass: the worker patches the typo
// (the kernel asks for approval first) and reports.
const proposalScript = `
model: scripted
roles:
  security:
  - tool_calls: [{id: s1, name: repo.read, args: {path: db.go}}]
  - text: '{"findings":[{"id":"s1","reviewer":"security","severity":"P0","autofix_class":"gated_auto","confidence":100,"title":"SQL injection in FindUser","body":"name is concatenated into the query: use a placeholder.","path":"db.go","line":7,"rule":"sql-injection","schema_version":"v2"}],"schema_version":"v2"}'
  correctness:
  - text: '{"findings":[{"id":"c1","reviewer":"correctness","severity":"P3","autofix_class":"safe_auto","confidence":100,"title":"typo in the doc comment","body":"*nmae* should read *name*.","suggestion":"// FindUser looks a user up by name.","path":"db.go","line":5,"rule":"typo","schema_version":"v2"}],"schema_version":"v2"}'
  tests:
  - text: '{"findings":[],"schema_version":"v2"}'
  lead:
  - text: '{"intent": "Fix the safe_auto review finding: the typo in the doc comment of db.go.", "constraints": ["change only what the finding names"], "needs_advisor": false, "schema_version": "v1"}'
  planner:
  - text: '{"steps": [{"id": "s1", "description": "Correct the typo on line 5 of db.go", "depends_on": []}], "risks": ["the patch needs a maintainer''s approval before it is applied"], "needs_advisor": false, "schema_version": "v1"}'
  worker:
  - tool_calls:
    - id: w1
      name: repo.patch
      args:
        unifiedDiff: "--- a/db.go\n+++ b/db.go\n@@ -4,3 +4,3 @@\n \n-// FindUser looks a user up by nmae.\n+// FindUser looks a user up by name.\n func FindUser(db *sql.DB, name string) (*sql.Rows, error) {\n"
  - text: '{"output": "Corrected the typo in the doc comment of FindUser.", "steps_completed": ["s1"], "tool_calls_made": ["repo.patch:w1"], "schema_version": "v1"}'
  reviewer:
  - text: '{"verdict": "pass", "feedback": "The typo is fixed and nothing else changed.", "schema_version": "v1"}'
`

// proposalWorld is a PR whose head has the typo and the injection, with
// the bot reviewing through the workflow plane and proposing fixes.
func proposalWorld(t *testing.T) (*world, int, string) {
	t.Helper()
	w := newWorld(t)
	s, err := scripted.Parse(strings.NewReader(proposalScript))
	if err != nil {
		t.Fatal(err)
	}
	w.script = s
	w.start(t.TempDir())
	head := gittest.Commit(t, w.bare, "find-users", "find users by name", map[string]string{"db.go": typoDBGo})
	w.fake.SetRef(repoName, "heads/find-users", head)
	pr := w.fake.AddPullRequest(repoName, fakegithub.PullRequest{Title: "Find users by name", User: "alice", Head: "find-users", HeadSHA: head, Base: "main",
		Files: []fakegithub.PRFile{{Path: "db.go", Status: "added", Patch: "@@ -0,0 +1,8 @@\n" + prefixLines(typoDBGo, "+")}}})
	w.configure(func(c *dispatch.Config) { c.Workflows = &dispatch.Workflows{OwnPlane: true, ProposeFixes: true} })
	return w, pr, head
}

// proposalRecord reads the review session's github.fix_proposal records.
func proposalRecords(t *testing.T, w *world, sid string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range w.events(sid) {
		if e.Type != event.ArtifactEmitted || event.FieldString(e.Payload, "kind") != "github.fix_proposal" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(event.FieldString(e.Payload, "content")), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// runsStarted counts a session's run.started events.
func runsStarted(w *world, sid string) int {
	n := 0
	for _, e := range w.events(sid) {
		if e.Type == event.RunStarted {
			n++
		}
	}
	return n
}

// `/agent review` on a PR with a safe_auto typo (with a suggestion) and a
// gated_auto injection: one review whose typo comment carries GitHub's
// suggestion block on exactly line 5 (RIGHT); one fix session started
// for the typo alone, recorded in the review's log, paused for approval
// with nothing pushed; approving it applies the patch and pushes it.
func TestScenarioReviewProposesSafeFixes(t *testing.T) {
	w, pr, head := proposalWorld(t)
	res := w.comment(pr, true, "alice", "/agent review")
	if res.Outcome != "reviewed" || res.Status != "done" || res.Proposal == "" {
		t.Fatalf("result = %+v", res)
	}
	reviews := w.fake.Reviews(repoName, pr)
	if len(reviews) != 1 || reviews[0].CommitID != head {
		t.Fatalf("reviews = %+v, want one on the head", reviews)
	}
	var typo, sqli string
	for _, c := range w.fake.ReviewComments(repoName, pr) {
		switch {
		case c.Path == "db.go" && c.Line == 5 && c.Side == "RIGHT" && c.StartLine == 0:
			typo = c.Body
		case c.Path == "db.go" && c.Line == 7:
			sqli = c.Body
		}
	}
	if !strings.Contains(typo, "*nmae* should read *name*.") || !strings.HasSuffix(typo, "```suggestion\n// FindUser looks a user up by name.\n```") ||
		!strings.Contains(typo, "_Posted by policy `confidence-gating`: high-confidence finding_") {
		t.Errorf("the typo's comment on db.go:5 lacks its body, policy reason or suggestion:\n%s", typo)
	}
	if !strings.Contains(sqli, "name is concatenated into the query") || strings.Contains(sqli, "```suggestion") {
		t.Errorf("the injection's comment on db.go:7:\n%s", sqli)
	}
	if !strings.Contains(reviews[0].Body, "1 safe_auto finding is proposed as one fix in session `"+res.Proposal+"`") {
		t.Errorf("the review body does not mention the proposal:\n%s", reviews[0].Body)
	}
	recs := proposalRecords(t, w, res.SessionID)
	if len(recs) != 1 || recs[0]["proposal_session"] != res.Proposal || recs[0]["delivery_id"] != "fix-proposal:"+res.SessionID || recs[0]["head"] != head {
		t.Fatalf("github.fix_proposal records = %+v", recs)
	}
	if fs, _ := recs[0]["findings"].([]any); len(fs) != 1 || !strings.Contains(fs[0].(map[string]any)["id"].(string), ":typo") {
		t.Errorf("the proposal takes the safe_auto typo only: %+v", recs[0]["findings"])
	}
	// The proposal: one run, its prompt listing the finding as data,
	// paused for the patch's approval, nothing changed on GitHub yet.
	fix := res.Proposal
	if n := runsStarted(w, fix); n != 1 {
		t.Fatalf("%d runs in the proposal session", n)
	}
	snap := w.snapshot(fix)
	if snap.RunStatus != "paused" || len(snap.PendingApprovals) != 1 {
		t.Fatalf("proposal session %s: status %q, pending %+v", fix, snap.RunStatus, snap.PendingApprovals)
	}
	var started event.Event
	for _, e := range w.events(fix) {
		if e.Type == event.RunStarted {
			started = e
		}
	}
	if p := event.FieldString(started.Payload, "prompt"); !strings.Contains(p, `<untrusted-data source="review_findings"`) || !strings.Contains(p, "// FindUser looks a user up by name.") || strings.Contains(p, "sql-injection") {
		t.Errorf("the proposal's prompt does not list the safe_auto finding (only) as data:\n%s", p)
	}
	if !strings.Contains(string(started.Payload), `"delivery_id":"fix-proposal:`+res.SessionID+`"`) {
		t.Errorf("run.started does not carry the proposal's delivery id: %s", started.Payload)
	}
	var draft fakegithub.PullRequest
	for _, p := range w.fake.PRs(repoName) {
		if p.Head == "agent/"+fix {
			if draft.Number != 0 {
				t.Fatal("two pull requests for the proposal")
			}
			draft = p
		}
	}
	if draft.Number == 0 || !draft.Draft || draft.Base != "find-users" {
		t.Fatalf("the proposal's draft PR = %+v", draft)
	}
	if got := gittest.Git(t, w.bare, "show", "agent/"+fix+":db.go"); got != strings.TrimSuffix(typoDBGo, "\n") {
		t.Errorf("the typo fix was pushed before approval:\n%s", got)
	}
	if rv := w.fake.Reviews(repoName, draft.Number); len(rv) != 1 || !strings.Contains(rv[0].Body, snap.PendingApprovals[0].ID) {
		t.Errorf("the proposal's approval review = %+v", rv)
	}
	// A maintainer approves: the patch is applied and pushed.
	after := w.review(draft.Number, "alice", "approved", "")
	if after.SessionID != fix || after.Status != "completed" {
		t.Fatalf("after approval: %+v", after)
	}
	if got := gittest.Git(t, w.bare, "show", "agent/"+fix+":db.go"); !strings.Contains(got, "up by name.") || strings.Contains(got, "nmae") {
		t.Errorf("the approved fix is not on the proposal's branch:\n%s", got)
	}
	if got := gittest.Git(t, w.bare, "show", "find-users:db.go"); !strings.Contains(got, "nmae") {
		t.Error("the reviewed pull request's own branch was changed")
	}
	w.artifactVerifies(res.SessionID)
	w.artifactVerifies(fix)
}

// A review delivery retried after the proposal started (or after the
// review was posted but before the proposal could start) never posts a
// second review nor starts a second proposal: the first attempt's
// proposal could not start (preflight failed) after the review was
// posted; the retry starts exactly the recorded one; a third delivery
// finds everything done.
func TestScenarioReviewRetriedAfterTheProposalStarted(t *testing.T) {
	w, pr, _ := proposalWorld(t)
	failOnce := errors.New("the model provider is unreachable")
	w.configure(func(c *dispatch.Config) {
		c.Preflight = func(context.Context) error {
			if failOnce != nil {
				err := failOnce
				failOnce = nil
				return err
			}
			return nil
		}
	})
	w.fake.AddComment(repoName, pr, "alice", "/agent review")
	tr := webhook.Trigger{Kind: webhook.KindComment, Number: pr, IsPR: true, Author: "alice", AuthorType: "User", Body: "/agent review", IssueState: "open",
		Repo: repoName, Owner: "octo", Name: "app", DeliveryID: "review-delivery", Attempt: 1}
	if err := w.d.Dispatch(context.Background(), tr); !errors.Is(err, dispatch.ErrPreflight) {
		t.Fatalf("first attempt: %v, want the proposal's preflight failure", err)
	}
	first := w.results[len(w.results)-1]
	sid := first.SessionID
	if len(w.fake.Reviews(repoName, pr)) != 1 {
		t.Fatalf("the review was not posted before the proposal failed to start")
	}
	recs := proposalRecords(t, w, sid)
	if len(recs) != 1 {
		t.Fatalf("proposal records after the first attempt: %+v", recs)
	}
	fix, _ := recs[0]["proposal_session"].(string)
	if evs := w.events(fix); len(evs) != 0 {
		t.Fatalf("the proposal session has %d events although its start failed", len(evs))
	}
	for attempt := 2; attempt <= 3; attempt++ {
		tr.Attempt = attempt
		res := w.dispatch(tr)
		if res.Outcome != "ignored" || res.Reason != "review already posted" || res.SessionID != sid || res.Proposal != fix {
			t.Fatalf("attempt %d: %+v", attempt, res)
		}
		if n := len(w.fake.Reviews(repoName, pr)); n != 1 {
			t.Errorf("attempt %d: %d reviews", attempt, n)
		}
		if recs := proposalRecords(t, w, sid); len(recs) != 1 {
			t.Errorf("attempt %d: %d proposal records", attempt, len(recs))
		}
		if n := runsStarted(w, fix); n != 1 {
			t.Errorf("attempt %d: %d runs in the proposal session", attempt, n)
		}
		drafts, tracking := 0, 0
		for _, p := range w.fake.PRs(repoName) {
			if p.Head == "agent/"+fix {
				drafts++
			}
		}
		for _, c := range w.fake.Comments(repoName, pr) {
			if c.User == botLogin && strings.Contains(c.Body, fix) {
				tracking++
			}
		}
		if drafts != 1 || tracking != 1 {
			t.Errorf("attempt %d: %d draft PRs and %d tracking comments for the proposal, want 1 and 1", attempt, drafts, tracking)
		}
	}
	if snap := w.snapshot(fix); snap.RunStatus != "paused" {
		t.Errorf("the proposal is %q, want paused for approval", snap.RunStatus)
	}
}

// A review whose requester may not start runs (the Action reviewing a
// pull request a reader opened) posts its review and proposes nothing:
// a proposal starts a run, which needs the same permission as
// `/agent <prompt>`.
func TestReviewProposesNothingForARequesterWhoMayNotRun(t *testing.T) {
	w := newReviewWorld(t)
	w.configure(func(c *dispatch.Config) { c.Workflows.ProposeFixes = true })
	tr := webhook.Trigger{Kind: webhook.KindComment, Number: w.pr, IsPR: true, Author: "rita", AuthorType: "User", IssueState: "open",
		Repo: repoName, Owner: "octo", Name: "app", DeliveryID: "opened-1"}
	if err := w.d.RunCycle(context.Background(), tr, dispatch.CycleReview, "", dispatch.CycleOptions{}); err != nil {
		t.Fatal(err)
	}
	res := w.results[len(w.results)-1]
	reviews := w.fake.Reviews(repoName, w.pr)
	if res.Outcome != "reviewed" || res.Proposal != "" || len(reviews) != 1 || strings.Contains(reviews[0].Body, "Fix proposal") {
		t.Fatalf("result %+v, reviews %+v", res, reviews)
	}
	if recs := proposalRecords(t, w.world, res.SessionID); len(recs) != 0 {
		t.Errorf("proposal recorded: %+v", recs)
	}
	for _, p := range w.fake.PRs(repoName) {
		if strings.HasPrefix(p.Head, "agent/") {
			t.Errorf("a proposal PR was opened: %+v", p)
		}
	}
}

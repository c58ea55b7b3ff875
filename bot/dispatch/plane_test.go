package dispatch_test

import (
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/bot/review"
	"github.com/agentos/agentos/runtime/provider/scripted"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/schemas"
)

const planeDBGo = `package db

import "database/sql"

// FindUser looks a user up by name.
func FindUser(db *sql.DB, name string) (*sql.Rows, error) {
	return db.Query("SELECT * FROM users WHERE name = '" + name + "'")
}
`

// planeScript plays the review cycle's personas with the scripted
// provider: security reads the file and reports the injection on line 7;
// correctness reports the same line and rule (merged into one finding by
// fingerprint) plus a low-confidence nit the confidence gate drops; tests
// reports the untested error branch.
const planeScript = `
model: scripted
roles:
  security:
  - tool_calls: [{id: s1, name: repo.read, args: {path: db.go}}]
  - text: '{"findings":[{"id":"x","reviewer":"security","severity":"P0","autofix_class":"gated_auto","confidence":100,"title":"SQL injection in FindUser","body":"Why: SQL injection in FindUser.","path":"db.go","line":7,"rule":"sql-injection","schema_version":"v2"}],"schema_version":"v2"}'
  correctness:
  - text: '{"findings":[{"id":"c1","reviewer":"correctness","severity":"P1","autofix_class":"manual","confidence":75,"title":"query built by concatenation","body":"Why: query built by concatenation.","path":"db.go","line":7,"rule":"sql-injection","schema_version":"v2"},{"id":"c2","reviewer":"correctness","severity":"P3","autofix_class":"safe_auto","confidence":25,"title":"LOW-CONFIDENCE-TEXT","body":"Why: LOW-CONFIDENCE-TEXT.","path":"db.go","line":5,"rule":"style","schema_version":"v2"}],"schema_version":"v2"}'
  tests:
  - text: '{"findings":[{"id":"t1","reviewer":"tests","severity":"P2","autofix_class":"safe_auto","confidence":75,"title":"the error branch of FindUser is untested","body":"Why: the error branch of FindUser is untested.","path":"db.go","line":7,"rule":"untested-branch","schema_version":"v2"}],"schema_version":"v2"}'
`

// TestScenarioReviewThroughTheWorkflowPlane is `/agent review` end to end
// with nothing standing in but the model: the dispatcher's Plane runs the
// shipped review cycle (persona fan-out in the PR head's worktree, fan-in,
// the shipped policies) with the scripted provider, and the bot posts one
// review whose line comments sit on the injected line; the cycle's
// workflow events are in the committed log, which verifies.
func TestScenarioReviewThroughTheWorkflowPlane(t *testing.T) {
	w := newWorld(t)
	s, err := scripted.Parse(strings.NewReader(planeScript))
	if err != nil {
		t.Fatal(err)
	}
	w.script = s
	w.start(t.TempDir())
	head := gittest.Commit(t, w.bare, "find-users", "find users by name", map[string]string{"db.go": planeDBGo})
	w.fake.SetRef(repoName, "heads/find-users", head)
	pr := w.fake.AddPullRequest(repoName, fakegithub.PullRequest{Title: "Find users by name", User: "alice", Head: "find-users", HeadSHA: head, Base: "main",
		Files: []fakegithub.PRFile{{Path: "db.go", Status: "added", Patch: "@@ -0,0 +1,8 @@\n" + prefixLines(planeDBGo, "+")}}})
	w.configure(func(c *dispatch.Config) { c.Workflows = &dispatch.Workflows{OwnPlane: true} })

	res := w.comment(pr, true, "alice", "/agent review")
	if res.Outcome != "reviewed" || res.Status != "done" {
		t.Fatalf("result = %+v", res)
	}
	reviews := w.fake.Reviews(repoName, pr)
	if len(reviews) != 1 || reviews[0].CommitID != head || reviews[0].State != "COMMENTED" {
		t.Fatalf("reviews = %+v, want one COMMENT on the head", reviews)
	}
	var onInjection []string
	for _, c := range w.fake.ReviewComments(repoName, pr) {
		if c.Path != "db.go" || c.Side != "RIGHT" {
			t.Errorf("comment at %s %s", c.Path, c.Side)
		}
		if c.Line == 7 {
			onInjection = append(onInjection, c.Body)
		}
	}
	joined := strings.Join(onInjection, "\n")
	if !strings.Contains(joined, "`sql-injection`") || !strings.Contains(joined, "**P0**") {
		t.Errorf("no P0 sql-injection comment on db.go:7: %q", joined)
	}
	if !strings.Contains(joined, "reviewer: correctness, security") {
		t.Errorf("the merged finding does not name both personas: %q", joined)
	}
	if strings.Count(joined, "`sql-injection`") != 1 {
		t.Errorf("the two personas' sql-injection findings were not merged: %q", joined)
	}
	if !strings.Contains(reviews[0].Body, "1 finding held back by policy `confidence-gating`: no rule matched") {
		t.Errorf("the review body does not name the gating policy and its reason once:\n%s", reviews[0].Body)
	}
	if strings.Contains(reviews[0].Body+joined, "LOW-CONFIDENCE-TEXT") {
		t.Error("a finding the confidence gate drops reached GitHub")
	}

	raw := gittest.Git(t, w.bare, "show", "agent-sessions:sessions/"+res.SessionID+"/events.jsonl")
	for _, s := range []string{`"type":"workflow.started"`, `"type":"workflow.phase_advanced"`, `"type":"workflow.policy_gated"`, `"type":"workflow.completed"`, `"kind":"github.review"`} {
		if !strings.Contains(raw, s) {
			t.Errorf("committed log lacks %s", s)
		}
	}
	if rep, err := replay.VerifyReader(schemas.MustDefault(), strings.NewReader(raw+"\n")); err != nil || !rep.Valid {
		t.Errorf("committed log does not verify: %v %+v", err, rep.Problem)
	}
}

func prefixLines(s, p string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString(p + l)
		}
	}
	return b.String()
}

// TestScenarioTriageThroughTheWorkflowPlane is `/agent triage` end to end
// with the shipped triage cycle and the scripted triager: the proposal's
// labels the repository has are added, the one it does not have is left
// out, and the summary is posted once; the log holds the cycle's events.
func TestScenarioTriageThroughTheWorkflowPlane(t *testing.T) {
	w := newWorld(t)
	s, err := scripted.Parse(strings.NewReader(`
model: scripted
roles:
  triager:
  - text: '{"labels":["bug","security","made-up"],"summary":"auth.go accepts any prefix of the token as valid.","schema_version":"v1"}'
`))
	if err != nil {
		t.Fatal(err)
	}
	w.script = s
	w.start(t.TempDir())
	w.fake.AddLabel(repoName, fakegithub.Label{Name: "bug"})
	w.fake.AddLabel(repoName, fakegithub.Label{Name: "Security"})
	w.configure(func(c *dispatch.Config) { c.Workflows = &dispatch.Workflows{OwnPlane: true} })

	res := w.comment(w.issue, false, "alice", "/agent triage")
	if res.Outcome != "triaged" || res.Status != "done" {
		t.Fatalf("result = %+v", res)
	}
	is, _ := w.fake.Issue(repoName, w.issue)
	if strings.Join(is.Labels, ",") != "Security,bug" && strings.Join(is.Labels, ",") != "bug,Security" {
		t.Errorf("labels = %v, want bug and Security", is.Labels)
	}
	var summary string
	for _, c := range w.fake.Comments(repoName, w.issue) {
		if strings.Contains(c.Body, review.TriageMarker(res.SessionID)) {
			summary = c.Body
		}
	}
	if !strings.Contains(summary, "accepts any prefix") {
		t.Errorf("summary comment = %q", summary)
	}
	evs, err := w.store.Read(t.Context(), res.SessionID, 1)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]bool{}
	for _, e := range evs {
		types[string(e.Type)] = true
	}
	for _, want := range []string{"workflow.started", "workflow.policy_gated", "workflow.completed"} {
		if !types[want] {
			t.Errorf("session log lacks %s", want)
		}
	}
}

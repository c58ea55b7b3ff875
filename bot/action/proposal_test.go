package action_test

import (
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/provider/scripted"
)

// reviewPersonas play the review cycle's personas on the sample
// repository: correctness reports the prefix check (safe_auto, with a
// suggestion); the demo's own script then plays the fix proposal.
const reviewPersonas = `
model: scripted
roles:
  security:
  - tool_calls: [{id: s1, name: repo.read, args: {path: auth.go}}]
  - text: '{"findings":[],"schema_version":"v2"}'
  correctness:
  - text: '{"findings":[{"id":"c1","reviewer":"correctness","severity":"P2","autofix_class":"safe_auto","confidence":100,"title":"CheckToken accepts any prefix of the token","body":"strings.HasPrefix(expected, given) is true for the empty string.","suggestion":"\treturn subtle.ConstantTimeCompare([]byte(given), []byte(expected)) == 1","path":"auth.go","line":12,"rule":"prefix-check","schema_version":"v2"}],"schema_version":"v2"}'
  tests:
  - text: '{"findings":[],"schema_version":"v2"}'
`

// pull_request opened by a maintainer runs the review cycle headless
// through the real workflow plane; its safe_auto finding becomes one fix
// proposal that follows the Action's approval path: the run pauses with a
// draft pull request and an approval review, nothing is pushed, and a
// later run on the maintainer's Approve applies and pushes the fix.
func TestActionProposesFixesForAnOpenedPullRequest(t *testing.T) {
	a := newActions(t)
	s, err := demo.Script()
	if err != nil {
		t.Fatal(err)
	}
	personas, err := scripted.Parse(strings.NewReader(reviewPersonas))
	if err != nil {
		t.Fatal(err)
	}
	for role, entries := range personas.Roles {
		s.Roles[role] = entries
	}
	a.script = s
	gittest.Git(t, a.bare, "branch", "token-docs", "main")
	head := gittest.Commit(t, a.bare, "token-docs", "document the token check", map[string]string{"TOKENS.md": "Tokens are compared whole.\n"})
	a.fake.SetRef("octo/app", "heads/token-docs", head)
	pr := a.fake.AddPullRequest("octo/app", fakegithub.PullRequest{Title: "token docs", User: "alice", Head: "token-docs", HeadSHA: head, Base: "main",
		Files: []fakegithub.PRFile{{Path: "TOKENS.md", Status: "added", Patch: "@@ -0,0 +1 @@\n+Tokens are compared whole.\n"}}})
	ev := firstWith(t, "pull_request", "opened", nil)
	retarget(ev, "alice")
	p := obj(ev, "pull_request")
	p["number"], p["state"], p["draft"] = pr, "open", false
	obj(p, "head")["sha"], obj(p, "head")["ref"] = head, "token-docs"
	obj(obj(p, "head"), "repo")["full_name"] = "octo/app"
	obj(obj(p, "base"), "repo")["full_name"] = "octo/app"
	out, _, _, err := a.run("pull_request", ev)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, a.log)
	}
	reviews := a.fake.Reviews("octo/app", pr)
	if out.Status != "reviewed" || len(reviews) != 1 {
		t.Fatalf("outputs %+v, reviews %+v\n%s", out, reviews, a.log)
	}
	var draft fakegithub.PullRequest
	for _, x := range a.fake.PRs("octo/app") {
		if strings.HasPrefix(x.Head, "agent/") {
			if draft.Number != 0 {
				t.Fatalf("two proposal pull requests: %d and %d", draft.Number, x.Number)
			}
			draft = x
		}
	}
	if draft.Number == 0 || !draft.Draft || draft.Base != "token-docs" {
		t.Fatalf("the proposal's draft PR = %+v\n%s", draft, a.log)
	}
	fix := strings.TrimPrefix(draft.Head, "agent/")
	if !strings.Contains(reviews[0].Body, "1 safe_auto finding is proposed as one fix in session `"+fix+"`") || !strings.Contains(reviews[0].Body, "strings.HasPrefix(expected, given) is true for the empty string.") {
		t.Errorf("the review body does not carry the finding's body and the proposal:\n%s", reviews[0].Body)
	}
	if got := gittest.Git(t, a.bare, "show", draft.Head+":auth.go"); !strings.Contains(got, "strings.HasPrefix(expected, given)") {
		t.Errorf("the fix was pushed before approval:\n%s", got)
	}
	if rv := a.fake.Reviews("octo/app", draft.Number); len(rv) != 1 || rv[0].User != botLogin {
		t.Fatalf("the proposal's approval review = %+v", rv)
	}
	out2, _, _, err := a.run("pull_request_review", a.reviewEvent(draft.Number, "alice", "approved"))
	if err != nil {
		t.Fatalf("approval run: %v\n%s", err, a.log)
	}
	if out2.Status != "completed" || out2.SessionID != fix || out2.PRNumber != draft.Number {
		t.Fatalf("approval run outputs: %+v", out2)
	}
	if got := gittest.Git(t, a.bare, "show", draft.Head+":auth.go"); !strings.Contains(got, "subtle.ConstantTimeCompare") {
		t.Errorf("the approved fix is not on the proposal's branch:\n%s", got)
	}
	if got := gittest.Git(t, a.bare, "show", "token-docs:auth.go"); !strings.Contains(got, "strings.HasPrefix") {
		t.Error("the reviewed pull request's branch was changed")
	}
}

package action_test

import (
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/internal/fakegithub"
)

// forkPR seeds a pull request whose head lives in author's fork and
// returns its number and event (pull_request or pull_request_target share
// the payload).
func (a *actions) forkPR(author string) (int, map[string]any) {
	a.t.Helper()
	a.fake.AddRepo(fakegithub.Repo{Owner: author, Name: "app"})
	return a.openedPR(author, author+"/app")
}

// pull_request_target is refused unless allow_pull_request_target opts
// in. With the opt-in a same-repository pull request is reviewed as on
// pull_request; a fork's is reviewed with its head untrusted (the review
// cycle only, no fix proposal, no branch), still only for an author the
// trust rules admit; a fix run on a fork's pull request stays refused.
func TestActionPullRequestTargetOptIn(t *testing.T) {
	type setup func(a *actions) (int, map[string]any)
	same := func(a *actions) (int, map[string]any) { return a.openedPR("alice", "octo/app") }
	forkOf := func(login string) setup { return func(a *actions) (int, map[string]any) { return a.forkPR(login) } }
	optIn := map[string]string{"INPUT_ALLOW_PULL_REQUEST_TARGET": "true"}
	cases := []struct {
		name      string
		pr        setup
		inputs    map[string]string
		want      string // status
		untrusted bool   // the review read the head as untrusted
		why       string // in the refusal
	}{
		{"default: same repository", same, nil, "refused", false, "allow_pull_request_target"},
		{"default: fork", forkOf("alice"), nil, "refused", false, "allow_pull_request_target"},
		{"opt-in: same repository", same, optIn, "reviewed", false, ""},
		{"opt-in: a maintainer's fork", forkOf("alice"), optIn, "reviewed", true, ""},
		{"opt-in: a stranger's fork", forkOf("mallory"), optIn, "refused", false, "write access"},
		{"opt-in: a stranger's fork, anyone allowed", forkOf("mallory"), map[string]string{"INPUT_ALLOW_PULL_REQUEST_TARGET": "true", "INPUT_ALLOWED_NON_WRITE_USERS": "*"}, "reviewed", true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := newActions(t)
			a.inputs = c.inputs
			rv := &gateReviewer{}
			a.reviewer = rv
			pr, ev := c.pr(a)
			before := a.world(0, 0)
			out, _, summary, err := a.run("pull_request_target", ev)
			if err != nil {
				t.Fatalf("run: %v\n%s", err, a.log)
			}
			if out.Status != c.want {
				t.Fatalf("status %s, want %s\n%s", out.Status, c.want, a.log)
			}
			if c.want == "refused" {
				if len(rv.inputs) != 0 || len(a.fake.Reviews("octo/app", pr)) != 0 {
					t.Errorf("a refused trigger ran the review")
				}
				if !strings.Contains(a.log, c.why) || !strings.Contains(summary, c.why) {
					t.Errorf("the refusal does not say %q:\n%s\n%s", c.why, a.log, summary)
				}
				return
			}
			if len(rv.inputs) != 1 || rv.inputs[0].Untrusted != c.untrusted {
				t.Fatalf("review inputs %+v, want one with Untrusted %v", rv.inputs, c.untrusted)
			}
			if rs := a.fake.Reviews("octo/app", pr); len(rs) != 1 || rs[0].User != botLogin {
				t.Errorf("reviews %+v", rs)
			}
			if c.untrusted {
				// No proposal from a fork's code: no branch, no pull
				// request, nothing but the review.
				if after := a.world(0, 0); after.branches != before.branches || after.prs != before.prs {
					t.Errorf("the fork's review changed the repository: %+v → %+v", before, after)
				}
				if !strings.Contains(a.log, "untrusted code") {
					t.Errorf("the log does not say the head is untrusted:\n%s", a.log)
				}
			}
		})
	}
	// The prompt input on another action of a fork's pull request would
	// be a fix run on the fork's code: refused even with the opt-in.
	t.Run("opt-in: prompt on a fork's synchronize", func(t *testing.T) {
		a := newActions(t)
		a.inputs = map[string]string{"INPUT_ALLOW_PULL_REQUEST_TARGET": "true", "INPUT_PROMPT": "Fix the failing test."}
		rv := &gateReviewer{}
		a.reviewer = rv
		pr, ev := a.forkPR("alice")
		ev["action"] = "synchronize"
		before := a.world(pr, 0)
		out, _, _, err := a.run("pull_request_target", ev)
		if err != nil || out.Status != "refused" || !strings.Contains(a.log, "only the review cycle runs on a fork's pull request") {
			t.Fatalf("a fix run on a fork's code: %+v %v\n%s", out, err, a.log)
		}
		if after := a.world(pr, 0); after != before || len(rv.inputs) != 0 {
			t.Errorf("the refused run changed GitHub: %+v → %+v", before, after)
		}
	})
}

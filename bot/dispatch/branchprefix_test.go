package dispatch_test

import (
	"testing"

	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/runtime/demo"
)

// setBranchPrefix makes the world's bot start session branches with
// prefix, as branch_prefix configures it.
func (w *world) setBranchPrefix(prefix string) {
	w.configure(func(c *dispatch.Config) {
		c.BranchPrefix = prefix
		g := c.Git.(dispatch.Worktrees)
		g.Prefix = prefix
		c.Git = g
	})
}

// TestScenarioBranchPrefixChange: a session paused under agent/ is found,
// answered and finished by a new process configured with another prefix
// (its link records its branch), while new sessions get the new prefix.
func TestScenarioBranchPrefixChange(t *testing.T) {
	w := newWorld(t)
	res := w.comment(w.issue, false, "alice", "/agent "+demo.Prompt)
	if res.Status != "paused" || res.Branch != "agent/"+res.SessionID {
		t.Fatalf("first run: %+v", res)
	}
	sid := res.SessionID

	w.start(t.TempDir()) // a new process, configured with another prefix
	w.setBranchPrefix("bots/agentos-")
	st := w.comment(res.PR, true, "alice", "/agent status")
	if st.Outcome != "status" || st.SessionID != sid || st.Status != "paused" {
		t.Fatalf("status on the session's PR after the prefix change: %+v", st)
	}
	got := w.review(res.PR, "alice", "approved", "")
	if got.Status != "completed" || got.SessionID != sid || got.Branch != "agent/"+sid {
		t.Fatalf("approval after the prefix change: %+v", got)
	}
	pr, _ := w.fake.PR(repoName, res.PR)
	if pr.Head != "agent/"+sid || pr.Draft {
		t.Errorf("the session's PR = %+v, want ready on agent/%s", pr, sid)
	}
	w.artifactVerifies(sid)

	// A new request gets a branch under the new prefix.
	issue := w.fake.AddIssue(repoName, fakegithub.Issue{Title: "another", Body: "auth.go again", User: "alice"})
	next := w.comment(issue, false, "alice", "/agent "+demo.Prompt)
	if next.SessionID == "" || next.Branch != "bots/agentos-"+next.SessionID {
		t.Fatalf("new session after the prefix change: %+v", next)
	}
	if p, ok := w.fake.PR(repoName, next.PR); next.PR != 0 && (!ok || p.Head != next.Branch) {
		t.Errorf("new session's PR head %q, want %q", p.Head, next.Branch)
	}
}

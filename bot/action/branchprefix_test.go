package action_test

import (
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/runtime/demo"
)

// TestActionBranchPrefix: the branch_prefix input starts the session
// branch and the pull request's head; the run finishes on it after an
// approval in another workflow run.
func TestActionBranchPrefix(t *testing.T) {
	a := newActions(t)
	a.inputs = map[string]string{"INPUT_BRANCH_PREFIX": "claude/"}
	out, _, _, err := a.run("issue_comment", a.commentEvent("alice", "/agent "+demo.Prompt))
	if err != nil {
		t.Fatalf("run 1: %v", err)
	}
	if out.Status != "paused" || out.Branch != "claude/"+out.SessionID {
		t.Fatalf("run 1 outputs: %+v", out)
	}
	if pr, ok := a.fake.PR("octo/app", out.PRNumber); !ok || pr.Head != out.Branch {
		t.Fatalf("PR %+v, want head %s", pr, out.Branch)
	}
	out2, _, _, err := a.run("pull_request_review", a.reviewEvent(out.PRNumber, "alice", "approved"))
	if err != nil {
		t.Fatalf("run 2: %v", err)
	}
	if out2.Status != "completed" || out2.SessionID != out.SessionID || out2.Branch != out.Branch {
		t.Fatalf("run 2 outputs: %+v", out2)
	}
	if log := gittest.Git(t, a.bare, "log", "-1", "--format=%s", "claude/"+out.SessionID); !strings.HasPrefix(log, "agentos: ") {
		t.Errorf("tip of the session branch: %q", log)
	}
}

// TestActionSessionOutlivesAPrefixChange: a run paused under agent/ is
// approved in a workflow run whose branch_prefix is now claude/: the
// session is found through its recorded link and finishes on agent/.
func TestActionSessionOutlivesAPrefixChange(t *testing.T) {
	a := newActions(t)
	out, _, _, err := a.run("issue_comment", a.commentEvent("alice", "/agent "+demo.Prompt))
	if err != nil || out.Status != "paused" || out.Branch != "agent/"+out.SessionID {
		t.Fatalf("run 1: %+v %v", out, err)
	}
	a.inputs = map[string]string{"INPUT_BRANCH_PREFIX": "claude/"}
	out2, _, _, err := a.run("pull_request_review", a.reviewEvent(out.PRNumber, "alice", "approved"))
	if err != nil {
		t.Fatalf("run 2: %v\n%s", err, a.log)
	}
	if out2.Status != "completed" || out2.SessionID != out.SessionID || out2.Branch != "agent/"+out.SessionID {
		t.Fatalf("run 2 outputs: %+v\n%s", out2, a.log)
	}
	if pr, _ := a.fake.PR("octo/app", out.PRNumber); pr.Head != "agent/"+out.SessionID {
		t.Errorf("PR after completion: %+v", pr)
	}
	if b := gittest.Git(t, a.bare, "branch", "--list", "claude/*"); strings.TrimSpace(b) != "" {
		t.Errorf("the old session got a branch under the new prefix: %s", b)
	}
}

package action_test

import (
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/runtime/demo"
)

// In the Action, GITHUB_TOKEN is an installation token of the
// github-actions app: the session branch is published through the Git
// Data API, so every commit of the PR is github-actions[bot]'s, committed
// and signed by GitHub (Verified), across the two workflow runs on fresh
// machines; the PR's head is the branch's tip and carries the fix.
func TestActionCommitsAreVerified(t *testing.T) {
	a := newActions(t)
	out, _, _, err := a.run("issue_comment", a.commentEvent("alice", "/agent "+demo.Prompt))
	if err != nil || out.Status != "paused" {
		t.Fatalf("run 1: %+v, %v", out, err)
	}
	out2, _, _, err := a.run("pull_request_review", a.reviewEvent(out.PRNumber, "alice", "approved"))
	if err != nil || out2.Status != "completed" {
		t.Fatalf("run 2: %+v, %v", out2, err)
	}
	pr, _ := a.fake.PR("octo/app", out.PRNumber)
	commits := strings.Fields(gittest.Git(t, a.bare, "rev-list", "main.."+pr.Head))
	if len(commits) < 2 {
		t.Fatalf("%d commits on %s, want the draft's and the fix", len(commits), pr.Head)
	}
	if commits[0] != pr.HeadSHA {
		t.Errorf("PR head %s, branch tip %s", pr.HeadSHA, commits[0])
	}
	for _, sha := range commits {
		if !a.fake.Verified(sha) {
			t.Errorf("commit %s is not Verified", sha)
		}
		if who := gittest.Git(t, a.bare, "log", "-1", "--format=%an|%cn", sha); who != "github-actions[bot]|GitHub" {
			t.Errorf("commit %s by %q, want github-actions[bot], committed by GitHub", sha, who)
		}
	}
	if src := gittest.Git(t, a.bare, "show", pr.Head+":auth.go"); !strings.Contains(src, "ConstantTimeCompare") {
		t.Errorf("the fix is not on the branch:\n%s", src)
	}
	// The session log on agent-sessions: GitHub's commits too.
	artifacts := gittest.APICommits(t, a.bare, a.fake.Verified, "github-actions[bot]", "agent-sessions")
	// Every one is Verified, which only a commit made through the API
	// is: through the Git Data API for a new branch, GraphQL's
	// createCommitOnBranch for one that exists.
	if n := a.fake.Calls()["POST /repos/{owner}/{repo}/git/commits"]; n > len(commits)+len(artifacts) {
		t.Errorf("%d commits made through the Git Data API, %d on the branch and %d on agent-sessions", n, len(commits), len(artifacts))
	}
}

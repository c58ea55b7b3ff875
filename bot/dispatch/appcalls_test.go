package dispatch_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/kernel/worktree"
)

// appFlowBudget is the most REST + GraphQL calls an App-mode `/agent fix`
// flow (comment → draft PR and approval review → Approve review → run
// completed, PR ready, log committed) may spend on a repository the bot
// has served before, in a process that has just started (issue 34).
const appFlowBudget = 16

// TestAppFlowCallBudget counts the App-mode flow's calls against the
// strict fake. The first flow on a new repository also creates the
// agent-sessions branch (a root commit: a tree, a commit and the branch
// through the Git Data API); after it, a new process (a replica, a
// restart) spends at most appFlowBudget, with the per-endpoint table
// pinned, and a later flow in the same process mints no token and learns
// no identity again. Every commit is GitHub's, Verified.
func TestAppFlowCallBudget(t *testing.T) {
	w := newLiveWorld(t, "app", "")
	w.login()
	first := w.fullFlow("token check accepts prefixes")
	t.Logf("first flow on a new repository:\n%s", fakegithub.FormatCalls(w.botCalls()))

	w.fake.ResetCalls()
	w.human = map[string]int{}
	w.startBot() // a replica, or the same server restarted
	w.login()
	second := w.fullFlow("token check rejects empty")
	want := map[string]int{
		// The process learns who it is and mints the installation's token.
		"GET /app": 1, "POST /app/installations/{installation_id}/access_tokens": 1,
		"GET /repos/{owner}/{repo}/collaborators/{username}/permission": 2,
		"POST /repos/{owner}/{repo}/issues/{issue_number}/comments":     1,
		"PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}":      2,
		"POST /repos/{owner}/{repo}/pulls":                              1,
		"POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews":        1,
		"PATCH /repos/{owner}/{repo}/pulls/{pull_number}":               1,
		// The new session branch: its empty commit and its creation.
		"POST /repos/{owner}/{repo}/git/commits": 1,
		"POST /repos/{owner}/{repo}/git/refs":    1,
		// createCommitOnBranch: the log at the pause, the fix, the log
		// at the end; and markPullRequestReadyForReview.
		"POST /graphql": 4,
	}
	calls := w.botCalls()
	fakegithub.Budget{Total: appFlowBudget, PerEndpoint: want}.Check(t, calls)
	if got, want := fakegithub.FormatCalls(calls), fakegithub.FormatCalls(want); got != want {
		t.Errorf("calls:\n%s\nwant exactly:\n%s", got, want)
	}

	w.fake.ResetCalls()
	w.human = map[string]int{}
	third := w.fullFlow("token check trims spaces")
	calls = w.botCalls()
	total := 0
	for k, n := range calls {
		total += n
		if strings.HasPrefix(k, "GET /app") || strings.Contains(k, "access_tokens") || strings.HasPrefix(k, "GET /users") {
			t.Errorf("a later flow in the same process called %s %d times", k, n)
		}
	}
	if total > appFlowBudget-2 {
		t.Errorf("a later flow in the same process made %d calls, want at most %d:\n%s", total, appFlowBudget-2, fakegithub.FormatCalls(calls))
	}
	for _, res := range []string{first.Branch, second.Branch, third.Branch, "agent-sessions"} {
		base := "main"
		if res == "agent-sessions" {
			base = ""
		}
		shas := w.branchCommitsFrom(base, res)
		if len(shas) == 0 {
			t.Errorf("no commits on %s", res)
		}
		for _, sha := range shas {
			if !w.fake.Verified(sha) {
				t.Errorf("%s: commit %s is not Verified", res, sha)
			}
		}
	}
}

func (w *liveWorld) branchCommitsFrom(base, branch string) []string {
	w.t.Helper()
	if base == "" {
		return strings.Fields(gittest.Git(w.t, w.bare, "rev-list", branch))
	}
	return strings.Fields(gittest.Git(w.t, w.bare, "rev-list", base+".."+branch))
}

// TestOneCallCommitFallsBackForModes: a commit of regular files on the
// published branch is one createCommitOnBranch call; a commit that
// changes an executable file or removes a symbolic link (the base branch
// has them), which the mutation cannot express, goes through the Git Data
// API (a tree, a commit, the ref moved) and keeps the modes; every commit
// is Verified.
func TestOneCallCommitFallsBackForModes(t *testing.T) {
	ctx := context.Background()
	w := newGitDataWorld(t, nil)
	// The default branch gets an executable and a symbolic link.
	clone := filepath.Join(t.TempDir(), "clone")
	gittest.Git(t, ".", "clone", "-q", w.bare, clone)
	writeFile(t, clone, "bin/run", []byte("#!/bin/sh\nexec true\n"), 0o755)
	if err := os.Symlink("README.md", filepath.Join(clone, "link")); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, clone, "add", "bin/run", "link")
	gittest.Git(t, clone, "commit", "-q", "-m", "modes")
	gittest.Git(t, clone, "push", "-q", "origin", "HEAD:main")
	s := w.prepare(t, "sess-modes-01")
	var changes []worktree.Change
	commit := func(msg string, cs ...worktree.Change) map[string]int {
		t.Helper()
		changes = append(changes, cs...)
		if _, err := s.Commit(ctx, worktree.CommitOptions{Message: msg, Changes: changes}); err != nil {
			t.Fatal(err)
		}
		w.fake.ResetCalls()
		head, err := s.Publish(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !w.fake.Verified(head) {
			t.Errorf("%s: head %s is not Verified", msg, head)
		}
		return w.fake.Calls()
	}
	commit("first: the branch", fileWrite(t, s.Dir, "a.txt", []byte("a\n")))
	if calls := commit("regular files", fileWrite(t, s.Dir, "README.md", []byte("hello again\n")), fileRemove(t, s.Dir, "old.txt")); calls["POST /graphql"] != 1 || len(gitDataCalls(w.fake)) != 0 {
		t.Errorf("a regular change: calls %v, want one createCommitOnBranch", calls)
	}
	writeFile(t, s.Dir, "bin/run", []byte("#!/bin/sh\nexec false\n"), 0o755)
	if calls := commit("an executable", worktree.Change{Path: "bin/run", SHA256: sha256Hex("#!/bin/sh\nexec false\n")}); calls["POST /graphql"] != 0 || calls["PATCH /repos/{owner}/{repo}/git/refs/{ref}"] != 1 {
		t.Errorf("an executable file: calls %v, want the Git Data API", calls)
	}
	if got := gittest.Git(t, w.bare, "ls-tree", s.Branch, "bin/run"); !strings.HasPrefix(got, "100755 blob") {
		t.Errorf("bin/run on the remote: %s, want mode 100755", got)
	}
	if calls := commit("a symlink removed", fileRemove(t, s.Dir, "link")); calls["POST /graphql"] != 0 || calls["PATCH /repos/{owner}/{repo}/git/refs/{ref}"] != 1 {
		t.Errorf("a symbolic link: calls %v, want the Git Data API", calls)
	}
	checkBranchIsWorktree(t, w, s, 4)
}

// interloper moves the session branch (another writer's commit through
// the same API) just before the publisher's createCommitOnBranch, so the
// call meets a head other than the one it expects.
type interloper struct {
	worktree.GitDataAPI
	before func()
	stale  int // createCommitOnBranch calls refused as stale
}

func (i *interloper) CommitOnBranch(ctx context.Context, r worktree.Repo, branch, head, message string, changes []worktree.TreeEntry) (string, string, error) {
	if f := i.before; f != nil {
		i.before = nil
		f()
	}
	sha, tree, err := i.GitDataAPI.(worktree.BranchCommitAPI).CommitOnBranch(ctx, r, branch, head, message, changes)
	if errors.Is(err, worktree.ErrNotFastForward) {
		i.stale++
	}
	return sha, tree, err
}

// TestOneCallCommitExpectedHeadConflict: the branch moved between the
// publisher's look and its createCommitOnBranch: GitHub refuses the
// commit (expectedHeadOid), nothing is overwritten, and the publisher
// looks again — another writer's content fails the publication clearly
// (not a fast-forward); an earlier attempt's commit of the same tree
// (an answer lost) counts as published, nothing made twice.
func TestOneCallCommitExpectedHeadConflict(t *testing.T) {
	ctx := context.Background()
	// raced publishes a session's first commit (a.txt), then its second
	// (b.txt = mine) while, just before the one-call commit, another
	// commit (b.txt = theirs, message msg) lands on the branch. It returns
	// the world, the session, the interloper, the other commit's SHA and
	// the second Publish's answer.
	raced := func(t *testing.T, sid, msg, theirs, mine string) (*gitDataWorld, *worktree.Session, *interloper, string, string, error) {
		t.Helper()
		repo := worktree.Repo{Owner: "octo", Name: "app"}
		var il *interloper
		w := newGitDataWorld(t, func(api worktree.GitDataAPI) worktree.GitDataAPI {
			il = &interloper{GitDataAPI: api}
			return il
		})
		s := w.prepare(t, sid)
		one := fileWrite(t, s.Dir, "a.txt", []byte("one\n"))
		if _, err := s.Commit(ctx, worktree.CommitOptions{Message: "one", Changes: []worktree.Change{one}}); err != nil {
			t.Fatal(err)
		}
		base, err := s.Publish(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var other string
		il.before = func() {
			sha, _, err := w.api.(worktree.BranchCommitAPI).CommitOnBranch(ctx, repo, s.Branch, base, msg, []worktree.TreeEntry{{Path: "b.txt", Mode: "100644", Content: []byte(theirs)}})
			if err != nil {
				t.Fatal(err)
			}
			other = sha
		}
		two := fileWrite(t, s.Dir, "b.txt", []byte(mine))
		if _, err := s.Commit(ctx, worktree.CommitOptions{Message: "two", Changes: []worktree.Change{one, two}}); err != nil {
			t.Fatal(err)
		}
		head, err := s.Publish(ctx)
		return w, s, il, other, head, err
	}
	t.Run("another writer", func(t *testing.T) {
		w, s, il, theirs, _, err := raced(t, "sess-stale-01", "someone else", "theirs\n", "mine\n")
		if err == nil || !strings.Contains(err.Error(), "fast-forward") {
			t.Fatalf("publish over another writer's commit: %v, want a non-fast-forward failure", err)
		}
		if il.stale != 1 {
			t.Errorf("%d createCommitOnBranch calls refused as stale, want 1", il.stale)
		}
		if got := gittest.Git(t, w.bare, "rev-parse", s.Branch); got != theirs {
			t.Errorf("the branch is at %s, want the other writer's %s kept", got, theirs)
		}
	})
	t.Run("an earlier attempt", func(t *testing.T) {
		// The same change, committed by an attempt whose answer was lost.
		w, s, il, earlier, head, err := raced(t, "sess-stale-02", "two", "two\n", "two\n")
		if err != nil {
			t.Fatal(err)
		}
		if il.stale != 1 || head != earlier {
			t.Errorf("published %s after %d stale answers, want the earlier attempt's %s after 1", head, il.stale, earlier)
		}
		checkBranchIsWorktree(t, w, s, 2)
	})
}

var _ worktree.BranchCommitAPI = dispatch.GitData{}

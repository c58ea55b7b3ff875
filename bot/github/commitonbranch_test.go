package github

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/internal/fakegithub"
)

// appRepoWorld is the fake GitHub with repository octo/lib (README.md,
// old.txt, src/a.go on main) and an App installed on it, a Client of the
// App, the repository's bare git directory and main's head; the fake is
// checked for spec violations at the end.
func appRepoWorld(t *testing.T) (*fakegithub.Fake, *Client, string, string) {
	t.Helper()
	ctx := context.Background()
	f := fakegithub.New(t)
	base := f.Serve(t)
	bare, err := f.AddGitRepo(ctx, fakegithub.Repo{Owner: "octo", Name: "lib"}, t.TempDir(), map[string]string{"README.md": "hello\n", "old.txt": "bye\n", "src/a.go": "package a\n"})
	if err != nil {
		t.Fatal(err)
	}
	app, key, err := fakegithub.NewApp(77, "agentos")
	if err != nil {
		t.Fatal(err)
	}
	f.AddApp(app)
	f.AddInstallation(9001, 77, "octo/lib")
	c, err := New(Config{BaseURL: base, AppID: 77, PrivateKey: key})
	if err != nil {
		t.Fatal(err)
	}
	head, err := c.GetRef(ctx, "octo", "lib", "heads/main")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.CheckNoViolations(t) })
	return f, c, bare, head
}

// One GraphQL call makes a Verified commit of the app on the branch's head
// with the changes (a file changed, a nested one added, one deleted) and
// moves the branch; the tree GitHub reports is git's.
func TestCommitOnBranchIsOneVerifiedCommit(t *testing.T) {
	ctx := context.Background()
	f, c, bare, head := appRepoWorld(t)
	f.ResetCalls()
	cm, err := c.CommitOnBranch(ctx, "octo", "lib", "main", head, "Fix the greeting\n\nThe body.\n\nAgent-Log-Seq: 7\n", []FileChange{
		{Path: "README.md", Content: []byte("hello, world\n")},
		{Path: "src/b/b.bin", Content: []byte{0, 1, 2, 0xff}},
		{Path: "old.txt", Delete: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls := f.Calls(); calls["POST /graphql"] != 1 || len(calls) != 1 {
		t.Errorf("calls = %v, want one GraphQL call", calls)
	}
	if got := gitOut(t, bare, "rev-parse", "main"); got != cm.SHA {
		t.Fatalf("main = %s, want %s", got, cm.SHA)
	}
	if got := gitOut(t, bare, "rev-parse", "main^{tree}"); got != cm.Tree {
		t.Errorf("tree = %s, GitHub said %s", got, cm.Tree)
	}
	if !f.Verified(cm.SHA) {
		t.Error("the commit is not Verified")
	}
	if got := gitOut(t, bare, "ls-tree", "-r", "--name-only", "main"); got != "README.md\nsrc/a.go\nsrc/b/b.bin" {
		t.Errorf("tree = %q", got)
	}
	if got := gitOut(t, bare, "cat-file", "-p", "main:src/b/b.bin"); got != string([]byte{0, 1, 2, 0xff}) {
		t.Errorf("binary file = %q", got)
	}
	if got := gitOut(t, bare, "log", "-1", "--format=%an|%cn|%P", "main"); got != "agentos[bot]|GitHub|"+head {
		t.Errorf("author|committer|parent = %q", got)
	}
	if got := gitOut(t, bare, "log", "-1", "--format=%B", "main"); got != "Fix the greeting\n\nThe body.\n\nAgent-Log-Seq: 7" {
		t.Errorf("message = %q", got)
	}
	// No changes: an empty commit.
	empty, err := c.CommitOnBranch(ctx, "octo", "lib", "main", cm.SHA, "Start", nil)
	if err != nil {
		t.Fatal(err)
	}
	if empty.Tree != cm.Tree || gitOut(t, bare, "rev-parse", "main^") != cm.SHA {
		t.Errorf("empty commit %+v does not keep the tree %s on %s", empty, cm.Tree, cm.SHA)
	}
}

// expectedHeadOid is a compare-and-swap: a branch elsewhere is
// ErrStaleHead and nothing is committed; a missing branch, a deletion of a
// missing file and a duplicate path are GitHub's validation errors; modes
// and oversized contents are refused before any call.
func TestCommitOnBranchRefusals(t *testing.T) {
	ctx := context.Background()
	f, c, bare, head := appRepoWorld(t)
	moved, err := c.CommitOnBranch(ctx, "octo", "lib", "main", head, "First", []FileChange{{Path: "x.txt", Content: []byte("x\n")}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CommitOnBranch(ctx, "octo", "lib", "main", head, "Stale", []FileChange{{Path: "y.txt", Content: []byte("y\n")}})
	if !errors.Is(err, ErrStaleHead) || !strings.Contains(err.Error(), "Expected branch to point to") {
		t.Errorf("stale head: %v, want ErrStaleHead", err)
	}
	if got := gitOut(t, bare, "rev-parse", "main"); got != moved.SHA {
		t.Errorf("a refused commit moved main to %s", got)
	}
	_, err = c.CommitOnBranch(ctx, "octo", "lib", "nope", head, "No branch", nil)
	if err == nil || errors.Is(err, ErrStaleHead) || !errors.Is(err, ErrNotFound) {
		t.Errorf("missing branch: %v, want ErrNotFound", err)
	}
	_, err = c.CommitOnBranch(ctx, "octo", "lib", "main", moved.SHA, "Delete nothing", []FileChange{{Path: "missing.txt", Delete: true}})
	if !errors.Is(err, ErrValidation) {
		t.Errorf("deleting a missing file: %v, want ErrValidation", err)
	}
	f.ResetCalls()
	for name, changes := range map[string][]FileChange{
		"executable": {{Path: "run.sh", Content: []byte("#!/bin/sh\n"), Mode: "100755"}},
		"symlink":    {{Path: "link", Content: []byte("README.md"), Mode: "120000"}},
		"too large":  {{Path: "big.txt", Content: make([]byte, MaxCommitOnBranchBytes+1)}},
		"duplicate":  {{Path: "a.txt", Content: []byte("a")}, {Path: "a.txt", Delete: true}},
		"unclean":    {{Path: "../a.txt", Content: []byte("a")}},
	} {
		if _, err := c.CommitOnBranch(ctx, "octo", "lib", "main", moved.SHA, "Refused", changes); !errors.Is(err, ErrValidation) {
			t.Errorf("%s: %v, want ErrValidation", name, err)
		}
	}
	if _, err := c.CommitOnBranch(ctx, "octo", "lib", "main", "abc", "Short", nil); !errors.Is(err, ErrValidation) {
		t.Errorf("short expected head: %v", err)
	}
	if n := len(f.Calls()); n != 0 {
		t.Errorf("refusals made %d calls: %v", n, f.Calls())
	}
	if CanCommitOnBranch([]FileChange{{Path: "run.sh", Mode: "100755"}}) || !CanCommitOnBranch([]FileChange{{Path: "a"}, {Path: "b", Delete: true, Mode: "120000"}}) {
		t.Error("CanCommitOnBranch misjudges modes")
	}
}

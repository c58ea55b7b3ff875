package github

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"--git-dir", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// In App mode a commit made through the Git Data API is the app's and
// Verified; git sees exactly the tree the API built (a file changed, a
// nested one added, one deleted), and the branch moves only by a
// fast-forward unless forced.
func TestCreateCommitThroughTheGitDataAPI(t *testing.T) {
	ctx := context.Background()
	f, c, bare, parent := appRepoWorld(t)
	f.ResetCalls()
	cm, err := c.CreateCommit(ctx, "octo", "lib", parent, "Fix the greeting", []FileChange{
		{Path: "README.md", Content: []byte("hello, world\n")},
		{Path: "src/b/b.go", Content: []byte("package b\n"), Mode: "100755"},
		{Path: "old.txt", Delete: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !cm.Verified || cm.Reason != "valid" || !f.Verified(cm.SHA) {
		t.Errorf("commit = %+v, want Verified", cm)
	}
	calls := f.Calls()
	if calls["POST /repos/{owner}/{repo}/git/blobs"] != 2 || calls["POST /repos/{owner}/{repo}/git/trees"] != 1 || calls["POST /repos/{owner}/{repo}/git/commits"] != 1 || calls["GET /repos/{owner}/{repo}/git/commits/{commit_sha}"] != 1 {
		t.Errorf("calls = %v", calls)
	}
	if err := c.UpdateRef(ctx, "octo", "lib", "heads/main", cm.SHA, false); err != nil {
		t.Fatal(err)
	}
	if got := gitOut(t, bare, "rev-parse", "main"); got != cm.SHA {
		t.Fatalf("main = %s, want %s", got, cm.SHA)
	}
	if got := gitOut(t, bare, "ls-tree", "-r", "--name-only", "main"); got != "README.md\nsrc/a.go\nsrc/b/b.go" {
		t.Errorf("tree = %q", got)
	}
	if got := gitOut(t, bare, "show", "main:README.md"); got != "hello, world" {
		t.Errorf("README = %q", got)
	}
	if got := gitOut(t, bare, "ls-tree", "main", "src/b/b.go"); !strings.HasPrefix(got, "100755 ") {
		t.Errorf("mode = %q", got)
	}
	if got := gitOut(t, bare, "log", "-1", "--format=%an|%cn|%P|%s", "main"); !strings.HasPrefix(got, "agentos[bot]|GitHub|"+parent+"|Fix the greeting") {
		t.Errorf("commit = %q", got)
	}
	// A commit on the old parent does not fast-forward main.
	side, err := c.CreateCommit(ctx, "octo", "lib", parent, "Other", []FileChange{{Path: "x", Content: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	var apiErr *APIError
	if err := c.UpdateRef(ctx, "octo", "lib", "heads/main", side.SHA, false); !errors.As(err, &apiErr) || apiErr.Status != 422 {
		t.Errorf("non-fast-forward update: %v, want 422", err)
	}
	if err := c.UpdateRef(ctx, "octo", "lib", "heads/main", side.SHA, true); err != nil {
		t.Errorf("forced update: %v", err)
	}
	for _, bad := range [][]FileChange{
		{{Path: "../x", Content: []byte("x")}},
		{{Path: ".git/config", Content: []byte("x")}},
		{{Path: "a", Content: []byte("x")}, {Path: "a", Delete: true}},
		{{Path: "a", Mode: "040000"}},
		nil,
	} {
		if _, err := c.CreateCommit(ctx, "octo", "lib", parent, "m", bad); !errors.Is(err, ErrValidation) {
			t.Errorf("CreateCommit(%+v) = %v, want a validation error", bad, err)
		}
	}
	f.CheckNoViolations(t)
}

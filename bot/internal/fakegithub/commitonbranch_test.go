package fakegithub

import (
	"context"
	"encoding/base64"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel/testenv"
)

func gitOutput(t *testing.T, gitDir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"--git-dir", gitDir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return string(out)
}

// createCommitOnBranch answers as GitHub's GraphQL API does: 200 with an
// errors array (the field null) for a stale head, a missing branch, a
// duplicate path, bad base64, a missing file to delete, a reader's token
// and a missing input; and a commit, signed, that moves the branch.
func TestCreateCommitOnBranchAnswers(t *testing.T) {
	testenv.LookPath(t, "git")
	f := New(t)
	url := f.Serve(t)
	bare, err := f.AddGitRepo(context.Background(), Repo{Owner: "octo", Name: "app"}, t.TempDir(), map[string]string{"README.md": "hi\n"})
	if err != nil {
		t.Fatal(err)
	}
	f.AddToken(devTok, "dev")
	f.AddToken(readTok, "reader")
	f.SetPermission("octo/app", "dev", PermWrite)
	f.SetPermission("octo/app", "reader", PermRead)
	head := strings.TrimSpace(gitOutput(t, bare, "rev-parse", "main"))
	const q = "mutation($input: CreateCommitOnBranchInput!) { createCommitOnBranch(input: $input) { commit { oid tree { oid } } } }"
	input := func(branch, expect string, adds []map[string]string, dels []map[string]string) map[string]any {
		return map[string]any{"query": q, "variables": map[string]any{"input": map[string]any{
			"branch":          map[string]string{"repositoryNameWithOwner": "octo/app", "branchName": branch},
			"expectedHeadOid": expect,
			"message":         map[string]string{"headline": "h"},
			"fileChanges":     map[string]any{"additions": adds, "deletions": dels},
		}}}
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	dev, reader := client{t, url, devTok}, client{t, url, readTok}
	errType := func(m map[string]any) string {
		errs, _ := m["errors"].([]any)
		if len(errs) == 0 {
			return ""
		}
		e, _ := errs[0].(map[string]any)
		return fmt.Sprint(e["type"], ": ", e["message"])
	}
	for _, tc := range []struct {
		name string
		c    client
		body any
		want string
	}{
		{"stale head", dev, input("main", strings.Repeat("a", 40), nil, nil), `STALE_DATA: Expected branch to point to "` + strings.Repeat("a", 40) + `" but it did not`},
		{"missing branch", dev, input("nope", head, nil, nil), "NOT_FOUND: "},
		{"duplicate path", dev, input("main", head, []map[string]string{{"path": "README.md", "contents": b64("x")}}, []map[string]string{{"path": "README.md"}}), "INVALID: Paths must be unique"},
		{"bad base64", dev, input("main", head, []map[string]string{{"path": "a", "contents": "!!"}}, nil), "INVALID: "},
		{"missing file deleted", dev, input("main", head, nil, []map[string]string{{"path": "gone.txt"}}), "UNPROCESSABLE: A path was requested for deletion"},
		{"reader", reader, input("main", head, []map[string]string{{"path": "a", "contents": b64("x")}}, nil), "FORBIDDEN: "},
		{"no input", dev, map[string]any{"query": q}, "INVALID: "},
	} {
		status, m, _ := tc.c.do("POST", "/graphql", tc.body)
		if got := errType(m); status != 200 || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %d %q, want 200 %q", tc.name, status, got, tc.want)
		}
		if data, _ := m["data"].(map[string]any); data == nil || data["createCommitOnBranch"] != nil {
			t.Errorf("%s: data = %v, want createCommitOnBranch null", tc.name, m["data"])
		}
	}
	if now := strings.TrimSpace(gitOutput(t, bare, "rev-parse", "main")); now != head {
		t.Fatalf("a refused commit moved main to %s", now)
	}
	status, m, _ := dev.do("POST", "/graphql", input("main", head, []map[string]string{{"path": "docs/a.md", "contents": b64("a\n")}}, []map[string]string{{"path": "README.md"}}))
	data, _ := m["data"].(map[string]any)
	out, _ := data["createCommitOnBranch"].(map[string]any)
	cm, _ := out["commit"].(map[string]any)
	sha, _ := cm["oid"].(string)
	if status != 200 || sha == "" || errType(m) != "" {
		t.Fatalf("commit: %d %v", status, m)
	}
	if now := strings.TrimSpace(gitOutput(t, bare, "rev-parse", "main")); now != sha || !f.Verified(sha) {
		t.Errorf("main at %s, the commit %s (Verified %v)", now, sha, f.Verified(sha))
	}
	if files := gitOutput(t, bare, "ls-tree", "-r", "--name-only", "main"); strings.TrimSpace(files) != "docs/a.md" {
		t.Errorf("tree: %q", files)
	}
	if parent := strings.TrimSpace(gitOutput(t, bare, "rev-parse", "main^")); parent != head {
		t.Errorf("parent %s, want %s", parent, head)
	}
}

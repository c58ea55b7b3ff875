package kernel_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel"
)

// TestProtectedPathsAlwaysNeedApproval: a write that touches CI or agent
// configuration pauses for approval under a policy that auto-approves
// every write (and under adaptive trust that would lower it), the pending
// action and its approval.requested event name the paths, nothing is
// written, and the path tricks the jail accepts (./, a/../, case, a
// symlink to .github) are caught the same.
func TestProtectedPathsAlwaysNeedApproval(t *testing.T) {
	trusting := `
capabilities:
  repo.patch: {approval: risk}
  repo.write: {approval: risk}
trust:
  enabled: true
  cleanApprovals: 1
`
	create := func(p string) string {
		b, _ := json.Marshal(map[string]string{"path": p, "content": "on: push\n", "expected_hash": ""})
		return string(b)
	}
	diff := func(d string) string {
		b, _ := json.Marshal(map[string]string{"unifiedDiff": d})
		return string(b)
	}
	cases := []struct {
		name, pol, tool, args string
		want                  string // the protected path named; "" executes
	}{
		{"workflow", openPolicy, "repo.write", create(".github/workflows/x.yml"), ".github/workflows/x.yml"},
		{"dot slash", openPolicy, "repo.write", create("./.github/workflows/x.yml"), "./.github/workflows/x.yml"},
		{"climbing", openPolicy, "repo.write", create("a/../.github/workflows/x.yml"), "a/../.github/workflows/x.yml"},
		{"case", openPolicy, "repo.write", create(".GitHub/workflows/x.yml"), ".GitHub/workflows/x.yml"},
		{"symlink to .github", openPolicy, "repo.write", create("ci/workflows/x.yml"), "ci/workflows/x.yml"},
		{"codeowners", openPolicy, "repo.write", create("docs/CODEOWNERS"), "docs/CODEOWNERS"},
		{"composite action", openPolicy, "repo.write", create("tools/setup/action.yaml"), "tools/setup/action.yaml"},
		{"gitlab", openPolicy, "repo.write", create(".gitlab-ci.yml"), ".gitlab-ci.yml"},
		{"jenkins", openPolicy, "repo.write", create("Jenkinsfile"), "Jenkinsfile"},
		{"circleci", openPolicy, "repo.write", create(".circleci/config.yml"), ".circleci/config.yml"},
		{"buildkite", openPolicy, "repo.write", create(".buildkite/pipeline.yml"), ".buildkite/pipeline.yml"},
		{"travis", openPolicy, "repo.write", create(".travis.yml"), ".travis.yml"},
		{"azure", openPolicy, "repo.write", create("azure-pipelines.yml"), "azure-pipelines.yml"},
		{"agent config", openPolicy, "repo.write", create(".agent/config.yaml"), ".agent/config.yaml"},
		{"claude settings", openPolicy, "repo.write", create(".claude/settings.json"), ".claude/settings.json"},
		{"mcp servers", openPolicy, "repo.write", create(".mcp.json"), ".mcp.json"},
		{"submodules", openPolicy, "repo.write", create(".gitmodules"), ".gitmodules"},
		{"gitattributes", openPolicy, "repo.write", create("sub/.gitattributes"), "sub/.gitattributes"},
		{"patch creates dependabot", openPolicy, "repo.patch", diff("--- /dev/null\n+++ b/.github/dependabot.yml\n@@ -0,0 +1 @@\n+version: 2\n"), ".github/dependabot.yml"},
		{"patch deletes CODEOWNERS", openPolicy, "repo.patch", diff("--- a/.github/CODEOWNERS\n+++ /dev/null\n@@ -1 +0,0 @@\n-* @owner\n"), ".github/CODEOWNERS"},
		{"patch renames a workflow away", openPolicy, "repo.patch", diff("diff --git a/.github/workflows/ci.yml b/ci.yml\nsimilarity index 100%\nrename from .github/workflows/ci.yml\nrename to ci.yml\n"), ".github/workflows/ci.yml"},
		{"trust does not lower it", trusting, "repo.write", create(".github/workflows/x.yml"), ".github/workflows/x.yml"},
		// Controls: the same policies let an ordinary write through.
		{"ordinary write", openPolicy, "repo.write", create("docs/notes.md"), ""},
		{"ordinary write under trust", trusting, "repo.write", create("docs/notes.md"), ""},
		{"lookalike", openPolicy, "repo.write", create("docs/github/workflows.md"), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t, c.pol, nil)
			e.k.Trust = func(tool, command string) kernel.TrustCounts { return kernel.TrustCounts{Approved: 100} }
			must(t, os.MkdirAll(filepath.Join(e.dir, ".github", "workflows"), 0o755))
			must(t, os.WriteFile(filepath.Join(e.dir, ".github", "CODEOWNERS"), []byte("* @owner\n"), 0o644))
			must(t, os.WriteFile(filepath.Join(e.dir, ".github", "workflows", "ci.yml"), []byte("on: push\n"), 0o644))
			must(t, os.Symlink(".github", filepath.Join(e.dir, "ci")))
			out, err := e.call(c.tool, c.args)
			if c.want == "" {
				if err != nil || out.Pending != nil {
					t.Fatalf("an ordinary write: pending %v, err %v; want it executed", out.Pending != nil, err)
				}
				return
			}
			if err != nil || out.Pending == nil {
				t.Fatalf("err %v, pending %v: want a pending approval", err, out.Pending != nil)
			}
			p := out.Pending
			if p.Risk.Control != kernel.ControlApproval || !contains(p.Preview.ProtectedPaths, c.want) || !contains(p.Risk.ProtectedPaths, c.want) || !strings.Contains(p.Risk.Reason, c.want) || p.Risk.Trusted {
				t.Fatalf("pending %+v / %+v: want preview_approval naming %s", p.Risk, p.Preview, c.want)
			}
			types := e.types(t)
			if contains(types, "tool.invoke") || types[len(types)-1] != "approval.requested" {
				t.Fatalf("events %v: want approval.requested and no tool.invoke", types)
			}
			evs, err := e.st.Read(context.Background(), "k", 1)
			must(t, err)
			var req struct {
				Preview struct {
					ProtectedPaths []string `json:"protected_paths"`
				} `json:"preview"`
			}
			must(t, evs[len(evs)-1].DecodePayload(&req))
			if !contains(req.Preview.ProtectedPaths, c.want) {
				t.Fatalf("approval.requested preview %+v does not name %s", req.Preview, c.want)
			}
			if _, err := os.Stat(filepath.Join(e.dir, ".github", "dependabot.yml")); err == nil {
				t.Fatal("written before approval")
			}
			if _, err := os.Stat(filepath.Join(e.dir, ".github", "workflows", "x.yml")); err == nil {
				t.Fatal("written before approval")
			}
		})
	}
}

// TestReadsOfProtectedPathsDoNotPause: the rule is about changes.
func TestReadsOfProtectedPathsDoNotPause(t *testing.T) {
	e := setup(t, openPolicy, nil)
	must(t, os.MkdirAll(filepath.Join(e.dir, ".github", "workflows"), 0o755))
	must(t, os.WriteFile(filepath.Join(e.dir, ".github", "workflows", "ci.yml"), []byte("on: push\n"), 0o644))
	out, err := e.call("repo.read", `{"path":".github/workflows/ci.yml"}`)
	if err != nil || out.Pending != nil {
		t.Fatalf("read: pending %v, err %v", out.Pending != nil, err)
	}
}

func TestIsProtectedPath(t *testing.T) {
	for p, want := range map[string]bool{
		".github/workflows/x.yml":   true,
		"./.github/workflows/x":     true,
		"a/../.github/x":            true,
		"../.github/x":              true,
		".GITHUB/CODEOWNERS":        true,
		`.github\workflows\x.yml`:   true,
		".github./x.yml":            true,
		"sub/.claude/settings.json": true,
		"JENKINSFILE":               true,
		"action.yml":                true,
		"x/Action.YAML":             true,
		".gitattributes":            true,
		".github":                   true,
		"github/workflows/x.yml":    false,
		"docs/action.yml.md":        false,
		"my.github/x":               false,
		"src/main.go":               false,
		".gitignore":                false,
	} {
		if got := kernel.IsProtectedPath(p); got != want {
			t.Errorf("IsProtectedPath(%q) = %v, want %v", p, got, want)
		}
	}
}

package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// npmDir is where .ci/npm-deps.sh installs the corpora; without it the
// public corpora are skipped loudly, and under CI=true that is a failure.
func npmPath(t *testing.T, rel string) string {
	t.Helper()
	dir := os.Getenv("AGENTOS_NPM_DIR")
	if dir == "" {
		if home, err := os.UserHomeDir(); err == nil {
			dir = filepath.Join(home, ".cache", "agentos-npm")
		}
	}
	p := filepath.Join(dir, "node_modules", filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		msg := "npm corpus " + rel + " is missing (" + p + "): run `bash .ci/npm-deps.sh` (or set AGENTOS_NPM_DIR)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPING: " + msg)
	}
	return dir
}

// checkResult holds a corpus to the benchmark's bar: every ground-truth call
// passes; every injected call is blocked before execution with the right
// class, and the scripted repair round fixes it.
func checkResult(t *testing.T, r Result) {
	t.Helper()
	var b strings.Builder
	WriteTable(&b, r)
	t.Log("\n" + b.String())
	if r.Calls == 0 {
		t.Fatal("no ground-truth calls: the corpus measures nothing")
	}
	if len(r.Defects)*20 > r.Calls {
		t.Errorf("%d calls refused by the corpus's own schema against %d accepted: the loader is reading the corpus wrong", len(r.Defects), r.Calls)
	}
	if r.FalseRejects != 0 {
		t.Errorf("%d of %d ground-truth calls rejected", r.FalseRejects, r.Calls)
	}
	total := 0
	for _, row := range r.Rows {
		total += row.Injected
		if row.Executed != 0 || row.Blocked != row.Injected || row.RightCode != row.Injected || row.Repaired != row.Injected {
			t.Errorf("%s: %+v", row.Injection, row)
		}
	}
	if total == 0 {
		t.Error("nothing injected")
	}
}

func TestBuiltinCorpus(t *testing.T) {
	c, err := Builtin(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, r)
	for _, row := range r.Rows {
		// No built-in tool has an enum argument; every other row applies.
		if row.Injected == 0 && row.Injection != BadEnum {
			t.Errorf("%s never injected into a built-in tool", row.Injection)
		}
	}
}

func TestGitHubOpenAPICorpus(t *testing.T) {
	dir := npmPath(t, "@octokit/openapi/generated/api.github.com.json")
	c, err := OpenAPI(filepath.Join(dir, "node_modules", "@octokit", "openapi", "generated", "api.github.com.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Tools) < 1000 {
		t.Fatalf("%d operations, want GitHub's whole REST API", len(c.Tools))
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, r)
}

func TestMCPReferenceServersCorpus(t *testing.T) {
	dir := npmPath(t, "@modelcontextprotocol/server-memory/dist/index.js")
	npmPath(t, "@modelcontextprotocol/server-filesystem/dist/index.js")
	npmPath(t, "@modelcontextprotocol/server-everything/dist/index.js")
	t.Setenv("MEMORY_FILE_PATH", filepath.Join(t.TempDir(), "memory.jsonl"))
	c, err := MCP(context.Background(), "mcp-reference-servers", NPMServers(dir, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, r)
}

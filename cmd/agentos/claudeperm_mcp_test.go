package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
)

// TestMCPServerThatFailsIsInTheLog: a .mcp.json server that dies at start
// is recorded in the run's events.jsonl as mcp.server_failed, with its
// command, the end of its stderr and a hint; the run goes on without its
// tools.
func TestMCPServerThatFailsIsInTheLog(t *testing.T) {
	repo, data := t.TempDir(), t.TempDir()
	files := map[string]string{
		".mcp.json": `{"mcpServers":{"broken":{"command":"sh","args":["-c","echo 'Error: Cannot find module @acme/mcp-server' >&2; exit 1"]}}}`,
		"auth.go":   "package auth\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(repo, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(t.TempDir(), "script.yaml")
	if err := os.WriteFile(script, []byte(`
roles:
  lead:
  - text: '{"intent":"read auth.go","constraints":[],"needs_advisor":false,"schema_version":"v1"}'
  planner:
  - text: '{"steps":[{"id":"s1","description":"read auth.go"}],"risks":[],"needs_advisor":false,"schema_version":"v1"}'
  worker:
  - tool_calls: [{id: w1, name: repo.read, args: {path: auth.go}}]
  - text: '{"output":"read it","steps_completed":["s1"],"tool_calls_made":["repo.read:w1"],"schema_version":"v1"}'
  reviewer:
  - text: '{"verdict":"pass","feedback":"ok","schema_version":"v1"}'
`), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, "run", "--session", "s-mcp", "--repo", repo, "--data", data, "--provider", "scripted", "--script", script, "--json", "read auth.go")
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", code, stdout, stderr)
	}
	evs, err := readJSONL(filepath.Join(data, "sessions", "s-mcp", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var failed string
	for _, e := range evs {
		if e.Type == event.MCPServerFailed {
			failed = string(e.Payload)
		}
	}
	for _, want := range []string{`"server":"broken"`, `"command":"sh -c `, `Cannot find module @acme/mcp-server`, `"hint":"run `} {
		if !strings.Contains(failed, want) {
			t.Errorf("mcp.server_failed %q lacks %s", failed, want)
		}
	}
	if _, errOut, code := runCLI(t, "verify", filepath.Join(data, "sessions", "s-mcp", "events.jsonl")); code != exitOK {
		t.Errorf("verify: exit %d %s", code, errOut)
	}
}

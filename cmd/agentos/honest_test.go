package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// testRunScript: the Worker runs the tests and claims they pass.
const testRunScript = `roles:
  lead: [{text: '{"intent":"run the tests","constraints":[],"needs_advisor":false,"schema_version":"v1"}'}]
  planner: [{text: '{"steps":[{"id":"s1","description":"run the tests and confirm they pass"}],"risks":[],"needs_advisor":false,"schema_version":"v1"}'}]
  worker:
    - tool_calls: [{id: t1, name: test.run, args: {}}]
    - text: '{"output":"all tests pass","steps_completed":["s1"],"tool_calls_made":["test.run:t1"],"schema_version":"v1"}'
  reviewer: [{text: '{"verdict":"pass","feedback":"ok","schema_version":"v1"}'}]
`

// TestRunEnvironmentFailureExitsNonZero: a run whose test command cannot
// run (the toolchain is missing, or no sandbox can start it) ends failed
// with the ENVIRONMENT code, a next action that names the fix, and exit
// 5, whatever the Worker and the Reviewer say.
func TestRunEnvironmentFailureExitsNonZero(t *testing.T) {
	repo := t.TempDir()
	writeFile(t, repo, ".agent/config.yaml", "test: agentos-no-such-toolchain --all\n")
	script := writeFile(t, t.TempDir(), "script.yaml", testRunScript)
	out, errOut, code := runCLI(t, "run", "--repo", repo, "--data", t.TempDir(), "--provider", "scripted", "--script", script, "--json", "run the tests")
	var r runReport
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Terminal == nil {
		t.Fatalf("exit %d %s%s", code, out, errOut)
	}
	if code != exitRunFailed || r.Status != "failed" || !strings.HasPrefix(r.Terminal.Reason, "ENVIRONMENT: ") || r.Terminal.NextAction == "" || !strings.Contains(errOut, "ENVIRONMENT") {
		t.Fatalf("exit %d, terminal %+v\n%s", code, r.Terminal, errOut)
	}
	t.Logf("%s\nnext: %s", r.Terminal.Reason, r.Terminal.NextAction)
}

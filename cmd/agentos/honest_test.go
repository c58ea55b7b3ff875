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

// rejectedWriteScript: the Worker's only call is a repo.write with bad
// arguments, and it claims the write in both rounds.
const rejectedWriteScript = `roles:
  lead: [{text: '{"intent":"write a.txt","constraints":[],"needs_advisor":false,"schema_version":"v1"}'}]
  planner: [{text: '{"steps":[{"id":"s1","description":"write a.txt"}],"risks":[],"needs_advisor":false,"schema_version":"v1"}'}]
  worker:
    - tool_calls: [{id: w1, name: repo.write, args: {file: a.txt}}]
    - text: '{"output":"wrote a.txt","steps_completed":["s1"],"tool_calls_made":["repo.write:w1"],"schema_version":"v1"}'
    - text: '{"output":"wrote a.txt","steps_completed":["s1"],"tool_calls_made":["repo.write:w1"],"schema_version":"v1"}'
  reviewer: [{text: '{"verdict":"pass","feedback":"ok","schema_version":"v1"}'}]
`

// TestRunClaimOfRejectedCallIsNotCompleted: a run whose only call was
// rejected and claimed is not completed (exit 5, EVIDENCE_MISMATCH quoting
// the claim), and agentos verify accepts its log strictly.
func TestRunClaimOfRejectedCallIsNotCompleted(t *testing.T) {
	repo := t.TempDir()
	writeFile(t, repo, "README", "x\n")
	script := writeFile(t, t.TempDir(), "script.yaml", rejectedWriteScript)
	out, errOut, code := runCLI(t, "run", "--repo", repo, "--data", t.TempDir(), "--provider", "scripted", "--script", script, "--json", "write a.txt")
	var r runReport
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Terminal == nil {
		t.Fatalf("exit %d %s%s", code, out, errOut)
	}
	if code != exitRunFailed || r.Status != "failed" || !strings.HasPrefix(r.Terminal.Reason, "EVIDENCE_MISMATCH: ") || !strings.Contains(r.Terminal.Reason, `"repo.write:w1"`) {
		t.Fatalf("exit %d, terminal %+v\n%s", code, r.Terminal, errOut)
	}
	if vout, verr, vcode := runCLI(t, "verify", r.LogPath); vcode != exitOK {
		t.Fatalf("verify: exit %d %s%s", vcode, vout, verr)
	}
}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/schemas"
)

const cliFixScript = `
model: scripted
roles:
  lead:
  - text: '{"intent":"make Check accept only the expected token","constraints":[],"needs_advisor":false,"schema_version":"v1"}'
  planner:
  - text: '{"steps":[{"id":"s1","description":"patch Check"}],"risks":[],"needs_advisor":false,"schema_version":"v1"}'
  worker:
  - tool_calls: [{id: w1, name: repo.read, args: {path: auth.go}}]
  - tool_calls: [{id: w2, name: repo.patch, args: {unifiedDiff: "--- a/auth.go\n+++ b/auth.go\n@@ -3 +3 @@\n-func Check(token string) bool { return token != \"\" }\n+func Check(token string) bool { return token == \"expected\" }\n"}}]
  - text: '{"output":"Check now accepts only the expected token.","steps_completed":["s1"],"schema_version":"v1"}'
  reviewer:
  - text: '{"verdict":"pass","feedback":"done","schema_version":"v1"}'
`

// TestWorkflowsRunFixThenApproveInAnotherProcess: agentos workflows run
// fix pauses for the patch's approval (exit 4); agentos approve, a new
// process, resumes the cycle from the log and it ends done; the exported
// log verifies and replays to the cycle's state.
func TestWorkflowsRunFixThenApproveInAnotherProcess(t *testing.T) {
	repo, data, tmp := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "auth.go"), []byte("package auth\n\nfunc Check(token string) bool { return token != \"\" }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(tmp, "fix.yaml")
	if err := os.WriteFile(script, []byte(cliFixScript), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"--repo", repo, "--data", data, "--provider", "scripted", "--script", script, "--json"}
	out, code := cliChild(t, "", append([]string{"workflows", "run", "fix", "--session", "wf-fix"}, append(common, "fix auth.go")...)...)
	var r1 struct {
		Verdict string `json:"verdict"`
		Outcome struct {
			Status  string `json:"status"`
			Pending []struct {
				ApprovalID string `json:"approval_id"`
			} `json:"pending"`
		} `json:"outcome"`
	}
	if code != exitApproval || json.Unmarshal([]byte(out), &r1) != nil || r1.Outcome.Status != "paused" || len(r1.Outcome.Pending) != 1 || r1.Verdict != "" {
		t.Fatalf("workflows run: exit %d %s", code, out)
	}
	out, code = cliChild(t, "", append([]string{"approve", "wf-fix", r1.Outcome.Pending[0].ApprovalID, "--by", "octocat"}, common...)...)
	var r2 runReport
	if code != exitOK || json.Unmarshal([]byte(out), &r2) != nil || r2.Status != "completed" {
		t.Fatalf("approve: exit %d %s", code, out)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "auth.go")); !strings.Contains(string(b), `"expected"`) {
		t.Fatalf("auth.go: %s", b)
	}
	f, err := os.Open(r2.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, _ := replay.VerifyReader(schemas.MustDefault(), f)
	if !rep.Valid {
		t.Fatalf("log: %v", rep.Problem)
	}
	f2, _ := os.Open(r2.LogPath)
	defer f2.Close()
	snap, err := replay.ReplayReader(f2)
	if err != nil {
		t.Fatal(err)
	}
	if w := snap.Workflow; w == nil || w.CycleID != "fix" || w.Verdict != "done" || strings.Join(w.Visited, ",") != "fix" {
		t.Fatalf("replayed workflow %+v", snap.Workflow)
	}
	// An unknown cycle is refused before anything runs (usage error).
	if _, code := cliChild(t, "", append([]string{"workflows", "run", "deploy", "--session", "wf-x"}, append(common, "go")...)...); code != exitUsage {
		t.Fatalf("unknown cycle: exit %d, want %d", code, exitUsage)
	}
}

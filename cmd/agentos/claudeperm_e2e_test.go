package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/runtime/event"
)

// claudePermScript drives a run in testdata/claude-project whose
// .claude/settings.json denies Read(calc.py) and Bash(rm:*) and asks for
// Read(docs/internal/**): the request matches no skill, so the default
// skill's tools are offered. The Worker searches (calc.py is hidden from
// the search; the search waits for approval, as it reads the paths the
// ask rule covers too), reads calc.py (refused by the deny rule), runs the
// project's test command, an rm, through test.run (refused), and reads
// the internal plan (paused for approval by the ask rule, though policy
// lets repo.read run without one).
const claudePermScript = `
roles:
  lead:
  - text: '{"intent":"summarise the internal release plan","constraints":[],"needs_advisor":false,"schema_version":"v1"}'
  planner:
  - text: '{"steps":[{"id":"s1","description":"read the plan"}],"risks":[],"needs_advisor":false,"schema_version":"v1"}'
  worker:
  - tool_calls: [{id: w1, name: repo.search, args: {query: "return a + b"}}]
  - tool_calls: [{id: w2, name: repo.read, args: {path: calc.py}}]
  - tool_calls: [{id: w3, name: test.run, args: {}}]
  - tool_calls: [{id: w4, name: repo.read, args: {path: docs/internal/plan.md}}]
  - text: '{"output":"the plan ships 1.3.0 after the calc fix","steps_completed":["s1"],"tool_calls_made":["repo.read:w4"],"schema_version":"v1"}'
  reviewer:
  - text: '{"verdict":"pass","feedback":"ok","schema_version":"v1"}'
`

func TestClaudePermissionsEndToEnd(t *testing.T) {
	repo, data := t.TempDir(), t.TempDir()
	if err := os.CopyFS(repo, os.DirFS(filepath.Join("..", "..", "testdata", "claude-project"))); err != nil {
		t.Fatal(err)
	}
	// The project's test command is an rm: the deny rule binds it.
	if err := os.MkdirAll(filepath.Join(repo, ".agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, ".agent", "config.yaml"), []byte("test: rm -f build/out.txt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.LookPath(t, "git")
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=Octo", "-c", "user.email=octo@example.com", "commit", "-q", "-m", "Release 1.2.0"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	script := filepath.Join(t.TempDir(), "script.yaml")
	if err := os.WriteFile(script, []byte(claudePermScript), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"--repo", repo, "--data", data, "--provider", "scripted", "--script", script, "--json"}
	stdout, stderr, code := runCLI(t, append([]string{"run", "--session", "s-perm"}, append(common, "summarise the internal release plan")...)...)
	if code != exitApproval {
		t.Fatalf("run: exit %d, want %d (paused by the ask rule)\n%s%s", code, exitApproval, stdout, stderr)
	}
	// What agentos does not do as written is said on stderr.
	for _, want := range []string{
		`.claude/settings.json permissions.allow "Bash(npm run lint), Read": 2 allow rule(s) not honoured`,
		`.claude/settings.json permissions.deny "WebFetch(domain:example.com)": agentos has no WebFetch tool`,
		`.claude/settings.json permissions.additionalDirectories "../shared-notes": refused`,
		`.claude/settings.local.json permissions.defaultMode "bypassPermissions": never honoured`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	// Two pauses: the search (the ask rule's paths are among those it
	// reads), then the read of the internal plan.
	var pendingTools []string
	var r2 runReport
	for i := 0; ; i++ {
		if err := json.Unmarshal([]byte(stdout), &r2); err != nil {
			t.Fatalf("report: %v %s", err, stdout)
		}
		if r2.Status != "paused" || i > 3 {
			break
		}
		if len(r2.Pending) != 1 {
			t.Fatalf("paused report: %s", stdout)
		}
		pendingTools = append(pendingTools, r2.Pending[0].Tool)
		stdout, stderr, code = runCLI(t, append([]string{"approve", "s-perm", r2.Pending[0].ApprovalID, "--by", "octocat"}, common...)...)
		if code != exitOK && code != exitApproval {
			t.Fatalf("approve: exit %d\n%s%s", code, stdout, stderr)
		}
	}
	if r2.Status != "completed" || strings.Join(pendingTools, ",") != "repo.search,repo.read" {
		t.Fatalf("status %s after approving %v, want completed after repo.search and repo.read", r2.Status, pendingTools)
	}
	if _, errOut, code := runCLI(t, "verify", r2.LogPath); code != exitOK {
		t.Fatalf("agentos verify: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(repo, "build", "out.txt")); err != nil {
		t.Errorf("rm ran: %v", err)
	}
	evs, err := readJSONL(r2.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string]string{}
	warnings := map[string]string{}
	var searched, asked, readPlan bool
	for _, e := range evs {
		p := string(e.Payload)
		switch e.Type {
		case event.ToolRejected:
			refused[event.FieldString(e.Payload, "call_id")] = event.FieldString(e.Payload, "stage") + " " + event.FieldString(e.Payload, "code") + " " + p
		case event.ToolResult:
			switch event.FieldString(e.Payload, "call_id") {
			case "w1":
				searched = event.FieldBool(e.Payload, "ok") && !strings.Contains(p, "calc.py")
			case "w4":
				readPlan = event.FieldBool(e.Payload, "ok") && strings.Contains(p, "Ship 1.3.0")
			}
		case event.ApprovalRequested:
			asked = asked || (event.FieldString(e.Payload, "tool") == "repo.read" && strings.Contains(p, "permissions.ask rule Read(docs/internal/**)"))
		case event.ConfigWarning:
			warnings[event.FieldString(e.Payload, "setting")+" "+event.FieldString(e.Payload, "rule")] = event.FieldString(e.Payload, "effect")
		}
	}
	for id, want := range map[string]string{
		"w2": `permissions TOOL_NOT_ALLOWED`,
		"w3": `permissions TOOL_NOT_ALLOWED`,
	} {
		if !strings.HasPrefix(refused[id], want) {
			t.Errorf("%s: %q, want refused at %s", id, refused[id], want)
		}
	}
	if !strings.Contains(refused["w2"], `"rule":"Read(calc.py)"`) || !strings.Contains(refused["w3"], `"rule":"Bash(rm:*)"`) {
		t.Errorf("the refusals do not name the rules: %v", refused)
	}
	if !searched {
		t.Error("repo.search did not run, or showed calc.py, which a deny rule hides")
	}
	if !asked || !readPlan {
		t.Errorf("the ask rule: approval requested %v, read after approval %v", asked, readPlan)
	}
	for key, effect := range map[string]string{
		"permissions.allow Bash(npm run lint), Read":        "ignored",
		"permissions.deny WebFetch(domain:example.com)":     "not_enforced",
		"permissions.additionalDirectories ../shared-notes": "refused",
		"permissions.defaultMode bypassPermissions":         "ignored",
	} {
		if warnings[key] != effect {
			t.Errorf("config.warning %q: effect %q, want %q (all: %v)", key, warnings[key], effect, warnings)
		}
	}
}

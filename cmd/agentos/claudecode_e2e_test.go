package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
)

// claudeProjectScript drives a run in testdata/claude-project, a
// repository whose .claude/ folder is written for Claude Code: a Bash
// guard hook started through "$CLAUDE_PROJECT_DIR", prompt hooks, and an
// Agent Skills skill (name and description only) whose allowed-tools are
// Claude Code's permission rules (Read, Bash(git log:*)). The Planner
// picks the skill by its description; the Worker tries rm -rf (the
// skill's rule refuses it before any hook runs), reads the changelog, runs
// a git log the rule allows and the guard refuses (its pattern sees
// "rm -rf" in the format string), and a harmless git log, which the guard
// lets through to policy's approval.
const claudeProjectScript = `
roles:
  lead:
  - text: '{"intent":"add a 1.3.0 entry to CHANGELOG.md","constraints":[],"needs_advisor":false,"schema_version":"v1"}'
  planner:
  - text: '{"steps":[{"id":"s1","description":"clean the build output"},{"id":"s2","description":"read CHANGELOG.md"},{"id":"s3","description":"list the build directory"}],"risks":[],"needs_advisor":false,"skills":["changelog"],"schema_version":"v1"}'
  worker:
  - tool_calls: [{id: w1, name: process.run, args: {command: "rm -rf build"}}]
  - tool_calls: [{id: w2, name: repo.read, args: {path: CHANGELOG.md}}]
  - tool_calls: [{id: w3, name: process.run, args: {command: "git log --format='rm -rf %s'"}}]
  - tool_calls: [{id: w4, name: process.run, args: {command: "git log --oneline -1"}}]
  - text: '{"output":"read the changelog; the guard refused rm -rf","steps_completed":["s2","s3"],"tool_calls_made":["repo.read:w2","process.run:w4"],"schema_version":"v1"}'
  reviewer:
  - text: '{"verdict":"pass","feedback":"ok","schema_version":"v1"}'
`

func TestClaudeCodeProject(t *testing.T) {
	repo, data := t.TempDir(), t.TempDir()
	if err := os.CopyFS(repo, os.DirFS(filepath.Join("..", "..", "testdata", "claude-project"))); err != nil {
		t.Fatal(err)
	}
	// os.CopyFS does not keep the executable bit.
	if err := os.Chmod(filepath.Join(repo, ".claude", "hooks", "guard.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A repository with history, for git log.
	testenv.LookPath(t, "git")
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=Octo", "-c", "user.email=octo@example.com", "commit", "-q", "-m", "Release 1.2.0"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	script := filepath.Join(t.TempDir(), "script.yaml")
	if err := os.WriteFile(script, []byte(claudeProjectScript), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"--repo", repo, "--data", data, "--provider", "scripted", "--script", script, "--json"}
	stdout, stderr, code := runCLI(t, append([]string{"run", "--session", "s-cc"}, append(common, "add the 1.3.0 release to the changelog")...)...)
	if code != exitApproval {
		t.Fatalf("run: exit %d, want %d (paused for the harmless command)\n%s%s", code, exitApproval, stdout, stderr)
	}
	// The prompt hooks are skipped with a note; the Bash matcher maps.
	for _, want := range []string{`hooks.PreToolUse[1].hooks[0]: hook type "prompt" is not run by agentos, skipped`, `hooks.Stop[0].hooks[0]: hook type "prompt"`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks the note %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, `matcher "Bash" matches no tool`) {
		t.Errorf("the Bash matcher was reported as matching nothing:\n%s", stderr)
	}
	var r1 runReport
	if err := json.Unmarshal([]byte(stdout), &r1); err != nil || len(r1.Pending) != 1 || r1.Pending[0].Tool != "process.run" {
		t.Fatalf("paused report: %v %s", err, stdout)
	}
	stdout, stderr, code = runCLI(t, append([]string{"approve", "s-cc", r1.Pending[0].ApprovalID, "--by", "octocat"}, common...)...)
	if code != exitOK {
		t.Fatalf("approve: exit %d\n%s%s", code, stdout, stderr)
	}
	var r2 runReport
	if err := json.Unmarshal([]byte(stdout), &r2); err != nil || r2.Status != "completed" {
		t.Fatalf("after approval: %v %s", err, stdout)
	}
	if _, errOut, code := runCLI(t, "verify", r2.LogPath); code != exitOK {
		t.Fatalf("agentos verify: exit %d\n%s", code, errOut)
	}

	// The guard blocked rm -rf: the build output is still there.
	if _, err := os.Stat(filepath.Join(repo, "build", "out.txt")); err != nil {
		t.Errorf("rm -rf ran: %v", err)
	}
	evs, err := readJSONL(r2.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	var guardDeny, rejected, ruled, hookOnW1, selected, invoked, logRan, readRan bool
	for _, e := range evs {
		p := string(e.Payload)
		switch e.Type {
		case event.HookFired:
			if event.FieldString(e.Payload, "decision") == "deny" && event.FieldString(e.Payload, "tool") == "process.run" &&
				strings.Contains(event.FieldString(e.Payload, "reason"), "guard.sh: refusing destructive command: git log --format='rm -rf %s'") {
				guardDeny = true
			}
			hookOnW1 = hookOnW1 || strings.Contains(p, "rm -rf build")
		case event.ToolRejected:
			rejected = rejected || (event.FieldString(e.Payload, "call_id") == "w3" && event.FieldString(e.Payload, "code") == "GATE_DENIED")
			// rm -rf build is outside the skill's Bash(git log:*): refused
			// by the rule, before the hook.
			ruled = ruled || (event.FieldString(e.Payload, "call_id") == "w1" && event.FieldString(e.Payload, "code") == "TOOL_NOT_ALLOWED" &&
				event.FieldString(e.Payload, "stage") == "rules" && strings.Contains(p, `"source":"skill allowed-tools"`))
		case event.SkillSelected:
			selected = strings.Contains(p, `"chosen":["changelog"]`)
		case event.SkillInvoke:
			// allowed-tools: Read, Bash(git log:*) → repo.read, process.run
			invoked = event.FieldString(e.Payload, "skill") == "changelog" && event.FieldString(e.Payload, "selected_by") == "planner" &&
				strings.Contains(p, `"allowed_tools":["repo.read","process.run"]`) && strings.Contains(p, `"Bash(git log:*)"`)
		case event.ToolResult:
			switch event.FieldString(e.Payload, "call_id") {
			case "w2":
				readRan = event.FieldBool(e.Payload, "ok")
			case "w4":
				logRan = event.FieldBool(e.Payload, "ok") && strings.Contains(p, "Release 1.2.0")
			}
		}
	}
	if !guardDeny || !rejected {
		t.Errorf("the guard's deny is not in the log (hook.fired deny %v, tool.rejected GATE_DENIED %v)", guardDeny, rejected)
	}
	if !ruled || hookOnW1 {
		t.Errorf("rm -rf build: refused by the skill's rule %v, a hook saw it %v; want refused before any hook", ruled, hookOnW1)
	}
	if !selected || !invoked {
		t.Errorf("the Agent Skills skill was not selected and loaded (skill.selected %v, skill.invoke %v)", selected, invoked)
	}
	if !readRan || !logRan {
		t.Errorf("the run did not go on after the block (repo.read %v, git log %v)", readRan, logRan)
	}
}

// TestBotEnginesReportConfigurationNotes: in bot mode (webhook server,
// Action) the notes of a worktree's .claude/ folder reach the operator.
func TestBotEnginesReportConfigurationNotes(t *testing.T) {
	repo := t.TempDir()
	if err := os.CopyFS(repo, os.DirFS(filepath.Join("..", "..", "testdata", "claude-project"))); err != nil {
		t.Fatal(err)
	}
	prof := provider.DefaultProfile()
	prof.Provider, prof.Script = "scripted", filepath.Join("..", "..", "runtime", "demo", "testdata", "fix-auth.script.yaml")
	var got []string
	build := engines(nil, "", prof, nil, func(sid, n string) { got = append(got, sid+": "+n) })
	eng, closeFn, err := build(context.Background(), dispatch.EngineRequest{Dir: repo, SessionID: "gh-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if eng == nil {
		t.Fatal("no engine")
	}
	if joined := strings.Join(got, "\n"); !strings.Contains(joined, `gh-1: .claude/settings.json: hooks.PreToolUse[1].hooks[0]: hook type "prompt" is not run by agentos`) {
		t.Errorf("notes %v", got)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/schemas"
)

// cliChild runs the CLI in a child process with stdin and returns its
// stdout and exit code.
func cliChild(t *testing.T, stdin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCLIProcess$")
	cmd.Env = append(os.Environ(), "AGENTOS_CLI_ARGS="+strings.Join(args, "\x1f"))
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("agentos %v: %v", args, err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// statusExit is the exit code of a run that ends with each status.
var statusExit = map[string]int{"completed": exitOK, "denied": exitBlocked, "paused": exitApproval, "failed": exitRunFailed}

// TestCLIDenyAndResume: `agentos deny` records the maintainer's reason,
// the agent gets it as the tool's result, nothing is applied, and the
// final log verifies; `agentos resume` on a session that is not paused is
// refused.
func TestCLIDenyAndResume(t *testing.T) {
	repo, data := t.TempDir(), t.TempDir()
	if err := demo.WriteSample(repo); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(repo, "auth.go"))
	script := filepath.Join("..", "..", "runtime", "demo", "testdata", "fix-auth.script.yaml")
	common := []string{"--repo", repo, "--data", data, "--provider", "scripted", "--script", script, "--json"}
	out, code := cliChild(t, "", append([]string{"run", "--session", "s-deny"}, append(common, demo.Prompt)...)...)
	var r1 runReport
	if code != exitApproval || json.Unmarshal([]byte(out), &r1) != nil || r1.Status != "paused" || len(r1.Pending) != 1 {
		t.Fatalf("run: exit %d %s", code, out)
	}
	out, code = cliChild(t, "", append([]string{"deny", "s-deny", r1.Pending[0].ApprovalID, "--by", "octocat", "--reason", "do not touch auth.go today"}, common...)...)
	var r2 runReport
	if json.Unmarshal([]byte(out), &r2) != nil || r2.Status == "paused" || r2.Terminal == nil || code != statusExit[r2.Status] {
		t.Fatalf("deny: exit %d %s", code, out)
	}
	if after, _ := os.ReadFile(filepath.Join(repo, "auth.go")); !bytes.Equal(before, after) {
		t.Fatal("a denied patch was applied")
	}
	f, err := os.Open(r2.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := replay.VerifyReader(schemas.MustDefault(), f)
	f.Close()
	if !rep.Valid {
		t.Fatalf("final log: %v", rep.Problem)
	}
	evs, _ := readJSONL(r2.LogPath)
	denied, fedBack := false, false
	for _, e := range evs {
		if e.Type == event.ApprovalResolved && event.FieldString(e.Payload, "decision") == "deny" && event.FieldString(e.Payload, "reason") == "do not touch auth.go today" && event.FieldString(e.Payload, "by") == "octocat" {
			denied = true
		}
		if e.Type == event.LLMRequest && bytes.Contains(e.Payload, []byte("do not touch auth.go today")) {
			fedBack = true
		}
	}
	if !denied || !fedBack {
		t.Errorf("denial recorded %v, fed back to the model %v", denied, fedBack)
	}
	// replay takes a session id from the embedded store as well as a file.
	sout, serr, code := runCLI(t, "replay", "s-deny", "--data", data, "--json")
	var snap replay.Snapshot
	if code != 0 || json.Unmarshal([]byte(sout), &snap) != nil || !snap.Closed || snap.SessionID != "s-deny" || len(snap.ResolvedApprovals) != 1 || snap.ResolvedApprovals[0].Decision != "deny" {
		t.Fatalf("replay by session id: exit %d %s %s", code, serr, sout)
	}
	if _, code := cliChild(t, "", append([]string{"resume", "s-deny"}, common...)...); code != exitFailure {
		t.Errorf("resume of a finished session: exit %d, want %d", code, exitFailure)
	}
	if _, code := cliChild(t, "", append([]string{"approve", "s-deny", r1.Pending[0].ApprovalID}, common...)...); code != exitFailure {
		t.Errorf("approving an answered approval: exit %d, want %d", code, exitFailure)
	}
}

// TestCLISkillsAndHooks: `agentos skills list --json` lists the built-in
// and repository skills and the skipped invalid ones; `agentos hooks test`
// fires a repository's settings.json hooks on stdin input.
func TestCLISkillsAndHooks(t *testing.T) {
	repo := t.TempDir()
	write := func(p, c string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(repo, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".agent/skills/release/SKILL.md", "---\nname: release\ndescription: Cuts a release.\nallowed-tools: repo.read, process.run\nmetadata:\n  triggers: [release]\n---\nSteps.\n")
	write(".claude/skills/Bad Name/SKILL.md", "---\nname: Bad Name\ndescription: x\n---\n")
	write(".agent/settings.json", `{"hooks":{"PreToolUse":[{"matcher":"repo.patch","hooks":[{"type":"command","command":"echo 'patches are frozen' >&2; exit 2"}]}]}}`)

	out, _, code := runCLI(t, "skills", "list", "--repo", repo, "--json")
	var list struct {
		Skills []struct {
			Name         string   `json:"name"`
			AllowedTools []string `json:"allowed_tools"`
		} `json:"skills"`
		Skipped []json.RawMessage `json:"skipped"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("skills list: exit %d %s", code, out)
	}
	names := map[string]string{}
	for _, s := range list.Skills {
		names[s.Name] = strings.Join(s.AllowedTools, ",")
	}
	if _, ok := names["greet"]; !ok || names["release"] != "repo.read,process.run" || len(list.Skipped) != 1 {
		t.Fatalf("skills %v skipped %d", names, len(list.Skipped))
	}

	out, code = cliChild(t, `{"session_id":"s","tool_name":"repo.patch","tool_input":{"path":"a.go"}}`, "hooks", "test", "PreToolUse", "--repo", repo)
	if code != exitBlocked || !strings.Contains(out, `"decision": "deny"`) || !strings.Contains(out, "patches are frozen") {
		t.Fatalf("hooks test deny: exit %d %s", code, out)
	}
	out, code = cliChild(t, `{"tool_name":"repo.read","tool_input":{"path":"a.go"}}`, "hooks", "test", "PreToolUse", "--repo", repo)
	if code != 0 || !strings.Contains(out, `"decision": "allow"`) {
		t.Fatalf("hooks test allow: exit %d %s", code, out)
	}
	out, code = cliChild(t, `{"prompt":"card 4111111111111111"}`, "hooks", "test", "UserPromptSubmit", "--repo", repo)
	if code != 0 || !strings.Contains(out, "REDACTED-CC") || strings.Contains(out, "4111111111111111") {
		t.Fatalf("hooks test built-in redaction: exit %d %s", code, out)
	}
}

// TestToolCallRunsRepositoryHooks: `agentos tool call` goes through the
// full kernel, so a PreToolUse command hook from the workspace's
// .agent/settings.json denies the call (GATE_DENIED, exit 3) and the
// decision is in the events file.
func TestToolCallRunsRepositoryHooks(t *testing.T) {
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hello\n"), 0o644)
	os.WriteFile(filepath.Join(ws, ".agent", "settings.json"), []byte(`{"hooks":{"PreToolUse":[{"matcher":"repo.read","hooks":[{"type":"command","command":"echo 'reads are audited today' >&2; exit 2"}]}]}}`), 0o644)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	out, _, code := runCLI(t, "tool", "call", "repo.read", "--args", `{"path":"a.txt"}`, "--workspace", ws, "--events", events)
	if code != exitBlocked || !strings.Contains(out, "GATE_DENIED") || !strings.Contains(out, "reads are audited today") {
		t.Fatalf("exit %d %s", code, out)
	}
	evs, err := readJSONL(events)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	denied := false
	for _, e := range evs {
		types = append(types, e.Type)
		denied = denied || (e.Type == event.HookFired && event.FieldString(e.Payload, "decision") == "deny" && strings.HasPrefix(event.FieldString(e.Payload, "handler"), "command:"))
	}
	if got := strings.Join(types, ","); !strings.HasSuffix(got, "hook.fired,tool.rejected") || strings.Contains(got, "tool.invoke") || !denied {
		t.Fatalf("events %s (command hook deny recorded: %v)", got, denied)
	}
	if out, _, code := runCLI(t, "tool", "call", "repo.search", "--args", `{"query":"hello"}`, "--workspace", ws, "--json"); code != 0 || !strings.Contains(out, "a.txt") {
		t.Fatalf("a call the hook does not match: exit %d %s", code, out)
	}
}

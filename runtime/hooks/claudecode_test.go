package hooks

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// guardScript is a Claude Code project's Bash guard, as such projects
// write it: jq-free, reading tool_input.command from stdin.
const guardScript = `#!/bin/sh
input=$(cat)
case "$input" in
  *'"command":"rm -rf'*) echo "blocked by guard.sh: rm -rf" >&2; exit 2;;
esac
exit 0
`

func claudeProject(t *testing.T, settings string) string {
	t.Helper()
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, ".claude", "hooks"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, ".claude", "hooks", "guard.sh"), []byte(guardScript), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, ".claude", "settings.json"), []byte(settings), 0o644))
	return dir
}

func TestClaudeCodeSettings(t *testing.T) {
	settings := `{"hooks":{
	  "PreToolUse":[
	    {"matcher":"Bash","hooks":[{"type":"command","command":"\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/guard.sh"}]},
	    {"matcher":"Bash","hooks":[{"type":"prompt","prompt":"Is this command safe? $ARGUMENTS"}]},
	    {"matcher":"WebFetch|Task","hooks":[{"type":"command","command":"exit 2"}]},
	    {"matcher":"mcp__memory__.*","hooks":[{"type":"command","command":"echo 'no memory writes' >&2; exit 2"}]}
	  ],
	  "Stop":[{"hooks":[{"type":"agent","prompt":"check the tests"}]}]
	}}`
	dir := claudeProject(t, settings)
	r := NewRegistry()
	notes, err := r.LoadSettings(DirFS(dir), shRunner{}, ".claude/settings.json")
	if err != nil {
		t.Fatalf("a prompt hook must not make the settings an error: %v", err)
	}
	joined := strings.Join(notes, "\n")
	for _, want := range []string{`hooks.PreToolUse[1].hooks[0]: hook type "prompt" is not run by agentos, skipped`, `hooks.Stop[0].hooks[0]: hook type "agent"`} {
		if !strings.Contains(joined, want) {
			t.Errorf("notes lack %q:\n%s", want, joined)
		}
	}
	if got := len(r.Handlers(PreToolUse)); got != 3 {
		t.Errorf("%d PreToolUse command hooks kept, want 3", got)
	}

	tools := []string{"echo", "repo.read", "repo.patch", "repo.write", "process.run", "mcp.memory.create_entities"}
	mn := r.MatcherNotes(tools, nil)
	if len(mn) != 1 || !strings.Contains(mn[0], `hooks.PreToolUse[2]: matcher "WebFetch|Task" matches no tool`) {
		t.Errorf("matcher notes %v", mn)
	}
	if mn := r.MatcherNotes([]string{"process.run"}, nil); len(mn) != 2 || !strings.Contains(mn[1], "no such MCP server") {
		t.Errorf("without the MCP tool: %v", mn)
	}
	// The memory server is mounted but has not listed its tools yet.
	if mn := r.MatcherNotes([]string{"process.run"}, []string{"memory"}); len(mn) != 1 {
		t.Errorf("with the memory server mounted, not started: %v", mn)
	}

	j, _ := newJournal(t)
	fire := func(tool, args string) Decision {
		t.Helper()
		d, err := r.Fire(context.Background(), j, Input{Event: PreToolUse, Cwd: dir, SessionID: "cc", ToolName: tool, ToolInput: json.RawMessage(args)})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := fire("process.run", `{"command":"rm -rf build"}`); d.Decision != Deny || !strings.Contains(d.Reason, "blocked by guard.sh") {
		t.Errorf("the Bash guard did not block rm -rf through $CLAUDE_PROJECT_DIR: %+v", d)
	}
	if d := fire("process.run", `{"command":"go test ./..."}`); d.Decision != Allow {
		t.Errorf("the guard blocked a harmless command: %+v", d)
	}
	if d := fire("repo.read", `{"path":"README.md"}`); d.Decision != Allow {
		t.Errorf("a Bash hook fired for repo.read: %+v", d)
	}
	if d := fire("mcp.memory.create_entities", `{"entities":[]}`); d.Decision != Deny || !strings.Contains(d.Reason, "no memory writes") {
		t.Errorf("mcp__memory__.* did not match mcp.memory.create_entities: %+v", d)
	}
}

// TestClaudeCodeToolInput checks what a command hook reads on stdin for a
// mapped tool: Claude Code's fields next to ours, one call per file of a
// multi-file patch, and updatedInput mapped back.
func TestClaudeCodeToolInput(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "seen")
	record := &Command{Event: PreToolUse, Line: `cat >> "` + out + `"; echo >> "` + out + `"`, Timeout: 5 * time.Second, Runner: shRunner{}}
	r := NewRegistry()
	must(t, r.Register(PreToolUse, record))
	j, _ := newJournal(t)
	diff := "--- a/a.go\n+++ b/a.go\n@@ -1 +1 @@\n-package a\n+package b\n--- a/.claude/settings.json\n+++ b/.claude/settings.json\n@@ -1 +1 @@\n-{}\n+{\"hooks\":{}}\n"
	args, _ := json.Marshal(map[string]string{"unifiedDiff": diff})
	d, err := r.Fire(context.Background(), j, Input{Event: PreToolUse, Cwd: dir, ToolName: "repo.patch", ToolInput: args})
	if err != nil || d.Decision != Allow {
		t.Fatalf("%+v %v", d, err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("the hook ran %d times for a two-file patch, want 2:\n%s", len(lines), b)
	}
	var seen []struct {
		ToolName  string `json:"tool_name"`
		ToolInput struct {
			FilePath    string `json:"file_path"`
			OldString   string `json:"old_string"`
			NewString   string `json:"new_string"`
			UnifiedDiff string `json:"unifiedDiff"`
		} `json:"tool_input"`
	}
	for _, l := range lines {
		var one struct {
			ToolName  string `json:"tool_name"`
			ToolInput struct {
				FilePath    string `json:"file_path"`
				OldString   string `json:"old_string"`
				NewString   string `json:"new_string"`
				UnifiedDiff string `json:"unifiedDiff"`
			} `json:"tool_input"`
		}
		must(t, json.Unmarshal([]byte(l), &one))
		seen = append(seen, one)
	}
	if seen[0].ToolName != "repo.patch" || seen[0].ToolInput.FilePath != filepath.Join(dir, "a.go") || seen[0].ToolInput.OldString != "package a" || seen[0].ToolInput.NewString != "package b" || seen[0].ToolInput.UnifiedDiff != diff {
		t.Errorf("first file: %+v", seen[0])
	}
	if seen[1].ToolInput.FilePath != filepath.Join(dir, ".claude", "settings.json") {
		t.Errorf("second file: %+v", seen[1])
	}

	// A guard on file_path denies the whole patch when one file is protected.
	guard := NewRegistry()
	must(t, guard.Register(PreToolUse, &Command{Event: PreToolUse, Matcher: "Edit|Write", Line: `grep -q '"file_path":"[^"]*/.claude/' && { echo "protected path" >&2; exit 2; }; exit 0`, Timeout: 5 * time.Second, Runner: shRunner{}}))
	d, err = guard.Fire(context.Background(), j, Input{Event: PreToolUse, Cwd: dir, ToolName: "repo.patch", ToolInput: args})
	if err != nil || d.Decision != Deny || !strings.Contains(d.Reason, "protected path") {
		t.Errorf("file_path guard on the second file of a patch: %+v %v", d, err)
	}

	// updatedInput: changing our field is kept, Claude Code's added fields
	// are dropped when unchanged, and changing one of them denies.
	cases := []struct{ reply, decision, output string }{
		{`{"hookSpecificOutput":{"hookEventName":"PreToolUse","updatedInput":{"path":"b.txt","file_path":"` + filepath.Join(dir, "a.txt") + `","content":"x","expected_hash":""}}}`, Transform, `{"content":"x","expected_hash":"","path":"b.txt"}`},
		{`{"hookSpecificOutput":{"hookEventName":"PreToolUse","updatedInput":{"path":"a.txt","file_path":"/etc/passwd","content":"x","expected_hash":""}}}`, Deny, ""},
	}
	for _, c := range cases {
		rr := NewRegistry()
		must(t, rr.Register(PreToolUse, &Command{Event: PreToolUse, Line: "echo '" + c.reply + "'", Timeout: 5 * time.Second, Runner: shRunner{}}))
		d, err := rr.Fire(context.Background(), j, Input{Event: PreToolUse, Cwd: dir, ToolName: "repo.write", ToolInput: json.RawMessage(`{"path":"a.txt","content":"x","expected_hash":""}`)})
		if err != nil || d.Decision != c.decision || (c.output != "" && string(d.Output) != c.output) {
			t.Errorf("reply %s: got %+v %v, want %s %s", c.reply, d, err, c.decision, c.output)
		}
	}
}

func TestLoadSettingsSkipsUnknownTypes(t *testing.T) {
	fsys := fstest.MapFS{".claude/settings.json": {Data: []byte(`{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"http","url":"http://x"},{"type":"command","command":"exit 2"}]}]}}`)}}
	r := NewRegistry()
	notes, err := r.LoadSettings(fsys, shRunner{}, ".claude/settings.json")
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], `"http"`) {
		t.Fatalf("notes %v, err %v", notes, err)
	}
	if got := r.Handlers(PreToolUse); len(got) != 1 || got[0] != "command:exit 2" {
		t.Errorf("handlers %v", got)
	}
}

// TestClaudeCodeToolName: scripts written for Claude Code often check
// tool_name themselves, as Claude Code's own example validator does (if
// tool_name != "Bash": allow). Hooks from .claude/settings.json therefore
// see Claude Code's tool names; those from .agent/settings.json see
// agentos's.
func TestClaudeCodeToolName(t *testing.T) {
	script := `input=$(cat); case "$input" in *'"tool_name":"Bash"'*) ;; *) exit 0;; esac; case "$input" in *'rm -rf'*) echo "no rm -rf ($input)" >&2; exit 2;; esac`
	settings, _ := json.Marshal(map[string]any{"hooks": map[string]any{"PreToolUse": []any{map[string]any{"matcher": "*", "hooks": []any{map[string]any{"type": "command", "command": script}}}}}})
	fsys := fstest.MapFS{".claude/settings.json": {Data: settings}, ".agent/settings.json": {Data: settings}}
	j, _ := newJournal(t)
	for _, c := range []struct {
		file, decision, seen string
	}{
		{".claude/settings.json", Deny, `"tool_name":"Bash","agentos_tool_name":"process.run"`},
		{".agent/settings.json", Allow, ""},
	} {
		r := NewRegistry()
		if _, err := r.LoadSettings(fsys, shRunner{}, c.file); err != nil {
			t.Fatal(err)
		}
		d, err := r.Fire(context.Background(), j, Input{Event: PreToolUse, Cwd: t.TempDir(), ToolName: "process.run", ToolInput: json.RawMessage(`{"command":"rm -rf /"}`)})
		if err != nil || d.Decision != c.decision || !strings.Contains(d.Reason, c.seen) {
			t.Errorf("%s: %+v %v, want %s seeing %s", c.file, d, err, c.decision, c.seen)
		}
	}
}

// TestSessionStartMatcher: Claude Code applies a SessionStart matcher to
// the source (startup, resume), a PreCompact matcher to the trigger.
func TestSessionStartMatcher(t *testing.T) {
	cases := []struct {
		matcher string
		in      Input
		want    bool
	}{
		{"startup", Input{Event: SessionStart, Source: "startup"}, true},
		{"startup", Input{Event: SessionStart, Source: "resume"}, false},
		{"startup|resume", Input{Event: SessionStart, Source: "resume"}, true},
		{"", Input{Event: SessionStart, Source: "resume"}, true},
		{"manual", Input{Event: PreCompact, Trigger: "auto"}, false},
		{"Bash", Input{Event: Stop}, true},
	}
	for _, c := range cases {
		if got := matchTool(c.matcher, c.in); got != c.want {
			t.Errorf("matcher %q on %+v = %v, want %v", c.matcher, c.in, got, c.want)
		}
	}
}

package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/journal"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
)

func newJournal(t *testing.T) (*journal.Journal, store.Store) {
	t.Helper()
	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := store.NewMemory(sealer)
	j, err := journal.Open(context.Background(), s, "hooks-test")
	if err != nil {
		t.Fatal(err)
	}
	return j, s
}

func firedDecisions(t *testing.T, s store.Store) []string {
	t.Helper()
	evs, err := s.Read(context.Background(), "hooks-test", 1)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Type != "hook.fired" {
			t.Fatalf("unexpected event %s", e.Type)
		}
		out = append(out, event.FieldString(e.Payload, "handler")+"="+event.FieldString(e.Payload, "decision"))
	}
	return out
}

func fn(name string, prio int, d Decision, err error) Func {
	return Func{Name: name, Prio: prio, Fn: func(context.Context, Input) (Decision, error) { return d, err }}
}

func TestFireOrderDenyAndTransform(t *testing.T) {
	r := NewRegistry()
	r.Builtins()
	must(t, r.Register(UserPromptSubmit, fn("low", 1, Decision{Decision: Allow}, nil)))
	must(t, r.Register(UserPromptSubmit, fn("high", 200, Decision{Decision: Allow}, nil)))
	j, s := newJournal(t)
	d, err := r.Fire(context.Background(), j, Input{Event: UserPromptSubmit, Prompt: "pay with 4111111111111111 please"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Decision != Transform || !strings.Contains(string(d.Output), "[REDACTED-CC]") || strings.Contains(string(d.Output), "4111") {
		t.Fatalf("decision %+v", d)
	}
	if got, want := strings.Join(firedDecisions(t, s), ","), "high=allow,redact_pii=transform,low=allow"; got != want {
		t.Errorf("fired %s, want %s", got, want)
	}
	// The recorded transform output is redacted like everything else, and
	// no card number reached the log.
	evs, _ := s.Read(context.Background(), "hooks-test", 1)
	for _, e := range evs {
		if bytes.Contains(e.Line(), []byte("4111111111111111")) {
			t.Fatal("card number in the log")
		}
	}
}

func TestFailClosed(t *testing.T) {
	cases := []struct {
		name   string
		h      Func
		reason string
	}{
		{"error", fn("err", 1, Decision{}, errors.New("boom")), "boom"},
		{"panic", Func{Name: "panic", Fn: func(context.Context, Input) (Decision, error) { panic("kaboom") }}, "kaboom"},
		{"timeout", Func{Name: "slow", Fn: func(ctx context.Context, in Input) (Decision, error) {
			time.Sleep(2 * time.Second)
			return Decision{Decision: Allow}, nil
		}}, "timed out"},
		{"invalid decision", fn("odd", 1, Decision{Decision: "maybe"}, nil), "invalid decision"},
		{"transform without output", fn("empty", 1, Decision{Decision: Transform}, nil), "without valid JSON"},
		{"transform wrong shape", fn("shape", 1, Decision{Decision: Transform, Output: json.RawMessage(`{"text":"x"}`)}, nil), "must be"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := NewRegistry()
			r.Timeout = 50 * time.Millisecond
			must(t, r.Register(UserPromptSubmit, c.h))
			must(t, r.Register(UserPromptSubmit, fn("after", -1, Decision{Decision: Allow}, nil)))
			j, s := newJournal(t)
			d, err := r.Fire(context.Background(), j, Input{Event: UserPromptSubmit, Prompt: "x"})
			if err != nil {
				t.Fatal(err)
			}
			if d.Decision != Deny || !strings.Contains(d.Reason, c.reason) {
				t.Fatalf("got %+v, want deny mentioning %q", d, c.reason)
			}
			fired := firedDecisions(t, s)
			if fired[len(fired)-1] != c.h.Name+"=deny" || strings.Contains(strings.Join(fired, ","), "after") {
				t.Errorf("fired %v: the chain must stop at the first deny", fired)
			}
		})
	}
}

func TestMatcher(t *testing.T) {
	cases := []struct {
		matcher, tool string
		want          bool
	}{
		{"", "repo.read", true}, {"*", "anything", true},
		{"repo.read", "repo.read", true}, {"repo.read", "repoXread", false},
		{"repo.read|repo.patch", "repo.patch", true}, {"repo.read|repo.patch", "process.run", false},
		{"repo\\..*", "repo.search", true}, {"^process", "process.run", true}, {"^process", "x.process", false},
		{"Bash", "bash", false},
	}
	for _, c := range cases {
		if got := matchTool(c.matcher, Input{Event: PreToolUse, ToolName: c.tool}); got != c.want {
			t.Errorf("matcher %q tool %q = %v, want %v", c.matcher, c.tool, got, c.want)
		}
	}
	if !matchTool("repo.read", Input{Event: Stop}) {
		t.Error("non-tool events ignore the matcher")
	}
}

// shRunner runs hook commands with sh -c. Production wiring uses the
// kernel's process runner; this is the test's own.
type shRunner struct{}

func (shRunner) RunHook(ctx context.Context, dir, command string, env []string, stdin []byte) ([]byte, []byte, int, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.WaitDelay = 100 * time.Millisecond
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ctx.Err() == nil {
		return out.Bytes(), errb.Bytes(), ee.ExitCode(), nil
	}
	if err != nil {
		return nil, nil, -1, err
	}
	return out.Bytes(), errb.Bytes(), 0, nil
}

func TestCommandHooks(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, command string
		event         Event
		decision      string
		reason        string
		output        string
	}{
		{"exit 0 silent", "true", PreToolUse, Allow, "", ""},
		{"exit 2 denies with stderr", "echo 'no writes to auth' >&2; exit 2", PreToolUse, Deny, "no writes to auth", ""},
		{"other exit denies", "exit 1", PreToolUse, Deny, "exited 1", ""},
		{"invalid JSON denies", "echo '{not json'", PreToolUse, Deny, "invalid hook output", ""},
		{"permissionDecision deny", `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"policy says no"}}'`, PreToolUse, Deny, "policy says no", ""},
		{"ask is deny", `echo '{"hookSpecificOutput":{"permissionDecision":"ask"}}'`, PreToolUse, Deny, "ask is treated as deny", ""},
		{"updatedInput transforms", `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"path":"safe.txt"}}}'`, PreToolUse, Transform, "", `{"path":"safe.txt"}`},
		{"continue false", `echo '{"continue":false,"stopReason":"maintenance window"}'`, PreToolUse, Deny, "maintenance window", ""},
		{"decision block", `echo '{"decision":"block","reason":"lint failed"}'`, PostToolUse, Deny, "lint failed", ""},
		{"plain text allows", "echo looks fine", PreToolUse, Allow, "", ""},
		{"stdin is Claude Code's shape", `read -r line; case "$line" in *'"hook_event_name":"PreToolUse"'*'"tool_name":"repo.write"'*) exit 0;; *) exit 2;; esac`, PreToolUse, Allow, "", ""},
		{"prompt context", `echo '{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"repo uses Go 1.26"}}'`, UserPromptSubmit, Transform, "", `{"prompt":"fix it\n\nrepo uses Go 1.26"}`},
		{"timeout denies", "sleep 5", PreToolUse, Deny, "timed out", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := NewRegistry()
			must(t, r.Register(c.event, &Command{Event: c.event, Line: c.command, Timeout: 300 * time.Millisecond, Runner: shRunner{}}))
			j, _ := newJournal(t)
			in := Input{Event: c.event, Cwd: dir, SessionID: "hooks-test", ToolName: "repo.write", ToolInput: json.RawMessage(`{"path":"auth.go"}`), Prompt: "fix it"}
			if c.event == PostToolUse {
				in.ToolResponse = json.RawMessage(`{"ok":true}`)
			}
			d, err := r.Fire(context.Background(), j, in)
			if err != nil {
				t.Fatal(err)
			}
			if d.Decision != c.decision || !strings.Contains(d.Reason, c.reason) {
				t.Fatalf("got %+v, want %s with %q", d, c.decision, c.reason)
			}
			if c.output != "" && string(d.Output) != c.output {
				t.Errorf("output %s, want %s", d.Output, c.output)
			}
		})
	}
}

func TestLoadSettings(t *testing.T) {
	good := `{"hooks":{"PreToolUse":[{"matcher":"repo.patch|repo.write","hooks":[{"type":"command","command":"exit 2","timeout":5}]}],"Notification":[{"hooks":[{"type":"command","command":"true"}]}]}}`
	fsys := fstest.MapFS{
		".agent/settings.json":  {Data: []byte(good)},
		".claude/settings.json": {Data: []byte(`{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"true"}]}]}}`)},
	}
	r := NewRegistry()
	notes, err := r.LoadSettings(fsys, shRunner{}, ".agent/settings.json", ".claude/settings.json", "missing.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "Notification") {
		t.Errorf("notes %v", notes)
	}
	if got := r.Handlers(PreToolUse); len(got) != 1 || got[0] != "command:exit 2" {
		t.Errorf("PreToolUse handlers %v", got)
	}
	if len(r.Handlers(Stop)) != 1 {
		t.Error("Stop hook from .claude/settings.json not loaded")
	}
	j, _ := newJournal(t)
	d, _ := r.Fire(context.Background(), j, Input{Event: PreToolUse, ToolName: "repo.write", Cwd: t.TempDir()})
	if d.Decision != Deny {
		t.Errorf("configured hook did not deny: %+v", d)
	}
	d, _ = r.Fire(context.Background(), j, Input{Event: PreToolUse, ToolName: "repo.read", Cwd: t.TempDir()})
	if d.Decision != Allow {
		t.Errorf("matcher did not exclude repo.read: %+v", d)
	}

	bad := []struct{ doc, want string }{
		{`{"hooks":`, "invalid JSON"},
		{`{"hooks":{"PreToolUse":[{"matcher":"(","hooks":[{"type":"command","command":"x"}]}]}}`, "matcher: invalid regular expression"},
		{`{"hooks":{"PreToolUse":[{"hooks":[{"command":"x"}]}]}}`, `type is missing`},
		{`{"hooks":{"Stop":[{"hooks":[{"type":"command","command":" "}]}]}}`, "command is empty"},
		{`{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"x","timeout":-1}]}]}}`, "timeout must be"},
	}
	for _, b := range bad {
		_, err := NewRegistry().LoadSettings(fstest.MapFS{"s.json": {Data: []byte(b.doc)}}, shRunner{}, "s.json")
		var se *SettingsError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: got %v, want SettingsError with %q", b.doc, err, b.want)
		}
	}
}

func TestLoadSettingsFromDisk(t *testing.T) {
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, ".claude"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, ".claude", "settings.json"), []byte(`{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"true"}]}]}}`), 0o644))
	r := NewRegistry()
	if _, err := r.LoadSettings(DirFS(dir), shRunner{}, ".agent/settings.json", ".claude/settings.json"); err != nil {
		t.Fatal(err)
	}
	if len(r.Handlers(SessionStart)) != 1 {
		t.Fatal("not loaded")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

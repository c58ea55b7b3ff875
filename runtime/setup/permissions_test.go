package setup_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/runtime/setup"
)

// TestClaudeCodePermissionsAreEnforced: testdata/claude-project's
// .claude/settings.json denies Read(calc.py) and Bash(rm:*): repo.read
// calc.py is refused naming the rule, calc.py is hidden from repo.search,
// an rm through test.run is refused; settings.local.json's rules are read
// too; what is not done as written is a warning, in the notes and as a
// config.warning notice for the run's log.
func TestClaudeCodePermissionsAreEnforced(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "testdata", "claude-project"))); err != nil {
		t.Fatal(err)
	}
	// The project's test command is an rm: test.run's command comes from
	// the repository's configuration, and the deny rule binds it too.
	if err := os.MkdirAll(filepath.Join(dir, ".agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".agent", "config.yaml"), []byte("test: rm -f build/out.txt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env, err := setup.Build(context.Background(), options(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	ctx := context.Background()
	dispatch := func(tool, args string) (kernel.Outcome, string) {
		t.Helper()
		out, err := env.Kernel.Dispatch(ctx, &memRecorder{}, kernel.Call{ID: "c1", Name: tool, Args: json.RawMessage(args), Caller: "worker"})
		var ke *kernel.Error
		if errors.As(err, &ke) {
			return out, string(ke.Code) + ": " + ke.Message
		}
		if err != nil {
			t.Fatal(err)
		}
		return out, "ok"
	}
	if _, got := dispatch("repo.read", `{"path":"calc.py"}`); !strings.HasPrefix(got, string(kernel.CodeToolNotAllowed)) || !strings.Contains(got, "Read(calc.py)") {
		t.Errorf("repo.read calc.py: %s, want TOOL_NOT_ALLOWED naming Read(calc.py)", got)
	}
	if _, got := dispatch("test.run", `{}`); !strings.HasPrefix(got, string(kernel.CodeToolNotAllowed)) || !strings.Contains(got, "Bash(rm:*)") {
		t.Errorf("test.run rm: %s, want TOOL_NOT_ALLOWED naming Bash(rm:*)", got)
	}
	out, got := dispatch("repo.search", `{"query":"return a + b"}`)
	if got != "ok" || strings.Contains(string(out.Result), "calc.py") {
		t.Errorf("repo.search: %s %s, want it to run without showing calc.py", got, out.Result)
	}
	if out, got := dispatch("repo.read", `{"path":"docs/internal/plan.md"}`); got != "ok" || out.Pending == nil || !strings.Contains(out.Pending.Risk.Reason, "permissions.ask") {
		t.Errorf("repo.read under an ask rule: %s %+v, want a pending approval", got, out.Pending)
	}
	// settings.local.json: Edit(build/**) denied.
	if _, got := dispatch("repo.write", `{"path":"build/out.txt","content":"x","expected_hash":""}`); !strings.Contains(got, "Edit(build/**)") {
		t.Errorf("repo.write build/out.txt: %s, want the local file's deny rule", got)
	}
	var settings []string
	for _, w := range env.Warnings {
		settings = append(settings, w.Source+" "+w.Setting+" "+w.Effect)
	}
	want := []string{
		".claude/settings.json permissions.deny not_enforced",
		".claude/settings.json permissions.allow ignored",
		".claude/settings.json permissions.additionalDirectories refused",
		".claude/settings.local.json permissions.defaultMode ignored",
	}
	if strings.Join(settings, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(settings, "\n"), strings.Join(want, "\n"))
	}
	if notes := strings.Join(env.Notes, "\n"); !strings.Contains(notes, `WARNING: .claude/settings.json permissions.allow "Bash(npm run lint), Read": 2 allow rule(s) not honoured`) {
		t.Errorf("notes:\n%s", notes)
	}
}

// TestUnreadablePermissionsFailClosed: a settings file whose permissions
// are not Claude Code's shape stops the build instead of running without
// its deny rules.
func TestUnreadablePermissionsFailClosed(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".claude", "settings.local.json"), []byte(`{"permissions":{"deny":"Read(.env)"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	env, err := setup.Build(context.Background(), options(t, dir))
	if err == nil {
		env.Close()
		t.Fatal("built with an unreadable deny list")
	}
	if !strings.Contains(err.Error(), ".claude/settings.local.json: permissions") {
		t.Errorf("error %v does not name the file", err)
	}
}

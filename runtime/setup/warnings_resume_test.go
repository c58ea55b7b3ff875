package setup_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/scripted"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/setup"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
)

// resumeScript reads the internal plan twice: each read waits for
// approval (testdata/claude-project asks for Read(docs/internal/**)), so
// the session pauses twice and is resumed twice.
const resumeScript = `
roles:
  lead:
  - text: '{"intent":"summarise the internal release plan","constraints":[],"needs_advisor":false,"schema_version":"v1"}'
  planner:
  - text: '{"steps":[{"id":"s1","description":"read the plan"}],"risks":[],"needs_advisor":false,"schema_version":"v1"}'
  worker:
  - tool_calls: [{id: w1, name: repo.read, args: {path: docs/internal/plan.md}}]
  - tool_calls: [{id: w2, name: repo.read, args: {path: docs/internal/plan.md}}]
  - text: '{"output":"the plan ships 1.3.0","steps_completed":["s1"],"tool_calls_made":["repo.read:w2"],"schema_version":"v1"}'
  reviewer:
  - text: '{"verdict":"pass","feedback":"ok","schema_version":"v1"}'
`

// TestConfigWarningsOncePerSession: a paused session resumed by another
// Build (as agentos approve, the server and the bot do) does not record
// the same config.warning again; a warning that is new because the
// settings changed between pause and resume is recorded, once.
func TestConfigWarningsOncePerSession(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "testdata", "claude-project"))); err != nil {
		t.Fatal(err)
	}
	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := store.NewMemory(sealer)
	script, err := scripted.Parse(strings.NewReader(resumeScript))
	if err != nil {
		t.Fatal(err)
	}
	const session = "s-warn"
	mgr := run.NewManager(st)
	build := func() *setup.Env {
		t.Helper()
		o := options(t, dir)
		o.Store, o.SessionID = st, session
		o.Providers = provider.Registry{"scripted": func(context.Context, provider.Profile) (provider.Provider, error) { return scripted.New(script), nil }}
		env, err := setup.Build(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	warnings := func() []string {
		t.Helper()
		evs, err := st.Read(ctx, session, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range evs {
			if e.Type == event.ConfigWarning {
				out = append(out, event.FieldString(e.Payload, "source")+" "+event.FieldString(e.Payload, "setting")+" "+event.FieldString(e.Payload, "rule"))
			}
		}
		return out
	}
	resume := func(want run.Status) {
		t.Helper()
		evs, err := st.Read(ctx, session, 0)
		if err != nil {
			t.Fatal(err)
		}
		var approvalID string
		for _, e := range evs {
			if e.Type == event.ApprovalRequested {
				approvalID = event.FieldString(e.Payload, "approval_id")
			}
		}
		if err := mgr.Resolve(ctx, session, approvalID, "approve", "octocat", ""); err != nil {
			t.Fatal(err)
		}
		env := build()
		defer env.Close()
		out, err := mgr.Resume(ctx, env.Engine, session, dir, "")
		if err != nil || out.Status != want {
			t.Fatalf("resume: %s %v, want %s", out.Status, err, want)
		}
	}

	env := build()
	out, err := mgr.Start(ctx, env.Engine, run.StartRequest{SessionID: session, Prompt: "summarise the internal release plan", Cwd: dir})
	env.Close()
	if err != nil || out.Status != run.StatusPaused {
		t.Fatalf("start: %s %v, want paused by the ask rule", out.Status, err)
	}
	first := warnings()
	if len(first) != 4 {
		t.Fatalf("config.warning events after the first run: %q, want the project's 4", first)
	}

	// Resumed with the same settings: nothing recorded again.
	resume(run.StatusPaused)
	if got := warnings(); strings.Join(got, "\n") != strings.Join(first, "\n") {
		t.Fatalf("after a resume with the same settings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(first, "\n"))
	}

	// The settings changed while paused: defaultMode plan instead of
	// bypassPermissions is a different warning, recorded once.
	if err := os.WriteFile(filepath.Join(dir, ".claude", "settings.local.json"), []byte(`{"permissions":{"defaultMode":"plan","deny":["Edit(build/**)"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The approval is stale then, the working tree having changed: the
	// run asks again, and pauses before any event of its own, so the
	// warning waits for the next Build's run. Approved again, the run
	// goes on and completes.
	resume(run.StatusPaused)
	resume(run.StatusCompleted)
	want := append(append([]string{}, first...), ".claude/settings.local.json permissions.defaultMode plan")
	if got := warnings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("after a resume with changed settings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

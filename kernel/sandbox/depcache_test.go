package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/workspace"
)

// A repository's dependency caches (docs/project-config.md): writable by
// setup commands, read-only for every command after UseDepCaches, in the
// environment as GOMODCACHE and npm_config_cache, outside the worktree,
// the same for every workspace of the repository.
func TestDepCaches(t *testing.T) {
	for _, mode := range append(mechanisms, sandbox.ModeNone) {
		t.Run(string(mode), func(t *testing.T) {
			s := detect(t, mode)
			if mode == sandbox.ModeNone {
				s = sandbox.Disabled()
			}
			work, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			ws, err := workspace.Open(work, workspace.Options{Sandbox: s})
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			d, err := ws.DepCaches()
			if err != nil {
				t.Fatal(err)
			}
			if mode == sandbox.ModeNone {
				t.Cleanup(func() { os.RemoveAll(filepath.Dir(d.GoMod)) })
			}
			for _, dir := range []string{d.GoMod, d.NPM} {
				if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || strings.HasPrefix(dir, work) {
					t.Fatalf("cache %s: %v", dir, err)
				}
			}
			again, _ := ws.DepCaches()
			other, err := workspace.Open(t.TempDir(), workspace.Options{Sandbox: s})
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			elsewhere, _ := other.DepCaches()
			if again != d || elsewhere.GoMod == d.GoMod {
				t.Fatalf("caches: %v, again %v, another repository %v", d, again, elsewhere)
			}
			if mode == sandbox.ModeNone {
				t.Cleanup(func() { os.RemoveAll(filepath.Dir(elsewhere.GoMod)) })
			}
			sh := func(run func(workspace.RunSpec) (workspace.RunResult, error), script string) workspace.RunResult {
				t.Helper()
				res, err := run(workspace.RunSpec{Argv: []string{"sh", "-c", script}, Timeout: time.Minute})
				if err != nil {
					t.Fatalf("%s: %v", script, err)
				}
				return res
			}
			setup := func(spec workspace.RunSpec) (workspace.RunResult, error) {
				return ws.RunSetup(context.Background(), spec, nil, d)
			}
			agent := func(spec workspace.RunSpec) (workspace.RunResult, error) {
				return ws.Run(context.Background(), spec)
			}
			res := sh(setup, `printf '%s\n%s\n' "$GOMODCACHE" "$npm_config_cache" && echo mod > "$GOMODCACHE/f" && echo npm > "$npm_config_cache/f"`)
			if res.ExitCode != 0 || res.Stdout != d.GoMod+"\n"+d.NPM+"\n" {
				t.Fatalf("setup: exit %d %q %s", res.ExitCode, res.Stdout, res.Stderr)
			}
			// Before UseDepCaches, commands have the host's caches.
			if res := sh(agent, `printf '%s' "$GOMODCACHE"`); res.Stdout == d.GoMod {
				t.Fatalf("the repository's cache before the setup phase ended: %q", res.Stdout)
			}
			ws.UseDepCaches(d)
			res = sh(agent, `cat "$GOMODCACHE/f" "$npm_config_cache/f" && echo x > "$GOMODCACHE/g"`)
			if res.Stdout != "mod\nnpm\n" {
				t.Fatalf("agent phase: exit %d %q %s", res.ExitCode, res.Stdout, res.Stderr)
			}
			_, statErr := os.Stat(filepath.Join(d.GoMod, "g"))
			if mode == sandbox.ModeNone {
				if res.ExitCode != 0 || statErr != nil {
					t.Fatalf("unconfined: exit %d %v", res.ExitCode, statErr)
				}
				return
			}
			if res.ExitCode == 0 || statErr == nil {
				t.Fatalf("the agent phase wrote into the repository's cache: exit %d %s", res.ExitCode, res.Stderr)
			}
			p := ws.SandboxProfile().(sandbox.Profile)
			if !strings.Contains(strings.Join(p.ReadOnly, "\n"), d.GoMod+" (the repository's Go module cache)") {
				t.Fatalf("profile read-only %v", p.ReadOnly)
			}
			// A cache inside the worktree is refused.
			_, err = s.Command(context.Background(), sandbox.Request{Argv: []string{"true"}, Work: work, Dir: work, Deps: &sandbox.DepCaches{GoMod: filepath.Join(work, "mod"), NPM: d.NPM}})
			if err == nil || !strings.Contains(err.Error(), "outside the worktree") {
				t.Fatalf("a cache in the worktree: %v", err)
			}
		})
	}
}

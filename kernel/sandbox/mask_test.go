package sandbox_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/kernel/workspace"
)

// TestDataDirectoryInsideTheWorktreeIsMasked: with agentos's data
// directory inside the worktree (agentos run --repo . keeps ./.agentos),
// a command sees neither its logs nor its store, and cannot plant anything
// there: under bwrap an empty directory covers it; Landlock cannot take a
// subtree out of a granted tree, so it refuses the command and says how to
// fix it. Unconfined (the control), the command reads the log.
func TestDataDirectoryInsideTheWorktreeIsMasked(t *testing.T) {
	const secret = "SESSION-LOG-SECRET-7f3a"
	setup := func(t *testing.T, s *sandbox.Sandbox) (*workspace.Root, string) {
		t.Helper()
		work, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(work, "README.md"), "sample\n")
		write(t, filepath.Join(work, ".agentos", "sessions", "s-1", "events.jsonl"), `{"payload":"`+secret+`"}`+"\n")
		write(t, filepath.Join(work, ".agentos", "agentos.db"), secret)
		ws, err := workspace.Open(work, workspace.Options{Sandbox: s, Exclude: []string{".agentos"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		return ws, work
	}
	script := `cat .agentos/sessions/s-1/events.jsonl .agentos/agentos.db; ls -a .agentos; echo planted > .agentos/planted; cat README.md`
	runIn := func(ws *workspace.Root) (workspace.RunResult, error) {
		return ws.Run(context.Background(), workspace.RunSpec{Argv: []string{"sh", "-c", script}, Timeout: 30 * time.Second})
	}
	t.Run("control", func(t *testing.T) {
		ws, _ := setup(t, sandbox.Disabled())
		res, err := runIn(ws)
		if err != nil || !strings.Contains(res.Stdout, secret) {
			t.Fatalf("unconfined, the command should read the log: %v %q", err, res.Stdout+res.Stderr)
		}
	})
	for _, mode := range mechanisms {
		t.Run(string(mode), func(t *testing.T) {
			ws, work := setup(t, detect(t, mode))
			res, err := runIn(ws)
			out := res.Stdout + res.Stderr
			if strings.Contains(out, secret) {
				t.Fatalf("the session log is visible to the command:\n%s", out)
			}
			if _, serr := os.Stat(filepath.Join(work, ".agentos", "planted")); serr == nil {
				t.Error("the command wrote into the data directory")
			}
			switch mode {
			case sandbox.ModeBwrap:
				if err != nil || !strings.Contains(res.Stdout, "sample") {
					t.Errorf("the rest of the worktree should work: %v\n%s", err, out)
				}
			case sandbox.ModeLandlock:
				if err == nil || !strings.Contains(err.Error(), "data directory") {
					t.Errorf("landlock ran a command it cannot keep out of the data directory: %v\n%s", err, out)
				}
			}
			if p, ok := ws.SandboxProfile().(sandbox.Profile); !ok || len(p.Masked) != 1 || p.Masked[0] != filepath.Join(work, ".agentos") {
				t.Errorf("the profile does not record the mask: %+v", ws.SandboxProfile())
			}
		})
	}
}

// TestDenyPatternsAreMaskedFromCommands: what policy.yaml's
// workspace.denyPatterns keep from the repository tools (by default .env
// and .env.local) a command cannot read either — a test that cats .env
// gets an empty file — while the rest of the worktree, .git, a symlink
// that happens to be named .env, and a denied file committed as it is
// (public defaults: `git show :.env` prints it anyway) stay as they are.
// A committed file filled in locally is hidden. Under Landlock, which
// cannot hide part of a granted tree, the command is refused and the
// message says why. Unconfined (the control), the command reads them.
func TestDenyPatternsAreMaskedFromCommands(t *testing.T) {
	testenv.LookPath(t, "git")
	const secret = "DATABASE_URL=postgres://app:hunter2-7f3a@db/prod"
	deny := []string{"**/.git/**", "**/.env", "**/.env.local", "secrets/**"}
	setup := func(t *testing.T, s *sandbox.Sandbox) (*workspace.Root, string) {
		t.Helper()
		work, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(work, "README.md"), "sample\n")
		write(t, filepath.Join(work, "web", ".env"), "PUBLIC_API=https://api.example\n")
		write(t, filepath.Join(work, "svc", ".env"), "DATABASE_URL=\n")
		write(t, filepath.Join(work, "secrets", "README"), "put keys here\n")
		git := func(args ...string) {
			cmd := exec.Command("git", args...)
			cmd.Dir = work
			cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
		git("init", "-q")
		git("add", "-A")
		git("commit", "-qm", "defaults")
		// What stays on this machine: credentials filled in or added.
		write(t, filepath.Join(work, ".env"), secret+"\n")
		write(t, filepath.Join(work, "svc", ".env"), secret+"\n")
		write(t, filepath.Join(work, "svc", "api", ".env.local"), secret+"\n")
		write(t, filepath.Join(work, "secrets", "prod", "key.txt"), secret+"\n")
		write(t, filepath.Join(work, "docs", "env.txt"), "not a secret\n")
		if err := os.Symlink("env.txt", filepath.Join(work, "docs", ".env")); err != nil {
			t.Fatal(err)
		}
		ws, err := workspace.Open(work, workspace.Options{Sandbox: s, DenyPatterns: deny})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		return ws, work
	}
	script := `cat .env svc/.env svc/api/.env.local secrets/prod/key.txt; cat docs/.env README.md web/.env secrets/README; git status --short`
	runIn := func(ws *workspace.Root) (workspace.RunResult, error) {
		return ws.Run(context.Background(), workspace.RunSpec{Argv: []string{"sh", "-c", script}, Timeout: 30 * time.Second})
	}
	t.Run("control", func(t *testing.T) {
		ws, _ := setup(t, sandbox.Disabled())
		res, err := runIn(ws)
		if err != nil || strings.Count(res.Stdout, secret) != 4 {
			t.Fatalf("unconfined, the command should read all four: %v %q", err, res.Stdout+res.Stderr)
		}
	})
	for _, mode := range mechanisms {
		t.Run(string(mode), func(t *testing.T) {
			ws, work := setup(t, detect(t, mode))
			res, err := runIn(ws)
			out := res.Stdout + res.Stderr
			if strings.Contains(out, "hunter2") {
				t.Fatalf("a denied file is visible to the command:\n%s", out)
			}
			// bwrap mounts over the denied paths; Landlock moves them out
			// of the worktree while the command runs: either way the rest
			// of the worktree works.
			for _, want := range []string{"sample", "not a secret", "PUBLIC_API=https://api.example", "put keys here"} {
				if err != nil || !strings.Contains(res.Stdout, want) {
					t.Errorf("%q: the rest of the worktree should work: %v\n%s", want, err, out)
				}
			}
			for _, rel := range []string{"svc/.env", "svc/api/.env.local", "secrets/prod/key.txt"} {
				if b, err := os.ReadFile(filepath.Join(work, rel)); err != nil || string(b) != secret+"\n" {
					t.Errorf("%s after the command: %q %v", rel, b, err)
				}
			}
			want := []string{filepath.Join(work, ".env"), filepath.Join(work, "secrets", "prod", "key.txt"), filepath.Join(work, "svc", ".env"), filepath.Join(work, "svc", "api", ".env.local")}
			got := ws.Masked()
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("masked %v, want %v", got, want)
			}
			if p, ok := ws.SandboxProfile().(sandbox.Profile); !ok || !slices.Equal(p.MaskedPatterns, deny) {
				t.Errorf("the profile does not record the deny patterns it masks: %+v", ws.SandboxProfile())
			}
			if b, err := os.ReadFile(filepath.Join(work, ".env")); err != nil || string(b) != secret+"\n" {
				t.Errorf("the mask changed the file itself: %q %v", b, err)
			}
		})
	}
	t.Run("a directory nothing of which is committed is hidden whole", func(t *testing.T) {
		work, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(work, "secrets", "a", "key.txt"), secret)
		ws, err := workspace.Open(work, workspace.Options{Sandbox: detect(t, sandbox.ModeBwrap), DenyPatterns: deny})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		if got := ws.Masked(); !slices.Equal(got, []string{filepath.Join(work, "secrets")}) {
			t.Errorf("masked %v, want the secrets directory", got)
		}
	})
}

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

package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/testenv"
)

// buildBinary builds the main package pkg (an import path of this
// module) to out.
func buildBinary(tb testing.TB, pkg, out string) {
	tb.Helper()
	testenv.LookPath(tb, "go")
	// A test binary run outside the module (.ci/run's unprivileged pass)
	// has no source to build from.
	if mod, err := exec.Command("go", "env", "GOMOD").Output(); err != nil || !strings.HasSuffix(strings.TrimSpace(string(mod)), "go.mod") {
		testenv.Require(tb, "the agentos module's source (to build "+pkg+")", fmt.Errorf("not inside the module: go env GOMOD = %q, %v", strings.TrimSpace(string(mod)), err))
	}
	if err := goBuild(pkg, out); err != nil {
		tb.Fatal(err)
	}
}

func goBuild(pkg, out string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// smallLauncherBeside builds agentos-launch into a new directory and
// returns the path of a stand-in agentos executable next to it (the file
// itself is not needed: the small launcher is what runs).
func smallLauncherBeside(tb testing.TB) string {
	tb.Helper()
	dir, err := filepath.EvalSymlinks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	buildBinary(tb, "github.com/agentos/agentos/cmd/agentos-launch", filepath.Join(dir, sandbox.LauncherName))
	return filepath.Join(dir, "agentos")
}

// TestSmallLauncher: with agentos-launch next to the executable, the
// sandbox launches commands with it under each mechanism, and they are
// confined as with the executable itself (Detect's probe ran through it
// and judged it): a command's status and output come back, a host file
// outside the worktree stays unreadable, the worktree's .git read-only
// (bwrap) or restored (Landlock), and a process it leaves behind is
// killed with it.
func TestSmallLauncher(t *testing.T) {
	exe := smallLauncherBeside(t)
	for _, mode := range mechanisms {
		t.Run(string(mode), func(t *testing.T) {
			if mode == sandbox.ModeBwrap {
				if _, err := exec.LookPath("bwrap"); err != nil {
					t.Skip("no bwrap on PATH")
				}
			}
			s := sandbox.DetectBeside(context.Background(), sandbox.Config{Mode: mode, CacheDir: t.TempDir()}, exe)
			testenv.Require(t, "the "+string(mode)+" sandbox", s.Err())
			r := s.Report()
			if r.LauncherKind != sandbox.LauncherSmall || r.Launcher != filepath.Join(filepath.Dir(exe), sandbox.LauncherName) || r.LauncherNote != "" {
				t.Fatalf("launcher %s (%s, %q), want the small one next to %s", r.Launcher, r.LauncherKind, r.LauncherNote, exe)
			}
			root, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			work := filepath.Join(root, "work")
			secret := filepath.Join(root, "secret")
			write(t, secret, "secret\n")
			write(t, filepath.Join(work, "README"), "hello\n")
			pidFile := filepath.Join(work, "left.pid")
			// A sleep no other process of the host runs.
			sleep := fmt.Sprintf("sleep %d", 100000+time.Now().UnixNano()%900000)
			script := `cat README; cat ` + secret + ` 2>/dev/null && echo READ-SECRET; ` +
				sleep + ` & echo $! > ` + pidFile + `; exit 3`
			c, err := s.Command(context.Background(), sandbox.Request{Argv: []string{"sh", "-c", script}, Work: work, Dir: work, Env: []string{"PATH=/usr/bin:/bin"}})
			if err != nil {
				t.Fatal(err)
			}
			var out, errb strings.Builder
			c.Stdout, c.Stderr = &out, &errb
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			werr := c.Wait()
			if ferr := c.Finish(); ferr != nil {
				t.Errorf("finish: %v", ferr)
			}
			var ee *exec.ExitError
			if !errors.As(werr, &ee) || ee.ExitCode() != 3 {
				t.Fatalf("exit: %v, want status 3; stderr %s", werr, errb.String())
			}
			if out.String() != "hello\n" {
				t.Errorf("stdout %q, want the worktree's README and no secret", out.String())
			}
			// The background sleep was killed with the command. Under
			// bwrap its pid is the sandbox's; the sleep with that
			// command line must be gone on the host either way.
			if b, err := os.ReadFile(pidFile); err != nil || strings.TrimSpace(string(b)) == "" {
				t.Fatalf("the command did not start its background process: %v", err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for sleepRunning(t, sleep) {
				if time.Now().After(deadline) {
					t.Fatal("the command's background process outlived it")
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// sleepRunning reports whether a process with exactly this command line
// runs on the host.
func sleepRunning(t *testing.T, cmdline string) bool {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.ReplaceAll(cmdline, " ", "\x00") + "\x00"
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && string(b) == want {
			return true
		}
	}
	return false
}

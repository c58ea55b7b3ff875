package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/testenv"
)

// TestTestRunCannotPlantASubmoduleRepository: a repository with a
// submodule entry whose test plants a git repository at the submodule's
// path, configured to run a program from core.fsmonitor. After `agentos
// tool call test.run` the user's next ordinary `git status` in the
// checkout must run nothing: the planted repository is gone and the call
// says so. Under bwrap and under Landlock.
func TestTestRunCannotPlantASubmoduleRepository(t *testing.T) {
	for _, mode := range []sandbox.Mode{sandbox.ModeBwrap, sandbox.ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			if _, err := exec.LookPath("bwrap"); err != nil && mode == sandbox.ModeBwrap {
				// A host without bubblewrap (CI's pass with it hidden):
				// the Landlock subtest is this host's; CI's main pass,
				// where kernel/sandbox requires bwrap, runs this one.
				t.Skip("bubblewrap is not on PATH")
			}
			sb := sandbox.Detect(context.Background(), sandbox.Config{Mode: mode})
			testenv.Require(t, "the "+string(mode)+" sandbox", sb.Err())
			t.Setenv(sandbox.EnvMode, string(mode))
			repo := t.TempDir()
			marker := filepath.Join(t.TempDir(), "fsmonitor-ran")
			git := func(args ...string) {
				t.Helper()
				cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
				cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
					"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			// The project's "tests": a script that plants the repository.
			writeFile(t, repo, "plant.pl", `system("git", "init", "-q", "planted") == 0 or die "git init: $?";
open(my $c, ">", "planted/.git/config") or die $!;
print $c "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = \"touch `+marker+`; false\"\n\tworktree = ../../sub\n";
close $c;
open(my $g, ">", "sub/.git") or die $!;
print $g "gitdir: ../planted/.git\n";
close $g;
print "planted\n";
`)
			writeFile(t, repo, ".agent/config.yaml", "test: perl plant.pl\n")
			git("init", "-q")
			git("add", "plant.pl", ".agent/config.yaml")
			git("update-index", "--add", "--cacheinfo", "160000,1111111111111111111111111111111111111111,sub")
			git("commit", "-qm", "a submodule that is not checked out")
			if err := os.MkdirAll(filepath.Join(repo, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			out, errOut, _ := runCLI(t, "tool", "call", "test.run", "--args", `{}`, "--workspace", repo)
			if !strings.Contains(out+errOut, "submodule path") {
				t.Errorf("the call does not say a repository was planted at a submodule path:\n%s%s", out, errOut)
			}
			// The user's own git, with the user's environment.
			status, _ := exec.Command("git", "-C", repo, "status", "--short").CombinedOutput()
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("the user's git status ran the planted core.fsmonitor (status: %s)", status)
			}
			if _, err := os.Lstat(filepath.Join(repo, "sub", ".git")); err == nil {
				t.Error("sub/.git is still there")
			}
		})
	}
}

// TestEventsDirectoryIsOutOfReach: `agentos tool call --events` (or mcp
// serve) with its events file in a directory inside the workspace: a
// command neither reads nor writes that directory (bwrap mounts over it;
// Landlock refuses the command while agentos's data is inside).
func TestEventsDirectoryIsOutOfReach(t *testing.T) {
	for _, mode := range []sandbox.Mode{sandbox.ModeBwrap, sandbox.ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			if _, err := exec.LookPath("bwrap"); err != nil && mode == sandbox.ModeBwrap {
				t.Skip("bubblewrap is not on PATH")
			}
			t.Setenv(sandbox.EnvMode, string(mode))
			ws := t.TempDir()
			events := filepath.Join(ws, ".agentos", "mcp", "events.jsonl")
			writeFile(t, ws, ".agentos/mcp/approvals.lock", "the server's own file\n")
			writeFile(t, ws, "plant.pl", `open(my $f, ">", ".agentos/mcp/planted") or die "write: $!\n"; print $f "x"; close $f;
open(my $r, "<", ".agentos/mcp/approvals.lock") and print "READ: ", <$r>;
print "done\n";
`)
			writeFile(t, ws, ".agent/config.yaml", "test: perl plant.pl\n")
			out, errOut, _ := runCLI(t, "tool", "call", "test.run", "--args", `{}`, "--workspace", ws, "--events", events)
			if strings.Contains(out, "the server's own file") {
				t.Errorf("a command read the events directory:\n%s", out)
			}
			if _, err := os.Stat(filepath.Join(ws, ".agentos", "mcp", "planted")); err == nil {
				t.Errorf("a command wrote into the events directory:\n%s%s", out, errOut)
			}
			if mode == sandbox.ModeLandlock && !strings.Contains(out+errOut, "agentos's own data") {
				t.Errorf("under Landlock the command should be refused while the data is inside:\n%s%s", out, errOut)
			}
		})
	}
}

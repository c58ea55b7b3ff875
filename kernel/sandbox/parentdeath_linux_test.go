package sandbox_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel/sandbox"
)

// Environment of the parent-death test's child.
const (
	orphanMode   = "AGENTOS_ORPHAN_TEST_MODE"
	orphanMarker = "AGENTOS_ORPHAN_TEST_MARKER"
)

// TestParentDeathChild is the child process of TestSandboxDiesWithParent:
// it runs a sandboxed `sleep` that would outlive any test, and never
// returns by itself.
func TestParentDeathChild(t *testing.T) {
	mode, marker := os.Getenv(orphanMode), os.Getenv(orphanMarker)
	if mode == "" {
		t.Skip("parent-death test child only")
	}
	s := detect(t, sandbox.Mode(mode))
	dir := t.TempDir()
	res, err := runIn(t, s, dir, nil, "sleep", marker)
	t.Fatalf("the sandboxed sleep returned: %+v %v", res, err)
}

// TestSandboxDiesWithParent: a process that runs a sandboxed command
// (a `sleep` with a marker argument) is killed with SIGKILL, as a replica
// is by the OOM killer or a node failure, without any chance to clean up:
// the sandboxed process dies with it (the parent-death signal of bwrap or
// of the Landlock supervisor, which kills the command's tree), instead of
// running on with nobody to collect it.
func TestSandboxDiesWithParent(t *testing.T) {
	if os.Getenv(orphanMode) != "" {
		t.Skip("in the child")
	}
	for _, mode := range mechanisms {
		t.Run(string(mode), func(t *testing.T) {
			detect(t, mode) // skips (or fails under CI) where the mechanism is missing
			// sleep takes a fractional number of seconds: a unique one
			// finds this test's process among the host's.
			marker := fmt.Sprintf("3600.%d%d", os.Getpid(), time.Now().UnixNano()%1000000)
			cmd := exec.Command(os.Args[0], "-test.run=^TestParentDeathChild$", "-test.v=false")
			cmd.Env = append(os.Environ(), orphanMode+"="+string(mode), orphanMarker+"="+marker)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			var pid int
			for deadline := time.Now().Add(2 * time.Minute); pid == 0; time.Sleep(20 * time.Millisecond) {
				pid = findProcess(marker)
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("the sandboxed sleep never started:\n%s", out.String())
				}
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			// Not a timing threshold: the sleep would live an hour; a
			// minute is the longest wait for the kernel and a loaded
			// machine to deliver and act on the signals.
			for deadline := time.Now().Add(time.Minute); alive(pid); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					syscall.Kill(pid, syscall.SIGKILL)
					t.Fatalf("the sandboxed sleep (pid %d) outlived its parent, killed with SIGKILL", pid)
				}
			}
		})
	}
}

// findProcess is the pid of a process whose arguments include marker (0:
// none).
func findProcess(marker string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) >= 2 && filepath.Base(args[0]) == "sleep" && args[len(args)-1] == marker {
			return pid
		}
	}
	return 0
}

// alive reports whether pid runs (a zombie, which only waits to be
// collected, does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

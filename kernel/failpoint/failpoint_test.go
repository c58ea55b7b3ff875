//go:build unix

package failpoint

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// TestHit runs this test binary again with the failpoint armed: a chaos
// build must die of SIGKILL at Hit, every other build must not notice.
func TestHit(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		Hit("another.point")
		Hit(PatchApplied)
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHit$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", Env+"="+PatchApplied)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	killed := errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
	switch {
	case Enabled && !killed:
		t.Errorf("chaos build: the armed failpoint did not kill the process: %v\n%s", err, out)
	case !Enabled && err != nil:
		t.Errorf("default build: the armed failpoint changed something: %v\n%s", err, out)
	}
}

//go:build chaos && unix

package failpoint

import (
	"fmt"
	"os"
	"syscall"
)

// Enabled: this build has failpoints.
const Enabled = true

var armed = os.Getenv(Env)

// Hit kills the process with SIGKILL — no deferred function, no flush, as
// a power cut or the OOM killer would — when name is the armed failpoint.
func Hit(name string) {
	if name == "" || name != armed {
		return
	}
	fmt.Fprintf(os.Stderr, "failpoint %s: SIGKILL\n", name)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}

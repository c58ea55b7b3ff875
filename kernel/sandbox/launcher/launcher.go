// Package launcher is the main of agentos-launch, the sandbox's small
// launcher binary: the same launcher code the agentos binary runs when it
// is re-executed (kernel/sandbox/internal/launch), in a binary that links
// nothing else, so that starting it costs the Go runtime's start and not
// the package initialisation of everything agentos links.
package launcher

import (
	"fmt"
	"io"

	"github.com/agentos/agentos/kernel/sandbox/internal/launch"
)

// Main runs the launcher for args (os.Args) and returns the exit status.
// The launch package's init function has already taken over, and exited,
// when args[1] is the launcher argument, so Main only sees other
// invocations: a person running the binary by hand.
func Main(args []string, stderr io.Writer) int {
	if len(args) > 1 && args[1] == launch.LauncherArg {
		// Unreachable through os.Args (see above); kept so that a caller
		// passing its own args still launches.
		return launch.Run(args[2:])
	}
	fmt.Fprintf(stderr, "agentos-launch is the sandbox's launcher: agentos starts it for every confined command (%s SPEC COMMAND...); it is not meant to be run by hand\n", launch.LauncherArg)
	return 2
}

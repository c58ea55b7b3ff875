// Command agentos-launch is the sandbox's small launcher: agentos starts
// it, not itself, for every confined command when it lies next to the
// agentos executable (see kernel/sandbox). Its imports are kept to the
// launcher's code so that a start costs well under a millisecond of
// package initialisation.
package main

import (
	"os"

	"github.com/agentos/agentos/kernel/sandbox/launcher"
)

func main() { os.Exit(launcher.Main(os.Args, os.Stderr)) }

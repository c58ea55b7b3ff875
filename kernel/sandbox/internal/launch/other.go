//go:build !linux

package launch

import (
	"fmt"
	"os"
	"runtime"
)

// Run refuses: the sandbox is Linux only.
func Run(args []string) int {
	fmt.Fprintf(os.Stderr, "%slauncher: no sandbox on %s\n", SetupPrefix, runtime.GOOS)
	return ExitSetup
}

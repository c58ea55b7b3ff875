// Package sandboxtest gives tests a real sandbox for the processes they
// start (exec tools, hooks): detected once per test binary, with one Go
// build cache shared by every test worktree, so that a `go test` inside
// does not rebuild the standard library for each new temporary directory.
// Where no mechanism works, the test is skipped loudly on a developer's
// machine and fails under CI=true.
package sandboxtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/testenv"
)

var (
	once sync.Once
	sbx  *sandbox.Sandbox
)

// Sandbox returns the test binary's sandbox, or ends the test as
// testenv.Require does. The mode is AGENTOS_SANDBOX's (auto when unset:
// bwrap, else landlock), so that the same tests run under each mechanism:
// AGENTOS_SANDBOX=landlock go test ./... is a host without bubblewrap.
func Sandbox(tb testing.TB) *sandbox.Sandbox {
	tb.Helper()
	once.Do(func() {
		cache := filepath.Join(os.TempDir(), fmt.Sprintf("agentos-sandboxtest-%d", os.Getuid()))
		mode, err := sandbox.ParseMode(os.Getenv(sandbox.EnvMode))
		if err != nil || mode == sandbox.ModeNone {
			mode = sandbox.ModeAuto // a test sandbox is never "none"
		}
		sbx = sandbox.Detect(context.Background(), sandbox.Config{Mode: mode, CacheDir: cache, GoCache: filepath.Join(cache, "go-build")})
	})
	testenv.Require(tb, "an OS sandbox for commands (bubblewrap, or Landlock)", sbx.Err())
	return sbx
}

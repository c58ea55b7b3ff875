package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentos/agentos/runtime/setup"
)

// TestMain gives the sandboxed `go test` runs of this package's tests one
// shared Go build cache: agentos serve keeps one cache per worktree unless
// AGENTOS_SANDBOX_GO_CACHE names a directory, so each serve test's worktree
// compiled the standard library from cold. This project's own test
// repositories are trusted alike, so they may share build outputs; a value
// set by the caller (CI sets one) is kept.
func TestMain(m *testing.M) {
	if os.Getenv(setup.EnvGoCache) == "" {
		if d, err := os.UserCacheDir(); err == nil {
			os.Setenv(setup.EnvGoCache, filepath.Join(d, "agentos", "sandbox", "go-build"))
		}
	}
	// The default data directory is under $XDG_STATE_HOME: the tests'
	// stores go to a directory of their own, not the user's.
	state, err := os.MkdirTemp("", "agentos-test-state-*")
	if err == nil && os.Getenv("XDG_STATE_HOME") == "" {
		os.Setenv("XDG_STATE_HOME", state)
	}
	code := m.Run()
	if err == nil {
		os.RemoveAll(state)
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "honest-outcome invariant: %d sessions of the commands' stores checked\n", audited.Load())
	}
	os.Exit(code)
}

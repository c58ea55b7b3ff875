// Package testenv lets a test require something of the machine it runs on
// (the git CLI, git http-backend, the go command). Where it is missing the
// test is skipped loudly on a developer's machine, and fails under CI=true:
// there a skipped test would prove nothing.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// Require ends the test when err says that what the test needs is missing:
// a failure under CI=true, a loud skip elsewhere.
func Require(tb testing.TB, what string, err error) {
	tb.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("%s is required under CI: %v", what, err)
		return
	}
	tb.Skipf("SKIPPING: %s is not available: %v", what, err)
}

// LookPath returns the path of the executable name, as Require requires it.
func LookPath(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	Require(tb, name, err)
	return p
}

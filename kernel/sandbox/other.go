//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"os/exec"
	"runtime"
)

var errOS = errors.New("no sandbox on " + runtime.GOOS + ": bubblewrap and Landlock are Linux only")

func findLauncher(exe string) (string, LauncherKind, string) { return exe, LauncherSelf, "" }

func checkLauncher(path string) error { return nil }

func (s *Sandbox) try(ctx context.Context, m Mechanism, bwrapPath string) Attempt {
	return Attempt{Mechanism: m, Error: errOS.Error(), Fix: "run agentos on Linux, or set sandbox: none knowingly"}
}

// ProbeOptions are extra checks of a probe (agentos doctor).
type ProbeOptions struct {
	Hidden []string
}

// Probe is not available on this system.
func (s *Sandbox) Probe(ctx context.Context, o ProbeOptions) (ProbeResult, error) {
	if err := s.Err(); err != nil {
		return ProbeResult{}, err
	}
	return ProbeResult{}, errOS
}

func (s *Sandbox) bwrapCommand(ctx context.Context, req Request) (*Cmd, error) { return nil, errOS }

func (s *Sandbox) landlockCommand(ctx context.Context, req Request) (*Cmd, error) {
	return nil, errOS
}

func (s *Sandbox) unconfined(req Request) *Cmd {
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Env = req.Env
	cmd.Dir = req.Dir
	c := &Cmd{Cmd: cmd}
	c.kill = func() { _ = cmd.Process.Kill() }
	return c
}

package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/agentos/agentos/kernel/sandbox/internal/launch"
)

// DetectBeside is Detect as if the running executable were exe: the
// tests put a small launcher, or none, next to a stand-in for agentos.
func DetectBeside(ctx context.Context, cfg Config, exe string) *Sandbox {
	return detect(ctx, cfg, func() (string, error) { return exe, nil }, nil)
}

// DetectNetns is Detect with the network namespaces a Landlock command
// may get given: modes to try (launch's Netns modes; one the launcher
// does not know fails as an unshare the host refuses would), or none and
// why.
func DetectNetns(ctx context.Context, cfg Config, modes []string, why string) *Sandbox {
	return detect(ctx, cfg, os.Executable, func() ([]string, string) { return modes, why })
}

// RawCommand is argv under the sandbox's mechanism without the launcher
// and without Command's bookkeeping (cgroups, proxy, the git guards):
// under bwrap, bwrap with the same file system and namespaces running
// argv itself; under Landlock, the launcher's confine stage started
// directly (in the same network namespace, when commands get one), that
// is one small Go program that applies the same limits, Landlock ruleset
// and seccomp filter and then execs argv, with no supervisor. It is the benchmarks' baseline of each mechanism. private
// is an existing directory for the command's tmp and HOME under Landlock.
func (s *Sandbox) RawCommand(work, private string, argv []string) (*exec.Cmd, error) {
	req := Request{Argv: argv, Work: work, Dir: work, Limits: s.limits}
	gocache := s.goCacheDir(work)
	if err := os.MkdirAll(gocache, 0o700); err != nil {
		return nil, err
	}
	var cmd *exec.Cmd
	switch s.mech {
	case Bwrap:
		bare := *s
		bare.launcher = ""
		a := append([]string{s.bwrap}, bare.bwrapArgs(req, gocache, "")...)
		cmd = exec.Command(a[0], append(append(a[1:], "--"), argv...)...)
		cmd.Env = s.env(req, insideHome, insideTmp, "")
	case Landlock:
		ll := s.landlockRules(req, private, gocache)
		sp := s.confineSpec(req, ll, launch.SeccompNoInet)
		attr, err := launch.NetnsAttr(s.netns)
		if err != nil {
			return nil, err
		}
		if s.netns != launch.NetnsNone {
			// What the supervisor sets on the stage it starts.
			sp.Seccomp, sp.PrivateNet = launch.SeccompPrivateNet, true
			sp.DropCaps = sp.DropCaps || s.netns == launch.NetnsUser
		}
		cmd = exec.Command(s.launcher, append([]string{launch.LauncherArg, sp.Encode()}, argv...)...)
		cmd.Env = s.env(req, filepath.Join(private, "home"), filepath.Join(private, "tmp"), "")
		cmd.SysProcAttr = attr
	default:
		return nil, errors.New("sandbox: no mechanism")
	}
	cmd.Dir = work
	return cmd, nil
}

// WithoutCgroups is a copy of s whose commands get no cgroup: the process
// limit falls back to RLIMIT_NPROC and the tree's memory is not limited.
// The benchmark separates what the cgroups cost from what the launcher
// does.
func (s *Sandbox) WithoutCgroups() *Sandbox {
	c := *s
	c.pids = pidsLimit{kind: pidsRlimit}
	if s.mech == Landlock {
		c.pids.kind = pidsRlimitShared
	}
	c.memCgroup, c.memWithPids = "", false
	return &c
}

// WithoutNetns is a copy of s whose Landlock commands get no network
// namespace (IP refused), as on a host that refuses them.
func (s *Sandbox) WithoutNetns() *Sandbox {
	c := *s
	c.netns, c.netnsWhy = "", "WithoutNetns"
	return &c
}

//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentos/agentos/kernel/sandbox/internal/launch"
	"golang.org/x/sys/unix"
)

// Paths inside a bwrap sandbox.
const (
	insideLauncher = "/run/agentos/launcher"
	insideSocket   = "/run/agentos/proxy.sock"
	insideProxy    = "127.0.0.1:3128"
	insideHome     = "/tmp/home"
	insideTmp      = "/tmp"
)

// killGrace is how long a landlock supervisor gets to kill its tree before
// the bot kills its process group itself.
const killGrace = 3 * time.Second

// try sets up mechanism m and runs the probe under it.
func (s *Sandbox) try(ctx context.Context, m Mechanism, bwrapPath string) Attempt {
	a := Attempt{Mechanism: m}
	switch m {
	case Bwrap:
		p := bwrapPath
		if p == "" {
			var err error
			if p, err = exec.LookPath("bwrap"); err != nil {
				a.Error, a.Fix = "bwrap is not installed (not on PATH)", "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)"
				return a
			}
		}
		s.bwrap = p
		help, _ := exec.CommandContext(ctx, p, "--help").CombinedOutput()
		s.bwrapOpt = bwrapFeatures{disableUserns: bytes.Contains(help, []byte("--disable-userns")), size: bytes.Contains(help, []byte("--size"))}
	case Landlock:
		abi, err := launch.LandlockABI()
		if err != nil || abi < 1 {
			a.Error = fmt.Sprintf("the kernel has no Landlock (%v)", err)
			a.Fix = "run on Linux 5.13 or newer with CONFIG_SECURITY_LANDLOCK=y and landlock in the lsm= boot parameter, or make bwrap work"
			return a
		}
		if !launch.SeccompSupported() {
			a.Error, a.Fix = "no seccomp network filter for this architecture", "use bwrap"
			return a
		}
		s.abi = abi
	}
	s.pids = decidePids(m)
	s.decideMemory()
	s.mech, s.err = m, nil
	var err error
	if m != Landlock || !s.decideNetns(ctx) {
		err = s.check(ctx, m)
	}
	if err != nil {
		s.mech = Unavailable
		a.Error = err.Error()
		a.Fix = fixFor(m, a.Error)
	}
	return a
}

// check runs the probe under mechanism m and judges what it saw.
func (s *Sandbox) check(ctx context.Context, m Mechanism) error {
	res, err := s.probe(ctx, nil)
	if err == nil {
		err = judge(m, s.netns != launch.NetnsNone, res)
	}
	return err
}

// decideNetns tries the network namespaces Landlock commands may get,
// best first, with a probe each: the first that works is kept, and the
// sandbox passed its probe (true). When none does, commands get none (IP
// refused, as without namespaces), netnsWhy says why, and the caller
// probes that.
func (s *Sandbox) decideNetns(ctx context.Context) bool {
	plan := s.planNetns
	if plan == nil {
		plan = netnsModes
	}
	modes, why := plan()
	var failed []string
	for _, mode := range modes {
		s.netns = mode
		err := s.check(ctx, Landlock)
		if err == nil {
			s.netnsWhy = ""
			return true
		}
		failed = append(failed, fmt.Sprintf("%s namespace: %v", mode, err))
	}
	s.netns = launch.NetnsNone
	if len(failed) > 0 {
		tried := "it could not be set up (" + strings.Join(failed, "; ") + ")"
		if why != "" {
			tried += "; " + why
		}
		why = tried
		if b, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && strings.TrimSpace(string(b)) == "1" {
			why += "; AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1)"
		}
	}
	if why == "" {
		why = "none was tried"
	}
	s.netnsWhy = why
	return false
}

// netnsModes are the network namespaces a Landlock command can get on
// this host, best first, or why there is none: a network namespace alone
// when the bot runs as root, a user namespace with it when unprivileged
// user namespaces are allowed. Detect tries each (a container's seccomp
// profile or AppArmor can still refuse what the sysctls allow).
func netnsModes() ([]string, string) {
	var modes []string
	if os.Geteuid() == 0 {
		modes = append(modes, launch.NetnsNet)
	}
	why := usernsRefused()
	if why == "" {
		modes = append(modes, launch.NetnsUser)
	}
	return modes, why
}

// usernsRefused says why this host refuses unprivileged user namespaces
// ("" = it does not, as far as its sysctls tell).
func usernsRefused() string {
	read := func(p string) string {
		b, _ := os.ReadFile(p)
		return strings.TrimSpace(string(b))
	}
	switch {
	case read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
		return "unprivileged user namespaces are disabled (sysctl kernel.unprivileged_userns_clone=0)"
	case read("/proc/sys/user/max_user_namespaces") == "0":
		return "user namespaces are disabled (sysctl user.max_user_namespaces=0)"
	}
	return ""
}

func decidePids(m Mechanism) pidsLimit {
	if dir, err := findPidsCgroup(); err == nil {
		return pidsLimit{kind: pidsCgroup, parent: dir}
	}
	if os.Geteuid() != 0 {
		if m == Bwrap {
			return pidsLimit{kind: pidsRlimit}
		}
		return pidsLimit{kind: pidsRlimitShared}
	}
	return pidsLimit{kind: pidsNone, why: "the bot runs as root, whom the kernel exempts from RLIMIT_NPROC, and no pids cgroup is writable (run as another user, or give it a delegated cgroup)"}
}

func fixFor(m Mechanism, msg string) string {
	if m == Landlock {
		return "check that seccomp and Landlock are allowed (a container's seccomp profile must allow landlock_* syscalls: Docker 23+), or make bwrap work"
	}
	switch {
	case strings.Contains(msg, "namespace"), strings.Contains(msg, "Operation not permitted"), strings.Contains(msg, "Permission denied"):
		return "allow unprivileged user namespaces: sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 sysctl kernel.apparmor_restrict_unprivileged_userns=0 or load the bwrap-userns-restrict AppArmor profile; in Docker, a seccomp profile that allows clone/unshare with CLONE_NEWUSER and an unmasked /proc"
	case strings.Contains(msg, "flag provided but not defined"), strings.Contains(msg, "unknown command"), strings.Contains(msg, "did not answer"):
		return "the launcher must be agentos-launch or a binary that links kernel/sandbox (whose launch package takes over at start)"
	}
	return "see `agentos doctor`"
}

// ProbeOptions are extra checks of a probe (agentos doctor).
type ProbeOptions struct {
	// Hidden are host paths the command must not be able to read.
	Hidden []string
}

// Probe runs the launcher's probe stage in a fresh worktree under the
// sandbox and returns what it saw. Detect calls it for each candidate;
// agentos doctor calls it to show what commands can see.
func (s *Sandbox) Probe(ctx context.Context, o ProbeOptions) (ProbeResult, error) {
	if err := s.Err(); err != nil {
		return ProbeResult{}, err
	}
	return s.probe(ctx, o.Hidden)
}

func (s *Sandbox) probe(ctx context.Context, hidden []string) (ProbeResult, error) {
	root, err := os.MkdirTemp("", "agentos-probe-*")
	if err != nil {
		return ProbeResult{}, err
	}
	defer os.RemoveAll(root)
	if root, err = filepath.EvalSymlinks(root); err != nil {
		return ProbeResult{}, err
	}
	work := filepath.Join(root, "work")
	secret := filepath.Join(root, "secret")
	for _, d := range []string{work, filepath.Join(work, ".git")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return ProbeResult{}, err
		}
	}
	if err := os.WriteFile(secret, []byte("secret"), 0o644); err != nil {
		return ProbeResult{}, err
	}
	check := append([]string{secret}, hidden...)
	// A host unix socket outside the worktree (a database's, Docker's)
	// must not be reachable by its path.
	sockPath := filepath.Join(root, "host.sock")
	sock, err := net.Listen("unix", sockPath)
	if err != nil {
		return ProbeResult{}, fmt.Errorf("probe: host socket: %w", err)
	}
	defer sock.Close()
	go func() {
		for {
			c, err := sock.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	// So must a TCP listener on the host's loopback (a database's, the
	// bot's own server).
	var hostAccepted atomic.Int32
	hostTCP, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return ProbeResult{}, fmt.Errorf("probe: host listener: %w", err)
	}
	defer hostTCP.Close()
	go func() {
		for {
			c, err := hostTCP.Accept()
			if err != nil {
				return
			}
			hostAccepted.Add(1)
			c.Close()
		}
	}()
	sp := launch.Spec{Stage: launch.StageProbe, Check: check, Write: []string{work, root, filepath.Join(work, ".git")}, Socket: sockPath, HostTCP: hostTCP.Addr().String()}.Encode()
	launcher := s.launcher
	if s.mech == Bwrap {
		launcher = insideLauncher
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := s.Command(ctx, Request{Argv: []string{launcher, launch.LauncherArg, sp}, Work: work, Dir: work, Env: []string{"PATH=" + s.host.path}})
	if err != nil {
		return ProbeResult{}, err
	}
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err = c.Start()
	if err == nil {
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		select {
		case err = <-done:
		case <-ctx.Done():
			c.Kill()
			err = <-done
			if err == nil {
				err = ctx.Err()
			}
		}
	}
	if ferr := c.Finish(); err == nil {
		err = ferr
	}
	var res ProbeResult
	if jerr := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &res); jerr != nil {
		msg := strings.TrimSpace(errb.String())
		if msg == "" && err != nil {
			msg = err.Error()
		}
		if msg == "" {
			msg = "the launcher did not answer"
		}
		return res, errors.New(firstLines(msg, 3))
	}
	// What the probe could write, seen from the host.
	res.Writable = res.Writable[:0]
	for _, d := range []string{work, root, filepath.Join(work, ".git")} {
		if exists(filepath.Join(d, launch.ProbeMark)) {
			res.Writable = append(res.Writable, d)
		}
	}
	if hostAccepted.Load() > 0 {
		res.HostLoopback = "open (the host's listener accepted a connection)"
	}
	res.WorkWritable = exists(filepath.Join(work, launch.ProbeMark))
	res.GitWritable = exists(filepath.Join(work, ".git", launch.ProbeMark))
	return res, nil
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " / ")
}

// judge checks that the probe really was confined; privateNet: a
// Landlock probe in a network namespace of its own, whose loopback must
// work (without one, loopback must be refused like all IP).
func judge(m Mechanism, privateNet bool, r ProbeResult) error {
	switch {
	case r.HostLoopback == "":
		return errors.New("the probe did not try the host's loopback: is the launcher older than this agentos?")
	case !strings.HasPrefix(r.HostLoopback, "blocked"):
		return fmt.Errorf("the probe connected to a listener on the host's loopback (%q)", r.HostLoopback)
	case m == Landlock && privateNet && r.Loopback != "open":
		return fmt.Errorf("the probe's own loopback does not work (%s)", r.Loopback)
	case m == Landlock && !privateNet && !strings.HasPrefix(r.Loopback, "blocked"):
		return fmt.Errorf("the probe could use loopback without a network namespace of its own (%s)", r.Loopback)
	case len(r.Readable) > 0:
		return fmt.Errorf("the probe could read %s outside its worktree", r.Readable[0])
	case !r.WorkWritable:
		return errors.New("the probe could not write in its worktree")
	case len(r.Writable) > 1 && !(m == Landlock && len(r.Writable) == 2 && r.GitWritable):
		// landlock cannot keep .git read-only (its control files are
		// restored after every command instead)
		return fmt.Errorf("the probe could write in %v, want only its worktree", r.Writable)
	case !strings.HasPrefix(r.Network, "blocked"):
		return fmt.Errorf("the probe reached the network (%s)", r.Network)
	case !strings.HasPrefix(r.UnixSocket, "blocked"):
		return fmt.Errorf("the probe connected to a host unix socket (%q)", r.UnixSocket)
	case !r.Shell:
		return errors.New("the probe could not run /bin/sh")
	case m == Bwrap && r.Processes > 4:
		return fmt.Errorf("the probe saw %d processes: no private pid namespace", r.Processes)
	}
	return nil
}

// rlimits are the limits set in the sandbox.
func rlimits(l Limits, nproc bool) []launch.Rlimit {
	cpu := uint64(math.Ceil(l.CPU.Seconds()))
	rl := []launch.Rlimit{
		{Resource: unix.RLIMIT_CPU, Value: cpu},
		{Resource: unix.RLIMIT_DATA, Value: l.Memory},
		{Resource: unix.RLIMIT_FSIZE, Value: l.FileSize},
		{Resource: unix.RLIMIT_NOFILE, Value: l.OpenFiles},
		{Resource: unix.RLIMIT_CORE, Value: 0},
	}
	if nproc {
		rl = append(rl, launch.Rlimit{Resource: unix.RLIMIT_NPROC, Value: l.Processes})
	}
	return rl
}

// cleanup runs release steps in reverse order.
type cleanup []func() error

func (c *cleanup) add(f func() error) { *c = append(*c, f) }

func (c cleanup) run() error {
	var errs []error
	for i := len(c) - 1; i >= 0; i-- {
		if err := c[i](); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// startProxy starts the egress proxy on ln for the allow-list.
func startProxy(ln net.Listener, allow []string, cl *cleanup) (*Proxy, error) {
	p, err := NewProxy(ln, allow)
	if err != nil {
		ln.Close()
		return nil, err
	}
	cl.add(p.Close)
	return p, nil
}

// proxySocket is an egress proxy listening on a unix socket: path on the
// host, url for the sandbox, where a bridge forwards insideProxy to it.
type proxySocket struct{ path, url string }

// unixProxy starts the egress proxy for the allow-list on a unix socket
// in a new private directory (bwrap mounts it in; under Landlock the
// supervisor reaches it from outside the command's network namespace).
func unixProxy(allow []string, cl *cleanup) (proxySocket, error) {
	dir, err := os.MkdirTemp("", "agentos-proxy-*")
	if err != nil {
		return proxySocket{}, err
	}
	cl.add(func() error { return os.RemoveAll(dir) })
	path := filepath.Join(dir, "proxy.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		return proxySocket{}, fmt.Errorf("sandbox: proxy: %w", err)
	}
	p, err := startProxy(ln, allow, cl)
	if err != nil {
		return proxySocket{}, err
	}
	return proxySocket{path: path, url: p.URL(insideProxy)}, nil
}

func (s *Sandbox) bwrapCommand(ctx context.Context, req Request) (*Cmd, error) {
	var cl cleanup
	fail := func(err error) (*Cmd, error) { _ = cl.run(); return nil, err }
	gocache := s.goCacheDir(req.Work)
	if err := os.MkdirAll(gocache, 0o700); err != nil {
		return fail(fmt.Errorf("sandbox: go build cache: %w", err))
	}
	var proxyURL, hostSock string
	var br *launch.Bridge
	if len(req.Allow) > 0 {
		up, err := unixProxy(req.Allow, &cl)
		if err != nil {
			return fail(err)
		}
		proxyURL, hostSock = up.url, up.path
		br = &launch.Bridge{Listen: insideProxy, Socket: insideSocket}
	}
	initSpec := launch.Spec{Stage: launch.StageInit, Rlimits: rlimits(req.Limits, s.pids.kind == pidsRlimit), Bridge: br, Seccomp: launch.SeccompNetns}
	var extra []*os.File
	cgroups, err := s.commandCgroups(req.Limits, &cl)
	if err != nil {
		return fail(err)
	}
	for _, cg := range cgroups {
		// The launcher, pid 1 inside, joins through these descriptors
		// before it starts the command.
		procs, err := launch.OpenJoinFile(cg)
		if err != nil {
			return fail(fmt.Errorf("sandbox: cgroup: %w", err))
		}
		cl.add(procs.Close)
		extra = append(extra, procs)
		initSpec.CgroupFDs = append(initSpec.CgroupFDs, 2+len(extra))
	}
	links, err := snapshotGitlinks(req.Work)
	if err != nil {
		return fail(err)
	}
	// Checked after the command and the cleanups above (added first, it
	// runs last).
	cl = append(cleanup{links.verify}, cl...)
	argv := append([]string{s.bwrap}, s.bwrapArgs(req, gocache, hostSock)...)
	argv = append(argv, "--", insideLauncher, launch.LauncherArg, initSpec.Encode())
	argv = append(argv, req.Argv...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = s.env(req, insideHome, insideTmp, proxyURL)
	cmd.Dir = req.Dir
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	c := &Cmd{Cmd: cmd, finish: cl.run}
	c.kill = func() {
		// bwrap's pid 1 (the launcher) dies with bwrap (--die-with-parent),
		// and with it every process of the sandbox's pid namespace.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
	}
	return c, nil
}

// bwrapArgs builds the sandbox's file system and namespaces.
func (s *Sandbox) bwrapArgs(req Request, gocache, hostSock string) []string {
	a := []string{"--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--as-pid-1", "--cap-drop", "ALL", "--hostname", "agentos-sandbox"}
	if s.bwrapOpt.disableUserns {
		a = append(a, "--disable-userns")
	}
	for _, d := range s.host.system {
		a = append(a, "--ro-bind", d, d)
	}
	for _, l := range s.host.links {
		a = append(a, "--symlink", l.target, l.path)
	}
	for _, f := range s.host.etc {
		a = append(a, "--ro-bind-try", f, f)
	}
	// bwrap's /dev is a tmpfs of half the host's memory: keep it
	// read-only (device nodes still work) and give /dev/shm a tmpfs of its
	// own, sized like /tmp.
	a = append(a, "--proc", "/proc", "--dev", "/dev")
	size := func() {
		if s.bwrapOpt.size {
			a = append(a, "--size", strconv.FormatUint(req.Limits.Tmp, 10))
		}
	}
	size()
	a = append(a, "--tmpfs", "/dev/shm")
	a = append(a, "--remount-ro", "/dev")
	size()
	a = append(a, "--tmpfs", insideTmp, "--dir", insideHome)
	for _, t := range s.host.tools {
		if within(req.Work, t) {
			continue // it would show the worktree's neighbours
		}
		a = append(a, "--ro-bind", t, t)
	}
	for _, c := range []string{s.host.modCache, s.host.npmCache} {
		if c != "" && !within(req.Work, c) {
			a = append(a, "--ro-bind", c, c)
		}
	}
	for _, d := range req.Deps.dirs() {
		if req.Deps.Writable {
			a = append(a, "--bind", d, d)
		} else {
			a = append(a, "--ro-bind", d, d)
		}
	}
	a = append(a, "--bind", gocache, gocache, "--bind", req.Work, req.Work)
	if fi, err := os.Lstat(filepath.Join(req.Work, ".git")); err == nil && (fi.IsDir() || fi.Mode().IsRegular()) {
		git := filepath.Join(req.Work, ".git")
		a = append(a, "--ro-bind", git, git)
	}
	for _, m := range req.Mask {
		// What does not exist needs no mask (and bwrap would create a
		// mount point for it in the worktree); a directory is covered by
		// an empty tmpfs, anything else by /dev/null.
		switch fi, err := os.Lstat(m); {
		case err != nil:
		case fi.IsDir():
			a = append(a, "--tmpfs", m)
		default:
			a = append(a, "--ro-bind", "/dev/null", m)
		}
	}
	if s.launcher != "" {
		a = append(a, "--ro-bind", s.launcher, insideLauncher)
	}
	if hostSock != "" {
		a = append(a, "--bind", hostSock, insideSocket)
	}
	a = append(a, "--remount-ro", "/", "--chdir", req.Dir)
	return a
}

func (s *Sandbox) landlockCommand(ctx context.Context, req Request) (*Cmd, error) {
	var cl cleanup
	fail := func(err error) (*Cmd, error) { _ = cl.run(); return nil, err }
	// Masked files leave the worktree while the command runs (see
	// aside_linux.go); put back after everything else.
	for _, d := range req.Data {
		if _, err := os.Lstat(d); err == nil {
			return nil, fmt.Errorf("sandbox: %s is agentos's own data and must be hidden from commands, and Landlock cannot hide part of a tree it grants: keep the data directory outside the repository (--data, AGENTOS_DATA; the default is), or use bwrap", d)
		}
	}
	restore, err := moveAside(req.Work, req.Mask)
	if err != nil {
		return nil, err
	}
	cl.add(restore)
	gocache := s.goCacheDir(req.Work)
	if err := os.MkdirAll(gocache, 0o700); err != nil {
		return fail(fmt.Errorf("sandbox: go build cache: %w", err))
	}
	private, err := os.MkdirTemp("", "agentos-sandbox-*")
	if err != nil {
		return fail(err)
	}
	cl.add(func() error { return os.RemoveAll(private) })
	home, tmp := filepath.Join(private, "home"), filepath.Join(private, "tmp")
	for _, d := range []string{home, tmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fail(err)
		}
	}
	ll := s.landlockRules(req, private, gocache)
	mode := launch.SeccompNoInet
	var proxyURL string
	var br *launch.Bridge
	switch {
	case s.netns != launch.NetnsNone:
		// A network namespace of its own: IP sockets reach only its
		// loopback. The proxy is bridged in as under bwrap, by the
		// supervisor from outside.
		mode = launch.SeccompPrivateNet
		if len(req.Allow) > 0 {
			px, err := unixProxy(req.Allow, &cl)
			if err != nil {
				return fail(err)
			}
			proxyURL = px.url
			br = &launch.Bridge{Listen: insideProxy, Socket: px.path}
		}
	case len(req.Allow) > 0:
		if s.abi < 4 {
			return fail(fmt.Errorf("sandbox: a network allow-list needs Landlock ABI 4 (Linux 6.7) or bwrap; this kernel has ABI %d", s.abi))
		}
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return fail(fmt.Errorf("sandbox: proxy: %w", err))
		}
		p, err := startProxy(ln, req.Allow, &cl)
		if err != nil {
			return fail(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		proxyURL = p.URL(ln.Addr().String())
		ll.ConnectTCP = []uint16{uint16(port)}
		mode = launch.SeccompTCPOnly
	}
	confineSpec := s.confineSpec(req, ll, mode)
	sup := launch.Spec{Stage: launch.StageSupervise, Dir: req.Dir, Next: &confineSpec, Netns: s.netns, Bridge: br}
	cgroups, err := s.commandCgroups(req.Limits, &cl)
	if err != nil {
		return fail(err)
	}
	sup.Cgroups = cgroups
	guard, err := snapshotGit(req.Work)
	if err != nil {
		return fail(err)
	}
	links, err := snapshotGitlinks(req.Work)
	if err != nil {
		return fail(err)
	}
	// Checked after the command and the cleanups above are done (added
	// first, they run last: the control files are restored, the index
	// with them, before the submodule paths are checked).
	cl = append(cleanup{restore, links.verify, guard.verify}, cl[1:]...)
	argv := append([]string{s.launcher, launch.LauncherArg, sup.Encode()}, req.Argv...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = s.env(req, home, tmp, proxyURL)
	cmd.Dir = req.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	cmd.WaitDelay = killGrace + 2*time.Second
	c := &Cmd{Cmd: cmd, finish: cl.run}
	c.kill = func() {
		// The supervisor kills the tree (it is the subreaper of every
		// orphan); its process group goes too if it takes too long.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		pid := cmd.Process.Pid
		time.AfterFunc(killGrace, func() {
			if !c.exited.Load() {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		})
	}
	return c, nil
}

// confineSpec is the Landlock confine stage of req.
func (s *Sandbox) confineSpec(req Request, ll launch.Landlock, seccomp string) launch.Spec {
	return launch.Spec{Stage: launch.StageConfine, Rlimits: rlimits(req.Limits, s.pids.kind == pidsRlimitShared || s.pids.kind == pidsRlimit), NprocShared: s.pids.kind == pidsRlimitShared, Landlock: &ll, Seccomp: seccomp, DropCaps: os.Geteuid() == 0, Dir: req.Dir}
}

// landlockRules are the paths a command may use under Landlock: the
// worktree, its private directory (tmp and HOME) and build cache, and
// read-only what the host offers every command.
func (s *Sandbox) landlockRules(req Request, private, gocache string) launch.Landlock {
	ll := launch.Landlock{RW: []string{req.Work, private, gocache}, RWFiles: []string{"/dev/null", "/dev/full"}, ROFiles: []string{s.launcher, "/dev/zero", "/dev/random", "/dev/urandom"}}
	ll.RO = append(ll.RO, s.host.system...)
	for _, f := range s.host.etc {
		if fi, err := os.Stat(f); err == nil && fi.IsDir() {
			ll.RO = append(ll.RO, f)
		} else {
			ll.ROFiles = append(ll.ROFiles, f)
		}
	}
	for _, t := range s.host.tools {
		if !within(req.Work, t) {
			ll.RO = append(ll.RO, t)
		}
	}
	for _, c := range []string{s.host.modCache, s.host.npmCache} {
		if c != "" && !within(req.Work, c) {
			ll.RO = append(ll.RO, c)
		}
	}
	if req.Deps != nil && req.Deps.Writable {
		ll.RW = append(ll.RW, req.Deps.dirs()...)
	} else {
		ll.RO = append(ll.RO, req.Deps.dirs()...)
	}
	return ll
}

// unconfined runs req as it is: sandbox none.
func (s *Sandbox) unconfined(req Request) *Cmd {
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Env = req.Env
	if d := req.Deps; d != nil {
		cmd.Env = envWith(req.Env, map[string]string{"GOMODCACHE": d.GoMod, "npm_config_cache": d.NPM})
	}
	cmd.Dir = req.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	c := &Cmd{Cmd: cmd}
	c.kill = func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Leave no stragglers in the process group (what ran before sandboxes).
	c.finish = func() error {
		if c.started {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		return nil
	}
	return c
}

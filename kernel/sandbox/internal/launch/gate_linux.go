//go:build linux

package launch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// init runs the launcher, and exits, when this process was started as one
// (see the package documentation).
func init() {
	if len(os.Args) < 2 || os.Args[1] != LauncherArg {
		return
	}
	os.Exit(Run(os.Args[2:]))
}

// Run runs one stage: args are the stage's JSON spec and the command.
func Run(args []string) int {
	if len(args) < 1 {
		return setupFailed(errors.New("launcher: missing spec"))
	}
	var sp Spec
	if err := json.Unmarshal([]byte(args[0]), &sp); err != nil {
		return setupFailed(fmt.Errorf("launcher: bad spec: %w", err))
	}
	argv := args[1:]
	if sp.Stage != StageProbe && len(argv) == 0 {
		return setupFailed(errors.New("launcher: no command"))
	}
	switch sp.Stage {
	case StageInit:
		return initStage(sp, argv)
	case StageSupervise:
		return superviseStage(sp, argv)
	case StageConfine:
		return confineStage(sp, argv)
	case StageProbe:
		return probeStage(sp)
	}
	return setupFailed(fmt.Errorf("launcher: unknown stage %q", sp.Stage))
}

func setupFailed(err error) int {
	fmt.Fprintf(os.Stderr, "%s%v\n", SetupPrefix, err)
	return ExitSetup
}

func setRlimits(rl []Rlimit, nprocShared bool) error {
	for _, r := range rl {
		v := r.Value
		if r.Resource == unix.RLIMIT_NPROC && nprocShared {
			v += uint64(uidTasks(os.Getuid()))
		}
		lim := unix.Rlimit{Cur: v, Max: v}
		if err := unix.Setrlimit(r.Resource, &lim); err != nil {
			return fmt.Errorf("setrlimit %d=%d: %w", r.Resource, v, err)
		}
	}
	return nil
}

// uidTasks counts the tasks (threads) of uid: what RLIMIT_NPROC counts.
func uidTasks(uid int) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		var ruid, threads int = -1, 0
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 {
				switch f[0] {
				case "Uid:":
					ruid, _ = strconv.Atoi(f[1])
				case "Threads:":
					threads, _ = strconv.Atoi(f[1])
				}
			}
		}
		if ruid == uid {
			n += threads
		}
	}
	return n
}

// startChild starts argv without os/exec, so that the reaper below, not
// exec.Cmd.Wait, collects its status.
func startChild(argv []string, env []string) (int, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return 0, err
	}
	wd, _ := os.Getwd()
	return syscall.ForkExec(path, argv, &syscall.ProcAttr{Dir: wd, Env: env, Files: []uintptr{0, 1, 2}})
}

// reapUntil waits for every child, collecting orphans too (pid 1 and the
// subreaper inherit them), and returns when pid exits, with its status as
// an exit code.
func reapUntil(pid int) int {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 126
		}
		if got == pid {
			return exitCode(ws)
		}
	}
}

func exitCode(ws unix.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return 128 + int(ws.Signal())
	}
	return 126
}

// initStage is pid 1 of a bwrap sandbox. When it exits, the kernel kills
// every other process of the pid namespace: nothing survives the command.
func initStage(sp Spec, argv []string) int {
	// The cgroups are joined by this OS thread, which then starts the
	// command (see OpenJoinFile).
	runtime.LockOSThread()
	for _, fd := range sp.CgroupFDs {
		// The bot opened the command's cgroup's OpenJoinFile and passed it
		// in: "0" moves the writer, wherever its pid namespace.
		f := os.NewFile(uintptr(fd), "cgroup")
		_, err := f.WriteString("0")
		f.Close()
		if err != nil {
			return setupFailed(fmt.Errorf("join the command's cgroup: %w", err))
		}
	}
	if err := setRlimits(sp.Rlimits, false); err != nil {
		return setupFailed(err)
	}
	if sp.Bridge != nil {
		ln, err := net.Listen("tcp", sp.Bridge.Listen)
		if err != nil {
			return setupFailed(fmt.Errorf("proxy bridge: %w", err))
		}
		go bridge(ln, sp.Bridge.Socket)
	}
	if sp.Seccomp != "" {
		// After the bridge's listener: the filter allows what the bridge
		// does (TCP in, unix out), and every process started from here on
		// inherits it.
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return setupFailed(fmt.Errorf("no_new_privs: %w", err))
		}
		if err := installSeccomp(sp.Seccomp); err != nil {
			return setupFailed(err)
		}
	}
	pid, err := startChild(argv, os.Environ())
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s%v\n", SetupPrefix, err)
		return 127
	}
	return reapUntil(pid)
}

// bridge forwards connections on ln to the proxy's unix socket.
func bridge(ln net.Listener, socket string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("unix", socket)
			if err != nil {
				return
			}
			defer u.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(u, c); closeWrite(u); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, u); closeWrite(c); done <- struct{}{} }()
			<-done
			<-done
		}()
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// superviseStage (landlock) starts the confine stage as its child and
// kills the command's whole tree when it ends or when the bot asks
// (SIGTERM). It stays outside the Landlock domain, so that with Landlock
// ABI 6 the command cannot signal it.
func superviseStage(sp Spec, argv []string) int {
	// The cgroups are joined by this OS thread, which then starts the
	// confine stage (see OpenJoinFile).
	runtime.LockOSThread()
	for _, cg := range sp.Cgroups {
		if err := JoinCgroup(cg); err != nil {
			return setupFailed(err)
		}
	}
	tree := ""
	if len(sp.Cgroups) > 0 {
		tree = sp.Cgroups[0]
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return setupFailed(fmt.Errorf("subreaper: %w", err))
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if sp.Next == nil {
		return setupFailed(errors.New("supervise: no confine stage"))
	}
	attr, err := NetnsAttr(sp.Netns)
	if err != nil {
		return setupFailed(err)
	}
	// Whether the confine stage has a network namespace of its own is
	// decided here, where the namespace is made, never by the spec alone.
	next := *sp.Next
	next.PrivateNet = sp.Netns != NetnsNone
	next.Bridge = nil
	if sp.Netns == NetnsUser {
		// It holds capabilities in its user namespace (NetnsAttr).
		next.DropCaps = true
	}
	files := []uintptr{0, 1, 2}
	handoff := -1
	if sp.Bridge != nil {
		// The proxy bridge: the confine stage listens inside its
		// namespace and hands the listener over; this process, on the
		// host's side, forwards each connection to the proxy's socket.
		if sp.Netns == NetnsNone {
			return setupFailed(errors.New("supervise: a proxy bridge needs a network namespace"))
		}
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return setupFailed(fmt.Errorf("proxy bridge: %w", err))
		}
		handoff = pair[0]
		files = append(files, uintptr(pair[1]))
		next.Bridge = &Bridge{Listen: sp.Bridge.Listen, Handoff: len(files) - 1}
	}
	spec, err := json.Marshal(next)
	if err != nil {
		return setupFailed(err)
	}
	self, err := os.Executable()
	if err != nil {
		return setupFailed(err)
	}
	pid, err := syscall.ForkExec(self, append([]string{self, LauncherArg, string(spec)}, argv...), &syscall.ProcAttr{Dir: sp.Dir, Env: os.Environ(), Files: files, Sys: attr})
	if err != nil {
		return setupFailed(fmt.Errorf("start the confine stage (network namespace %q): %w", sp.Netns, err))
	}
	if handoff >= 0 {
		unix.Close(int(files[len(files)-1]))
		go func() {
			ln, err := receiveListener(handoff)
			if err != nil {
				// The confine stage failed before it handed the
				// listener over, and says why itself.
				return
			}
			bridge(ln, sp.Bridge.Socket)
		}()
	}
	status := make(chan int, 1)
	go func() { status <- reapUntil(pid) }()
	var code int
	select {
	case code = <-status:
	case <-sigs:
		code = 128 + int(syscall.SIGKILL)
	}
	killTree(tree)
	return code
}

// killTree kills every descendant of this process: the processes of the
// cgroup when there is one, else every process whose parent chain leads
// here (as the subreaper, orphans are re-parented to this process, so a
// double fork does not escape).
func killTree(cgroup string) {
	self := os.Getpid()
	for round := 0; round < 200; round++ {
		var pids []int
		if cgroup != "" {
			pids = CgroupPids(cgroup, self)
		} else if noChildren() {
			// Every live descendant has a live ancestor chain up to
			// here (orphans are re-parented to this subreaper), so
			// without children there is none: skip reading the stat
			// of every process of the host.
			return
		} else {
			pids = descendants(self)
		}
		if len(pids) == 0 {
			return
		}
		for _, p := range pids {
			_ = unix.Kill(p, unix.SIGKILL)
		}
		for {
			var ws unix.WaitStatus
			if got, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil); got <= 0 || err != nil {
				break
			}
		}
		time.Sleep(time.Duration(min(round+1, 20)) * time.Millisecond)
	}
}

// noChildren reports whether this process has no child, running or
// exited, left to wait for (it reaps one exited child, if any: the
// caller kills the rest anyway).
func noChildren() bool {
	var ws unix.WaitStatus
	_, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
	return errors.Is(err, unix.ECHILD)
}

// descendants lists the processes below pid by their parent links.
func descendants(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may contain spaces and parens.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[p] = pp
	}
	var out []int
	for p := range parent {
		for q, hops := parent[p], 0; q > 1 && hops < 4096; q, hops = parent[q], hops+1 {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// confineStage (landlock) confines itself, then becomes the command.
func confineStage(sp Spec, argv []string) int {
	// Capabilities and securebits are per thread: do everything, exec
	// included, on this one.
	runtime.LockOSThread()
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s%v\n", SetupPrefix, err)
		return 127
	}
	if sp.PrivateNet {
		if err := loopbackUp(); err != nil {
			return setupFailed(err)
		}
	}
	if sp.Bridge != nil {
		if !sp.PrivateNet {
			return setupFailed(errors.New("confine: a proxy bridge needs a network namespace"))
		}
		if err := handOffListener(*sp.Bridge); err != nil {
			return setupFailed(err)
		}
	}
	if err := confine(sp); err != nil {
		return setupFailed(err)
	}
	err = syscall.Exec(path, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "%sexec %s: %v\n", SetupPrefix, argv[0], err)
	return 126
}

// confine applies the stage's limits, capability drop, seccomp filter and
// Landlock ruleset to this process.
func confine(sp Spec) error {
	if err := setRlimits(sp.Rlimits, sp.NprocShared); err != nil {
		return err
	}
	if sp.DropCaps {
		if err := dropCapabilities(); err != nil {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if sp.Seccomp == SeccompPrivateNet && !sp.PrivateNet {
		// IP sockets in the host's network namespace would reach its
		// loopback services.
		return errors.New("seccomp: the private-net filter outside a network namespace of the command's own")
	}
	if sp.Seccomp != "" {
		if err := installSeccomp(sp.Seccomp); err != nil {
			return err
		}
	}
	if sp.Landlock != nil {
		if err := applyLandlock(*sp.Landlock, sp.PrivateNet); err != nil {
			return err
		}
	}
	return nil
}

// dropCapabilities empties every capability set of this thread and locks
// the securebits so that uid 0 gains none on exec.
func dropCapabilities() error {
	last := 40
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	// SECBIT_NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED and
	// NO_CAP_AMBIENT_RAISE, each with its lock.
	const securebits = 0xEF
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, securebits, 0, 0, 0); err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// probeStage reports what it can see, as JSON on stdout.
func probeStage(sp Spec) int {
	r := ProbeResult{PID: os.Getpid(), UID: os.Getuid(), Readable: []string{}, Writable: []string{}}
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				r.Processes++
			}
		}
	} else {
		r.Processes = -1
	}
	for _, p := range sp.Check {
		if f, err := os.Open(p); err == nil {
			var b [1]byte
			if _, err := f.Read(b[:]); err == nil || errors.Is(err, io.EOF) {
				r.Readable = append(r.Readable, p)
			} else if fi, err := f.Stat(); err == nil && fi.IsDir() {
				if _, err := f.Readdirnames(1); err == nil || errors.Is(err, io.EOF) {
					r.Readable = append(r.Readable, p)
				}
			}
			f.Close()
		}
	}
	for _, d := range sp.Write {
		// The mark stays: the caller looks for it on the host, which is
		// what counts (inside, a path can also exist on a private tmpfs).
		if f, err := os.OpenFile(filepath.Join(d, ProbeMark), os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
			r.Writable = append(r.Writable, d)
			f.Close()
		}
	}
	c, err := net.DialTimeout("tcp", "192.0.2.1:9", 300*time.Millisecond)
	switch {
	case err == nil:
		c.Close()
		r.Network = "open"
	case isTimeout(err):
		r.Network = "open (a connection was attempted)"
	default:
		r.Network = "blocked: " + err.Error()
	}
	r.Loopback = probeLoopback()
	if sp.HostTCP != "" {
		if c, err := net.DialTimeout("tcp", sp.HostTCP, 300*time.Millisecond); err == nil {
			c.Close()
			r.HostLoopback = "open"
		} else {
			r.HostLoopback = "blocked: " + err.Error()
		}
	}
	if sp.Socket != "" {
		r.UnixSocket = "blocked"
		if c, err := net.DialTimeout("unix", sp.Socket, 300*time.Millisecond); err == nil {
			c.Close()
			r.UnixSocket = "open"
		} else {
			r.UnixSocket = "blocked: " + err.Error()
		}
	}
	r.Shell = exec.Command("/bin/sh", "-c", "exit 0").Run() == nil
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return 1
	}
	return 0
}

// probeLoopback listens on 127.0.0.1 and connects to itself: "open", or
// "blocked: <error>".
func probeLoopback() string {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return "blocked: " + err.Error()
	}
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	c, err := net.DialTimeout("tcp4", ln.Addr().String(), time.Second)
	if err != nil {
		return "blocked: " + err.Error()
	}
	c.Close()
	if err := <-accepted; err != nil {
		return "blocked: " + err.Error()
	}
	return "open"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Package launch is the sandbox's launcher: the code that runs in the
// child, before the command, to apply what Go cannot apply between fork
// and exec (resource limits, capability drop, seccomp, Landlock, joining
// a cgroup, being pid 1 or the subreaper of the command's tree).
//
// The sandbox starts a launcher binary with LauncherArg as its first
// argument: agentos-launch (cmd/agentos-launch), which links this package
// and nothing heavy, or, when that is not installed next to agentos, the
// program's own binary. This package's init function recognises the
// argument and runs the launcher instead of the program, then exits. It
// is an init function, not a call at the top of main, so that every
// binary that links the sandbox, test binaries included, can launch
// without wiring, and so that in agentos it runs before most of the heavy
// package inits (Go initialises packages as soon as their imports are
// ready, and this package imports only the standard library, x/sys and
// go-landlock). Before it still run the inits of the standard library and
// of whatever sorts before it: 20-27 ms per start of agentos, against
// about 0.25 ms of package initialisation for agentos-launch. Nothing
// here runs unless argv[1] is exactly LauncherArg.
package launch

import (
	"encoding/json"
	"strings"
)

// LauncherArg is the first argument that makes a binary act as the
// sandbox's launcher. It looks like a flag so that a binary without this
// package fails at once ("flag provided but not defined", "unknown
// command") instead of running its normal work inside the probe.
const LauncherArg = "-agentos-sandbox-exec"

// Stages of the launcher.
const (
	// StageInit is pid 1 of a bwrap sandbox: limits, the proxy bridge,
	// then it starts argv, reaps every orphan and exits with argv's status
	// (which tears the pid namespace down).
	StageInit = "init"
	// StageSupervise (landlock) stays outside the Landlock domain: it
	// joins the cgroup, becomes the subreaper of the command's tree,
	// starts the confine stage and kills the whole tree at the end.
	StageSupervise = "supervise"
	// StageConfine (landlock) brings up the loopback of its private
	// network namespace (when it has one) and hands the proxy bridge's
	// listener to the supervisor, applies limits, drops capabilities,
	// installs the seccomp filter and the Landlock ruleset, then execs
	// argv.
	StageConfine = "confine"
	// StageProbe reports what the sandbox lets it see (Detect, doctor).
	StageProbe = "probe"
)

// Spec is one launcher stage's instructions, passed as JSON in argv (it
// holds paths and numbers, never a secret).
type Spec struct {
	Stage   string   `json:"stage"`
	Rlimits []Rlimit `json:"rlimits,omitempty"`
	// NprocShared: RLIMIT_NPROC counts every task of the uid (landlock,
	// not root), so the limit is added to the uid's tasks at start.
	NprocShared bool `json:"nproc_shared,omitempty"`
	// Cgroups are the command's cgroup directories, the pids one first
	// (supervise joins them); CgroupFDs inherited descriptors of their
	// OpenJoinFile (init, inside bwrap, where the cgroup
	// file system is not mounted).
	Cgroups   []string `json:"cgroups,omitempty"`
	CgroupFDs []int    `json:"cgroup_fds,omitempty"`
	// Bridge: init (bwrap) forwards Listen to Socket itself; supervise
	// (landlock, with Netns) gets the listener from the confine stage
	// and forwards it from outside the namespace.
	Bridge   *Bridge   `json:"bridge,omitempty"`
	Landlock *Landlock `json:"landlock,omitempty"`
	// Netns (supervise) is the namespaces the confine stage starts in:
	// NetnsNone, NetnsNet or NetnsUser.
	Netns string `json:"netns,omitempty"`
	// PrivateNet (confine) says that the stage runs in a network
	// namespace of its own: it brings lo up, IP sockets are allowed and
	// Landlock leaves TCP ports alone. Only the supervisor sets it, on
	// the stage it starts in the namespace.
	PrivateNet bool `json:"private_net,omitempty"`
	// Seccomp is "" (none) or one of the Seccomp modes below.
	Seccomp  string `json:"seccomp,omitempty"`
	DropCaps bool   `json:"drop_caps,omitempty"`
	Dir      string `json:"dir,omitempty"`
	Next     *Spec  `json:"next,omitempty"`
	// Check lists paths the probe tries to read and Write paths it tries
	// to create a file in.
	Check []string `json:"check,omitempty"`
	Write []string `json:"write,omitempty"`
	// Socket is a listening unix socket of the host the probe tries to
	// connect to by its path.
	Socket string `json:"socket,omitempty"`
	// HostTCP is a TCP listener on the host's loopback the probe tries
	// to connect to.
	HostTCP string `json:"host_tcp,omitempty"`
}

type Rlimit struct {
	Resource int    `json:"resource"`
	Value    uint64 `json:"value"`
}

// Bridge connects a TCP port on the sandbox's loopback to the egress
// proxy's unix socket.
type Bridge struct {
	Listen string `json:"listen"`
	Socket string `json:"socket,omitempty"`
	// Handoff (confine) is the descriptor of a unix socket over which
	// the stage sends its listener to the supervisor.
	Handoff int `json:"handoff,omitempty"`
}

// Netns modes of Spec.Netns.
const (
	NetnsNone = ""
	// NetnsNet: a network namespace alone (the bot runs as root, or with
	// CAP_SYS_ADMIN).
	NetnsNet = "net"
	// NetnsUser: a user namespace and a network namespace (unprivileged
	// user namespaces allowed).
	NetnsUser = "user+net"
)

// Landlock is a Landlock ruleset.
type Landlock struct {
	RO         []string `json:"ro,omitempty"`
	RW         []string `json:"rw,omitempty"`
	ROFiles    []string `json:"ro_files,omitempty"`
	RWFiles    []string `json:"rw_files,omitempty"`
	ConnectTCP []uint16 `json:"connect_tcp,omitempty"`
}

// ProbeResult is what the probe stage saw from inside.
type ProbeResult struct {
	PID int `json:"pid"`
	UID int `json:"uid"`
	// Processes is how many processes /proc shows (-1: /proc unreadable).
	Processes int `json:"processes"`
	// Readable are the Check paths the probe could read.
	Readable []string `json:"readable"`
	// Writable are the Write paths it could create a file in (as seen
	// from the host after the probe, by Probe).
	Writable []string `json:"writable"`
	// WorkWritable and GitWritable: the worktree, and its .git.
	WorkWritable bool `json:"work_writable"`
	GitWritable  bool `json:"git_writable"`
	// Network is "blocked: <error>" or "open".
	Network string `json:"network"`
	// UnixSocket is "blocked: <error>" or "open": a connect() by path to
	// a host socket outside the worktree.
	UnixSocket string `json:"unix_socket,omitempty"`
	// Loopback is "open" when the probe could listen on 127.0.0.1 and
	// connect to itself (a loopback of the sandbox's own: HostLoopback
	// says it is not the host's), else "blocked: <error>".
	Loopback string `json:"loopback"`
	// HostLoopback is "blocked: <error>" or "open": a connect() to a
	// listener on the host's 127.0.0.1.
	HostLoopback string `json:"host_loopback,omitempty"`
	// Shell is whether /bin/sh could be run.
	Shell bool   `json:"shell"`
	Error string `json:"error,omitempty"`
}

// ProbeMark is the file the probe creates in each Write directory.
const ProbeMark = ".agentos-probe-mark"

// ExitSetup is the launcher's exit status when the sandbox could not be
// set up (the command never ran); it prints SetupPrefix and the reason on
// stderr.
const ExitSetup = 125

const SetupPrefix = "agentos-sandbox: "

// SetupFailed reports whether a command's exit code and stderr say that
// the launcher could not set the sandbox up (so the command never ran).
func SetupFailed(exitCode int, stderr string) bool {
	return exitCode == ExitSetup && strings.Contains(stderr, SetupPrefix)
}

// Encode is the JSON of a spec, for the launcher's argv.
func (s Spec) Encode() string {
	b, err := json.Marshal(s)
	if err != nil {
		// A Spec is strings, numbers and booleans: it always encodes.
		panic("launch: spec does not encode: " + err.Error())
	}
	return string(b)
}

// Seccomp modes of Spec.Seccomp.
const (
	SeccompNoInet  = "no-inet"  // Landlock: no IP or unix sockets at all
	SeccompTCPOnly = "tcp-only" // Landlock: IP sockets only for plain TCP (Landlock limits the ports), no unix sockets
	SeccompNetns   = "netns"    // bwrap: unix, netlink and IP sockets (in the sandbox's own namespaces), nothing else
	// Landlock in a network namespace of its own: netlink and IP sockets
	// (the namespace has only loopback), no unix sockets.
	SeccompPrivateNet = "private-net"
)

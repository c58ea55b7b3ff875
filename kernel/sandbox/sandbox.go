package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentos/agentos/kernel/sandbox/internal/launch"
)

// LauncherArg is the first argument that makes a binary linking this
// package act as the sandbox's launcher (see internal/launch).
const LauncherArg = launch.LauncherArg

// LauncherName is the file name of the small launcher (cmd/agentos-launch)
// that the sandbox looks for next to the running executable.
const LauncherName = "agentos-launch"

// LauncherKind says which binary launches confined commands.
type LauncherKind string

// Launcher kinds.
const (
	// LauncherSmall is agentos-launch next to the running executable: a
	// start costs the Go runtime's start (about a millisecond).
	LauncherSmall LauncherKind = "small"
	// LauncherSelf is the running executable, re-executed: each start
	// also initialises every package it links (tens of milliseconds for
	// agentos, twice per command under Landlock).
	LauncherSelf LauncherKind = "self"
	// LauncherConfigured is Config.Launcher.
	LauncherConfigured LauncherKind = "configured"
)

// ProbeResult is what the probe saw from inside a sandbox.
type ProbeResult = launch.ProbeResult

// SetupFailed reports whether a command's exit code and stderr say that
// the launcher could not set the sandbox up (so the command never ran).
func SetupFailed(exitCode int, stderr string) bool { return launch.SetupFailed(exitCode, stderr) }

// Mechanism is how commands are confined.
type Mechanism string

// Mechanisms.
const (
	Bwrap    Mechanism = "bwrap"
	Landlock Mechanism = "landlock"
	// None runs commands unconfined: only when the operator opted out.
	None Mechanism = "none"
	// Unavailable refuses every command: no mechanism could be set up.
	Unavailable Mechanism = "unavailable"
)

// Mode is what the operator asked for.
type Mode string

// Modes.
const (
	ModeAuto     Mode = "auto" // bwrap, else landlock, else refuse
	ModeBwrap    Mode = "bwrap"
	ModeLandlock Mode = "landlock"
	ModeNone     Mode = "none"
)

// EnvMode is the environment variable that selects the mode for the CLI
// (agentos run, tool call, hooks test); the server reads `sandbox:` from
// its config file first.
const EnvMode = "AGENTOS_SANDBOX"

// ParseMode parses a mode; "" is auto.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return ModeAuto, nil
	case ModeAuto, ModeBwrap, ModeLandlock, ModeNone:
		return m, nil
	}
	return "", fmt.Errorf("sandbox %q: want auto, bwrap, landlock or none", s)
}

// Limits bound one command. A zero field takes the default.
type Limits struct {
	CPU       time.Duration // CPU time of each process (RLIMIT_CPU)
	Memory    uint64        // bytes of data segment of each process (RLIMIT_DATA)
	Processes uint64        // tasks (processes and threads) in the sandbox
	FileSize  uint64        // bytes of any file written (RLIMIT_FSIZE)
	OpenFiles uint64        // open file descriptors of each process (RLIMIT_NOFILE)
	Tmp       uint64        // bytes of the private tmp and HOME (bwrap: tmpfs size)
}

// DefaultLimits are generous for builds and tests and small enough that a
// runaway command cannot take the host down.
func DefaultLimits() Limits {
	return Limits{CPU: 20 * time.Minute, Memory: 8 << 30, Processes: 1024, FileSize: 2 << 30, OpenFiles: 8192, Tmp: 2 << 30}
}

// Or fills l's zero fields from d.
func (l Limits) Or(d Limits) Limits {
	if l.CPU <= 0 {
		l.CPU = d.CPU
	}
	for _, p := range []struct{ v, d *uint64 }{{&l.Memory, &d.Memory}, {&l.Processes, &d.Processes}, {&l.FileSize, &d.FileSize}, {&l.OpenFiles, &d.OpenFiles}, {&l.Tmp, &d.Tmp}} {
		if *p.v == 0 {
			*p.v = *p.d
		}
	}
	return l
}

// Config configures Detect.
type Config struct {
	Mode Mode
	// Launcher is the binary that launches every confined command:
	// agentos-launch, or any binary that links this package. "" = the
	// small launcher next to the running executable (LauncherName) when
	// only root or this user can change it, else the running executable.
	// A launcher set here must pass the same check, or Detect fails.
	Launcher string
	// Bwrap is the bubblewrap binary ("" = bwrap from PATH).
	Bwrap string
	// ReadOnly are extra host paths commands may read (toolchains in odd
	// places). System directories, GOROOT, Node, PATH directories, the Go
	// module cache and a configured npm cache are found by themselves.
	ReadOnly []string
	// CacheDir holds one private, writable build cache per worktree
	// ("" = the user cache directory's agentos/sandbox).
	CacheDir string
	// GoCache, when set, is one Go build cache every command shares
	// instead of one per worktree. A command can plant entries that later
	// builds of every worktree trust, so only set it where all
	// repositories are trusted alike (a developer's own checkouts, tests).
	GoCache string
	// Limits are the defaults of every command (zero fields: DefaultLimits).
	Limits Limits
	// Getenv reads the environment the toolchains are found from
	// (nil = os.Getenv).
	Getenv func(string) string
}

// Attempt is one mechanism Detect tried.
type Attempt struct {
	Mechanism Mechanism `json:"mechanism"`
	Error     string    `json:"error,omitempty"`
	Fix       string    `json:"fix,omitempty"`
}

// UnavailableError is why commands are refused: no mechanism could be set
// up and the operator did not opt out.
type UnavailableError struct {
	Mode  Mode
	Tried []Attempt
}

func (e *UnavailableError) Error() string {
	var b strings.Builder
	if e.Mode == "" {
		// A caller that never set a sandbox up: a wiring defect.
		return "no sandbox was set up for this workspace, so commands are refused"
	}
	fmt.Fprintf(&b, "no sandbox could be set up (sandbox: %s), so commands are refused", e.Mode)
	for _, a := range e.Tried {
		fmt.Fprintf(&b, "; %s: %s", a.Mechanism, a.Error)
		if a.Fix != "" {
			fmt.Fprintf(&b, " (fix: %s)", a.Fix)
		}
	}
	b.WriteString("; or, knowingly, run commands unconfined with `sandbox: none` in the server config or AGENTOS_SANDBOX=none")
	return b.String()
}

// ErrUnavailable matches every *UnavailableError with errors.Is.
var ErrUnavailable = errors.New("sandbox unavailable")

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Sandbox confines commands with the mechanism Detect found. It is safe for
// concurrent use.
type Sandbox struct {
	mode     Mode
	mech     Mechanism
	err      error
	tried    []Attempt
	launcher string
	// launcherKind and launcherNote: which launcher, and why a small
	// launcher that is there is not the one used.
	launcherKind LauncherKind
	launcherNote string
	bwrap        string
	bwrapOpt     bwrapFeatures
	host         hostPaths
	cacheDir     string
	goCache      string
	limits       Limits
	abi          int       // Landlock ABI (0: none)
	pids         pidsLimit // how the process limit is enforced
	// netns is the namespaces a Landlock command starts in (a launch
	// Netns mode: "" = none, IP refused); netnsWhy why there are none;
	// planNetns lists the modes Detect tries (nil: netnsModes).
	netns     string
	netnsWhy  string
	planNetns func() (modes []string, why string)
	// memCgroup is the cgroup directory commands' memory cgroups are made
	// in ("" = the command tree's memory is not limited, only each
	// process's data segment); memWithPids: it is the pids cgroup's
	// hierarchy (cgroup v2), so one cgroup carries both limits.
	memCgroup   string
	memWithPids bool
	memWhy      string
}

// Mechanism is the active mechanism (Unavailable when commands are refused).
func (s *Sandbox) Mechanism() Mechanism {
	if s == nil {
		return Unavailable
	}
	return s.mech
}

// Err is non-nil (an *UnavailableError) when commands are refused.
func (s *Sandbox) Err() error {
	if s == nil {
		return &UnavailableError{}
	}
	return s.err
}

// Limits are the default limits of every command.
func (s *Sandbox) Limits() Limits {
	if s == nil {
		return DefaultLimits()
	}
	return s.limits
}

// Disabled returns a sandbox that runs commands unconfined: mode none.
// Callers must say so loudly (logs, tracking comments).
func Disabled() *Sandbox {
	return &Sandbox{mode: ModeNone, mech: None, limits: DefaultLimits()}
}

// Detect finds a working mechanism for cfg.Mode by running a probe command
// under each candidate. It always returns a Sandbox; when nothing works,
// its Err says why and what to do, and every command is refused.
func Detect(ctx context.Context, cfg Config) *Sandbox {
	return detect(ctx, cfg, os.Executable, nil)
}

// detect is Detect with the running executable given by executable, and
// the network namespaces a Landlock command may get by planNetns (nil:
// those the host allows).
func detect(ctx context.Context, cfg Config, executable func() (string, error), planNetns func() ([]string, string)) *Sandbox {
	if cfg.Mode == "" {
		cfg.Mode = ModeAuto
	}
	s := &Sandbox{mode: cfg.Mode, limits: cfg.Limits.Or(DefaultLimits()), planNetns: planNetns}
	if cfg.Mode == ModeNone {
		s.mech = None
		return s
	}
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if a, ok := s.setLauncher(cfg.Launcher, executable); !ok {
		return s.fail(a)
	}
	s.goCache = cfg.GoCache
	s.cacheDir = cfg.CacheDir
	if s.cacheDir == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			d = os.TempDir()
		}
		s.cacheDir = d + "/agentos/sandbox"
	}
	s.host = discover(getenv, cfg.ReadOnly)
	var cands []Mechanism
	switch cfg.Mode {
	case ModeAuto:
		cands = []Mechanism{Bwrap, Landlock}
	case ModeBwrap:
		cands = []Mechanism{Bwrap}
	case ModeLandlock:
		cands = []Mechanism{Landlock}
	default:
		return s.fail(Attempt{Mechanism: Unavailable, Error: fmt.Sprintf("unknown sandbox mode %q", cfg.Mode)})
	}
	for _, m := range cands {
		a := s.try(ctx, m, cfg.Bwrap)
		s.tried = append(s.tried, a)
		if a.Error == "" {
			s.mech = m
			return s
		}
	}
	return s.fail()
}

// setLauncher picks the launcher: configured, else the small one next to
// the executable, else the executable itself.
func (s *Sandbox) setLauncher(configured string, executable func() (string, error)) (Attempt, bool) {
	if configured != "" {
		if err := checkLauncher(configured); err != nil {
			return Attempt{Mechanism: Unavailable, Error: "the configured launcher is not trustworthy: " + err.Error(), Fix: "make it a file only root or the bot's user can change, or leave the launcher unset"}, false
		}
		s.launcher, s.launcherKind = configured, LauncherConfigured
		return Attempt{}, true
	}
	exe, err := executable()
	if err != nil {
		return Attempt{Mechanism: Unavailable, Error: "cannot find this executable to use as the launcher: " + err.Error()}, false
	}
	s.launcher, s.launcherKind, s.launcherNote = findLauncher(exe)
	return Attempt{}, true
}

func (s *Sandbox) fail(extra ...Attempt) *Sandbox {
	s.tried = append(s.tried, extra...)
	s.mech = Unavailable
	s.err = &UnavailableError{Mode: s.mode, Tried: s.tried}
	return s
}

// Request is one command to run.
type Request struct {
	Argv []string
	// Work is the worktree: absolute, symlinks resolved. It is writable,
	// except its .git.
	Work string
	// Dir is the working directory: absolute, inside Work.
	Dir string
	// Env is the command's environment, already scrubbed of secrets; the
	// sandbox sets HOME, TMPDIR, the Go caches and the proxy variables.
	Env []string
	// Allow is the network allow-list (host rules, see ParseRule); empty
	// means no network at all.
	Allow []string
	// Limits override the sandbox's defaults where not zero.
	Limits Limits
	// Mask are paths inside Work the command must not see (agentos's own
	// data directory when it lies in the worktree, files the policy's deny
	// patterns keep from the tools): absolute. bwrap mounts an empty
	// directory (or /dev/null) over each; Landlock cannot take a subtree
	// out of a granted one, so there each is moved out of the worktree
	// while the command runs (aside_linux.go), except Data.
	Mask []string
	// Data are the paths of Mask that are agentos's own data (a data
	// directory inside the worktree, whose database is open): Landlock
	// can neither hide nor move them, so there the command is refused
	// while one exists.
	Data []string
	// Deps are a repository's own dependency caches, which replace the
	// host's in the command's environment (GOMODCACHE, npm's cache):
	// writable in the setup phase, read-only after it
	// (docs/project-config.md). Nil: the host's caches, read-only.
	Deps *DepCaches
}

// DepCaches are one repository's dependency caches: host directories
// outside every worktree (DepCacheDirs).
type DepCaches struct {
	GoMod    string // GOMODCACHE
	NPM      string // npm_config_cache
	Writable bool
}

// dirs are the caches' directories.
func (d *DepCaches) dirs() []string {
	if d == nil {
		return nil
	}
	return []string{d.GoMod, d.NPM}
}

// DepCacheDirs are the dependency caches of the repository whose identity
// (a stable name of the repository, not of one worktree: the workspace's
// RepoIdentity) is given, under the sandbox's cache directory, created if
// missing. Every run of that repository shares them.
func (s *Sandbox) DepCacheDirs(identity string) (DepCaches, error) {
	dir := ""
	if s != nil {
		dir = s.cacheDir
	}
	if dir == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			d = os.TempDir()
		}
		dir = d + "/agentos/sandbox"
	}
	base := dir + "/deps/" + workKey(identity)
	d := DepCaches{GoMod: base + "/gomod", NPM: base + "/npm"}
	for _, p := range d.dirs() {
		if err := os.MkdirAll(p, 0o700); err != nil {
			return DepCaches{}, fmt.Errorf("sandbox: dependency cache: %w", err)
		}
	}
	return d, nil
}

// Profile is what a command can see and do: recorded with every exec tool
// call (tool.invoke "sandbox") and shown by agentos doctor.
type Profile struct {
	Mechanism Mechanism `json:"mechanism"`
	// Writable and ReadOnly are the host paths visible to the command.
	Writable []string `json:"writable,omitempty"`
	ReadOnly []string `json:"read_only,omitempty"`
	// Hidden are paths inside Writable that are read-only (the worktree's .git).
	Hidden []string `json:"read_only_inside,omitempty"`
	// Masked are paths inside Writable that are not visible at all
	// (Request.Mask).
	Masked []string `json:"masked,omitempty"`
	// MaskedPatterns are the workspace's deny patterns: what they match
	// when a command starts is masked too (workspace.Root.Masked walks
	// the worktree for it then; the profile does not walk it twice).
	MaskedPatterns []string      `json:"masked_patterns,omitempty"`
	Network        string        `json:"network"` // off | allow-list | host (unconfined)
	Allow          []string      `json:"allow,omitempty"`
	Limits         ProfileLimits `json:"limits"`
	Notes          []string      `json:"notes,omitempty"`
}

// ProfileLimits are Limits for people and logs.
type ProfileLimits struct {
	WallTime  string `json:"wall_time,omitempty"`
	CPU       string `json:"cpu_time"`
	MemoryMB  uint64 `json:"memory_mb"`
	Processes uint64 `json:"processes"`
	FileMB    uint64 `json:"file_size_mb"`
	OpenFiles uint64 `json:"open_files"`
	// ProcessLimit says how Processes is enforced.
	ProcessLimit string `json:"process_limit"`
	// TreeMemory says whether MemoryMB also bounds the whole process tree
	// (a memory cgroup) or only each process's data segment.
	TreeMemory string `json:"tree_memory,omitempty"`
}

// Profile describes the confinement of a command in work with the given
// allow-list and limits (zero fields: the defaults).
func (s *Sandbox) Profile(work string, allow []string, lim Limits, mask ...string) Profile {
	if s == nil {
		return Profile{Mechanism: Unavailable, Network: "off", Notes: []string{"commands are refused: " + s.Err().Error()}}
	}
	lim = lim.Or(s.limits)
	p := Profile{Mechanism: s.Mechanism(), Network: "off", Limits: ProfileLimits{CPU: lim.CPU.String(), MemoryMB: lim.Memory >> 20, Processes: lim.Processes, FileMB: lim.FileSize >> 20, OpenFiles: lim.OpenFiles}}
	switch p.Mechanism {
	case None:
		p.Network = "host"
		p.Writable = []string{"/ (unconfined: sandbox none)"}
		p.Limits = ProfileLimits{ProcessLimit: "none"}
		p.Notes = []string{"commands run without a sandbox: the operator set sandbox: none"}
		return p
	case Unavailable:
		p.Notes = []string{"commands are refused: " + s.Err().Error()}
		return p
	}
	if len(allow) > 0 {
		p.Network, p.Allow = "allow-list", append([]string(nil), allow...)
	}
	p.Writable = []string{work, "(private tmp)", "(private HOME)", s.goCacheDir(work)}
	p.Hidden = []string{work + "/.git"}
	p.Masked = append([]string(nil), mask...)
	p.ReadOnly = s.host.readOnly()
	p.Limits.ProcessLimit = string(s.pids.kind)
	p.Limits.TreeMemory = s.treeMemory()
	if s.pids.kind == pidsNone {
		p.Notes = append(p.Notes, "the process limit is not enforced: "+s.pids.why)
	}
	if s.memCgroup == "" {
		p.Notes = append(p.Notes, "the command tree's memory is not limited as a whole, only each process's data segment: "+s.memWhy)
	}
	if s.mech == Landlock {
		p.Notes = append(p.Notes, "landlock: .git is restored if a command changes its control files")
		if s.netns == "" {
			p.Notes = append(p.Notes, "landlock without a network namespace: IP networking (loopback too) is refused outside the proxy: "+s.netnsWhy)
		}
	}
	return p
}

// Report is what agentos doctor and /readyz show.
type Report struct {
	Mode      Mode      `json:"mode"`
	Mechanism Mechanism `json:"mechanism"`
	Ready     bool      `json:"ready"` // exec tools will run
	Error     string    `json:"error,omitempty"`
	Tried     []Attempt `json:"tried,omitempty"`
	Launcher  string    `json:"launcher,omitempty"`
	// LauncherKind is which binary Launcher is (small, self or
	// configured); LauncherNote why a small launcher next to the
	// executable was passed over.
	LauncherKind LauncherKind `json:"launcher_kind,omitempty"`
	LauncherNote string       `json:"launcher_note,omitempty"`
	Bwrap        string       `json:"bwrap,omitempty"`
	LandlockABI  int          `json:"landlock_abi,omitempty"`
	ProcessLimit string       `json:"process_limit,omitempty"`
	// TreeMemory says how the memory of a command's whole process tree
	// is limited ("memory cgroup", or "none: <why>").
	TreeMemory string `json:"tree_memory,omitempty"`
	// Loopback is "private" when a command has a loopback of its own (a
	// network namespace: bwrap, and Landlock where the host allows it),
	// else "refused: <why>" (every IP socket is refused).
	Loopback string   `json:"loopback,omitempty"`
	ReadOnly []string `json:"read_only,omitempty"`
	// Limited and Unlimited say, resource by resource, what bounds a
	// command and what does not.
	Limited   []string `json:"limited,omitempty"`
	Unlimited []string `json:"unlimited,omitempty"`
	Warning   string   `json:"warning,omitempty"`
}

// Report summarises the sandbox.
func (s *Sandbox) Report() Report {
	if s == nil {
		return Report{Mechanism: Unavailable, Error: s.Err().Error()}
	}
	r := Report{Mode: s.mode, Mechanism: s.Mechanism(), Ready: s.Err() == nil, Tried: s.tried, Launcher: s.launcher, LauncherKind: s.launcherKind, LauncherNote: s.launcherNote, LandlockABI: s.abi}
	if err := s.Err(); err != nil {
		r.Error = err.Error()
	}
	switch r.Mechanism {
	case Bwrap:
		r.Bwrap = s.bwrap
	case None:
		r.Warning = "sandbox: none — repository code runs with the bot's own reach (files, network, processes)"
	}
	if r.Mechanism == Bwrap || r.Mechanism == Landlock {
		r.ProcessLimit = string(s.pids.kind)
		r.TreeMemory = s.treeMemory()
		r.Loopback = "private"
		if r.Mechanism == Landlock && s.netns == "" {
			r.Loopback = "refused: " + s.netnsWhy
		}
		if s.pids.kind == pidsNone {
			r.Warning = "the process limit is not enforced: " + s.pids.why
		}
		r.ReadOnly = s.host.readOnly()
		r.Limited, r.Unlimited = s.limitReport()
	}
	return r
}

// limitReport lists what bounds a command under this sandbox, and what
// does not.
func (s *Sandbox) limitReport() (limited, unlimited []string) {
	l := s.limits
	limited = append(limited,
		fmt.Sprintf("CPU time: %s per process (RLIMIT_CPU)", l.CPU),
		fmt.Sprintf("file size: %d MiB per file written (RLIMIT_FSIZE)", l.FileSize>>20),
		fmt.Sprintf("open files: %d per process (RLIMIT_NOFILE)", l.OpenFiles),
		fmt.Sprintf("memory: %d MiB per process (RLIMIT_DATA)", l.Memory>>20),
		"network: none, or the policy's allow-list through the egress proxy; no host unix sockets, AF_VSOCK or io_uring",
	)
	if ns := s.netnsName(); ns != "" {
		limited = append(limited, "loopback: private ("+ns+" of the command's own): its own servers on 127.0.0.1 work, the host's are out of reach")
	} else {
		limited = append(limited, "loopback: refused like all IP (no network namespace: "+s.netnsWhy+"); tests that listen on 127.0.0.1 fail: install bubblewrap or allow unprivileged user namespaces")
	}
	if s.memCgroup != "" {
		limited = append(limited, fmt.Sprintf("memory: %d MiB for the whole process tree (memory cgroup, swap included)", l.Memory>>20))
	} else {
		unlimited = append(unlimited, "memory of the whole process tree: "+s.memWhy)
	}
	if s.pids.kind != pidsNone {
		limited = append(limited, fmt.Sprintf("processes: %d (%s)", l.Processes, s.pids.kind))
	} else {
		unlimited = append(unlimited, "processes: "+s.pids.why)
	}
	switch s.mech {
	case Bwrap:
		if s.bwrapOpt.size {
			limited = append(limited, fmt.Sprintf("/tmp, HOME and /dev/shm: tmpfs of %d MiB each; /dev read-only", l.Tmp>>20))
		} else {
			unlimited = append(unlimited, "/tmp, HOME and /dev/shm: tmpfs without a size (this bwrap has no --size: 0.8 or newer has)")
		}
		unlimited = append(unlimited, "disk used in the worktree and its build cache: only each file's size is limited")
	case Landlock:
		limited = append(limited, "/dev/shm: not writable")
		unlimited = append(unlimited, "the private /tmp and HOME, the worktree and the build cache: on the host's disk, only each file's size is limited")
	}
	return limited, unlimited
}

// netnsName names the namespaces that give a command its own loopback
// ("" = none: IP refused).
func (s *Sandbox) netnsName() string {
	switch {
	case s.mech == Bwrap:
		return "bwrap's network namespace"
	case s.mech != Landlock || s.netns == "":
		return ""
	case s.netns == launch.NetnsUser:
		return "a user and a network namespace"
	}
	return "a network namespace"
}

// treeMemory says how a command tree's memory is limited.
func (s *Sandbox) treeMemory() string {
	if s.memCgroup != "" {
		return "memory cgroup"
	}
	return "none: " + s.memWhy
}

// WithGoCache returns a copy of s whose commands share the Go build cache
// dir (GOCACHE, writable, created on each command's start) instead of s's:
// one cache per repository and trust domain, chosen by the caller for each
// run (cmd/agentos's build caches, docs/security.md). Whoever can write a
// build cache can plant outputs that later builds sharing it trust, so dir
// must only ever be given to runs of one trust domain. dir must be
// absolute; "" returns s itself. Detection is not repeated: the copy has
// s's mechanism, launcher, limits and error.
func (s *Sandbox) WithGoCache(dir string) (*Sandbox, error) {
	if s == nil || dir == "" {
		return s, nil
	}
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("sandbox: go build cache %q is not an absolute path", dir)
	}
	c := *s
	c.goCache = filepath.Clean(dir)
	return &c, nil
}

// goCacheDir is the worktree's private Go build cache (or the shared one).
func (s *Sandbox) goCacheDir(work string) string {
	if s.goCache != "" {
		return s.goCache
	}
	return s.cacheDir + "/" + workKey(work) + "/go-build"
}

// Cmd is a prepared command. Start it with Start, wait with Wait, stop it
// early with Kill, and always call Finish.
type Cmd struct {
	*exec.Cmd
	kill    func()
	finish  func() error
	started bool
	exited  atomic.Bool
	// unpin lets the OS thread that started the command go (see Start).
	unpin     chan struct{}
	unpinOnce sync.Once
}

// Start starts the command. The command's first process dies with this
// process (its parent-death signal, SysProcAttr.Pdeathsig: bwrap, or the
// Landlock supervisor, which then kills the command's tree). The kernel
// sends that signal when the OS thread that started the child exits, not
// the process: the child is started from a goroutine locked to its
// thread, which keeps the thread (so no goroutine can end it by exiting
// locked to it) until the command has exited.
func (c *Cmd) Start() error {
	if c.SysProcAttr == nil || c.SysProcAttr.Pdeathsig == 0 {
		if err := c.Cmd.Start(); err != nil {
			return err
		}
		c.started = true
		return nil
	}
	c.unpin = make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := c.Cmd.Start()
		started <- err
		if err == nil {
			<-c.unpin
		}
	}()
	if err := <-started; err != nil {
		return err
	}
	c.started = true
	return nil
}

// release lets the thread that started the command go.
func (c *Cmd) release() {
	if c.unpin != nil {
		c.unpinOnce.Do(func() { close(c.unpin) })
	}
}

// Wait waits for the command to exit.
func (c *Cmd) Wait() error {
	err := c.Cmd.Wait()
	c.exited.Store(true)
	c.release()
	return err
}

// Kill stops the command and every process it started.
func (c *Cmd) Kill() {
	if c.started && c.kill != nil {
		c.kill()
	}
}

// Finish releases what the command held (the proxy, private directories,
// the process cgroup) and checks what the sandbox must check afterwards
// (landlock: the worktree's .git control files); an error there means the
// command broke out of its bounds.
func (c *Cmd) Finish() error {
	c.release() // a caller that never waited
	if c.finish == nil {
		return nil
	}
	f := c.finish
	c.finish = nil
	return f()
}

// Command prepares req under the sandbox. The caller sets Stdin, Stdout
// and Stderr before Start.
func (s *Sandbox) Command(ctx context.Context, req Request) (*Cmd, error) {
	if err := s.Err(); err != nil {
		return nil, err
	}
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return nil, errors.New("sandbox: empty command")
	}
	if req.Work == "" || req.Work[0] != '/' || req.Dir == "" || req.Dir[0] != '/' {
		return nil, errors.New("sandbox: work and dir must be absolute")
	}
	if !within(req.Dir, req.Work) {
		return nil, fmt.Errorf("sandbox: the working directory %s is outside the worktree %s", req.Dir, req.Work)
	}
	for _, m := range req.Mask {
		if m == "" || m[0] != '/' || m == req.Work || !within(m, req.Work) {
			return nil, fmt.Errorf("sandbox: a masked path must lie inside the worktree: %q", m)
		}
		if within(req.Dir, m) {
			return nil, fmt.Errorf("sandbox: the working directory %s is masked", req.Dir)
		}
	}
	for _, d := range req.Deps.dirs() {
		if d == "" || d[0] != '/' || within(d, req.Work) || within(req.Work, d) {
			return nil, fmt.Errorf("sandbox: a dependency cache must be an absolute directory outside the worktree: %q", d)
		}
	}
	for _, a := range req.Allow {
		if _, err := ParseRule(a); err != nil {
			return nil, fmt.Errorf("sandbox: network allow-list: %w", err)
		}
	}
	req.Limits = req.Limits.Or(s.limits)
	switch s.mech {
	case None:
		return s.unconfined(req), nil
	case Bwrap:
		return s.bwrapCommand(ctx, req)
	case Landlock:
		return s.landlockCommand(ctx, req)
	}
	return nil, s.Err()
}

// envWith returns env with the given variables set (replacing any
// previous value), sorted by name for stable output.
func envWith(env []string, set map[string]string) []string {
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range set {
		if v != "" {
			out = append(out, k+"="+v)
		}
	}
	sort.Strings(out)
	return out
}

// pidsKind says how the process limit is enforced.
type pidsKind string

const (
	// pidsCgroup: a pids cgroup per command (exact, kills the tree too).
	pidsCgroup pidsKind = "pids cgroup"
	// pidsRlimit: RLIMIT_NPROC inside the sandbox's user namespace
	// (exact: it counts only the sandbox's tasks).
	pidsRlimit pidsKind = "rlimit"
	// pidsRlimitShared: RLIMIT_NPROC counts every task of the uid, so the
	// limit is added to the uid's tasks when the command starts.
	pidsRlimitShared pidsKind = "rlimit (shared with the uid)"
	// pidsNone: not enforced (root, which RLIMIT_NPROC exempts, without
	// a writable pids cgroup).
	pidsNone pidsKind = "none"
)

// pidsLimit is the process limit's enforcement.
type pidsLimit struct {
	kind   pidsKind
	parent string // cgroup directory commands' cgroups are made in
	why    string
}

// bwrapFeatures are options of the installed bwrap that older versions lack.
type bwrapFeatures struct {
	disableUserns bool // --disable-userns (0.8)
	size          bool // --size for --tmpfs (0.8)
}

package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/agentos/agentos/kernel/argv"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/sandbox"
)

// RunSpec is one process to run.
type RunSpec struct {
	Argv      []string
	Cwd       string // workspace-relative; "" is the root
	Timeout   time.Duration
	MaxOutput int    // bytes kept of stdout and of stderr, each
	Stdin     []byte // optional
	// Env are extra "NAME=value" entries for this process only, added
	// after the scrubbed environment (hook commands get
	// CLAUDE_PROJECT_DIR this way). The caller decides them; they are
	// never read from the server's environment.
	Env []string
}

// RunResult is what a process did.
type RunResult struct {
	ExitCode   int    `json:"exit_code"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	DurationMS int64  `json:"duration_ms"`
	Truncated  bool   `json:"truncated"`
	TimedOut   bool   `json:"timed_out"`
}

// TruncationMarker ends output that hit the cap.
const TruncationMarker = "\n[output truncated by agentos: limits.maxStdout]\n"

// baseEnv are passed through from the server's environment when set; build
// tools need them to find their caches. Secrets are never in this list.
var baseEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "GOPATH", "GOCACHE", "GOMODCACHE", "GOFLAGS", "GOPROXY", "GOTOOLCHAIN", "GOROOT", "CGO_ENABLED", "NODE_PATH", "npm_config_cache", "PYTHONPATH", "VIRTUAL_ENV", "CI"}

// Env builds a process environment: the base list plus the workspace's
// EnvAllow names, never a name that looks like a secret unless EnvAllow
// names it explicitly. It returns the entries and the names passed.
func (w *Root) Env() (env, names []string) {
	explicit := map[string]bool{}
	for _, n := range w.opts.EnvAllow {
		explicit[n] = true
	}
	seen := map[string]bool{}
	add := func(n string) {
		if seen[n] {
			return
		}
		seen[n] = true
		v, ok := os.LookupEnv(n)
		if !ok {
			return
		}
		if !explicit[n] && w.opts.SecretName != nil && w.opts.SecretName(n) {
			return
		}
		env = append(env, n+"="+v)
		names = append(names, n)
	}
	for _, n := range baseEnv {
		add(n)
	}
	for _, n := range w.opts.EnvAllow {
		add(n)
	}
	env = append(env, "AGENTOS=1", "TERM=dumb", "GIT_TERMINAL_PROMPT=0")
	return env, names
}

// capWriter keeps the first n bytes and counts the rest.
type capWriter struct {
	buf     bytes.Buffer
	n       int
	dropped int
}

func (c *capWriter) Write(p []byte) (int, error) {
	if room := c.n - c.buf.Len(); room > 0 {
		if len(p) <= room {
			c.buf.Write(p)
		} else {
			c.buf.Write(p[:room])
			c.dropped += len(p) - room
		}
	} else {
		c.dropped += len(p)
	}
	return len(p), nil
}

func (c *capWriter) String() string {
	if c.dropped > 0 {
		return c.buf.String() + TruncationMarker
	}
	return c.buf.String()
}

// Run starts argv (no shell) in the jail, confined by the workspace's
// sandbox, and waits for it. A timeout kills the whole process tree and
// returns a TIMEOUT error carrying the partial result; a non-zero exit is
// a result, not an error. Without a usable sandbox nothing starts and the
// error (SANDBOX_UNAVAILABLE) names the fix.
func (w *Root) Run(ctx context.Context, spec RunSpec) (RunResult, error) {
	return w.run(ctx, spec, w.opts.Network, w.deps.Load())
}

// run is Run with the network allow-list and dependency caches given
// (RunSetup gives the setup phase's).
func (w *Root) run(ctx context.Context, spec RunSpec, allow []string, deps *sandbox.DepCaches) (RunResult, error) {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return RunResult{}, errors.New("empty command")
	}
	if err := w.SandboxErr(); err != nil {
		return RunResult{}, sandboxUnavailable(err)
	}
	cwd := "."
	if spec.Cwd != "" {
		r, err := w.Resolve(spec.Cwd)
		if err != nil {
			return RunResult{}, err
		}
		fi, err := w.root.Stat(r)
		if err != nil || !fi.IsDir() {
			return RunResult{}, violation(spec.Cwd, "cwd is not a directory in the workspace")
		}
		cwd = r
	}
	if spec.MaxOutput <= 0 {
		spec.MaxOutput = DefaultMaxOutput
	}
	rctx := ctx
	if spec.Timeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, spec.Timeout)
		defer cancel()
	}
	env, _ := w.Env()
	for _, e := range spec.Env {
		if i := strings.IndexByte(e, '='); i <= 0 {
			return RunResult{}, fmt.Errorf("environment entry %q is not NAME=value", e)
		}
	}
	env = append(env, spec.Env...)
	dir := w.dir
	if cwd != "." {
		dir = w.dir + "/" + cwd
	}
	cmd, err := w.opts.Sandbox.Command(ctx, sandbox.Request{Argv: spec.Argv, Work: w.dir, Dir: dir, Env: env, Allow: allow, Limits: w.opts.Limits, Mask: w.Masked(), Data: w.Excluded(), Deps: deps})
	if err != nil {
		if errors.Is(err, sandbox.ErrUnavailable) {
			return RunResult{}, sandboxUnavailable(err)
		}
		return RunResult{}, &kernel.Error{Kind: "sandbox", Code: kernel.CodeToolRuntimeError, Message: "cannot prepare the sandbox: " + err.Error(), Err: err}
	}
	stdout, stderr := &capWriter{n: spec.MaxOutput}, &capWriter{n: spec.MaxOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if spec.Stdin != nil {
		cmd.Stdin = bytes.NewReader(spec.Stdin)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		ferr := cmd.Finish()
		return RunResult{}, &kernel.Error{Kind: "runtime", Code: kernel.CodeToolRuntimeError, Message: fmt.Sprintf("cannot start %s", spec.Argv[0]), Err: errors.Join(err, ferr)}
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	timedOut := false
	select {
	case err = <-waitErr:
	case <-rctx.Done():
		timedOut = true
		// The sandbox kills the whole tree: children that ignore SIGTERM,
		// double-fork or start a new session die too.
		cmd.Kill()
		err = <-waitErr
	}
	// Release the sandbox (and, where .git could not be read-only, check
	// that the command left its control files alone).
	finishErr := cmd.Finish()
	res := RunResult{Stdout: stdout.String(), Stderr: stderr.String(), DurationMS: time.Since(start).Milliseconds(), Truncated: stdout.dropped > 0 || stderr.dropped > 0, TimedOut: timedOut}
	var ee *exec.ExitError
	switch {
	case timedOut:
		res.ExitCode = -1
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
	case err != nil:
		return res, &kernel.Error{Kind: "runtime", Code: kernel.CodeToolRuntimeError, Message: "wait failed", Err: err}
	}
	var tamper *sandbox.GitTamperError
	switch {
	case errors.As(finishErr, &tamper):
		return res, &kernel.Error{Kind: "jail", Code: kernel.CodeJailViolation, Message: tamper.Error(), Details: res}
	case finishErr != nil:
		return res, &kernel.Error{Kind: "sandbox", Code: kernel.CodeToolRuntimeError, Message: "sandbox cleanup failed: " + finishErr.Error(), Details: res, Err: finishErr}
	case timedOut:
		return res, &kernel.Error{Kind: "runtime", Code: kernel.CodeTimeout, Message: fmt.Sprintf("%s did not finish within %s; the process tree was killed", spec.Argv[0], spec.Timeout), Details: res}
	case sandbox.SetupFailed(res.ExitCode, res.Stderr):
		return res, &kernel.Error{Kind: "sandbox", Code: kernel.CodeSandboxUnavailable, Message: "the sandbox could not start the command: " + strings.TrimSpace(res.Stderr), Details: res}
	}
	return res, nil
}

// sandboxUnavailable is the error of a command the sandbox refuses.
func sandboxUnavailable(err error) error {
	return &kernel.Error{Kind: "sandbox", Code: kernel.CodeSandboxUnavailable, Message: err.Error()}
}

// SandboxErr is non-nil when processes are refused (kernel.Confinement).
func (w *Root) SandboxErr() error {
	return w.opts.Sandbox.Err()
}

// SandboxProfile describes what a process started by Run can see and do
// (kernel.Confinement; recorded in tool.invoke).
func (w *Root) SandboxProfile() any {
	p := w.opts.Sandbox.Profile(w.dir, w.opts.Network, w.opts.Limits, w.Excluded()...)
	if p.Mechanism != sandbox.None && p.Mechanism != sandbox.Unavailable {
		p.MaskedPatterns = append([]string(nil), w.opts.DenyPatterns...)
		if d := w.deps.Load(); d != nil {
			p.ReadOnly = append(p.ReadOnly, d.GoMod+" (the repository's Go module cache)", d.NPM+" (the repository's npm cache)")
		}
	}
	return p
}

// SplitCommand splits a command line into the argv process.run starts
// (argv.Split): shell-like quoting, no expansion, metacharacters literal.
func SplitCommand(s string) ([]string, error) { return argv.Split(s) }

// IsShell reports whether argv is an explicit shell invocation (sh -c,
// bash -c, ...), which policy must allow separately.
func IsShell(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	base := argv[0][strings.LastIndexByte(argv[0], '/')+1:]
	switch base {
	case "sh", "bash", "zsh", "dash", "ksh", "fish", "busybox":
		return true
	}
	return false
}

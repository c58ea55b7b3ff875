// Package setup assembles everything one session's run needs on a working
// tree — the workspace jail, the layered policy, the kernel with its
// capability tools, hooks, skills and the provider — so that the CLI, the
// webhook server and the GitHub Action build runs the same way.
//
// The provider registry is passed in: it is built explicitly by the
// caller (cmd), never filled from init().
package setup

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/policy"
	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/tools"
	"github.com/agentos/agentos/kernel/workspace"
	"github.com/agentos/agentos/runtime/claudecode"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/hooks"
	"github.com/agentos/agentos/runtime/mcp"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/skills"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/workflow"
	"github.com/agentos/agentos/runtime/workflow/cycle"
	"github.com/agentos/agentos/schemas"
	builtinskills "github.com/agentos/agentos/skills"
)

// Options says what to assemble.
type Options struct {
	// Dir is the working tree the kernel is jailed in.
	Dir string
	// PolicyFile is the operator's policy.yaml ("" for the built-in
	// defaults); the repository's .agent/policy.yaml may only tighten it.
	PolicyFile string
	Profile    provider.Profile
	Providers  provider.Registry
	SessionID  string
	// Store feeds adaptive trust (per-repository approval counters); the
	// session's config.warning events are read from it (recorded once).
	Store store.Store
	// DataDir is agentos's data directory (store, exported session logs).
	// When it lies inside Dir, the kernel's repository tools cannot see it:
	// the model must not read its own event logs or write into them.
	DataDir string
	// Exclude lists more paths (absolute) the kernel's repository tools
	// cannot see: agentos mcp serve's events file and its directory.
	Exclude []string
	// UntrustedRepo skips the repository's own command hooks
	// (.agent/settings.json, .claude/settings.json): set it when the
	// working tree holds code from outside the repository (a fork's pull
	// request), whose hooks must not run with the bot's authority.
	UntrustedRepo bool
	// Sandbox confines every command the kernel starts (exec tools and
	// hook commands). Nil detects one as AGENTOS_SANDBOX says (auto by
	// default); processes detect once (Sandbox) and pass it here.
	Sandbox *sandbox.Sandbox
	// Runs is the run manager the session's runs start with: when set,
	// Build assembles the workflow plane over it (Env.Workflows, the
	// engine's Plane), so that a cycle run starts, resumes and is taken
	// over the same way in the CLI, the API, the bot and the Action. The
	// plane's cycles must start through the manager that tracks the
	// session's other runs (one lock, one cancel), hence passed in.
	Runs *run.Manager
	// RequireWorkflows fails Build when the repository's workflow
	// definitions (.agent/workflows) do not load: the bot, where every
	// run is a cycle, fails closed. Otherwise the plane is left out and
	// Notes says why (the CLI's plain runs go on).
	RequireWorkflows bool
}

// Env is one session's assembled runtime. Close releases it.
type Env struct {
	Workspace *workspace.Root
	Sandbox   *sandbox.Sandbox
	Policy    *policy.Policy
	Kernel    *kernel.Kernel
	Hooks     *hooks.Registry
	Engine    *run.Engine
	Redactor  *redact.Redactor
	// MCP is the session's mounted MCP servers (.mcp.json): started
	// lazily, stopped by Close.
	MCP *mcp.Mount
	// Notes are things the operator should know (skipped skills, ignored
	// hook settings).
	Notes []string
	// Warnings are what the repository's Claude Code settings ask for and
	// agentos does not do as written (a rule it cannot enforce, allow
	// rules, additionalDirectories): each is also in Notes, and a run
	// records them as config.warning events.
	Warnings []claudecode.Warning
	// Notices are recorded by the session's runs (the engine's): the
	// warnings, and MCP servers that fail to start.
	Notices *run.Notices
	// Workflows is the workflow plane (with Options.Runs): the built-in
	// cycles plus the repository's .agent/workflows, read through the
	// workspace jail; the built-in cycles only for untrusted code. The
	// engine's Plane is it. Nil when Options.Runs is nil or the
	// repository's definitions do not load (WorkflowsErr).
	Workflows *cycle.Executor
	// WorkflowsErr is why the repository's workflow definitions did not
	// load (the file and field).
	WorkflowsErr error
}

// Close stops the session's MCP servers and releases the workspace.
func (e *Env) Close() {
	if e.MCP != nil {
		e.MCP.Close()
	}
	if e.Workspace != nil {
		e.Workspace.Close()
	}
}

// UsageError is an error in what the caller asked for (a missing working
// tree, an unreadable policy file, an unknown provider).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// LoadPolicy layers the policy: built-in defaults, the operator's file
// (which may loosen), then the repository's .agent/policy.yaml in ws (which
// may only tighten).
func LoadPolicy(operatorFile string, ws *workspace.Root) (*policy.Policy, error) {
	p := policy.Default()
	if operatorFile != "" {
		f, err := os.Open(operatorFile)
		if err != nil {
			return nil, &UsageError{fmt.Errorf("policy: %w", err)}
		}
		defer f.Close()
		if p, err = policy.Parse(operatorFile, f); err != nil {
			return nil, err
		}
	}
	if ws != nil {
		if b, err := ws.ReadFile(".agent/policy.yaml"); err == nil {
			repo, err := policy.Parse(".agent/policy.yaml", strings.NewReader(string(b)))
			if err != nil {
				return nil, err
			}
			p = policy.Merge(p, repo)
		}
	}
	return p, nil
}

// HookRunner runs hook commands through the workspace's process runner:
// in the sandbox, with a scrubbed environment, the process tree killed at
// the end, capped output. Hook commands are shell command lines by
// definition (Claude Code's settings.json).
type HookRunner struct{ WS *workspace.Root }

// RunHook implements hooks.Runner.
func (h HookRunner) RunHook(ctx context.Context, dir, command string, env []string, stdin []byte) ([]byte, []byte, int, error) {
	if dir == "" {
		// An event fired without a working directory still runs in this
		// worktree, and Claude Code's hooks find their scripts through it.
		env = append(env, hooks.Env(h.WS.Root())...)
	}
	res, err := h.WS.Run(ctx, workspace.RunSpec{Argv: []string{"sh", "-c", command}, Stdin: stdin, Env: env, MaxOutput: 1 << 20})
	if err != nil {
		return nil, nil, -1, err
	}
	return []byte(res.Stdout), []byte(res.Stderr), res.ExitCode, nil
}

// Kernel assembles the kernel of a session's working tree o.Dir, as
// Build does for a run and without a model: the workspace jail (o.DataDir
// and o.Exclude hidden from the tools), the layered policy, the
// repository's Claude Code permissions, the hooks, and the capability
// tools. agentos tool and agentos mcp serve call tools through it; Build
// adds the rest of a run. o.Providers, Runs and RequireWorkflows are not
// used. Close releases it.
func Kernel(ctx context.Context, o Options) (*Env, error) {
	if o.Dir == "" {
		return nil, &UsageError{fmt.Errorf("a working tree is required")}
	}
	base, err := LoadPolicy(o.PolicyFile, nil)
	if err != nil {
		return nil, err
	}
	sb := o.Sandbox
	if sb == nil {
		if sb, err = Sandbox(ctx, os.Getenv); err != nil {
			return nil, &UsageError{err}
		}
	}
	red := redact.New(base.Redaction.Keys)
	red.AddLiteral(o.Profile.APIKey)
	var exclude []string
	if o.DataDir != "" {
		abs, err := filepath.Abs(o.DataDir)
		if err != nil {
			return nil, &UsageError{fmt.Errorf("data directory: %w", err)}
		}
		exclude = append(exclude, abs)
	}
	exclude = append(exclude, o.Exclude...)
	// Open once with the operator's policy to read the repository's, then
	// again with the merged deny patterns, environment allow-list, network
	// allow-list and process limits.
	ws, err := workspace.Open(o.Dir, workspace.Options{DenyPatterns: base.Workspace.DenyPatterns, EnvAllow: base.Execution.EnvAllow, SecretName: red.IsSecretName, Exclude: exclude})
	if err != nil {
		return nil, &UsageError{err}
	}
	pol, err := LoadPolicy(o.PolicyFile, ws)
	var perms *claudecode.Permissions
	if err == nil {
		perms, pol, err = claudePermissions(ws, pol, o.UntrustedRepo)
	}
	ws.Close()
	if err != nil {
		return nil, err
	}
	if ws, err = workspace.Open(o.Dir, workspace.Options{DenyPatterns: pol.Workspace.DenyPatterns, EnvAllow: pol.Execution.EnvAllow, SecretName: red.IsSecretName, Exclude: exclude, Sandbox: sb, Network: pol.Network.Allow, Limits: pol.SandboxLimits(), UntrustedCode: o.UntrustedRepo}); err != nil {
		return nil, err
	}
	e := &Env{Workspace: ws, Sandbox: sb, Policy: pol, Redactor: red, Warnings: perms.Warnings, Notices: &run.Notices{}}
	e.Notes = append(e.Notes, SandboxNotes(sb)...)
	for _, w := range perms.Warnings {
		e.Notes = append(e.Notes, "WARNING: "+w.String())
	}
	// Once per session: a resumed session's log holds them already.
	queueWarnings(ctx, o.Store, o.SessionID, e.Notices, perms.Warnings)
	e.Hooks = hooks.NewRegistry()
	e.Hooks.Builtins()
	if o.UntrustedRepo {
		e.Notes = append(e.Notes, "repository hooks not loaded: the working tree holds untrusted code")
	} else {
		notes, err := e.Hooks.LoadSettings(ws.FS(), HookRunner{WS: ws}, ".agent/settings.json", ".claude/settings.json")
		if err != nil {
			e.Close()
			return nil, err
		}
		e.Notes = append(e.Notes, notes...)
	}
	timeouts := map[string]time.Duration{}
	for _, name := range []string{"process.run", "test.run", "lint.run"} {
		timeouts[name] = pol.Timeout(name)
	}
	e.Kernel = kernel.New(pol, ws, hooks.ForKernel{R: e.Hooks, SessionID: o.SessionID, Cwd: ws.Root()})
	e.Kernel.Redact = red.String
	e.Kernel.Permissions = perms.Rules
	e.Kernel.Preapprove = perms.Preapprover()
	if o.Store != nil {
		e.Kernel.Trust = run.TrustFromStore(ctx, o.Store)
	}
	for _, d := range tools.Defs(ws, tools.Options{AllowShell: pol.Execution.AllowShell, Timeouts: timeouts}) {
		if err := e.Kernel.Register(d); err != nil {
			e.Close()
			return nil, err
		}
	}
	return e, nil
}

// Build assembles the runtime for o.Dir: Kernel's kernel, then the
// skills, the provider, the repository's MCP servers, the engine and
// (with o.Runs) the workflow plane.
func Build(ctx context.Context, o Options) (*Env, error) {
	e, err := Kernel(ctx, o)
	if err != nil {
		return nil, err
	}
	pol, ws := e.Policy, e.Workspace
	var toolNames []string
	for _, d := range e.Kernel.Tools() {
		toolNames = append(toolNames, d.Name)
	}
	// Untrusted code (a fork's pull request) gets the built-in skills, role
	// prompts and no repository memory: its .agent/skills, .claude/skills,
	// .agent/roles and .agent/memory.md would be instructions in the
	// system prompt, written by whoever opened the pull request.
	roots := []skills.Root{{Name: "builtin", FS: builtinskills.FS}}
	var repoFS fs.FS = ws.FS()
	if o.UntrustedRepo {
		repoFS = nil
		e.Notes = append(e.Notes, "repository skills, role prompts and memory not loaded: the working tree holds untrusted code")
	} else {
		roots = append(roots, skills.Root{Name: ".agent/skills", FS: ws.FS(), Dir: ".agent/skills"},
			skills.Root{Name: ".claude/skills", FS: ws.FS(), Dir: ".claude/skills"})
	}
	sk, problems := skills.Discover(schemas.MustDefault(), roots...)
	for _, p := range problems {
		e.Notes = append(e.Notes, "skill skipped: "+p.String())
	}
	prov, err := o.Providers.New(ctx, o.Profile)
	if err != nil {
		e.Close()
		return nil, &UsageError{err}
	}
	prov = provider.Checked{P: provider.Priced{P: prov, Pricing: provider.PricingFor(o.Profile)}, Reg: schemas.MustDefault()}
	var tools run.Tools = run.KernelTools{K: e.Kernel}
	if mt, notes, err := mountMCP(o, e); err != nil {
		e.Close()
		return nil, err
	} else if mt != nil {
		tools = mt
		e.Notes = append(e.Notes, notes...)
	} else {
		e.Notes = append(e.Notes, notes...)
	}
	// A hook whose matcher selects no tool never fires, and a skill's
	// allowed tool that names nothing is unusable: a security hook that
	// silently does not apply is fail-open, so say so at load time. A
	// mounted MCP server's tools are listed only when it starts (lazily):
	// what names one of its tools is not reported.
	var servers []string
	var mcpScope []string
	if e.MCP != nil {
		servers = e.MCP.Servers()
		for _, n := range servers {
			mcpScope = append(mcpScope, "mcp."+n+".*")
		}
	}
	e.Notes = append(e.Notes, e.Hooks.MatcherNotes(toolNames, servers)...)
	e.Notes = append(e.Notes, sk.ToolNotes(toolNames, servers)...)
	e.Engine = &run.Engine{Provider: prov, Tools: tools, Hooks: e.Hooks, Skills: sk, Schemas: schemas.MustDefault(), Profile: o.Profile, Repo: repoFS, PolicyNoRepair: !pol.GuardRepair(), DefaultScopeExtra: mcpScope, Notices: e.Notices}
	if o.Runs != nil {
		if err := e.plane(o); err != nil {
			e.Close()
			return nil, err
		}
	}
	return e, nil
}

// plane assembles the workflow plane over o.Runs and makes it the
// engine's Plane. The repository's definitions are read through the
// workspace jail (ws.FS); untrusted code gets the built-in plane only:
// its .agent/workflows were written by whoever opened the pull request.
func (e *Env) plane(o Options) error {
	sources := []workflow.Source{workflow.Builtin()}
	if !o.UntrustedRepo {
		sources = append(sources, workflow.RepoSource(e.Workspace.FS()))
	}
	reg, err := workflow.Load(schemas.MustDefault(), sources...)
	if err != nil {
		if o.RequireWorkflows {
			return err
		}
		e.WorkflowsErr = err
		e.Notes = append(e.Notes, "workflow plane not loaded: "+strings.SplitN(err.Error(), "\n", 2)[0])
		return nil
	}
	// The engine and the executor share one Engine value, so what a host
	// sets on Env.Engine afterwards (tool limits) holds for cycles too.
	e.Workflows = &cycle.Executor{Registry: reg, Manager: o.Runs, Engine: e.Engine, Schemas: schemas.MustDefault()}
	e.Engine.Plane = e.Workflows
	return nil
}

// mountMCP mounts the repository's .mcp.json servers: nothing starts
// here. The engine seeds the tools a run's recorded history offered the
// model (a resumed or re-executed run starts a server only when it calls
// one of its tools live); the others are listed when the Worker first
// needs its tools. A configuration that cannot be used mounts nothing and
// says why.
func mountMCP(o Options, e *Env) (*mcp.Tools, []string, error) {
	var notes []string
	prof, err := mcp.FromProfile(o.Profile.MCPServers)
	if err != nil {
		return nil, nil, &UsageError{err}
	}
	repo, err := mcp.ReadConfigFile(e.Workspace.ReadFile)
	switch {
	case err != nil:
		notes = append(notes, "MCP servers of the repository not mounted: "+err.Error())
		repo = nil
	case repo != nil && len(repo.Servers) > 0 && o.UntrustedRepo:
		notes = append(notes, "MCP servers of "+mcp.ConfigFile+" not mounted: the working tree holds untrusted code")
		repo = nil
	}
	cfg, shadowed := mcp.Merge(repo, prof)
	for _, n := range shadowed {
		notes = append(notes, fmt.Sprintf("MCP server %s: the profile's definition replaces %s's", n, mcp.ConfigFile))
	}
	if len(cfg.Servers) == 0 {
		return nil, notes, nil
	}
	red := e.Redactor
	e.MCP = mcp.NewMount(cfg, mcp.Options{
		Starter:  e.Workspace,
		Expander: mcp.Expander{Allow: e.Policy.Execution.EnvAllow, Getenv: os.Getenv, Secret: red.HasLiteral},
		Network:  e.Policy.Network.Allow,
		Redact:   red.String,
	})
	t := &mcp.Tools{KernelTools: run.KernelTools{K: e.Kernel}, M: e.MCP, Notes: func(n string) { fmt.Fprintln(os.Stderr, "agentos: "+n) },
		Failed: func(f mcp.Failure) { e.Notices.Add(run.Notice{Type: event.MCPServerFailed, Payload: f}) }}
	return t, append(notes, fmt.Sprintf("MCP servers: %s (started on first use)", strings.Join(cfg.Names(), ", "))), nil
}

// EnvGoCache chooses the Go build cache of sandboxed commands: a
// directory shared by every command, or "worktree" for one cache per
// worktree. A command can plant build outputs that later builds sharing
// its cache trust, so a shared cache belongs where every repository is
// trusted alike. The CLI (Sandbox below) shares one per user by default,
// the user being its trust domain; unset, agentos serve and the Action
// keep one per repository for its trusted runs and one per session for
// untrusted ones (docs/security.md, "The sandbox").
const EnvGoCache = "AGENTOS_SANDBOX_GO_CACHE"

// EnvSandboxReadOnly lists extra host paths (separated by ':') that
// sandboxed commands and MCP servers may read: a directory of MCP servers
// installed with npm outside Node's prefix, a toolchain in an odd place.
const EnvSandboxReadOnly = "AGENTOS_SANDBOX_READONLY"

// GoCachePerWorktree is the EnvGoCache value for one cache per worktree.
const GoCachePerWorktree = "worktree"

var (
	sandboxMu sync.Mutex
	sandboxes = map[string]*sandbox.Sandbox{}
)

// Sandbox returns the sandbox for a process that did not set one up
// itself (the CLI, the demo, the Action, tests): the mode comes from
// AGENTOS_SANDBOX (auto, bwrap, landlock or none; empty is auto), and the
// Go build cache from AGENTOS_SANDBOX_GO_CACHE (default: one per user,
// under the user cache directory). It is detected once per process and
// setting. An unknown mode is an error; a sandbox that cannot be set up is
// not (its Err refuses every command and names the fix).
func Sandbox(ctx context.Context, getenv func(string) string) (*sandbox.Sandbox, error) {
	mode, err := sandbox.ParseMode(getenv(sandbox.EnvMode))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sandbox.EnvMode, err)
	}
	gocache := getenv(EnvGoCache)
	switch gocache {
	case GoCachePerWorktree:
		gocache = ""
	case "":
		if d, err := os.UserCacheDir(); err == nil {
			gocache = filepath.Join(d, "agentos", "sandbox", "go-build")
		}
	}
	var ro []string
	for _, p := range filepath.SplitList(getenv(EnvSandboxReadOnly)) {
		if p != "" {
			ro = append(ro, p)
		}
	}
	key := string(mode) + "\x00" + gocache + "\x00" + strings.Join(ro, "\x00")
	sandboxMu.Lock()
	defer sandboxMu.Unlock()
	if s, ok := sandboxes[key]; ok {
		return s, nil
	}
	s := sandbox.Detect(ctx, sandbox.Config{Mode: mode, GoCache: gocache, Getenv: getenv, ReadOnly: ro})
	sandboxes[key] = s
	return s, nil
}

// SandboxNotes say what the operator must know about the sandbox: that
// commands run unconfined, or are refused and why.
func SandboxNotes(sb *sandbox.Sandbox) []string {
	switch r := sb.Report(); {
	case r.Mechanism == sandbox.None:
		return []string{"WARNING: " + r.Warning}
	case !r.Ready:
		return []string{"commands and hook commands are refused: " + r.Error}
	case r.Warning != "":
		return []string{"sandbox " + string(r.Mechanism) + ": " + r.Warning}
	}
	return nil
}

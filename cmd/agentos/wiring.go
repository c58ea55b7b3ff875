package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/policy"
	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/kernel/tools"
	"github.com/agentos/agentos/kernel/workspace"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/hooks"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/anthropic"
	"github.com/agentos/agentos/runtime/provider/gemini"
	"github.com/agentos/agentos/runtime/provider/openai"
	"github.com/agentos/agentos/runtime/provider/scripted"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/skills"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
	builtinskills "github.com/agentos/agentos/skills"
)

// providers is the provider registry, built explicitly. The real adapters
// take everything from the profile (model, base_url, the API key from the
// environment, max_tokens, temperature, retries, timeout); a missing key is
// an error, except for openai with a base_url (a local compatible server).
func providers(script *scripted.Script) provider.Registry {
	return provider.Registry{
		"scripted": func(ctx context.Context, p provider.Profile) (provider.Provider, error) {
			if script != nil {
				return scripted.New(script), nil
			}
			s, err := scripted.Load(p.Script)
			if err != nil {
				return nil, err
			}
			return scripted.New(s), nil
		},
		"openai": func(ctx context.Context, p provider.Profile) (provider.Provider, error) {
			a, err := openai.New(p, openai.Options{Stream: p.Stream})
			if err != nil {
				return nil, err
			}
			return a, nil
		},
		"anthropic": func(ctx context.Context, p provider.Profile) (provider.Provider, error) {
			a, err := anthropic.New(p, anthropic.Options{Stream: p.Stream})
			if err != nil {
				return nil, err
			}
			return a, nil
		},
		"gemini": func(ctx context.Context, p provider.Profile) (provider.Provider, error) {
			a, err := gemini.New(ctx, p, gemini.Options{Stream: p.Stream})
			if err != nil {
				return nil, err
			}
			return a, nil
		},
	}
}

// loadPolicy layers: built-in defaults, the operator's file (--policy,
// which may loosen), then the repository's .agent/policy.yaml (which may
// only tighten).
func loadPolicy(operatorFile string, ws *workspace.Root) (*policy.Policy, error) {
	p := policy.Default()
	if operatorFile != "" {
		f, err := os.Open(operatorFile)
		if err != nil {
			return nil, usageErrorf("policy: %v", err)
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

// runtimeEnv is everything one session's run needs.
type runtimeEnv struct {
	store    store.Store
	ws       *workspace.Root
	kernel   *kernel.Kernel
	hooks    *hooks.Registry
	engine   *agentrun.Engine
	mgr      *agentrun.Manager
	redactor *redact.Redactor
	notes    []string
}

func (r *runtimeEnv) Close() {
	if r.ws != nil {
		r.ws.Close()
	}
	if r.store != nil {
		r.store.Close()
	}
}

// hookRunner runs hook commands through the workspace's process runner:
// scrubbed environment, process-group kill, capped output. Hook commands
// are shell command lines by definition (Claude Code's settings.json).
type hookRunner struct{ ws *workspace.Root }

func (h hookRunner) RunHook(ctx context.Context, dir, command string, stdin []byte) ([]byte, []byte, int, error) {
	res, err := h.ws.Run(ctx, workspace.RunSpec{Argv: []string{"sh", "-c", command}, Stdin: stdin, MaxOutput: 1 << 20})
	if err != nil {
		return nil, nil, -1, err
	}
	return []byte(res.Stdout), []byte(res.Stderr), res.ExitCode, nil
}

type envOptions struct {
	repo       string
	dataDir    string
	policyFile string
	profile    provider.Profile
	script     *scripted.Script // overrides the profile's script file
	sessionID  string
}

func buildRuntime(ctx context.Context, o envOptions) (*runtimeEnv, error) {
	if o.repo == "" {
		return nil, usageErrorf("--repo DIR is required")
	}
	base, err := loadPolicy(o.policyFile, nil)
	if err != nil {
		return nil, err
	}
	red := redact.New(base.Redaction.Keys)
	red.AddLiteral(o.profile.APIKey)
	ws, err := workspace.Open(o.repo, workspace.Options{DenyPatterns: base.Workspace.DenyPatterns, EnvAllow: base.Execution.EnvAllow, SecretName: red.IsSecretName})
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	pol, err := loadPolicy(o.policyFile, ws)
	if err != nil {
		ws.Close()
		return nil, err
	}
	ws.Close()
	if ws, err = workspace.Open(o.repo, workspace.Options{DenyPatterns: pol.Workspace.DenyPatterns, EnvAllow: pol.Execution.EnvAllow, SecretName: red.IsSecretName}); err != nil {
		return nil, err
	}
	r := &runtimeEnv{ws: ws, redactor: red}
	sealer, err := event.NewSealer(schemas.MustDefault(), red, nil)
	if err != nil {
		r.Close()
		return nil, err
	}
	if r.store, err = openStore(o.dataDir, sealer); err != nil {
		r.Close()
		return nil, err
	}
	r.hooks = hooks.NewRegistry()
	r.hooks.Builtins()
	notes, err := r.hooks.LoadSettings(ws.FS(), hookRunner{ws}, ".agent/settings.json", ".claude/settings.json")
	if err != nil {
		r.Close()
		return nil, err
	}
	r.notes = notes
	timeouts := map[string]time.Duration{}
	for _, name := range []string{"process.run", "test.run", "lint.run"} {
		timeouts[name] = pol.Timeout(name)
	}
	r.kernel = kernel.New(pol, ws, hooks.ForKernel{R: r.hooks, SessionID: o.sessionID, Cwd: ws.Root()})
	r.kernel.Redact = red.String
	r.kernel.Trust = agentrun.TrustFromStore(ctx, r.store)
	for _, d := range tools.Defs(ws, tools.Options{AllowShell: pol.Execution.AllowShell, Timeouts: timeouts}) {
		if err := r.kernel.Register(d); err != nil {
			r.Close()
			return nil, err
		}
	}
	sk, problems := skills.Discover(schemas.MustDefault(),
		skills.Root{Name: "builtin", FS: builtinskills.FS},
		skills.Root{Name: ".agent/skills", FS: ws.FS(), Dir: ".agent/skills"},
		skills.Root{Name: ".claude/skills", FS: ws.FS(), Dir: ".claude/skills"})
	for _, p := range problems {
		r.notes = append(r.notes, "skill skipped: "+p.String())
	}
	prov, err := providers(o.script).New(ctx, o.profile)
	if err != nil {
		r.Close()
		return nil, usageErrorf("%v", err)
	}
	prov = provider.Checked{P: provider.Priced{P: prov, Pricing: o.profile.Pricing}, Reg: schemas.MustDefault()}
	r.engine = &agentrun.Engine{Provider: prov, Tools: agentrun.KernelTools{K: r.kernel}, Hooks: r.hooks, Skills: sk, Schemas: schemas.MustDefault(), Profile: o.profile, Repo: ws.FS()}
	r.mgr = agentrun.NewManager(r.store)
	return r, nil
}

// exportSession writes the session's events.jsonl artifact under the data
// directory and returns its path.
func exportSession(ctx context.Context, s store.Store, dataDir, sessionID string) (string, error) {
	path := filepath.Join(dataDir, "sessions", sessionID, "events.jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return "", err
	}
	if _, err := store.Export(ctx, s, sessionID, f); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// printOutcome prints a run's outcome for people.
func printOutcome(w io.Writer, out agentrun.Outcome, logPath string) {
	fmt.Fprintf(w, "session  %s\nrun      %s\nstatus   %s\n", out.SessionID, out.RunID, out.Status)
	for _, p := range out.Pending {
		fmt.Fprintf(w, "approval %s needed for %s (digest %.12s…)\n", p.ApprovalID, p.Tool, p.Digest)
		fmt.Fprintf(w, "         answer: agentos approve %s %s   or   agentos deny %s %s --reason \"...\"\n", out.SessionID, p.ApprovalID, out.SessionID, p.ApprovalID)
	}
	if t := out.Terminal; t != nil {
		fmt.Fprintf(w, "terminal %s", t.Status)
		if t.ErrorClass != "" {
			fmt.Fprintf(w, " (%s)", t.ErrorClass)
		}
		if t.Reason != "" {
			fmt.Fprintf(w, ": %s", t.Reason)
		}
		fmt.Fprintf(w, "\n         next: %s\n", t.NextAction)
	}
	if out.Output != "" {
		fmt.Fprintf(w, "output   %s\n", out.Output)
	}
	if logPath != "" {
		fmt.Fprintf(w, "log      %s\n", logPath)
	}
}

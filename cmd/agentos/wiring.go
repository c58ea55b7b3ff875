package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/policy"
	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/kernel/workspace"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/hooks"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/anthropic"
	"github.com/agentos/agentos/runtime/provider/gemini"
	"github.com/agentos/agentos/runtime/provider/openai"
	"github.com/agentos/agentos/runtime/provider/scripted"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/setup"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/workflow/cycle"
	"github.com/agentos/agentos/schemas"
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

// preflight builds the profile's provider and checks, with
// provider.Preflight (cached successes), that its endpoint answers,
// accepts the key and serves the model. The scripted provider has nothing
// to check.
func preflight(ctx context.Context, prof provider.Profile) error {
	if prof.Provider == "scripted" {
		return nil
	}
	p, err := providers(nil).New(ctx, prof)
	if err != nil {
		return usageErrorf("%v", err)
	}
	return provider.Preflight(ctx, p)
}

// providerPreflight is the check to run before each new run in a
// long-lived process (the bot's dispatcher): a success is trusted for
// provider.PreflightTTL, so it costs a request now and then, not one per
// run.
func providerPreflight(prof provider.Profile) func(context.Context) error {
	return func(ctx context.Context) error { return preflight(ctx, prof) }
}

// botPreflight is the check the bot's dispatcher runs before a new run,
// before anything is posted to GitHub. A rejected key or an unknown model
// is permanent: no redelivery fixes configuration, so the delivery fails at
// once (and shows in the dead letters). An unreachable endpoint is retried
// with the queue's backoff: a model server may be restarting. A momentary
// unavailability (429, 5xx) lets the run start: its calls retry.
func botPreflight(prof provider.Profile) func(context.Context) error {
	check := providerPreflight(prof)
	return func(ctx context.Context) error {
		err := check(ctx)
		switch {
		case errors.Is(err, provider.ErrKeyRejected) || errors.Is(err, provider.ErrUnknownModel):
			return fmt.Errorf("%w: %w", webhook.ErrPermanent, err)
		case provider.Fatal(err):
			return err
		}
		return nil
	}
}

// checkProvider prints the resolved provider, model and endpoint (never
// the key) and checks the provider before anything else happens: an
// unreachable endpoint, a rejected key or an unknown model is an error
// naming the variable to set; a momentary unavailability (429, 5xx) is a
// warning, since the run retries.
func checkProvider(ctx context.Context, prof provider.Profile, w io.Writer) error {
	fmt.Fprintf(w, "agentos: %s\n", prof.Describe())
	err := preflight(ctx, prof)
	switch {
	case err == nil:
		return nil
	case provider.Fatal(err):
		return usageErrorf("%v", err)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	fmt.Fprintf(w, "agentos: warning: %v (going on: the run retries)\n", err)
	return nil
}

// loadPolicy layers the policy (see setup.LoadPolicy); a policy file that
// cannot be read is a usage error.
func loadPolicy(operatorFile string, ws *workspace.Root) (*policy.Policy, error) {
	p, err := setup.LoadPolicy(operatorFile, ws)
	var ue *setup.UsageError
	if errors.As(err, &ue) {
		return nil, usageErrorf("%v", ue.Err)
	}
	return p, err
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
	// mcp stops the session's MCP servers (nil: none mounted).
	mcp io.Closer
	// workflows runs the workflow plane's cycles (nil: the plane did not
	// load).
	workflows *cycle.Executor
	// unlock releases the session's lock (lockSession).
	unlock func()
}

func (r *runtimeEnv) Close() {
	if r.mcp != nil {
		r.mcp.Close()
	}
	if r.ws != nil {
		r.ws.Close()
	}
	if r.store != nil {
		r.store.Close()
	}
	if r.unlock != nil {
		r.unlock()
	}
}

// hookRunner runs hook commands through the workspace's process runner.
type hookRunner = setup.HookRunner

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
	// The store redacts with the operator's keys and the provider's key.
	red := redact.New(base.Redaction.Keys)
	red.AddLiteral(o.profile.APIKey)
	sealer, err := event.NewSealer(schemas.MustDefault(), red, nil)
	if err != nil {
		return nil, err
	}
	st, err := openStore(o.dataDir, sealer)
	if err != nil {
		return nil, err
	}
	unlock := func() {}
	if o.sessionID != "" {
		if unlock, err = lockSession(o.dataDir, o.sessionID); err != nil {
			st.Close()
			return nil, err
		}
	}
	mgr := agentrun.NewManager(st)
	// A session the store does not hold (the database was deleted) is
	// recovered from its exported log.
	mgr.Logs = agentrun.DirLogs(o.dataDir)
	// The workflow plane executes cycles (agentos workflows run) and
	// resumes paused ones (agentos resume). A plane that does not load
	// leaves workflow runs denied (env.Notes says why); plain runs are
	// unaffected.
	env, err := setup.Build(ctx, setup.Options{Dir: o.repo, DataDir: o.dataDir, PolicyFile: o.policyFile, Profile: o.profile, Providers: providers(o.script), SessionID: o.sessionID, Store: st, Runs: mgr})
	if err != nil {
		unlock()
		st.Close()
		var ue *setup.UsageError
		if errors.As(err, &ue) {
			return nil, usageErrorf("%v", ue.Err)
		}
		return nil, err
	}
	r := &runtimeEnv{store: st, ws: env.Workspace, kernel: env.Kernel, hooks: env.Hooks, engine: env.Engine, mgr: mgr, redactor: env.Redactor, notes: env.Notes, unlock: unlock, workflows: env.Workflows}
	if env.MCP != nil {
		r.mcp = env.MCP
	}
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
// printTerminal prints a run's terminal report, if it has one; the
// reason is the log's text, made safe for a terminal.
func printTerminal(w io.Writer, t *agentrun.Report) {
	if t == nil {
		return
	}
	fmt.Fprintf(w, "terminal %s", t.Status)
	if t.ErrorClass != "" {
		fmt.Fprintf(w, " (%s)", t.ErrorClass)
	}
	if t.Reason != "" {
		fmt.Fprintf(w, ": %s", termLine(t.Reason))
	}
	fmt.Fprintf(w, "\n         next: %s\n", termLine(t.NextAction))
}

func printOutcome(w io.Writer, out agentrun.Outcome, logPath string) {
	fmt.Fprintf(w, "session  %s\nrun      %s\nstatus   %s\n", out.SessionID, out.RunID, out.Status)
	for _, p := range out.Pending {
		fmt.Fprintf(w, "approval %s needed for %s (digest %.12s…)\n", p.ApprovalID, p.Tool, p.Digest)
		fmt.Fprintf(w, "         answer: agentos approve %s %s   or   agentos deny %s %s --reason \"...\"\n", out.SessionID, p.ApprovalID, out.SessionID, p.ApprovalID)
	}
	printTerminal(w, out.Terminal)
	if out.Output != "" {
		fmt.Fprintf(w, "output   %s\n", termLine(out.Output))
	}
	if logPath != "" {
		fmt.Fprintf(w, "log      %s\n", logPath)
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/agentos/agentos/bot/action"
	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/setup"
	"github.com/agentos/agentos/runtime/store"
)

// cmdAction is the GitHub Action's entrypoint (the Dockerfile's
// ENTRYPOINT): it handles the event that started the workflow run.
func cmdAction(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		return usageErrorf("usage: agentos action (configured by the Actions environment and the action's inputs)")
	}
	return runAction(ctx, os.Getenv, action.Deps{}, stdout)
}

// actionEnv maps the action's inputs onto the runtime profile's variables,
// so the Action and the CLI read one profile format.
func actionEnv(env action.Env, getenv func(string) string) func(string) string {
	in := env.Inputs
	m := map[string]string{
		"AGENTOS_PROVIDER":  in.Provider,
		"AGENTOS_MODEL":     in.Model,
		"AGENTOS_BASE_URL":  in.BaseURL,
		"OPENAI_API_KEY":    in.OpenAIKey,
		"ANTHROPIC_API_KEY": in.AnthropicKey,
		"GEMINI_API_KEY":    in.GeminiKey,
	}
	if in.MaxTurns > 0 {
		m["AGENTOS_MAX_TURNS"] = strconv.Itoa(in.MaxTurns)
	}
	if in.MaxCostUSD > 0 {
		m["AGENTOS_MAX_COST_USD"] = strconv.FormatFloat(in.MaxCostUSD, 'f', -1, 64)
	}
	if in.Timeout > 0 {
		m["AGENTOS_TIMEOUT_MINUTES"] = strconv.FormatFloat(in.Timeout.Minutes(), 'f', -1, 64)
	}
	return func(k string) string {
		if v := m[k]; v != "" {
			return v
		}
		return getenv(k)
	}
}

func runAction(ctx context.Context, getenv func(string) string, deps action.Deps, stdout io.Writer) error {
	env, err := action.FromEnv(getenv)
	if err != nil {
		action.Errorf(stdout, "%v", err)
		return &exitError{code: exitUsage, err: err}
	}
	for _, s := range env.Secrets() {
		action.Mask(stdout, s)
	}
	prof, err := provider.LoadProfile(getenv("AGENTOS_PROFILE"), actionEnv(env, getenv))
	if err != nil {
		action.Errorf(stdout, "%v", err)
		return &exitError{code: exitUsage, err: err}
	}
	// mcp_config's servers join the profile's (the workflow's wins on a
	// name both define).
	for name, srv := range env.Inputs.MCPServers {
		if prof.MCPServers == nil {
			prof.MCPServers = map[string]provider.MCPServer{}
		}
		prof.MCPServers[name] = srv
	}
	// The provider is checked before a new run, before anything reaches
	// GitHub (no comment or pull request for a run whose model cannot be
	// reached); events that start no run (other comments, reviews of other
	// pull requests) do not fail on it.
	fmt.Fprintf(stdout, "agentos: %s\n", prof.Describe())
	if deps.Preflight == nil {
		deps.Preflight = botPreflight(prof)
	}
	// An operator policy from the workflow's checkout, if there is one; the
	// repository's own .agent/policy.yaml always applies (it only tightens).
	policyFile := ""
	if env.Workspace != "" && env.Inputs.PolicyFile != "" {
		p := filepath.Join(env.Workspace, env.Inputs.PolicyFile)
		if _, err := os.Stat(p); err == nil {
			policyFile = p
		}
	}
	if deps.Sealer == nil {
		if deps.Sealer, err = newSealer(nil, append(env.Secrets(), prof.APIKey)...); err != nil {
			return err
		}
	}
	// The sandbox the runs' commands get, detected once: said in the
	// workflow log, and in the tracking comment when there is none.
	sb, err := setup.Sandbox(ctx, getenv)
	if err != nil {
		action.Errorf(stdout, "%v", err)
		return &exitError{code: exitUsage, err: err}
	}
	for _, n := range setup.SandboxNotes(sb) {
		action.Warningf(stdout, "%s", n)
	}
	fmt.Fprintf(stdout, "agentos: sandbox %s\n", sb.Mechanism())
	deps.Sandbox = string(sb.Mechanism())
	if deps.Engines == nil {
		// Each run's Go build cache: the repository's (buildcache.go).
		caches, err := actionBuildCaches(getenv, env.ServerURL, env.Repository, sb)
		if err != nil {
			action.Errorf(stdout, "%v", err)
			return &exitError{code: exitFailure, err: err}
		}
		deps.Engines = func(st store.Store) dispatch.Engines {
			return meteredEngines(st, policyFile, prof, sb, caches, nil, func(_, n string) { action.Warningf(stdout, "%s", n) })
		}
	}
	out, err := action.Run(ctx, env, deps, stdout)
	if err != nil {
		if errors.Is(err, dispatch.ErrTamperedLog) {
			return &exitError{code: exitFailure, err: fmt.Errorf("refused: %w", err)}
		}
		return &exitError{code: exitFailure, err: err}
	}
	fmt.Fprintf(stdout, "status=%s session=%s pr=%d\n", out.Status, out.SessionID, out.PRNumber)
	return actionExit(out)
}

// actionExit maps the step's outcome to its exit code
// (docs/action-reference.md, "Exit codes"): a pause for approval, a
// review, a triage, a refusal and an ignored event succeed; a run that did
// not do what was asked fails the step, so that the workflow run shows it
// and later steps do not take it for success.
func actionExit(out action.Outputs) error {
	code := exitOK
	switch out.ExitReason {
	case "":
		if out.Status == "failed" { // no reason given: still a failure
			code = exitRunFailed
		}
	case action.ExitFailed, action.ExitTestsNotRun, action.ExitNoChange:
		code = exitRunFailed
	case action.ExitDenied, action.ExitCancelled:
		code = exitBlocked
	default:
		code = exitFailure
	}
	if code == exitOK {
		return nil
	}
	what := out.ExitReason
	if what == "" {
		what = out.Status
	}
	return &exitError{code: code, err: fmt.Errorf("session %s: %s (see the tracking comment, the step summary and the session log)", out.SessionID, what)}
}

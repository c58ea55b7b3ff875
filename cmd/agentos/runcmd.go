package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentos/agentos/runtime/provider"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/oklog/ulid/v2"
)

// runFlags are shared by run, approve, deny and resume.
type runFlags struct {
	repo, data, profile, providerName, script, policy, session string
	asJSON                                                     bool
}

func (f *runFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.repo, "repo", "", "repository working tree the agent works in")
	fs.StringVar(&f.data, "data", defaultDataDir(), "embedded store directory")
	fs.StringVar(&f.profile, "profile", "", "runtime profile (YAML): provider, model, limits")
	fs.StringVar(&f.providerName, "provider", "", "provider (overrides the profile)")
	fs.StringVar(&f.script, "script", "", "script for the scripted provider")
	fs.StringVar(&f.policy, "policy", "", "operator policy.yaml (the repository's .agent/policy.yaml may only tighten it)")
	fs.BoolVar(&f.asJSON, "json", false, "print one JSON object")
}

func (f *runFlags) loadProfile() (provider.Profile, error) {
	p, err := provider.LoadProfile(f.profile, func(k string) string {
		switch {
		case k == "AGENTOS_PROVIDER" && f.providerName != "":
			return f.providerName
		case k == "AGENTOS_SCRIPT" && f.script != "":
			return f.script
		}
		return os.Getenv(k)
	})
	if err != nil {
		return p, usageErrorf("%v", err)
	}
	return p, nil
}

func newSessionID() string {
	return "cli-" + strings.ToLower(ulid.Make().String())
}

type runReport struct {
	SessionID string             `json:"session_id"`
	RunID     string             `json:"run_id"`
	Status    string             `json:"status"`
	LogPath   string             `json:"log_path"`
	Terminal  *agentrun.Report   `json:"terminal,omitempty"`
	Pending   []agentrun.Pending `json:"pending,omitempty"`
	Output    string             `json:"output,omitempty"`
}

func finishRun(ctx context.Context, env *runtimeEnv, f runFlags, out agentrun.Outcome, stdout io.Writer) error {
	path, err := exportSession(ctx, env.store, f.data, out.SessionID)
	if err != nil {
		return err
	}
	if f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(runReport{SessionID: out.SessionID, RunID: out.RunID, Status: out.Status, LogPath: path, Terminal: out.Terminal, Pending: out.Pending, Output: out.Output})
	}
	printOutcome(stdout, out, path)
	return nil
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var f runFlags
	f.register(fs)
	fs.StringVar(&f.session, "session", "", "session id (default: a new one)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErrorf("usage: agentos run --repo DIR [--profile FILE | --provider scripted --script FILE] [--json] \"prompt\"")
	}
	prompt := strings.Join(pos, " ")
	if f.session == "" {
		f.session = newSessionID()
	}
	prof, err := f.loadProfile()
	if err != nil {
		return err
	}
	if err := checkProvider(ctx, prof, stderr); err != nil {
		return err
	}
	env, err := buildRuntime(ctx, envOptions{repo: f.repo, dataDir: f.data, policyFile: f.policy, profile: prof, sessionID: f.session})
	if err != nil {
		return err
	}
	defer env.Close()
	for _, n := range env.notes {
		fmt.Fprintln(stderr, "note:", n)
	}
	var stop func(settled bool)
	if !f.asJSON {
		stop = watchProgress(ctx, env, f.session, stdout)
	}
	out, err := env.mgr.Start(ctx, env.engine, agentrun.StartRequest{SessionID: f.session, Prompt: prompt, SessionKey: "cli:" + f.repo, Cwd: env.ws.Root()})
	if stop != nil {
		stop(err == nil)
	}
	if err != nil {
		return err
	}
	return finishRun(ctx, env, f, out, stdout)
}

func cmdResolve(decision string) func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		fs := flag.NewFlagSet(decision, flag.ContinueOnError)
		var f runFlags
		f.register(fs)
		reason := fs.String("reason", "", "why (fed back to the agent on deny)")
		by := fs.String("by", os.Getenv("USER"), "who answers")
		pos, err := parseFlags(fs, args)
		if err != nil {
			return err
		}
		if len(pos) != 2 {
			return usageErrorf("usage: agentos %s SESSION APPROVAL-ID --repo DIR [--reason TEXT]", decision)
		}
		if *by == "" {
			*by = "cli"
		}
		sid, id := pos[0], pos[1]
		prof, err := f.loadProfile()
		if err != nil {
			return err
		}
		// Before the answer is recorded: a run that cannot resume should
		// not consume it.
		if err := checkProvider(ctx, prof, stderr); err != nil {
			return err
		}
		env, err := buildRuntime(ctx, envOptions{repo: f.repo, dataDir: f.data, policyFile: f.policy, profile: prof, sessionID: sid})
		if err != nil {
			return err
		}
		defer env.Close()
		d := map[string]string{"approve": "approve", "deny": "deny"}[decision]
		if err := env.mgr.Resolve(ctx, sid, id, d, *by, *reason); err != nil {
			return &exitError{code: exitFailure, err: err}
		}
		out, err := env.mgr.Resume(ctx, env.engine, sid, env.ws.Root(), "")
		if err != nil {
			return err
		}
		return finishRun(ctx, env, f, out, stdout)
	}
}

func cmdResume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("resume", flag.ContinueOnError)
	var f runFlags
	f.register(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("usage: agentos resume SESSION --repo DIR")
	}
	prof, err := f.loadProfile()
	if err != nil {
		return err
	}
	if err := checkProvider(ctx, prof, stderr); err != nil {
		return err
	}
	env, err := buildRuntime(ctx, envOptions{repo: f.repo, dataDir: f.data, policyFile: f.policy, profile: prof, sessionID: pos[0]})
	if err != nil {
		return err
	}
	defer env.Close()
	out, err := env.mgr.Resume(ctx, env.engine, pos[0], env.ws.Root(), "")
	if err != nil {
		return &exitError{code: exitFailure, err: err}
	}
	return finishRun(ctx, env, f, out, stdout)
}

// watchProgress prints state changes, tool calls and approvals as the run
// appends them. The returned stop waits for the printer: when the run
// settled (it ended with turn.terminal or paused with run.paused, both
// already in the store) the printer stops by itself after printing them;
// otherwise stop cancels it.
func watchProgress(ctx context.Context, env *runtimeEnv, sessionID string, w io.Writer) func(settled bool) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var after int64
	if evs, err := env.store.Read(ctx, sessionID, 1); err == nil {
		after = int64(len(evs))
	}
	go func() {
		defer close(done)
		_ = followPrint(ctx, env, sessionID, after, w)
	}()
	return func(settled bool) {
		if !settled {
			cancel()
		}
		<-done
		cancel()
	}
}

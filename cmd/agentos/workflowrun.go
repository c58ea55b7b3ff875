package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/workflow/cycle"
)

// inputFlags collects repeated --input NAME=FILE flags.
type inputFlags map[string]string

func (f inputFlags) String() string { return "" }

func (f inputFlags) Set(v string) error {
	if v == "" {
		return nil // --input= (the flag's default) adds nothing
	}
	name, file, ok := strings.Cut(v, "=")
	if !ok || name == "" || file == "" {
		return fmt.Errorf("--input wants NAME=FILE, got %q", v)
	}
	if _, dup := f[name]; dup {
		return fmt.Errorf("--input %s given twice", name)
	}
	f[name] = file
	return nil
}

type workflowRunFlags struct {
	runFlags
	mode   string
	inputs inputFlags
}

func workflowRunCmdFlags(fs *flag.FlagSet) *workflowRunFlags {
	f := &workflowRunFlags{inputs: inputFlags{}}
	f.register(fs)
	fs.StringVar(&f.session, "session", "", "session id (default: a new one)")
	fs.StringVar(&f.mode, "mode", cycle.ModeInteractive, "interactive, autofix, report-only or headless (mode-dispatch)")
	fs.Var(f.inputs, "input", "NAME=FILE: an input of the cycle (e.g. diff=pr.diff, issue=issue.md); repeatable")
	return f
}

const workflowRunUsage = "usage: agentos workflows run CYCLE --repo DIR [--mode MODE] [--input NAME=FILE]... [--json] \"prompt\""

// cmdWorkflowRun runs a cycle as a run of the session: it pauses for
// approvals like agentos run (agentos approve/deny/resume continue it) and
// prints the cycle's verdict and, for a review, its decisions.
func cmdWorkflowRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("workflows run", flag.ContinueOnError)
	f := workflowRunCmdFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usageErrorf(workflowRunUsage)
	}
	cycleID, prompt := pos[0], strings.Join(pos[1:], " ")
	inputs := map[string]string{}
	for name, file := range f.inputs {
		b, err := os.ReadFile(file)
		if err != nil {
			return usageErrorf("--input %s: %v", name, err)
		}
		inputs[name] = string(b)
	}
	env, err := f.openRuntime(ctx, stderr)
	if err != nil {
		return err
	}
	defer env.Close()
	if env.workflows == nil {
		return usageErrorf("the workflow plane did not load (agentos workflows validate --repo %s)", f.repo)
	}
	var res cycle.Result
	out, rctx, err := interruptible(ctx, env, f.session, func(rctx context.Context) (agentrun.Outcome, error) {
		var rerr error
		res, rerr = env.workflows.Run(rctx, cycle.Request{SessionID: f.session, Cycle: cycleID, Prompt: prompt, Mode: f.mode, Inputs: inputs,
			SessionKey: "cli:" + f.repo, Cwd: env.ws.Root()})
		return res.Outcome, rerr
	})
	if err != nil {
		if out.SessionID == "" {
			return usageErrorf("%v", err)
		}
		return runError(ctx, f.session, err)
	}
	if f.asJSON {
		path, err := exportSession(rctx, env.store, f.dataDir(), out.SessionID)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			LogPath string `json:"log_path"`
			cycle.Result
		}{path, res}); err != nil {
			return err
		}
		return outcomeExit(out)
	}
	if res.Verdict != "" {
		fmt.Fprintf(stdout, "cycle %s: %s", res.Cycle, res.Verdict)
		if res.Reason != "" {
			fmt.Fprintf(stdout, " (%s)", res.Reason)
		}
		fmt.Fprintln(stdout)
	}
	for _, d := range res.Decisions {
		where := d.Finding.Path
		if d.Finding.Line > 0 {
			where = fmt.Sprintf("%s:%d", where, d.Finding.Line)
		}
		fmt.Fprintf(stdout, "  %-9s %s %s %s [%s] %s\n", d.Gate, d.Finding.Severity, where, d.Finding.Title, d.Route, d.Reason)
	}
	return finishRun(rctx, env, f.runFlags, out, stdout)
}

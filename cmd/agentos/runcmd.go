package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/agentos/agentos/bot/viewer"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/replay"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/oklog/ulid/v2"
)

// dataDir is --data, else the default data directory of --repo.
func (f *runFlags) dataDir() string {
	if f.data != "" {
		return f.data
	}
	return dataDirFor(f.repo)
}

// runFlags are shared by run, approve, deny and resume.
type runFlags struct {
	repo, data, profile, providerName, script, policy, session string
	asJSON                                                     bool
}

func (f *runFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.repo, "repo", "", "repository working tree the agent works in (required)")
	fs.StringVar(&f.data, "data", "", "embedded store directory (default: $AGENTOS_DATA, else the repository's directory under ~/.local/state/agentos); the repository tools never see it")
	fs.StringVar(&f.profile, "profile", "", "runtime profile (YAML): provider, model, base_url, limits (see docs/configuration.md)")
	fs.StringVar(&f.providerName, "provider", "", "scripted, openai, anthropic or gemini (overrides the profile and AGENTOS_PROVIDER)")
	fs.StringVar(&f.script, "script", "", "script for the scripted provider (overrides AGENTOS_SCRIPT)")
	fs.StringVar(&f.policy, "policy", "", "operator policy.yaml (the repository's .agent/policy.yaml may only tighten it)")
	fs.BoolVar(&f.asJSON, "json", false, "print one JSON object")
}

// runCmdFlags registers agentos run's flags.
func runCmdFlags(fs *flag.FlagSet) *runFlags {
	var f runFlags
	f.register(fs)
	fs.StringVar(&f.session, "session", "", "session id (default: a new one)")
	return &f
}

// resolveOpts are agentos approve's and deny's flags.
type resolveOpts struct {
	runFlags
	reason, by string
}

func resolveFlags(fs *flag.FlagSet) *resolveOpts {
	var o resolveOpts
	o.register(fs)
	fs.StringVar(&o.reason, "reason", "", "why (fed back to the agent on deny)")
	fs.StringVar(&o.by, "by", os.Getenv("USER"), "who answers (recorded in the log)")
	return &o
}

func resumeFlags(fs *flag.FlagSet) *runFlags {
	var f runFlags
	f.register(fs)
	return &f
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

// openRuntime builds the runtime for a new session (f.session, or a new
// id): the profile, a provider check, and the repository's configuration
// notes on stderr.
func (f *runFlags) openRuntime(ctx context.Context, stderr io.Writer) (*runtimeEnv, error) {
	if f.session == "" {
		f.session = newSessionID()
	}
	prof, err := f.loadProfile()
	if err != nil {
		return nil, err
	}
	if err := checkProvider(ctx, prof, stderr); err != nil {
		return nil, err
	}
	env, err := buildRuntime(ctx, envOptions{repo: f.repo, dataDir: f.dataDir(), policyFile: f.policy, profile: prof, sessionID: f.session})
	if err != nil {
		return nil, err
	}
	for _, n := range env.notes {
		fmt.Fprintln(stderr, "note:", n)
	}
	return env, nil
}

func finishRun(ctx context.Context, env *runtimeEnv, f runFlags, out agentrun.Outcome, stdout io.Writer) error {
	path, err := exportSession(ctx, env.store, f.dataDir(), out.SessionID)
	if err != nil {
		return err
	}
	if f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(runReport{SessionID: out.SessionID, RunID: out.RunID, Status: string(out.Status), LogPath: path, Terminal: out.Terminal, Pending: out.Pending, Output: out.Output}); err != nil {
			return err
		}
	} else {
		evs, err := env.store.Read(ctx, out.SessionID, 1)
		if err != nil {
			return err
		}
		if err := printRunOutcome(stdout, out, path, f, evs); err != nil {
			return err
		}
	}
	return outcomeExit(out)
}

// printRunOutcome prints a run's outcome for people, from its log: for a
// pause, what each approval would do (the diff or the command) and the
// approve and deny commands that answer it, as they can be run; then the
// evidence (every command a tool ran with its exit code, the changed
// files, the review's verdict and coverage) and what the models cost.
func printRunOutcome(w io.Writer, out agentrun.Outcome, logPath string, f runFlags, evs []event.Event) error {
	s, err := viewer.Build(out.SessionID, evs, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "session  %s\nrun      %s\nstatus   %s\n", out.SessionID, out.RunID, out.Status)
	for _, p := range out.Pending {
		fmt.Fprintf(w, "approval %s needed for %s (digest %.12s…)\n", p.ApprovalID, p.Tool, p.Digest)
		printPreview(w, p, logPath)
		answer := answerArgs(out.SessionID, p.ApprovalID, f)
		fmt.Fprintf(w, "         approve: %s\n", shellLine(append([]string{"agentos", "approve"}, answer...)))
		fmt.Fprintf(w, "         deny:    %s\n", shellLine(append([]string{"agentos", "deny"}, answer...)))
		fmt.Fprintf(w, "                  (add --reason TEXT to tell the agent why)\n")
	}
	printTerminal(w, out.Terminal)
	if out.Output != "" {
		fmt.Fprintf(w, "output   %s (the worker's words; the evidence below is the log's)\n", termLine(out.Output))
	}
	printEvidence(w, s.Evidence)
	fmt.Fprintf(w, "usage    %s\n", usageLine(s))
	if logPath != "" {
		fmt.Fprintf(w, "log      %s\n", logPath)
	}
	return nil
}

// printPreview prints what an approval would do: its diff, else its
// command, bounded.
func printPreview(w io.Writer, p agentrun.Pending, logPath string) {
	var pv struct {
		Diff      string   `json:"diff"`
		DiffTrunc bool     `json:"diff_truncated"`
		Command   string   `json:"command"`
		Cwd       string   `json:"cwd"`
		Summary   string   `json:"summary"`
		Protected []string `json:"protected_paths"`
	}
	_ = json.Unmarshal(p.Preview, &pv)
	if pv.Diff == "" {
		var a struct {
			UnifiedDiff string `json:"unifiedDiff"`
			Command     string `json:"command"`
		}
		_ = json.Unmarshal(p.Args, &a)
		pv.Diff = a.UnifiedDiff
		if pv.Command == "" {
			pv.Command = a.Command
		}
	}
	if pv.Summary != "" {
		fmt.Fprintf(w, "         %s\n", oneLineText(pv.Summary))
	}
	if len(pv.Protected) > 0 {
		fmt.Fprintf(w, "         changes protected configuration: %s\n", oneLineText(strings.Join(pv.Protected, ", ")))
	}
	switch {
	case pv.Diff != "":
		lines := strings.Split(strings.TrimSuffix(pv.Diff, "\n"), "\n")
		const maxLines = 200
		for i, l := range lines {
			if i == maxLines {
				fmt.Fprintf(w, "    … %d more lines (agentos view %s shows the whole diff)\n", len(lines)-maxLines, shellLine([]string{logPath}))
				break
			}
			fmt.Fprintf(w, "    %s\n", termLine(l))
		}
		if pv.DiffTrunc {
			fmt.Fprintf(w, "    … the preview's diff was cut by the kernel; the call's arguments hold the whole change (agentos replay --json)\n")
		}
	case pv.Command != "":
		fmt.Fprintf(w, "         command: %s\n", oneLineText(pv.Command))
		if pv.Cwd != "" {
			fmt.Fprintf(w, "         in:      %s\n", oneLineText(pv.Cwd))
		}
	default:
		fmt.Fprintf(w, "         (the approval shows no diff or command; agentos replay %s --data DIR shows its arguments)\n", p.ApprovalID)
	}
}

// answerArgs are the arguments of agentos approve and deny for an
// approval: the session, the approval and the flags this run was started
// with that the answering process needs (the repository, the data
// directory, the provider), file paths made absolute so the line works
// from any directory.
func answerArgs(sid, id string, f runFlags) []string {
	args := []string{sid, id}
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	add := func(flag, v string, path bool) {
		if v == "" {
			return
		}
		if path {
			v = abs(v)
		}
		args = append(args, flag, v)
	}
	add("--repo", f.repo, true)
	add("--data", f.data, true)
	add("--profile", f.profile, true)
	add("--provider", f.providerName, false)
	if f.script != "" && f.script != "inline" {
		add("--script", f.script, true)
	}
	add("--policy", f.policy, true)
	return args
}

// shellLine quotes args for a POSIX shell where they need it.
func shellLine(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		safe := a != ""
		for _, r := range a {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:,=+@%", r)) {
				safe = false
				break
			}
		}
		if safe {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

// printEvidence prints what the log shows the run did.
func printEvidence(w io.Writer, ev viewer.Evidence) {
	for _, c := range ev.Commands {
		exit := "no exit code"
		if c.Exit != "" {
			exit = "exit " + c.Exit
		}
		cmd := c.Command
		if cmd == "" {
			cmd = "(default command)"
		}
		line := fmt.Sprintf("%s %s: %s, %s", c.Tool, oneLineText(cmd), exit, c.Outcome)
		if c.Detail != "" {
			line += " (" + oneLineText(c.Detail) + ")"
		}
		fmt.Fprintf(w, "command  %s\n", termLine(line))
	}
	if len(ev.Files) > 0 {
		var fs []string
		for _, f := range ev.Files {
			d := oneLineText(f.Path) + " (" + f.Op
			if f.LinesKnown {
				d += fmt.Sprintf(", +%d -%d", f.Added, f.Removed)
			}
			fs = append(fs, d+")")
		}
		fmt.Fprintf(w, "changed  %s\n", strings.Join(fs, ", "))
		fmt.Fprintf(w, "diff     the applied changes, in order:\n")
		const maxLines = 200
		for i, l := range ev.Diff {
			if i == maxLines {
				fmt.Fprintf(w, "    … %d more lines (agentos view shows the whole diff)\n", len(ev.Diff)-maxLines)
				break
			}
			fmt.Fprintf(w, "    %s\n", termLine(l.Text))
		}
	} else {
		fmt.Fprintf(w, "changed  no file\n")
	}
	if r := ev.Review; r != nil {
		var parts []string
		if r.Verdict != "" {
			parts = append(parts, "reviewer "+r.Verdict)
		}
		if r.HasAgg {
			parts = append(parts, fmt.Sprintf("personas %s (coverage %.0f%%)", r.Aggregate, r.Coverage*100))
		}
		for _, p := range r.NotReviewed() {
			nr := "not reviewed: " + p.Persona + " (" + p.Status
			if p.Reason != "" {
				nr += ": " + oneLineText(p.Reason)
			}
			parts = append(parts, nr+")")
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, "review   %s\n", termLine(strings.Join(parts, "; ")))
		}
	}
}

// usageLine is the tokens and cost of the session's model calls; a cost
// no price was known for is "not tracked", not $0.
func usageLine(s viewer.Session) string {
	u := s.Usage
	line := fmt.Sprintf("%d input + %d output tokens over %d model call", u.InputTokens, u.OutputTokens, s.LLMCalls)
	if s.LLMCalls != 1 {
		line += "s"
	}
	if s.LLMCalls == 0 {
		return line
	}
	return line + ", " + s.Costs.TotalText()
}

// oneLineText is model or tool text on one terminal line, at most 300
// runes, with nothing a terminal would interpret (termLine).
func oneLineText(s string) string {
	s = termLine(strings.Join(strings.Fields(s), " "))
	if r := []rune(s); len(r) > 300 {
		s = string(r[:300]) + "…"
	}
	return s
}

// termLine replaces control characters but the tab and the newline
// (escape sequences included) and format characters with "?": a diff
// line keeps its indentation, and a file the agent wrote cannot drive
// the terminal.
func termLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r != '\t' && r != '\n' && (unicode.IsControl(r) || r == unicode.ReplacementChar || unicode.In(r, unicode.Cf)) {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

// outcomeExit maps a run's outcome to the exit code scripts and CI steps
// branch on (exitCodesHelp): completed 0, denied or cancelled 3, paused
// for approval 4, failed 5.
func outcomeExit(out agentrun.Outcome) error {
	reason := ""
	if t := out.Terminal; t != nil {
		reason = t.Reason
		if t.ErrorClass != "" {
			reason = fmt.Sprintf("%s (%s)", reason, t.ErrorClass)
		}
	}
	switch out.Status {
	case agentrun.StatusCompleted:
		return nil
	case agentrun.StatusPaused:
		ids := make([]string, 0, len(out.Pending))
		for _, p := range out.Pending {
			ids = append(ids, p.ApprovalID)
		}
		return &exitError{code: exitApproval, err: fmt.Errorf("session %s is paused for approval of %s: answer with agentos approve or agentos deny", out.SessionID, strings.Join(ids, ", "))}
	case agentrun.StatusDenied:
		return &exitError{code: exitBlocked, err: fmt.Errorf("session %s: the run was denied: %s", out.SessionID, reason)}
	case agentrun.StatusCancelled:
		return &exitError{code: exitBlocked, err: fmt.Errorf("session %s: the run was cancelled: %s", out.SessionID, reason)}
	case agentrun.StatusFailed:
		return &exitError{code: exitRunFailed, err: fmt.Errorf("session %s: the run failed: %s", out.SessionID, reason)}
	}
	return &exitError{code: exitFailure, err: fmt.Errorf("session %s: the run ended with status %q", out.SessionID, out.Status)}
}

// runError maps an error from starting or resuming a run: a session that
// is already paused exits 4, an interrupted run (SIGINT, SIGTERM) counts
// as cancelled (3), anything else is an error (1).
func runError(ctx context.Context, sessionID string, err error) error {
	switch {
	case errors.Is(err, agentrun.ErrPaused):
		return &exitError{code: exitApproval, err: fmt.Errorf("session %s is paused for approval: answer with agentos approve or agentos deny (agentos replay %s lists the pending approvals)", sessionID, sessionID)}
	case ctx.Err() != nil:
		return &exitError{code: exitBlocked, err: fmt.Errorf("session %s: cancelled: %w", sessionID, err)}
	}
	return &exitError{code: exitFailure, err: err}
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	f := runCmdFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErrorf("usage: agentos run --repo DIR [--profile FILE | --provider scripted --script FILE] [--json] \"prompt\"")
	}
	prompt := strings.Join(pos, " ")
	env, err := f.openRuntime(ctx, stderr)
	if err != nil {
		return err
	}
	defer env.Close()
	var stop func(settled bool)
	if !f.asJSON {
		stop = watchProgress(ctx, env, f.session, stdout)
	}
	out, rctx, err := interruptible(ctx, env, f.session, func(rctx context.Context) (agentrun.Outcome, error) {
		return env.mgr.Start(rctx, env.engine, agentrun.StartRequest{SessionID: f.session, Prompt: prompt, SessionKey: "cli:" + f.repo, Cwd: env.ws.Root()})
	})
	if stop != nil {
		stop(err == nil)
	}
	if err != nil {
		return runError(ctx, f.session, err)
	}
	return finishRun(rctx, env, *f, out, stdout)
}

func cmdResolve(decision string) func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		fs := flag.NewFlagSet(decision, flag.ContinueOnError)
		o := resolveFlags(fs)
		f, reason, by := &o.runFlags, &o.reason, &o.by
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
		env, err := buildRuntime(ctx, envOptions{repo: f.repo, dataDir: f.dataDir(), policyFile: f.policy, profile: prof, sessionID: sid})
		if err != nil {
			return err
		}
		defer env.Close()
		d := map[string]string{"approve": "approve", "deny": "deny"}[decision]
		if err := env.mgr.Resolve(ctx, sid, id, d, *by, *reason); err != nil {
			return &exitError{code: exitFailure, err: err}
		}
		out, rctx, err := interruptible(ctx, env, sid, func(rctx context.Context) (agentrun.Outcome, error) {
			return env.mgr.Resume(rctx, env.engine, sid, env.ws.Root(), "")
		})
		if err != nil {
			return runError(ctx, sid, err)
		}
		return finishRun(rctx, env, *f, out, stdout)
	}
}

func cmdResume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("resume", flag.ContinueOnError)
	f := resumeFlags(fs)
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
	env, err := buildRuntime(ctx, envOptions{repo: f.repo, dataDir: f.dataDir(), policyFile: f.policy, profile: prof, sessionID: pos[0]})
	if err != nil {
		return err
	}
	defer env.Close()
	sid := pos[0]
	evs, err := env.store.Read(ctx, sid, 1)
	if err != nil {
		return err
	}
	snap, err := replay.Replay(evs)
	if err != nil {
		return err
	}
	resume := func(rctx context.Context) (agentrun.Outcome, error) {
		return env.mgr.Resume(rctx, env.engine, sid, env.ws.Root(), "")
	}
	if snap.RunStatus == replay.RunRunning {
		// This process holds the session's lock (buildRuntime), so no
		// process runs the run the log says is running: the one that did
		// was killed. Take it over (ADR 26).
		resume = func(rctx context.Context) (agentrun.Outcome, error) {
			return takeOver(rctx, env, sid, evs, snap.RunID, stderr)
		}
	}
	out, rctx, err := interruptible(ctx, env, sid, resume)
	if err != nil {
		return runError(ctx, sid, err)
	}
	return finishRun(rctx, env, *f, out, stdout)
}

// takeOver continues session sid's run that a killed process left
// running, in the repository itself (takeOverInPlace, shared with the
// server's takeover of API runs). A worktree the log cannot account for
// ends the run with its report_missing terminal report, saying why.
func takeOver(ctx context.Context, env *runtimeEnv, sid string, evs []event.Event, runID string, stderr io.Writer) (agentrun.Outcome, error) {
	out, _, err := takeOverInPlace(ctx, env.mgr, env.engine, env.ws.Root(), sid, evs, runID, "taken over by agentos resume: the process running it stopped", func(s string) { fmt.Fprintln(stderr, s) })
	return out, err
}

// interruptible runs a run-driving call so that SIGINT or SIGTERM (ctx
// ending) cancels the run through the RunManager, like the API and
// /agent cancel: the run ends as cancelled, with its terminal report in
// the log, instead of being cut off mid-append. The call runs on the
// returned context, which outlives ctx, for the caller's writes after it.
func interruptible(ctx context.Context, env *runtimeEnv, sessionID string, call func(context.Context) (agentrun.Outcome, error)) (agentrun.Outcome, context.Context, error) {
	rctx := context.WithoutCancel(ctx)
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		// The run may not be registered yet: try until it is, or the call
		// has returned.
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if env.mgr.Running(sessionID) {
				_, _ = env.mgr.Cancel(rctx, sessionID, "cli", "interrupted (SIGINT or SIGTERM)")
				return
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	out, err := call(rctx)
	close(done)
	<-watched
	return out, rctx, err
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

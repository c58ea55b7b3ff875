package action

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentos/agentos/bot/config"
	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/review"
	"github.com/agentos/agentos/bot/tracking"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/sqlite"
)

// Deps are what the Action needs from the program: how to build a run
// engine on a worktree (the provider registry lives in cmd).
type Deps struct {
	// Engines returns the engine builder for session worktrees over the
	// run's store.
	Engines func(st store.Store) dispatch.Engines
	// Sealer seals events (with the secrets to redact registered).
	Sealer *event.Sealer
	// Preflight, when set, checks before a new run that it can work (the
	// model endpoint answers); see dispatch.Config.Preflight.
	Preflight func(ctx context.Context) error
	// Sandbox is the mechanism commands run under (sandbox.Mechanism), for
	// the tracking comment's warning.
	Sandbox string
	// Reviewer and Triager, when set, replace the workflow plane's
	// executor (the dispatcher's own) for the review and triage cycles.
	Reviewer review.Reviewer
	Triager  review.Triager
}

// Run handles the event that started the workflow run: it answers
// exactly as the webhook server would, with the session's log on the
// artifact branch as the only state. A pause for approval is a success.
// It writes the outputs and the step summary and returns the outputs.
func Run(ctx context.Context, env Env, deps Deps, log io.Writer) (Outputs, error) {
	for _, s := range env.Secrets() {
		Mask(log, s)
	}
	body, err := os.ReadFile(env.EventPath)
	if err != nil {
		return Outputs{}, fmt.Errorf("read the event: %w", err)
	}
	deliveryID := fmt.Sprintf("actions-%s", env.RunID)
	auto, automated, err := Automate(env.EventName, body, env.Inputs, deliveryID)
	if err != nil {
		return Outputs{}, err
	}
	// The prompt input on an event nothing else acts on (PromptRun):
	// tried after the command path, or instead of it when the event has
	// no command path.
	var prompted Automation
	hasPrompt := false
	if !automated {
		if prompted, hasPrompt, err = PromptRun(env.EventName, body, env.Inputs, deliveryID); err != nil {
			return Outputs{}, err
		}
	}
	t, ok, err := webhook.Normalize(env.EventName, deliveryID, body)
	switch {
	case automated:
		t, ok, err = auto.Trigger, true, nil
	case hasPrompt && err == nil && !ok:
		auto, automated = prompted, true
		t, ok, err = auto.Trigger, true, nil
	}
	if err != nil {
		return Outputs{}, fmt.Errorf("the %s event: %w", env.EventName, err)
	}
	if !ok {
		out := Outputs{Status: "ignored"}
		fmt.Fprintf(log, "agentos: nothing to do for %s\n", env.EventName)
		return out, finish(env, out, SummaryInput{Outputs: out, Event: env.EventName})
	}
	if t, err = env.ownTrigger(t, auto.Home); err != nil {
		return Outputs{}, err
	}
	if hasPrompt {
		if prompted.Trigger, err = env.ownTrigger(prompted.Trigger, false); err != nil {
			return Outputs{}, err
		}
	}
	data := filepath.Join(env.RunnerTemp, "agentos")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return Outputs{}, err
	}
	st, err := sqlite.Open(data, deps.Sealer, sqlite.Options{})
	if err != nil {
		return Outputs{}, err
	}
	defer st.Close()
	js, err := newJobStore(ctx, st)
	if err != nil {
		return Outputs{}, err
	}
	// The same wiring as the webhook server, configured from the inputs.
	// The bot's login is an input: a workflow token cannot read GET /user.
	cfg := config.Default()
	cfg.DataDir, cfg.GitHubAPIURL, cfg.GitHubToken = data, env.APIURL, env.Token
	if env.Inputs.AppID != 0 {
		// App mode: the run mints its own installation tokens (revoked at
		// the end), so the workflow's token is not used for the API.
		cfg.GitHubAppID, cfg.GitHubPrivateKey, cfg.GitHubToken = env.Inputs.AppID, []byte(env.Inputs.AppPrivateKey), ""
	}
	// The bot's login is learned from the credentials below (never a
	// default): Login then finds it cached.
	cfg.TriggerWord, cfg.AllowedUsers, cfg.AllowedBots, cfg.BotLogin = env.Inputs.Trigger, env.Inputs.AllowedUsers, env.Inputs.AllowedBots, ""
	cfg.ArtifactBranch, cfg.LogOnSessionBranch = env.Inputs.ArtifactBranch, env.Inputs.LogOnSessionBranch
	cfg.BranchPrefix = env.Inputs.BranchPrefix
	for _, n := range env.Inputs.ToolNotes {
		Warningf(log, "agentos: %s", n)
	}
	engines := limitEngines(deps.Engines(js), agentrun.ToolLimits{Allow: env.Inputs.AllowedTools, Deny: env.Inputs.DisallowedTools, Rules: env.Inputs.ToolRules})
	bot, err := dispatch.NewGitHubBot(cfg, js, engines, slog.New(slog.NewTextHandler(log, nil)))
	if err != nil {
		return Outputs{}, err
	}
	self, err := bot.Client.TokenLogin(ctx)
	if err != nil {
		return Outputs{}, fmt.Errorf("learn the bot's own login from its credentials: %w", err)
	}
	if want := env.Inputs.BotLogin; want != "" && !strings.EqualFold(want, self) {
		return Outputs{}, fmt.Errorf("bot_login is %s, but the credentials act as %s: leave bot_login empty (it is learned) or give the matching token", want, self)
	}
	var res dispatch.Result
	// Review and triage in headless mode with the custom instructions; a
	// re-run attempt (same GITHUB_RUN_ID, so the same delivery and
	// session) continues what an earlier attempt began.
	wf := &dispatch.Workflows{OwnPlane: true, ProposeFixes: true, Mode: review.ModeHeadless, Instructions: env.Inputs.CustomInstructions,
		Reviewer: deps.Reviewer, Triager: deps.Triager}
	d, err := bot.Dispatcher(ctx, dispatch.BotOptions{ServerURL: env.ServerURL, Preflight: deps.Preflight, Sandbox: deps.Sandbox,
		Result: func(r dispatch.Result) { res = r }, ResumeFromArtifact: true, Workflows: wf})
	if err != nil {
		return Outputs{}, err
	}
	fmt.Fprintf(log, "agentos: acting as %s\n", self)
	var derr error
	if !automated {
		end := Group(log, fmt.Sprintf("agentos: %s on %s#%d by %s", env.EventName, t.Repo, t.Number, t.Author))
		derr = d.Dispatch(ctx, t)
		end()
		if derr == nil && hasPrompt && res.Outcome == "ignored" && !strings.EqualFold(t.Author, self) {
			// No command, approval or session event: the prompt runs.
			fmt.Fprintf(log, "agentos: the %s event holds nothing for the command path (%s); running the prompt input\n", env.EventName, res.Reason)
			auto, automated, t = prompted, true, prompted.Trigger
			res = dispatch.Result{}
		}
	}
	var cycleOpts dispatch.CycleOptions
	if automated {
		auto.Trigger = t
		tr, err := CheckTrust(ctx, bot.Client, env.EventName, auto, env.Inputs)
		if err != nil {
			revoke(ctx, bot, log)
			return Outputs{}, err
		}
		if tr.Refused != "" {
			Warningf(log, "agentos: not starting the %s cycle for %s: %s", auto.Cycle, env.EventName, tr.Refused)
			out := Outputs{Status: "refused"}
			revoke(ctx, bot, log)
			return out, finish(env, out, SummaryInput{Outputs: out, Event: env.EventName, Reason: tr.Refused})
		}
		if tr.Note != "" {
			fmt.Fprintf(log, "agentos: %s\n", tr.Note)
		}
		if tr.UntrustedHead {
			// A fork's pull request on pull_request_target: the review
			// reads it (the dispatcher fetches the head from this
			// repository and runs the built-in workflows only); no fix
			// proposal starts from its code.
			cycleOpts.NoFixProposal = true
		}
		cycleOpts.Instructions = auto.Instructions
	}
	if automated && auto.Home {
		home, err := openHome(ctx, env, bot.Client, d, t, auto.Prompt, log)
		if err != nil {
			revoke(ctx, bot, log)
			return Outputs{}, err
		}
		if home.Refused != "" {
			Warningf(log, "agentos: not starting the %s run: %s", env.EventName, home.Refused)
			out := Outputs{Status: "refused"}
			revoke(ctx, bot, log)
			return out, finish(env, out, SummaryInput{Outputs: out, Event: env.EventName, Reason: home.Refused})
		}
		t.Number, t.IssueState = home.Number, home.State
	}
	if automated {
		end := Group(log, fmt.Sprintf("agentos: %s cycle for %s %s on %s#%d", auto.Cycle, env.EventName, t.Action, t.Repo, t.Number))
		derr = d.RunCycle(ctx, t, auto.Cycle, auto.Prompt, cycleOpts)
		end()
	}
	revoke(ctx, bot, log)
	out := Outputs{SessionID: res.SessionID, Status: res.Status, PRNumber: res.PR, Branch: res.Branch,
		InputTokens: res.Spent.InputTokens, OutputTokens: res.Spent.OutputTokens, CostUSD: res.Spent.CostUSD,
		LogCommit: logCommit(res.LogURL)}
	if res.Outcome == "reviewed" || res.Outcome == "triaged" {
		// A cycle's status is what it did; its verdict is the cycle's.
		out.Status, out.Verdict = res.Outcome, res.Status
	}
	if out.Status == "" {
		out.Status = res.Outcome
	}
	if res.SessionID != "" {
		// A continued session's usage so far was spent by earlier jobs.
		evs, err := st.Read(ctx, res.SessionID, 1)
		spent, ok, err := jobUsage(evs, js.foundSeq(res.SessionID), err)
		switch {
		case err != nil:
			Warningf(log, "agentos: this job's usage of session %s could not be read from its log (%v); the usage outputs may include earlier jobs'", res.SessionID, err)
		case ok:
			out.InputTokens, out.OutputTokens, out.CostUSD = spent.InputTokens, spent.OutputTokens, spent.CostUSD
		}
	}
	sum := SummaryInput{Outputs: out, Event: env.EventName, Reason: res.Reason, LogURL: res.LogURL}
	if res.SessionID != "" {
		fillSummary(ctx, st, res.SessionID, &sum)
		if out.Status == "" {
			out.Status = sum.Outputs.Status
		}
	}
	if derr != nil && isPRRefusal(derr) {
		// The work is on the session branch; the maintainer is told on
		// the tracking comment what to change, and the step fails.
		out.Status, out.ExitReason = "failed", ExitPRsNotPermitted
		sum.Reason = "Failed: GitHub refused to let the workflow's token open the pull request. Allow it: " + PRSetting + ", then re-run the job; or use a GitHub App (docs/action-setup.md)."
		if res.SessionID != "" && t.Number > 0 {
			found, err := settleTrackingComment(ctx, bot.Client, t.Owner, t.Name, t.Number, d.BotLogin(), res.SessionID, prRefusalNote(res.SessionID, res.Branch))
			if err != nil {
				Warningf(log, "agentos: could not update the tracking comment: %v", err)
			} else if !found {
				Warningf(log, "agentos: no tracking comment of session %s on #%d to update", res.SessionID, t.Number)
			}
		}
		Errorf(log, "agentos could not open the pull request: GitHub Actions is not permitted to create pull requests in %s. Allow it in %s, or run the Action as a GitHub App (docs/action-setup.md)", env.Repository, PRSetting)
		return out, errors.Join(fmt.Errorf("%w: %v", ErrPRsNotPermitted, derr), finish(env, out, sum))
	}
	if derr != nil {
		if errors.Is(derr, dispatch.ErrPreflight) {
			out.Status, out.ExitReason = "not_started", ExitNotStarted
		}
		if errors.Is(derr, dispatch.ErrTamperedLog) {
			Errorf(log, "refusing session %s: %v", res.SessionID, derr)
		} else {
			Errorf(log, "%v", derr)
		}
		sum.Reason = "Failed: " + derr.Error()
		return out, errors.Join(derr, finish(env, out, sum))
	}
	fmt.Fprintf(log, "agentos: session %s is %s\n", out.SessionID, out.Status)
	var evs []event.Event
	var snap *replay.Snapshot
	if res.SessionID != "" {
		if evs, err = st.Read(ctx, res.SessionID, 1); err == nil && len(evs) > 0 {
			if s, err := replay.Replay(evs); err == nil {
				snap = &s
			}
		}
	}
	if why := judge(&out, evs, snap, changesRequestedBy(env.EventName, body)); out.ExitReason != "" {
		// The run did not do what was asked: the step fails (the
		// command maps ExitReason to its exit code) and an annotation
		// puts why on the workflow run's page.
		if why == "" {
			why = sum.Reason
		}
		Errorf(log, "agentos session %s: %s: %s", out.SessionID, out.ExitReason, why)
		if why != sum.Reason && why != "" {
			sum.Reason = strings.TrimSpace(sum.Reason + "\n\n**The step fails:** " + why)
		}
	}
	return out, finish(env, out, sum)
}

// ownTrigger completes a trigger from the environment (the repository
// when the payload has none; for a home run, GITHUB_ACTOR as the author)
// and refuses an event about another repository.
func (e Env) ownTrigger(t webhook.Trigger, home bool) (webhook.Trigger, error) {
	if t.Repo == "" {
		t.Repo = e.Repository
		t.Owner, t.Name, _ = strings.Cut(t.Repo, "/")
	}
	if home && t.Author == "" {
		t.Author = e.Actor
	}
	t.Attempt = e.RunAttempt
	if !strings.EqualFold(t.Repo, e.Repository) {
		return t, fmt.Errorf("the event is about %s, but this workflow runs in %s", t.Repo, e.Repository)
	}
	return t, nil
}

// revoke ends the installation tokens this run minted (App mode); a
// failure is a warning, never the step's error.
func revoke(ctx context.Context, bot *dispatch.GitHubBot, log io.Writer) {
	if n, err := bot.Client.RevokeMintedTokens(context.WithoutCancel(ctx)); err != nil {
		Warningf(log, "agentos: revoking the run's installation tokens: %v", err)
	} else if n > 0 {
		fmt.Fprintf(log, "agentos: revoked %d installation token(s) this run minted\n", n)
	}
}

func finish(env Env, out Outputs, sum SummaryInput) error {
	sum.Outputs = out
	return errors.Join(WriteOutputs(env.OutputPath, out.Pairs()), AppendSummary(env.Summary, Summary(sum)))
}

// fillSummary adds the plan, tool calls, tests and approvals from the log,
// read through the same view the tracking comment renders.
func fillSummary(ctx context.Context, st store.Store, sid string, sum *SummaryInput) {
	evs, err := st.Read(ctx, sid, 1)
	if err != nil || len(evs) == 0 {
		return
	}
	snap, err := replay.Replay(evs)
	if err != nil {
		return
	}
	if snap.Terminal != nil && sum.Reason == "" {
		sum.Reason = snap.Terminal.Reason
	}
	if n := snap.Usage.UnpricedCalls; n > 0 {
		sum.Unpriced = fmt.Sprintf("not tracked for %d of the session's %d model calls (no price is known)", n, snap.LLMCalls)
	}
	v := tracking.ViewFromSnapshot(snap, tracking.Options{})
	for _, s := range v.Plan {
		sum.Plan = append(sum.Plan, s.Description)
	}
	for _, t := range v.Tests {
		line := "`" + t.Command + "`: " + t.Result
		if t.Detail != "" {
			line += " (" + t.Detail + ")"
		}
		sum.Tests = append(sum.Tests, line)
	}
	sum.Tools = map[string]int{}
	for _, c := range snap.ToolsInvoked {
		sum.Tools[c.Tool]++
	}
	for _, a := range snap.ResolvedApprovals {
		sum.Approvals = append(sum.Approvals, fmt.Sprintf("`%s` %s: %s by %s", a.ID, a.Tool, a.Decision, a.By))
	}
	for _, a := range snap.PendingApprovals {
		sum.Approvals = append(sum.Approvals, fmt.Sprintf("`%s` %s: waiting for a maintainer", a.ID, a.Tool))
	}
	sort.Strings(sum.Approvals)
}

// logCommit is the commit of a session log link (…/blob/<commit>/…), ""
// when there is none.
func logCommit(url string) string {
	_, rest, ok := strings.Cut(url, "/blob/")
	if !ok {
		return ""
	}
	c, _, _ := strings.Cut(rest, "/")
	if len(c) != 40 || strings.Trim(c, "0123456789abcdef") != "" {
		return ""
	}
	return c
}

// limitEngines narrows every engine's runs by allowed_tools and
// disallowed_tools (run.Engine.Limit): the kernel refuses what they
// exclude, and skill.invoke records them with the scope that results.
func limitEngines(next dispatch.Engines, lim agentrun.ToolLimits) dispatch.Engines {
	if lim.Empty() {
		return next
	}
	return func(ctx context.Context, r dispatch.EngineRequest) (*agentrun.Engine, func(), error) {
		e, closeFn, err := next(ctx, r)
		if err != nil || e == nil {
			return e, closeFn, err
		}
		e.Limit(lim)
		return e, closeFn, nil
	}
}

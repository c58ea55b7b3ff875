package dispatch

// The workflow plane's review and triage cycles: bot/review posts what
// they find; the dispatcher routes the commands to it, serves it the
// session lifecycle (review.Sessions), and starts cycles for the Action's
// events that carry no command (RunCycle).

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentos/agentos/bot/auth"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/review"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/untrusted"
)

// Workflows configures the workflow plane's cycles (Config.Workflows). A
// nil Reviewer or Triager makes the command answer that the cycle is not
// set up here, unless OwnPlane fills it.
type Workflows struct {
	Reviewer review.Reviewer
	Triager  review.Triager
	// OwnPlane runs the cycles Reviewer and Triager leave unset on the
	// dispatcher's own workflow plane: the same worktrees, engines and
	// store as every run (New wires it).
	OwnPlane bool
	// Mode is the mode the cycles run in: review.ModeInteractive unless
	// set (the Action sets review.ModeHeadless).
	Mode string
	// Instructions are passed to every cycle (custom_instructions).
	Instructions string
	// ProposeFixes makes a review's safe_auto findings one follow-up fix
	// proposal that pauses for approval like any `/agent` request. The bot
	// and the Action set it; without it a review only reports.
	ProposeFixes bool
}

// cycleMode is the mode cycles run in, the fix cycle of `/agent` runs
// included.
func (d *Dispatcher) cycleMode() string {
	if d.workflows.Mode == "" {
		return review.ModeInteractive
	}
	return d.workflows.Mode
}

// reviews is the review and triage handler for one command.
func (d *Dispatcher) reviews() *review.Handler { return d.reviewsFor(CycleOptions{}) }

// reviewsFor is the review and triage handler for one trigger; a cycle
// the Action starts (RunCycle) adds its own instructions and may turn fix
// proposals off.
func (d *Dispatcher) reviewsFor(o CycleOptions) *review.Handler {
	w := d.workflows
	h := &review.Handler{GitHub: d.gh, Sessions: sessions{d}, Trigger: d.trigger(), BotLogin: d.botLogin, Mode: d.cycleMode(), Log: d.log(),
		Reviewer: w.Reviewer, Triager: w.Triager, Instructions: w.Instructions, ProposeFixes: w.ProposeFixes && !o.NoFixProposal}
	if o.Instructions != "" {
		h.Instructions = strings.TrimSpace(h.Instructions + "\n\n" + o.Instructions)
	}
	return h
}

// CycleOptions are what one cycle RunCycle starts adds to the
// dispatcher's Workflows.
type CycleOptions struct {
	// Instructions are appended to Workflows.Instructions for this cycle
	// (the automation's own, after the custom instructions).
	Instructions string
	// NoFixProposal keeps a review's safe_auto findings from becoming a
	// fix proposal (a fork's pull request: no proposal starts from its
	// code), whatever Workflows.ProposeFixes says.
	NoFixProposal bool
}

// reported is a review or triage trigger's result as the dispatcher
// reports every trigger's.
func reported(r review.Result, err error) (Result, error) {
	return Result{Outcome: r.Outcome, Reason: r.Reason, SessionID: r.SessionID, Status: r.Status, PR: r.PR,
		Usage: r.Usage, Spent: r.Spent, LogURL: r.LogURL, Proposal: r.Proposal}, err
}

// sessions serves bot/review the dispatcher's session lifecycle.
type sessions struct{ d *Dispatcher }

var _ review.Sessions = sessions{}

func (s sessions) SessionID(t webhook.Trigger) string { return s.d.triggerSession(t) }

func (s sessions) Lease(ctx context.Context, sid string) (func(), error) { return s.d.lease(ctx, sid) }

func (s sessions) MayRun(ctx context.Context, repo github.Repo, t webhook.Trigger) (bool, error) {
	_, refused, err := s.d.authorize(ctx, repo, t, auth.ActionRun, false)
	return err == nil && !refused, err
}

func (s sessions) Events(ctx context.Context, sid string) ([]event.Event, error) {
	return s.d.runs.Store.Read(ctx, sid, 1)
}

func (s sessions) Annotate(ctx context.Context, sid, kind string, v any) error {
	return s.d.annotate(ctx, sid, kind, "github", v)
}

func (s sessions) KeepLog(ctx context.Context, repo github.Repo, sid string) (string, error) {
	d := s.d
	if d.git == nil || d.git.ArtifactBranch() == "" {
		return "", nil // the log lives on session branches; a review has none
	}
	_, sha, err := d.commitArtifact(ctx, repo, sid, nil)
	if err != nil {
		return "", err
	}
	return d.logURL(repo, sha, sid), nil
}

func (s sessions) IsSessionBranch(ctx context.Context, repo github.Repo, branch string) (bool, error) {
	_, own, err := s.d.sessionOfBranch(ctx, repo, branch)
	return own, err
}

func (s sessions) StartRun(ctx context.Context, repo github.Repo, t webhook.Trigger, prompt string) (string, error) {
	res, err := s.d.startRun(ctx, repo, t, prompt)
	return res.SessionID, err
}

// Cycles that RunCycle starts.
const (
	CycleReview = "review"
	CycleTriage = "triage"
	CycleFix    = "fix"
)

// RunCycle starts a cycle for an event that carries no command (the
// Action's automation mode: a pull request opened, an issue opened,
// labelled or assigned): review on a pull request, triage on an issue,
// or fix — a run on prompt, as `/agent <prompt>` starts. Review and
// triage only read and comment, and the repository's workflow chose to
// run them on such events, so the event's author is not checked (a
// contributor's pull request gets reviewed); fix changes code, so its
// author needs the same permission as for `/agent <prompt>`. Result
// reports the outcome as for Dispatch.
func (d *Dispatcher) RunCycle(ctx context.Context, t webhook.Trigger, cycle, prompt string, o CycleOptions) error {
	res, err := d.runCycle(ctx, t, cycle, prompt, o)
	if d.onResult != nil {
		d.onResult(res)
	}
	if err != nil {
		d.log().Error("cycle failed", "cycle", cycle, "delivery", t.DeliveryID, "repo", t.Repo, "number", t.Number, "session", res.SessionID, "err", err)
	}
	return err
}

func (d *Dispatcher) runCycle(ctx context.Context, t webhook.Trigger, cycle, prompt string, o CycleOptions) (Result, error) {
	if d.botLogin != "" && strings.EqualFold(t.Author, d.botLogin) {
		return Result{Outcome: "ignored", Reason: "the bot's own event"}, nil
	}
	repo, ok := github.ParseRepo(t.Repo)
	if !ok || t.Number <= 0 {
		return Result{Outcome: "ignored", Reason: "no repository or number"}, nil
	}
	d.remember(repo, t.InstallationID)
	switch cycle {
	case CycleReview:
		return reported(d.reviewsFor(o).Review(ctx, repo, t))
	case CycleTriage:
		return reported(d.reviewsFor(o).Triage(ctx, repo, t))
	case CycleFix:
		// The prompt may quote an issue's text: what GitHub renders
		// invisibly is not part of what anyone visibly asked.
		prompt, _ = untrusted.GitHubText(prompt, 0)
		if strings.TrimSpace(prompt) == "" {
			return Result{Outcome: "ignored", Reason: "fix without a prompt"}, nil
		}
		if res, refused, err := d.authorize(ctx, repo, t, auth.ActionRun, true); refused || err != nil {
			return res, err
		}
		return d.startRun(ctx, repo, t, prompt)
	}
	return Result{Outcome: "ignored", Reason: "unknown cycle " + cycle}, fmt.Errorf("dispatch: unknown cycle %q", cycle)
}

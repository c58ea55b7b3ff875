package dispatch

import (
	"context"
	"errors"
	"fmt"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/review"
	"strings"

	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/workflow"
	"github.com/agentos/agentos/runtime/workflow/cycle"
)

// workflowPlane runs the workflow plane's review and triage cycles
// (runtime/workflow/cycle) on the dispatcher's own machinery: each cycle
// is a run of the session, in a worktree of the repository (the pull
// request's head for a review, the default branch for triage) jailed like
// any run, with the dispatcher's engines and run manager, so the cycle's
// events land in the session's log. It satisfies Reviewer and Triager.
//
// The registry is the built-in plane plus the repository's own
// .agent/workflows — except for a fork's pull request, whose definitions
// are not the repository's: it gets the built-in plane only.
type workflowPlane struct {
	D *Dispatcher
}

var (
	_ review.Reviewer = (*workflowPlane)(nil)
	_ review.Triager  = (*workflowPlane)(nil)
)

// errCyclePaused is returned when a review or triage cycle stops for an
// approval: their personas only read, so nothing in them should ask; the
// bot posts nothing rather than a half-finished result.
var errCyclePaused = errors.New("the cycle paused for an approval; review and triage never write, so nothing is posted")

// execute runs cycle id in a fresh worktree at base and returns its
// result and the session's usage.
func (p *workflowPlane) execute(ctx context.Context, repo github.Repo, number int, base Base, untrusted bool, req cycle.Request) (cycle.Result, replay.Usage, error) {
	d := p.D
	wt, err := d.git.Start(ctx, repo, p.D.branchPrefix()+req.SessionID, base)
	if err != nil {
		return cycle.Result{}, replay.Usage{}, fmt.Errorf("prepare the worktree: %w", err)
	}
	defer wt.Close()
	_, x, release, err := d.engine(ctx, EngineRequest{Dir: wt.Dir(), SessionID: req.SessionID, Untrusted: untrusted})
	if err != nil {
		return cycle.Result{}, replay.Usage{}, fmt.Errorf("set up the runtime: %w", err)
	}
	defer release()
	req.Cwd = wt.Dir()
	req.SessionKey = fmt.Sprintf("%s#%d", repo.FullName(), number)
	res, err := p.run(ctx, repo, x, req)
	if err != nil {
		return res, replay.Usage{}, err
	}
	if res.Outcome.Status == run.StatusPaused {
		return res, replay.Usage{}, errCyclePaused
	}
	snap, _, err := d.snapshotAt(ctx, req.SessionID)
	if err != nil {
		return res, replay.Usage{}, err
	}
	return res, snap.Usage, nil
}

// run starts the cycle, unless an earlier attempt of the same delivery
// began it (its process died and the delivery is handled again; the
// session derives from the delivery): a run the log shows still running
// is taken over — lanes and phases that finished are replayed from the
// log, not asked again, and what was unfinished goes on live — and a run
// that completed is not run again: its result is the log's, and the
// caller posts it (it looks for an earlier post by its marker first). A
// running run whose worktree the log cannot rebuild (a command ran in it)
// is started again instead; Manager.Start closes the earlier run with its
// report_missing report. The caller holds the session's lease.
func (p *workflowPlane) run(ctx context.Context, repo github.Repo, x *cycle.Executor, req cycle.Request) (cycle.Result, error) {
	d := p.D
	sid := req.SessionID
	if _, err := d.runs.CloseEnded(ctx, sid); err != nil {
		return cycle.Result{}, err
	}
	evs, err := d.runs.Store.Read(ctx, sid, 1)
	if err != nil {
		return cycle.Result{}, err
	}
	if len(evs) == 0 {
		return x.Run(ctx, req)
	}
	snap, err := replay.Replay(evs)
	if err != nil {
		return cycle.Result{}, err
	}
	c, err := x.Registry.CycleForTrigger(req.Cycle)
	if err != nil {
		return cycle.Result{}, err
	}
	if snap.RunID == "" || cycle.ResultFromLog(evs, snap.RunID).Cycle != c.ID || d.runs.Running(sid) {
		return x.Run(ctx, req)
	}
	switch snap.RunStatus {
	case "running":
		n, rerr := run.RebuildWorkspace(req.Cwd, evs, 0)
		if rerr != nil {
			d.log().Warn("cycle cannot be taken over; running it again", "session", sid, "repo", repo.FullName(), "cycle", c.ID, "err", rerr)
			return x.Run(ctx, req)
		}
		d.log().Info("taking over a cycle whose process stopped", "session", sid, "repo", repo.FullName(), "cycle", c.ID, "run", snap.RunID, "changes_applied", n)
		return x.Takeover(ctx, sid, req.Cwd, req.Transcript, "taken over: the delivery was handled again after the process working the cycle stopped")
	case "completed":
		res := cycle.ResultFromLog(evs, snap.RunID)
		res.Outcome = run.Outcome{SessionID: sid, RunID: snap.RunID, Status: snap.RunStatus, Output: res.Output}
		d.log().Info("cycle already completed; using its recorded result", "session", sid, "repo", repo.FullName(), "cycle", c.ID, "run", snap.RunID)
		return res, nil
	}
	return x.Run(ctx, req)
}

// engine builds the engine of a session's worktree (d.engines, which
// assembles it with setup.Build) and returns it with its workflow plane:
// the built-in plane plus the worktree's .agent/workflows, except for
// untrusted code (a fork's pull request): the built-in plane only. A
// repository whose definitions do not load gets no run (fail closed); the
// error names the file and field. An engine without the plane, or whose
// plane starts cycles through another manager or holds the repository's
// definitions for untrusted code, is refused.
func (d *Dispatcher) engine(ctx context.Context, r EngineRequest) (*run.Engine, *cycle.Executor, func(), error) {
	r.Runs = d.runs
	eng, release, err := d.engines(ctx, r)
	if err != nil {
		return nil, nil, nil, err
	}
	x, _ := eng.Plane.(*cycle.Executor)
	switch {
	case x == nil || x.Registry == nil:
		err = errors.New("the run engine has no workflow plane (assemble it with setup.Options.Runs)")
	case x.Manager != d.runs:
		err = errors.New("the run engine's workflow plane starts cycles through another run manager")
	case r.Untrusted && x.Registry.FromSource(workflow.RepoDir):
		err = errors.New("the run engine loaded the repository's workflow definitions for untrusted code")
	}
	if err != nil {
		release()
		return nil, nil, nil, err
	}
	return eng, x, release, nil
}

// fixRequest is the run request of an `/agent` request: the fix cycle,
// in the mode the bot runs cycles in.
func (d *Dispatcher) fixRequest(x *cycle.Executor, req cycle.Request) (run.StartRequest, error) {
	req.Cycle, req.Mode = "fix", d.cycleMode()
	return x.StartRequest(req)
}

// Review implements Reviewer: the review cycle over the pull request's
// diff.
func (p *workflowPlane) Review(ctx context.Context, in review.Input) (review.Output, error) {
	repo, ok := github.ParseRepo(in.Repo)
	if !ok {
		return review.Output{}, fmt.Errorf("review: repository %q", in.Repo)
	}
	// A fork's head is fetched from the base repository, never from the
	// fork.
	base := Base{Ref: in.HeadRef, SHA: in.HeadSHA}
	if in.Untrusted {
		base = Base{PullNumber: in.PR, SHA: in.HeadSHA}
	}
	prompt := fmt.Sprintf("Review pull request #%d of %s at %s.", in.PR, in.Repo, short(in.HeadSHA))
	if in.Instructions != "" {
		prompt += "\n\nThe maintainers' instructions:\n" + in.Instructions
	}
	res, usage, err := p.execute(ctx, repo, in.PR, base, in.Untrusted, cycle.Request{SessionID: in.SessionID, Cycle: "review", Prompt: prompt, Mode: in.Mode,
		Inputs:  map[string]string{"diff": in.Diff},
		Trigger: map[string]any{"repo": in.Repo, "number": in.PR, "kind": "review", "head_sha": in.HeadSHA}})
	if err != nil {
		return review.Output{}, err
	}
	return review.FromCycle(res, usage), nil
}

// Triage implements Triager: the triage cycle over the issue.
func (p *workflowPlane) Triage(ctx context.Context, in review.TriageInput) (review.TriageOutput, error) {
	repo, ok := github.ParseRepo(in.Repo)
	if !ok {
		return review.TriageOutput{}, fmt.Errorf("triage: repository %q", in.Repo)
	}
	def, err := p.D.gh.DefaultBranch(ctx, repo)
	if err != nil {
		return review.TriageOutput{}, err
	}
	var issue strings.Builder
	fmt.Fprintf(&issue, "Title: %s\n", in.Title)
	fmt.Fprintf(&issue, "Labels the repository has (propose only these): %s\n", strings.Join(in.Labels, ", "))
	fmt.Fprintf(&issue, "Labels the issue has now: %s\n\n", strings.Join(in.Current, ", "))
	issue.WriteString(in.Body)
	prompt := fmt.Sprintf("Triage issue #%d of %s.", in.Issue, in.Repo)
	if in.Instructions != "" {
		prompt += "\n\nThe maintainers' instructions:\n" + in.Instructions
	}
	res, usage, err := p.execute(ctx, repo, in.Issue, Base{Ref: def}, false, cycle.Request{SessionID: in.SessionID, Cycle: "triage", Prompt: prompt, Mode: in.Mode,
		Inputs:  map[string]string{"issue": issue.String()},
		Trigger: map[string]any{"repo": in.Repo, "number": in.Issue, "kind": "triage"}})
	if err != nil {
		return review.TriageOutput{}, err
	}
	return review.TriageFromCycle(res, usage), nil
}

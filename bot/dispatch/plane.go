package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/workflow"
	"github.com/agentos/agentos/runtime/workflow/cycle"
	"github.com/agentos/agentos/schemas"
)

// Plane runs the workflow plane's review and triage cycles
// (runtime/workflow/cycle) on the dispatcher's own machinery: each cycle
// is a run of the session, in a worktree of the repository (the pull
// request's head for a review, the default branch for triage) jailed like
// any run, with the dispatcher's engines and run manager, so the cycle's
// events land in the session's log. It satisfies Reviewer and Triager.
//
// The registry is the built-in plane plus the repository's own
// .agent/workflows — except for a fork's pull request, whose definitions
// are not the repository's: it gets the built-in plane only.
type Plane struct {
	D *Dispatcher
}

var (
	_ Reviewer = (*Plane)(nil)
	_ Triager  = (*Plane)(nil)
)

// errCyclePaused is returned when a review or triage cycle stops for an
// approval: their personas only read, so nothing in them should ask; the
// bot posts nothing rather than a half-finished result.
var errCyclePaused = errors.New("the cycle paused for an approval; review and triage never write, so nothing is posted")

// execute runs cycle id in a fresh worktree at base and returns its
// result and the session's usage.
func (p *Plane) execute(ctx context.Context, repo Repo, number int, base Base, untrusted bool, req cycle.Request) (cycle.Result, replay.Usage, error) {
	d := p.D
	wt, err := d.Git.Start(ctx, repo, p.D.branchPrefix()+req.SessionID, base)
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
func (p *Plane) run(ctx context.Context, repo Repo, x *cycle.Executor, req cycle.Request) (cycle.Result, error) {
	d := p.D
	sid := req.SessionID
	if _, err := d.Runs.CloseEnded(ctx, sid); err != nil {
		return cycle.Result{}, err
	}
	evs, err := d.Runs.Store.Read(ctx, sid, 1)
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
	if snap.RunID == "" || cycle.ResultFromLog(evs, snap.RunID).Cycle != c.ID || d.Runs.Running(sid) {
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

// engine builds the engine of a session's worktree with the workflow
// plane as its Plane, so a run that records a cycle (every `/agent` run
// is the fix cycle) starts, resumes and is taken over as that cycle in
// any process. The plane is the built-in one plus the worktree's
// .agent/workflows, except for untrusted code (a fork's pull request):
// the built-in plane only. A repository whose definitions do not load
// gets no run (fail closed); the error names the file and field.
func (d *Dispatcher) engine(ctx context.Context, r EngineRequest) (*run.Engine, *cycle.Executor, func(), error) {
	var reg *workflow.Registry
	var err error
	if r.Untrusted {
		reg, err = workflow.Load(schemas.MustDefault(), workflow.Builtin())
	} else {
		reg, err = workflow.LoadRepo(schemas.MustDefault(), r.Dir)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	eng, release, err := d.Engines(ctx, r)
	if err != nil {
		return nil, nil, nil, err
	}
	x := &cycle.Executor{Registry: reg, Manager: d.Runs, Engine: eng, Schemas: schemas.MustDefault()}
	return x.PlaneEngine(), x, release, nil
}

// fixRequest is the run request of an `/agent` request: the fix cycle,
// in the mode the bot runs cycles in.
func (d *Dispatcher) fixRequest(x *cycle.Executor, req cycle.Request) (run.StartRequest, error) {
	req.Cycle, req.Mode = "fix", ModeInteractive
	if d.Workflows != nil {
		req.Mode = d.Workflows.mode()
	}
	return x.StartRequest(req)
}

// Review implements Reviewer: the review cycle over the pull request's
// diff.
func (p *Plane) Review(ctx context.Context, in ReviewInput) (ReviewOutput, error) {
	repo, ok := ParseRepo(in.Repo)
	if !ok {
		return ReviewOutput{}, fmt.Errorf("review: repository %q", in.Repo)
	}
	prompt := fmt.Sprintf("Review pull request #%d of %s at %s.", in.PR, in.Repo, short(in.HeadSHA))
	if in.Instructions != "" {
		prompt += "\n\nThe maintainers' instructions:\n" + in.Instructions
	}
	res, usage, err := p.execute(ctx, repo, in.PR, in.Base, in.Untrusted, cycle.Request{SessionID: in.SessionID, Cycle: "review", Prompt: prompt, Mode: in.Mode,
		Inputs:  map[string]string{"diff": in.Diff},
		Trigger: map[string]any{"repo": in.Repo, "number": in.PR, "kind": "review", "head_sha": in.HeadSHA}})
	if err != nil {
		return ReviewOutput{}, err
	}
	return reviewOutput(res, usage), nil
}

// reviewOutput turns the cycle's per-finding gates into the review's
// decisions. The cycle's mode-dispatch decision (Delivery) bounds them:
// allow posts as the gates say, advisory puts every surviving finding in
// the body, anything else (deny, none) holds every finding back.
func reviewOutput(res cycle.Result, usage replay.Usage) ReviewOutput {
	out := ReviewOutput{Verdict: string(res.Verdict), Usage: usage}
	// A cycle that loops reports a persona once per pass: the last
	// report is the one its findings (or their absence) come from.
	at := map[string]int{}
	for _, p := range res.Personas {
		c := PersonaCoverage{Persona: p.Persona, Status: p.Status, Reason: p.Reason}
		if i, ok := at[p.Persona]; ok {
			out.Personas[i] = c
			continue
		}
		at[p.Persona] = len(out.Personas)
		out.Personas = append(out.Personas, c)
	}
	if a := res.Aggregate; a != nil {
		out.Aggregate, out.Coverage = a.Verdict, a.Coverage
	}
	for _, dc := range res.Decisions {
		f := dc.Finding
		// Fan-in merged findings by fingerprint: the fingerprint, not a
		// persona's own id, names the merged one.
		f.ID = dc.Fingerprint
		if f.Body == "" {
			f.Body = dc.Body // a result recorded before findings carried their body
		}
		out.Findings = append(out.Findings, f)
		gate := workflow.Outcome{PolicyID: dc.Policy, Reason: strings.TrimPrefix(dc.Reason, dc.Policy+": ")}
		switch dc.Gate {
		case cycle.GatePosted:
			gate.Decision = workflow.Allow
		case cycle.GateBodyOnly:
			gate.Decision = workflow.Advisory
		default:
			gate.Decision = workflow.Deny
		}
		switch res.Delivery {
		case workflow.Allow:
		case workflow.Advisory:
			if gate.Decision == workflow.Allow {
				gate = workflow.Outcome{PolicyID: "mode-dispatch", Decision: workflow.Advisory, Reason: "report only: " + res.Mode}
			}
		default:
			if gate.Decision != workflow.Deny {
				gate = workflow.Outcome{PolicyID: "mode-dispatch", Decision: workflow.Deny, Reason: "the cycle's mode delivers nothing"}
			}
		}
		out.Decisions = append(out.Decisions, FindingDecision{FindingID: f.ID, Gate: gate, Route: workflow.Outcome{Decision: dc.Route}})
	}
	return out
}

// Triage implements Triager: the triage cycle over the issue.
func (p *Plane) Triage(ctx context.Context, in TriageInput) (TriageOutput, error) {
	repo, ok := ParseRepo(in.Repo)
	if !ok {
		return TriageOutput{}, fmt.Errorf("triage: repository %q", in.Repo)
	}
	def, err := p.D.GitHub.DefaultBranch(ctx, repo)
	if err != nil {
		return TriageOutput{}, err
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
		return TriageOutput{}, err
	}
	return triageOutput(res, usage), nil
}

// triageOutput reads the triager's proposal (triage_proposal_v1, checked
// by the cycle) and gates both halves with the cycle's delivery decision.
func triageOutput(res cycle.Result, usage replay.Usage) TriageOutput {
	out := TriageOutput{Verdict: string(res.Verdict), Usage: usage}
	gate := workflow.Outcome{PolicyID: "mode-dispatch", Decision: res.Delivery, Reason: "the cycle's delivery decision"}
	if res.Verdict != workflow.VerdictDone || gate.Decision == "" {
		gate = workflow.Outcome{PolicyID: "triage", Decision: workflow.Deny, Reason: fmt.Sprintf("the cycle ended %q without a delivery decision", res.Verdict)}
	}
	out.LabelDecision, out.SummaryDecision = gate, gate
	prop, _ := res.Outputs["triage-propose"]["triager"].(map[string]any)
	if s, ok := prop["summary"].(string); ok {
		out.Summary = s
	}
	if ls, ok := prop["labels"].([]any); ok {
		for _, l := range ls {
			if s, ok := l.(string); ok {
				out.Labels = append(out.Labels, s)
			}
		}
	}
	if out.Summary == "" {
		out.LabelDecision = workflow.Outcome{PolicyID: "triage", Decision: workflow.Deny, Reason: "no proposal"}
		out.SummaryDecision = out.LabelDecision
	}
	return out
}

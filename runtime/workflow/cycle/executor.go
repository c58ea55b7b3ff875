package cycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/journal"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/workflow"
	"github.com/agentos/agentos/schemas"
)

// Modes a cycle runs in (mode-dispatch): a PR comment is interactive, the
// GitHub Action is headless.
const (
	ModeInteractive = "interactive"
	ModeAutofix     = "autofix"
	ModeReportOnly  = "report-only"
	ModeHeadless    = "headless"
)

var modes = []string{ModeInteractive, ModeAutofix, ModeReportOnly, ModeHeadless}

// Errors callers branch on (wrapped).
var (
	// ErrMode: the mode is not one of the four, or the cycle does not
	// allow it.
	ErrMode = errors.New("mode not allowed")
	// ErrInput: an input is too large or has an invalid name.
	ErrInput = errors.New("invalid workflow input")
)

// maxInput bounds one input (a PR diff, an issue body): inputs are recorded
// in run.started and quoted to every persona.
const maxInput = 256 << 10

// Request asks for one cycle run.
type Request struct {
	SessionID     string
	SessionKey    string // e.g. owner/repo#42
	CorrelationID string // e.g. the webhook delivery id
	// Cycle is a cycle id or a trigger word ("review"); unknown is
	// workflow.ErrUnknownID and nothing starts.
	Cycle  string
	Prompt string
	// Mode is interactive, autofix, report-only or headless ("" is
	// interactive); the cycle's modes, when listed, must include it.
	Mode string
	// Inputs are the request's data by name ("diff": a PR's unified diff,
	// "issue": an issue's title and body). They reach the model as
	// untrusted data.
	Inputs     map[string]string
	Trigger    map[string]any // recorded in run.started
	Cwd        string
	Transcript string
}

// spec is the recorded workflow request (run.started "workflow").
type spec struct {
	Cycle  string            `json:"cycle_id"`
	Mode   string            `json:"mode"`
	Inputs map[string]string `json:"inputs,omitempty"`
}

// Gate is what happened to a finding.
type Gate string

// Gates of a finding.
const (
	GatePosted   Gate = "posted"    // a line comment
	GateBodyOnly Gate = "body-only" // in the review's body
	GateDropped  Gate = "dropped"   // suppressed by policy
)

// FindingDecision is the policies' decision on one fanned-in finding.
type FindingDecision struct {
	Fingerprint string            `json:"fingerprint"`
	Finding     workflow.Finding  `json:"finding"`
	Body        string            `json:"body,omitempty"`
	Reviewers   []string          `json:"reviewers"`
	Gate        Gate              `json:"gate"`
	Route       workflow.Decision `json:"route,omitempty"`  // safe_auto | gated_auto | manual | advisory
	Policy      string            `json:"policy,omitempty"` // the confidence-gating policy that decided Gate
	Reason      string            `json:"reason"`
}

// PersonaReport says how one persona of a fan-out fared.
type PersonaReport struct {
	Persona  string `json:"persona"`
	Phase    string `json:"phase"`
	Status   string `json:"status"` // ran | failed | forbidden
	Reason   string `json:"reason,omitempty"`
	Findings int    `json:"findings"`
}

// Result is what a cycle run amounts to.
type Result struct {
	// Outcome is the run's: completed, failed, denied or paused, with its
	// terminal report and pending approvals.
	Outcome run.Outcome `json:"outcome"`
	Cycle   string      `json:"cycle_id"`
	Mode    string      `json:"mode"`
	// Verdict is done, halted or abort; "" while paused or when the
	// cycle never started (the WorkflowStart hook denied it).
	Verdict workflow.Verdict `json:"verdict,omitempty"`
	Reason  string           `json:"reason,omitempty"`
	Visited []string         `json:"visited_phases,omitempty"`
	// Delivery is the merged mode-dispatch decision of the last phase
	// that has one: allow (deliver: post, apply) or advisory (report
	// only; a deny aborts the cycle). "" means the cycle has no
	// mode-dispatch policy: callers deliver nothing they were not told to.
	Delivery  workflow.Decision         `json:"delivery,omitempty"`
	Aggregate *workflow.ReviewAggregate `json:"aggregate,omitempty"`
	Decisions []FindingDecision         `json:"decisions,omitempty"`
	Personas  []PersonaReport           `json:"personas,omitempty"`
	Outputs   map[string]map[string]any `json:"outputs,omitempty"`
	Paused    []run.Pending             `json:"paused,omitempty"`
	Output    string                    `json:"output,omitempty"`
}

// Executor runs cycles. It is the engine's workflow Plane: Run and Resume
// use a copy of Engine with Plane set to the executor.
type Executor struct {
	Registry *workflow.Registry
	Manager  *run.Manager
	Engine   *run.Engine
	Schemas  *schemas.Registry
}

// Open implements run.Plane: it resolves a recorded request's cycle. An
// unknown cycle, phase, policy or persona id fails closed.
func (x *Executor) Open(raw json.RawMessage) (run.Cycle, error) {
	var sp spec
	if err := json.Unmarshal(raw, &sp); err != nil {
		return nil, fmt.Errorf("workflow request: %w", err)
	}
	c, err := x.Registry.Cycle(sp.Cycle)
	if err != nil {
		return nil, err
	}
	if err := x.check(c, sp.Mode); err != nil {
		return nil, err
	}
	return &runner{x: x, c: c, sp: sp}, nil
}

// check resolves every id a cycle references, so that a dangling id fails
// before the cycle starts, and checks the mode.
func (x *Executor) check(c *workflow.Cycle, mode string) error {
	if !slices.Contains(modes, mode) {
		return fmt.Errorf("%w: %q is not one of %v", ErrMode, mode, modes)
	}
	if len(c.Modes) > 0 && !slices.Contains(c.Modes, mode) {
		return fmt.Errorf("%w: cycle %s runs in %v, not %q", ErrMode, c.ID, c.Modes, mode)
	}
	for _, id := range c.Phases {
		p, err := x.Registry.Phase(id)
		if err != nil {
			return err
		}
		for _, pid := range p.Personas {
			if _, err := x.Registry.Persona(pid); err != nil {
				return err
			}
		}
		if _, err := x.Registry.PoliciesFor(c, id); err != nil {
			return err
		}
	}
	return nil
}

func (x *Executor) engine() *run.Engine {
	e := *x.Engine
	e.Plane = x
	return &e
}

// StartRequest checks req (the cycle and the mode before anything is
// recorded: an unknown cycle is workflow.ErrUnknownID, a mode the cycle
// does not allow ErrMode, a bad input ErrInput) and returns the run
// request that starts the cycle. A host that drives runs itself (the bot)
// starts it with Manager.Start on an engine whose Plane is the executor
// (Executor.Engine's copy from PlaneEngine); Run does both.
func (x *Executor) StartRequest(req Request) (run.StartRequest, error) {
	c, err := x.Registry.CycleForTrigger(req.Cycle)
	if err != nil {
		return run.StartRequest{}, err
	}
	mode := req.Mode
	if mode == "" {
		mode = ModeInteractive
	}
	if err := x.check(c, mode); err != nil {
		return run.StartRequest{}, err
	}
	for k, v := range req.Inputs {
		if !validInputName(k) {
			return run.StartRequest{}, fmt.Errorf("%w: name %q (want [a-z0-9_-]+)", ErrInput, k)
		}
		if len(v) > maxInput {
			return run.StartRequest{}, fmt.Errorf("%w: %s is %d bytes, at most %d", ErrInput, k, len(v), maxInput)
		}
	}
	raw, err := json.Marshal(spec{Cycle: c.ID, Mode: mode, Inputs: req.Inputs})
	if err != nil {
		return run.StartRequest{}, err
	}
	return run.StartRequest{SessionID: req.SessionID, Prompt: req.Prompt, SessionKey: req.SessionKey,
		CorrelationID: req.CorrelationID, Trigger: req.Trigger, Cwd: req.Cwd, Transcript: req.Transcript, Workflow: raw}, nil
}

// PlaneEngine is the executor's engine with the executor as its workflow
// Plane: the engine that starts, resumes and takes over cycle runs.
func (x *Executor) PlaneEngine() *run.Engine { return x.engine() }

// Run starts a cycle and drives it until it ends or pauses. The cycle and
// the mode are checked before anything is recorded (see StartRequest).
func (x *Executor) Run(ctx context.Context, req Request) (Result, error) {
	sr, err := x.StartRequest(req)
	if err != nil {
		return Result{}, err
	}
	var sp spec
	if err := json.Unmarshal(sr.Workflow, &sp); err != nil {
		return Result{}, err
	}
	out, err := x.Manager.Start(ctx, x.engine(), sr)
	if err != nil {
		return Result{Outcome: out, Cycle: sp.Cycle, Mode: sp.Mode}, err
	}
	return x.result(ctx, out)
}

// Resume continues a paused cycle run (after its approvals were resolved
// with Manager.Resolve), in this process or any other.
func (x *Executor) Resume(ctx context.Context, sessionID, cwd, transcript string) (Result, error) {
	out, err := x.Manager.Resume(ctx, x.engine(), sessionID, cwd, transcript)
	if err != nil {
		return Result{Outcome: out}, err
	}
	return x.result(ctx, out)
}

// Takeover continues a cycle run its process left running (it died, or its
// replica did): run.Manager.Takeover on the executor's engine, so the
// cycle re-executes from the log — a finished persona lane is replayed,
// never asked again, and an unfinished one goes on from where its record
// ends — and the Result is the log's, as for Run. The caller holds the
// session's lease and gives a worktree rebuilt from the log as cwd.
func (x *Executor) Takeover(ctx context.Context, sessionID, cwd, transcript, reason string) (Result, error) {
	out, err := x.Manager.Takeover(ctx, x.engine(), sessionID, cwd, transcript, reason)
	if err != nil {
		return Result{Outcome: out}, err
	}
	return x.result(ctx, out)
}

func validInputName(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// result projects the run's log into a Result: the workflow_result
// artifact of the run, or (paused, denied before the end) what the log
// holds so far.
func (x *Executor) result(ctx context.Context, out run.Outcome) (Result, error) {
	j, err := journal.Open(ctx, x.Manager.Store, out.SessionID)
	if err != nil {
		return Result{Outcome: out}, err
	}
	evs, err := j.Events(ctx)
	if err != nil {
		return Result{Outcome: out}, err
	}
	res := ResultFromLog(evs, out.RunID)
	res.Outcome, res.Paused = out, out.Pending
	if res.Output == "" {
		res.Output = out.Output
	}
	return res, nil
}

// ResultFromLog folds run runID's workflow events and its workflow_result
// artifact (the last one) into a Result without Outcome.
func ResultFromLog(evs []event.Event, runID string) Result {
	var res Result
	for _, e := range evs {
		if e.RunID != runID {
			continue
		}
		switch e.Type {
		case event.RunStarted:
			var sp spec
			if json.Unmarshal(event.Field(e.Payload, "workflow"), &sp) == nil {
				res.Cycle, res.Mode = sp.Cycle, sp.Mode
			}
		case event.WorkflowPhaseAdvanced:
			res.Visited = append(res.Visited, event.FieldString(e.Payload, "to_phase"))
		case event.WorkflowCompleted:
			res.Verdict = workflow.Verdict(event.FieldString(e.Payload, "verdict"))
		case event.WorkflowAborted:
			res.Verdict, res.Reason = workflow.VerdictAbort, event.FieldString(e.Payload, "reason")
		case event.ArtifactEmitted:
			if event.FieldString(e.Payload, "kind") != artifactResult {
				continue
			}
			var r Result
			if json.Unmarshal([]byte(event.FieldString(e.Payload, "content")), &r) == nil {
				visited := res.Visited
				res = r
				res.Visited = visited
			}
		}
	}
	return res
}

package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/hooks"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/untrusted"
)

// Plane opens workflow-plane cycles for runs whose Input.Workflow is
// set (Engine.Plane). The workflow package implements it; run only knows
// this seam, so the import direction stays runtime/workflow/... → run.
type Plane interface {
	// Open returns the cycle a recorded workflow request names. An
	// unknown cycle, or a request that does not parse, is an error: the
	// run is denied (fail closed).
	Open(spec json.RawMessage) (Cycle, error)
}

// Cycle executes one workflow request inside a run.
type Cycle interface {
	// Execute runs the cycle over st. A paused Result pauses the run (an
	// approval inside a Plan-Work-Review pass); on resume Execute runs again from the
	// start over the recorded events, which st replays.
	Execute(ctx context.Context, st *Steps) (Result, error)
}

// Steps is what a cycle may do inside a run. Every method goes through the
// run's effects: live it appends to the session's log; while the run's
// recorded history lasts it replays and checks what was recorded, so a
// cycle re-executes deterministically in any process.
type Steps struct{ s *state }

// SessionID is the run's session.
func (st *Steps) SessionID() string { return st.s.f.j.SessionID() }

// Prompt is the run's request after the UserPromptSubmit hook.
func (st *Steps) Prompt() string { return st.s.prompt }

// Replaying reports whether the next step replays a recorded one.
func (st *Steps) Replaying() bool { return st.s.f.replaying() }

// Emit appends a workflow-plane event (actor "workflow").
func (st *Steps) Emit(ctx context.Context, typ string, payload any) error {
	_, err := st.s.f.emit(ctx, typ, "workflow", payload, "")
	return err
}

// Hook fires a lifecycle hook (the workflow plane's WorkflowStart,
// PhaseAdvance, WorkflowComplete) with the run's session, cwd and
// transcript filled in.
func (st *Steps) Hook(ctx context.Context, in hooks.Input) (hooks.Decision, error) {
	in.SessionID, in.Cwd, in.Transcript = st.SessionID(), st.s.in.Cwd, st.s.in.Transcript
	return st.s.f.hook(ctx, st.s.e.Hooks, in)
}

// Pass is one Plan-Work-Review pass of a phase.
type Pass struct {
	// Prompt is the request the Lead sees.
	Prompt string
	// AllowedTools is the Worker's tool scope; nil keeps the run's (the
	// selected skill's).
	AllowedTools []string
	// WritePaths is the Worker's write scope, enforced by the kernel
	// (kernel.Call.WritePaths); nil: unrestricted beyond policy.
	WritePaths []string
}

// Pass runs one Plan-Work-Review pass. It may pause for an approval.
func (st *Steps) Pass(ctx context.Context, p Pass) (Result, error) {
	s := st.s
	prompt, allowed, wp, sr := s.prompt, s.allowed, s.writePaths, s.skillRules
	defer func() { s.prompt, s.allowed, s.writePaths, s.skillRules = prompt, allowed, wp, sr }()
	s.prompt = p.Prompt
	if p.AllowedTools != nil {
		// A persona's own tools take the skills' place, rules and all.
		s.allowed, s.skillRules = p.AllowedTools, nil
	}
	s.writePaths = p.WritePaths
	return s.pass(ctx)
}

// PersonaCall is one persona's pass in a fan-out: a read-only tool loop
// whose final reply is a JSON document of Schema.
type PersonaCall struct {
	Role         string // the persona's id: actor and provider role of its calls
	System, User string
	AllowedTools []string
	Schema       string
}

// PersonaResult is one persona's outcome: its validated document, or why
// it produced none.
type PersonaResult struct {
	Role    string
	Doc     json.RawMessage
	Failure string
}

// Markers delimiting one persona's events in the log (agent.transition
// from → to): each persona's events are one contiguous segment.
const (
	personaStart = "PERSONA"
	personaEnd   = "PERSONA_DONE"
)

// FanOut runs the personas' passes with at most limit at a time. Each
// persona is a lane of the session's log, recorded live: a lane begins with
// an agent.transition FANOUT → PERSONA by the persona, every event of its
// pass is appended as it happens (interleaved with the other lanes'), and
// it ends with PERSONA → PERSONA_DONE the moment the pass ends. A lane's
// events are told apart by their parent: an event the pass appends with no
// parent gets the lane's opening transition as its parent, and every other
// one (a response, a tool result) already names an event of the lane.
//
// Re-execution (resume, takeover, Reexecute) sorts the recorded lanes out
// by role: a finished lane is replayed and never calls the model again, a
// lane cut short by a crash is replayed and continues live from where its
// record ends (a request without a response is asked again, a tool call
// without a result was closed INTERRUPTED by Takeover), and a lane that
// never started runs live. Results are in the order of calls whatever
// order the lanes finished in. A persona's tools are read-only: its calls
// carry an empty write scope, so the kernel refuses every write, and an
// approval it runs into is denied.
func (st *Steps) FanOut(ctx context.Context, limit int, calls []PersonaCall) ([]PersonaResult, error) {
	s := st.s
	if limit < 1 {
		limit = 1
	}
	lanes, err := s.recordedLanes(calls)
	if err != nil {
		return nil, err
	}

	type out struct {
		res PersonaResult
		sub *state
		err error
	}
	outs := make([]out, len(calls))
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Add(1)
		go func(i int, c PersonaCall) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			o := &outs[i]
			o.res, o.sub, o.err = s.runLane(ctx, c, lanes[i])
		}(i, c)
	}
	wg.Wait()
	results := make([]PersonaResult, len(calls))
	for i, o := range outs {
		if o.err != nil {
			return nil, o.err
		}
		results[i] = o.res
		if o.sub != nil {
			s.usage = s.usage.Add(o.sub.usage)
			s.calls += o.sub.calls
			s.turns[calls[i].Role] = o.sub.turns[calls[i].Role]
		}
	}
	return results, nil
}

// recordedLane is what the log holds of one persona's lane.
type recordedLane struct {
	marker   string        // the id of its opening transition; "" when it never started
	events   []event.Event // its events, in log order, without the markers
	complete bool          // its closing transition is recorded
}

// recordedLanes reads the fan-out's lanes off the run's recorded history
// (moving the replay cursor past them). It stops at the first event that
// belongs to no lane, or once every lane is complete; a history that goes
// on past the fan-out while a lane is unfinished is a *NonDeterminismError.
func (s *state) recordedLanes(calls []PersonaCall) ([]recordedLane, error) {
	f := s.f
	lanes := make([]recordedLane, len(calls))
	byRole := map[string]int{}
	for i, c := range calls {
		if _, dup := byRole[c.Role]; dup {
			return nil, fmt.Errorf("fan-out: persona %s is called twice", c.Role)
		}
		byRole[c.Role] = i
	}
	member := map[string]int{} // event id → lane
	done := 0
	for f.pos < len(f.history) && done < len(calls) {
		e := f.history[f.pos]
		if i, ok := member[e.Parent()]; ok && e.Parent() != "" {
			lanes[i].events = append(lanes[i].events, e)
			member[e.ID] = i
			f.pos++
			continue
		}
		if e.Type == event.AgentTransition {
			i, ok := byRole[e.Actor]
			from, to := event.FieldString(e.Payload, "from"), event.FieldString(e.Payload, "to")
			if ok && to == personaStart && lanes[i].marker == "" {
				lanes[i].marker = e.ID
				member[e.ID] = i
				f.pos++
				continue
			}
			if ok && from == personaStart && to == personaEnd && lanes[i].marker != "" && !lanes[i].complete {
				lanes[i].complete = true
				done++
				f.pos++
				continue
			}
		}
		if e.Parent() == "" && !managerOwned[e.Type] {
			// Logs written before lanes were recorded live held each
			// persona's events as one contiguous segment, parentless
			// events included: such an event belongs to the one open lane.
			open := -1
			for i := range lanes {
				if lanes[i].marker != "" && !lanes[i].complete {
					if open >= 0 {
						open = -2
						break
					}
					open = i
				}
			}
			if open >= 0 {
				lanes[open].events = append(lanes[open].events, e)
				member[e.ID] = open
				f.pos++
				continue
			}
		}
		if managerOwned[e.Type] {
			f.pos++
			continue
		}
		break
	}
	if f.replaying() {
		for i, l := range lanes {
			if !l.complete {
				got := f.history[f.pos]
				return nil, &NonDeterminismError{Seq: got.Seq, Want: "the lane of persona " + calls[i].Role, Got: got.Type + " by " + got.Actor}
			}
		}
	}
	return lanes, nil
}

// runLane runs one persona's lane: replayed while its record lasts, live
// after (opening the lane first when it never started), and closed in the
// log as soon as the pass ends. A persona whose pass fails (a malformed
// reply after its repair turn, its budget, an approval) yields no
// document; the closing transition says why. Other errors (the store, a
// cancelled context, non-determinism) leave the lane open for a takeover.
func (s *state) runLane(ctx context.Context, c PersonaCall, rec recordedLane) (PersonaResult, *state, error) {
	if rec.complete {
		res, sub, err := s.replayPersona(ctx, c, rec.events)
		return res, sub, err
	}
	marker := rec.marker
	if marker == "" {
		e, err := s.f.j.Append(ctx, event.AgentTransition, c.Role, map[string]any{"from": "FANOUT", "to": personaStart, "role": c.Role}, "")
		if err != nil {
			return PersonaResult{}, nil, err
		}
		marker = e.ID
	}
	sub := s.persona(c, newLane(s.f.j, marker), rec.events)
	res, err := sub.personaLoop(ctx, c)
	if err != nil {
		var nd *NonDeterminismError
		var f *Failure
		if errors.As(err, &nd) || ctx.Err() != nil || !errors.As(err, &f) {
			return PersonaResult{}, nil, err
		}
		res = PersonaResult{Role: c.Role, Failure: f.Reason}
	}
	end := map[string]any{"from": personaStart, "to": personaEnd, "role": c.Role}
	if res.Failure != "" {
		end["reason"] = res.Failure
	}
	if _, err := s.f.j.Append(ctx, event.AgentTransition, c.Role, end, ""); err != nil {
		return PersonaResult{}, nil, err
	}
	return res, sub, nil
}

// lane is one persona's view of the session's log during a fan-out: it
// appends to the log, giving the lane's opening transition as the parent
// of every event that names none (so that a re-execution can tell the
// interleaved lanes apart), and its Seq and Events are the lane's own
// events appended through it.
type lane struct {
	log      eventLog // nil: replay only, appending is an error
	sid, rid string
	marker   string
	mu       sync.Mutex
	evs      []event.Event
}

func newLane(log eventLog, marker string) *lane {
	return &lane{log: log, sid: log.SessionID(), rid: log.RunID(), marker: marker}
}

func (l *lane) Append(ctx context.Context, typ, actor string, payload any, parentID string) (event.Event, error) {
	if l.log == nil {
		return event.Event{}, &NonDeterminismError{Want: typ + " by " + actor + " past the end of a finished lane", Got: "the lane's end"}
	}
	if parentID == "" {
		parentID = l.marker
	}
	e, err := l.log.Append(ctx, typ, actor, payload, parentID)
	if err == nil {
		l.mu.Lock()
		l.evs = append(l.evs, e)
		l.mu.Unlock()
	}
	return e, err
}

func (l *lane) Record(ctx context.Context, typ, actor string, payload any, parentID string) (string, error) {
	e, err := l.Append(ctx, typ, actor, payload, parentID)
	if err != nil {
		return "", err
	}
	return e.ID, nil
}

func (l *lane) Seq() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(len(l.evs))
}

func (l *lane) Events(context.Context) ([]event.Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]event.Event(nil), l.evs...), nil
}

func (l *lane) SessionID() string { return l.sid }
func (l *lane) RunID() string     { return l.rid }

// replayPersona re-executes a finished persona's pass over its recorded
// events only; going live would mean the record is incomplete.
func (s *state) replayPersona(ctx context.Context, c PersonaCall, seg []event.Event) (PersonaResult, *state, error) {
	replayOnly := newLane(s.f.j, "")
	replayOnly.log = nil
	sub := s.persona(c, replayOnly, seg)
	sub.in.ctl = nil
	eng := *s.e
	eng.Provider, eng.Tools = replayOnlyProvider{}, replayOnlyTools{s.e.Tools}
	sub.e = &eng
	res, err := sub.personaLoop(ctx, c)
	if sub.f.replaying() {
		return PersonaResult{}, nil, &NonDeterminismError{Want: "persona " + c.Role + " to end exactly where its recorded lane ends", Got: "a different amount of work"}
	}
	if err != nil {
		var f *Failure
		if errors.As(err, &f) {
			return PersonaResult{Role: c.Role, Failure: f.Reason}, sub, nil
		}
		return PersonaResult{}, nil, err
	}
	return res, sub, nil
}

// persona is the state of one persona's pass: its own effects over its
// recorded lane, then live through log.
func (s *state) persona(c PersonaCall, log eventLog, seg []event.Event) *state {
	sub := &state{e: s.e, f: &effects{j: log, history: seg}, in: s.in, prompt: s.prompt, turns: map[string]int{c.Role: s.turns[c.Role]}, approvals: map[string]Resolution{}}
	sub.allowed = c.AllowedTools
	if sub.allowed == nil {
		sub.allowed = []string{}
	}
	sub.writePaths = []string{}
	return sub
}

// personaLoop is a persona's read-only tool loop: it ends with a reply of
// c.Schema, after at most one repair turn.
func (s *state) personaLoop(ctx context.Context, c PersonaCall) (PersonaResult, error) {
	msgs := []provider.Message{{Role: provider.RoleSystem, Content: c.System + "\n\n" + untrusted.Rule}, {Role: provider.RoleUser, Content: c.User}}
	var specs []provider.ToolSpec
	if s.e.Tools != nil && len(s.allowed) > 0 {
		specs = s.e.Tools.Specs(s.allowed)
	}
	var repair error
	for turn := 0; turn < max(s.e.Profile.Limits.MaxToolTurns, 1); turn++ {
		var schema *provider.ResponseSchema
		if repair != nil {
			schema = s.responseSchema(c.Schema)
		}
		resp, err := s.call(ctx, c.Role, msgs, specs, schema)
		if err != nil {
			return PersonaResult{}, err
		}
		if len(resp.ToolCalls) == 0 {
			doc, verr := s.settle(ctx, c.Role, c.Schema, resp.Text, repair)
			if verr == nil {
				return PersonaResult{Role: c.Role, Doc: doc}, nil
			}
			if err := s.violation(ctx, c.Role, c.Schema, verr); err != nil {
				return PersonaResult{}, err
			}
			if repair != nil {
				return PersonaResult{}, malformed(c.Role, c.Schema, verr)
			}
			repair = verr
			msgs = append(msgs, provider.Message{Role: provider.RoleAssistant, Content: resp.Text},
				provider.Message{Role: provider.RoleUser, Content: repairRequest(c.Schema, true, verr)})
			continue
		}
		msgs = append(msgs, provider.Message{Role: provider.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls})
		for _, tc := range resp.ToolCalls {
			call := Call{ID: tc.ID, Name: tc.Name, Args: tc.Args, AllowedTools: s.allowed, Role: c.Role, NoRepair: s.in.NoRepair, WritePaths: []string{}}
			out, err := s.f.tool(ctx, s.e.Tools, call)
			if err != nil {
				return PersonaResult{}, err
			}
			if out.Pending != nil {
				// A persona is read-only and cannot wait for a maintainer:
				// the action is denied, in the log, and the persona ends.
				// (approval.resolved is a manager-owned event: replay steps
				// over the recorded one instead of checking it.)
				if f := s.f; f.pos < len(f.history) && f.history[f.pos].Type == event.ApprovalResolved {
					f.pos++
				} else if _, err := f.j.Append(ctx, event.ApprovalResolved, "maintainer", map[string]any{"approval_id": out.Pending.ApprovalID, "decision": "deny", "by": "workflow", "reason": "a persona pass is read-only and does not wait for approvals"}, ""); err != nil {
					return PersonaResult{}, err
				}
				return PersonaResult{}, &Failure{Status: StatusDenied, Class: ClassPolicyDenied, Code: "GATE_DENIED", Reason: fmt.Sprintf("persona %s asked for an approval (%s); persona passes are read-only", c.Role, tc.Name)}
			}
			msgs = append(msgs, provider.Message{Role: provider.RoleTool, ToolCallID: tc.ID, Name: tc.Name, Content: untrusted.Block("tool_result:"+tc.Name, untrusted.Visible(toolMessage(out), true))})
		}
	}
	return PersonaResult{}, &Failure{Status: StatusFailed, Class: ClassPolicyDenied, Code: "BUDGET_EXCEEDED", Reason: fmt.Sprintf("persona %s did not finish within max_tool_turns", c.Role)}
}

// cycle runs the run's workflow request through Engine.Plane.
func (s *state) cycle(ctx context.Context) (Result, error) {
	if s.e.Plane == nil {
		return Result{}, &Failure{Status: StatusDenied, Class: ClassPolicyDenied, Code: "GATE_DENIED", Reason: "a workflow run was requested but this engine has no workflow plane", NextAction: "configure the workflow plane"}
	}
	c, err := s.e.Plane.Open(s.in.Workflow)
	if err != nil {
		return Result{}, &Failure{Status: StatusDenied, Class: ClassPolicyDenied, Code: "GATE_DENIED", Reason: "workflow: " + err.Error(), NextAction: "name a cycle the workflow plane defines (agentos workflows list)", Err: err}
	}
	return c.Execute(ctx, &Steps{s: s})
}

package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/hooks"
	"github.com/agentos/agentos/runtime/journal"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/untrusted"
)

// Plane opens workflow-plane cycles (L8) for runs whose Input.Workflow is
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
	// approval inside an L3 pass); on resume Execute runs again from the
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

// Pass is one L3 Plan-Work-Review pass of a phase.
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
	prompt, allowed, wp := s.prompt, s.allowed, s.writePaths
	defer func() { s.prompt, s.allowed, s.writePaths = prompt, allowed, wp }()
	s.prompt = p.Prompt
	if p.AllowedTools != nil {
		s.allowed = p.AllowedTools
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

// FanOut runs the personas' passes with at most limit at a time. Each runs
// on a private journal while the others run; when all have ended, their
// events are appended to the session's log one persona after another, in
// the order of calls, each as a segment between agent.transition markers.
// The log is therefore the same whatever order the passes finished in, and
// re-execution replays each persona from its own segment (a segment cut
// short by a crash is replayed, then continued live). A persona's tools
// are read-only: its calls carry an empty write scope, so the kernel
// refuses every write, and an approval it runs into is denied.
func (st *Steps) FanOut(ctx context.Context, limit int, calls []PersonaCall) ([]PersonaResult, error) {
	s := st.s
	if limit < 1 {
		limit = 1
	}
	// The recorded segments, in order.
	segs := make([][]event.Event, len(calls))
	recorded := make([]bool, len(calls)) // segment started in the log
	complete := make([]bool, len(calls))
	for i, c := range calls {
		next, ok := s.f.next()
		if !ok || next.Type != event.AgentTransition || next.Actor != c.Role || event.FieldString(next.Payload, "to") != personaStart {
			break
		}
		recorded[i] = true
		s.f.pos++
		for s.f.pos < len(s.f.history) {
			e := s.f.history[s.f.pos]
			s.f.pos++
			if e.Type == event.AgentTransition && e.Actor == c.Role && event.FieldString(e.Payload, "from") == personaStart && event.FieldString(e.Payload, "to") == personaEnd {
				complete[i] = true
				break
			}
			segs[i] = append(segs[i], e)
		}
		if !complete[i] {
			break
		}
	}
	if s.f.replaying() {
		for i := range calls {
			if !complete[i] {
				got := s.f.history[s.f.pos]
				return nil, &NonDeterminismError{Seq: got.Seq, Want: "persona segment " + calls[i].Role, Got: got.Type + " by " + got.Actor}
			}
		}
	}

	type out struct {
		res   PersonaResult
		sub   *state
		local []event.Event // events appended live, to copy
		err   error
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
			sub, err := s.persona(ctx, c, segs[i])
			if err != nil {
				outs[i].err = err
				return
			}
			res, err := sub.personaLoop(ctx, c)
			outs[i].res, outs[i].sub = res, sub
			if err != nil {
				outs[i].err = err
				return
			}
			outs[i].local, outs[i].err = sub.f.j.Events(context.WithoutCancel(ctx))
		}(i, c)
	}
	wg.Wait()
	results := make([]PersonaResult, len(calls))
	for i, o := range outs {
		if o.err != nil {
			var nd *NonDeterminismError
			if errors.As(o.err, &nd) || ctx.Err() != nil {
				return nil, o.err
			}
			var f *Failure
			if !errors.As(o.err, &f) {
				return nil, o.err
			}
			// A persona that failed (a malformed reply after its repair
			// turn, its budget) yields no findings; the fan-in records why.
			o.res = PersonaResult{Role: calls[i].Role, Failure: f.Reason}
		}
		results[i] = o.res
		if o.sub != nil {
			s.usage = s.usage.Add(o.sub.usage)
			s.calls += o.sub.calls
			s.turns[calls[i].Role] = o.sub.turns[calls[i].Role]
		}
		if complete[i] {
			continue
		}
		if !recorded[i] {
			if _, err := s.f.j.Append(ctx, event.AgentTransition, calls[i].Role, map[string]any{"from": "FANOUT", "to": personaStart, "role": calls[i].Role}, ""); err != nil {
				return nil, err
			}
		}
		remap := map[string]string{}
		copied := append([]event.Event(nil), segs[i]...)
		for _, e := range o.local {
			parent := e.Parent()
			if n, ok := remap[parent]; ok {
				parent = n
			}
			ne, err := s.f.j.Append(ctx, e.Type, e.Actor, json.RawMessage(e.Payload), parent)
			if err != nil {
				return nil, fmt.Errorf("fan-out: copying %s's events: %w", calls[i].Role, err)
			}
			remap[e.ID] = ne.ID
			copied = append(copied, ne)
		}
		// The session's log holds the events as sealed there (redacted).
		// The persona's result is what a re-execution will derive from
		// them, so derive it now, replaying the copy: live and resumed runs
		// then decide on the same documents.
		if len(o.local) > 0 {
			res, err := s.replayPersona(ctx, calls[i], copied)
			if err != nil {
				return nil, err
			}
			results[i] = res
		}
		end := map[string]any{"from": personaStart, "to": personaEnd, "role": calls[i].Role}
		if results[i].Failure != "" {
			end["reason"] = results[i].Failure
		}
		if _, err := s.f.j.Append(ctx, event.AgentTransition, calls[i].Role, end, ""); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// replayPersona re-executes a persona's pass over its recorded events
// only; going live would mean the record is incomplete.
func (s *state) replayPersona(ctx context.Context, c PersonaCall, seg []event.Event) (PersonaResult, error) {
	sub, err := s.persona(ctx, c, seg)
	if err != nil {
		return PersonaResult{}, err
	}
	sub.in.ctl = nil
	eng := *s.e
	eng.Provider, eng.Tools = replayOnlyProvider{}, replayOnlyTools{s.e.Tools}
	sub.e = &eng
	res, err := sub.personaLoop(ctx, c)
	if sub.f.j.Seq() > 0 {
		return PersonaResult{}, &NonDeterminismError{Want: "persona " + c.Role + " to end within its recorded events", Got: "more work"}
	}
	if err != nil {
		var f *Failure
		if errors.As(err, &f) {
			return PersonaResult{Role: c.Role, Failure: f.Reason}, nil
		}
		return PersonaResult{}, err
	}
	return res, nil
}

// persona is the state of one persona's pass: its own effects over the
// recorded segment, then a private journal.
func (s *state) persona(ctx context.Context, c PersonaCall, seg []event.Event) (*state, error) {
	sealer, err := event.NewSealer(s.e.Schemas, nil, nil)
	if err != nil {
		return nil, err
	}
	j, err := journal.Open(ctx, store.NewMemory(sealer), s.f.j.SessionID())
	if err != nil {
		return nil, err
	}
	j.SetRun(s.f.j.RunID())
	sub := &state{e: s.e, f: &effects{j: j, history: seg}, in: s.in, prompt: s.prompt, turns: map[string]int{c.Role: s.turns[c.Role]}, approvals: map[string]Resolution{}}
	sub.allowed = c.AllowedTools
	if sub.allowed == nil {
		sub.allowed = []string{}
	}
	sub.writePaths = []string{}
	return sub, nil
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

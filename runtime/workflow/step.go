package workflow

import (
	"fmt"
	"slices"
)

// Verdict is how a cycle ends (done | halted | abort); "" while it
// runs.
type Verdict string

const (
	VerdictDone   Verdict = "done"
	VerdictHalted Verdict = "halted"
	VerdictAbort  Verdict = "abort"
)

// Step is the deterministic transition after a phase's work: stay in the
// phase (To == From, the advance signal does not hold yet), move to To,
// or end with Verdict. Executors record it as workflow.phase_advanced,
// workflow.completed or workflow.aborted.
type Step struct {
	From       string  `json:"from_phase"`
	To         string  `json:"to_phase,omitempty"`
	Generation int     `json:"generation"` // the generation To runs in
	Verdict    Verdict `json:"verdict,omitempty"`
	Reason     string  `json:"reason"`
}

// Next decides what follows phase current of cycle c, over activation a
// (a.Phase is set to current). In this order: the phase's
// halt_signal and the cycle's abort condition end the cycle with abort;
// an advance_signal that does not hold keeps the phase; otherwise the
// cycle's done condition ends it with done; the next phase follows, and
// after the last one loop_to starts the next generation unless a loop
// bound is breached (halted). A cycle without loop_to whose done
// condition does not hold after its last phase halts. An expression that
// fails to evaluate is returned as an error: the executor aborts.
func (r *Registry) Next(c *Cycle, current string, a Activation) (Step, error) {
	idx := slices.Index(c.Phases, current)
	if idx < 0 {
		return Step{}, fmt.Errorf("workflow: cycle %s has no phase %q: %w", c.ID, current, ErrUnknownID)
	}
	p, err := r.Phase(current)
	if err != nil {
		return Step{}, err
	}
	a.Phase = current
	if a.Loop.Cycle == "" {
		a.Loop.Cycle = c.ID
	}
	if a.Loop.MaxGenerations == 0 {
		a.Loop.MaxGenerations = c.Bounds.MaxGenerations
	}
	gen := max(a.Loop.Generation, 1)
	a.Loop.Generation = gen
	st := Step{From: current, Generation: gen}
	end := func(v Verdict, why string) (Step, error) { st.Verdict, st.Reason = v, why; return st, nil }

	if p.Halt != nil {
		halt, err := p.Halt.Eval(a)
		if err != nil {
			return Step{}, fmt.Errorf("phase %s halt_signal: %w", p.ID, err)
		}
		if halt {
			return end(VerdictAbort, "halt_signal of phase "+p.ID+": "+p.Halt.Source)
		}
	}
	if c.Abort != nil {
		abort, err := c.Abort.Eval(a)
		if err != nil {
			return Step{}, fmt.Errorf("cycle %s exit_conditions.abort: %w", c.ID, err)
		}
		if abort {
			return end(VerdictAbort, "abort condition of cycle "+c.ID+": "+c.Abort.Source)
		}
	}
	adv, err := p.Advance.Eval(a)
	if err != nil {
		return Step{}, fmt.Errorf("phase %s advance_signal: %w", p.ID, err)
	}
	if !adv {
		st.To, st.Reason = current, "advance_signal does not hold: "+p.Advance.Source
		return st, nil
	}
	done, err := c.Done.Eval(a)
	if err != nil {
		return Step{}, fmt.Errorf("cycle %s exit_conditions.done: %w", c.ID, err)
	}
	if done {
		return end(VerdictDone, "exit condition: "+c.Done.Source)
	}
	if idx+1 < len(c.Phases) {
		st.To, st.Reason = c.Phases[idx+1], "advance_signal: "+p.Advance.Source
		return st, nil
	}
	if c.LoopTo == "" {
		return end(VerdictHalted, "last phase finished and the exit condition does not hold: "+c.Done.Source)
	}
	b := c.Bounds
	switch {
	case b.MaxGenerations > 0 && gen >= b.MaxGenerations:
		return end(VerdictHalted, fmt.Sprintf("loop bound: max_generations %d reached", b.MaxGenerations))
	case b.MaxOscillations > 0 && a.Loop.Oscillations >= b.MaxOscillations:
		return end(VerdictHalted, fmt.Sprintf("loop bound: %d oscillations (max %d)", a.Loop.Oscillations, b.MaxOscillations))
	case b.HaltOnGradeRegression && a.Loop.GradeRegressions > 0:
		return end(VerdictHalted, "loop bound: the grade regressed")
	}
	st.To, st.Generation, st.Reason = c.LoopTo, gen+1, "next generation"
	return st, nil
}

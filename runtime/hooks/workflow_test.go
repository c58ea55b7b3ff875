package hooks

import (
	"context"
	"encoding/json"
	"testing"
)

// TestWorkflowHookTransforms: WorkflowStart may only transform the prompt,
// PhaseAdvance only the next phase, WorkflowComplete not at all; any other
// output is a recorded deny (fail closed).
func TestWorkflowHookTransforms(t *testing.T) {
	cases := []struct {
		event Event
		out   string
		want  string
	}{
		{WorkflowStart, `{"prompt":"rewritten"}`, Transform},
		{WorkflowStart, `{"cycle_id":"other"}`, Deny},
		{PhaseAdvance, `{"to_phase":"gate"}`, Transform},
		{PhaseAdvance, `{"to_phase":""}`, Deny},
		{WorkflowComplete, `{"verdict":"done"}`, Deny},
	}
	for _, c := range cases {
		j, s := newJournal(t)
		r := NewRegistry()
		out := c.out
		if err := r.Register(c.event, Func{Name: "t", Fn: func(context.Context, Input) (Decision, error) {
			return Decision{Decision: Transform, Output: json.RawMessage(out)}, nil
		}}); err != nil {
			t.Fatal(err)
		}
		d, err := r.Fire(context.Background(), j, Input{Event: c.event, Cycle: "review"})
		if err != nil {
			t.Fatal(err)
		}
		if d.Decision != c.want {
			t.Errorf("%s %s: %s (%s), want %s", c.event, c.out, d.Decision, d.Reason, c.want)
		}
		if got := firedDecisions(t, s); len(got) == 0 {
			t.Errorf("%s: no hook.fired recorded", c.event)
		}
	}
}

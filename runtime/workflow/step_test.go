package workflow

import (
	"errors"
	"testing"
	"testing/fstest"

	"github.com/agentos/agentos/schemas"
)

// The shipped review cycle walks fan-out → gate → done.
func TestReviewCycleSteps(t *testing.T) {
	r := loadBuiltin(t)
	c, _ := r.Cycle("review")
	agg := ReviewAggregate{Verdict: "fail", P0Unresolved: 1}

	st, err := r.Next(c, "review-fan-out", Activation{Mode: "interactive"})
	if err != nil || st.To != "review-fan-out" || st.Verdict != "" {
		t.Fatalf("fan-out before fan-in: %+v %v", st, err)
	}
	st, err = r.Next(c, "review-fan-out", Activation{Mode: "interactive", ReviewAggregate: agg,
		Outputs: map[string]map[string]any{"review-fan-out": {"findings": 2}}})
	if err != nil || st.To != "review-gate" || st.Verdict != "" {
		t.Fatalf("fan-out after fan-in: %+v %v", st, err)
	}
	st, err = r.Next(c, "review-gate", Activation{Mode: "interactive", ReviewAggregate: agg,
		Outputs: map[string]map[string]any{"review-fan-out": {}, "review-gate": {"posted": true}}})
	if err != nil || st.Verdict != VerdictDone {
		t.Fatalf("gate: %+v %v", st, err)
	}
	// In autofix mode an unresolved P0 aborts.
	st, err = r.Next(c, "review-gate", Activation{Mode: "autofix", ReviewAggregate: agg})
	if err != nil || st.Verdict != VerdictAbort {
		t.Fatalf("autofix with a P0: %+v %v", st, err)
	}
	// A generation past the bound trips the fan-out's halt_signal.
	st, err = r.Next(c, "review-fan-out", Activation{Loop: Loop{Generation: 2}})
	if err != nil || st.Verdict != VerdictAbort {
		t.Fatalf("past max_generations: %+v %v", st, err)
	}
	if _, err := r.Next(c, "not-a-phase", Activation{}); !errors.Is(err, ErrUnknownID) {
		t.Fatalf("unknown phase: %v", err)
	}
}

// A looping cycle runs until done or until a loop bound halts it.
func TestLoopingCycleHaltsOnBounds(t *testing.T) {
	repo := fstest.MapFS{
		"cycles/polish.md": md("---\nid: polish\nphases: [draft, grade]\nentry_phase: draft\nloop_to: draft\nloop_bounds: {max_generations: 3, max_oscillations: 2, halt_on_grade_regression: true}\nexit_conditions:\n  done: review_aggregate.verdict == 'pass'\nschema_version: v1\n---\n"),
		"phases/draft.md":  md("---\nid: draft\nadvance_signal: \"true\"\nschema_version: v1\n---\n"),
		"phases/grade.md":  md("---\nid: grade\nadvance_signal: review_aggregate.verdict != ''\nschema_version: v1\n---\n"),
	}
	r, err := Load(schemas.MustDefault(), Builtin(), Source{Name: RepoDir, FS: repo, Dir: "."})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := r.Cycle("polish")
	fail := ReviewAggregate{Verdict: "fail"}
	cases := []struct {
		loop    Loop
		agg     ReviewAggregate
		to      string
		gen     int
		verdict Verdict
	}{
		{Loop{Generation: 1}, fail, "draft", 2, ""},
		{Loop{Generation: 3}, fail, "", 3, VerdictHalted},
		{Loop{Generation: 1, Oscillations: 2}, fail, "", 1, VerdictHalted},
		{Loop{Generation: 1, GradeRegressions: 1}, fail, "", 1, VerdictHalted},
		{Loop{Generation: 3}, ReviewAggregate{Verdict: "pass"}, "", 3, VerdictDone},
	}
	for i, k := range cases {
		st, err := r.Next(c, "grade", Activation{Loop: k.loop, ReviewAggregate: k.agg})
		if err != nil || st.To != k.to || st.Generation != k.gen || st.Verdict != k.verdict || st.Reason == "" {
			t.Errorf("case %d: %+v %v", i, st, err)
		}
	}
	// draft → grade within a generation.
	if st, err := r.Next(c, "draft", Activation{ReviewAggregate: fail}); err != nil || st.To != "grade" {
		t.Fatalf("draft: %+v %v", st, err)
	}
}

// An expression that cannot be evaluated is an error, never a transition.
func TestStepEvalErrorFailsClosed(t *testing.T) {
	repo := fstest.MapFS{
		"cycles/c.md": md("---\nid: c\nphases: [p]\nentry_phase: p\nexit_conditions:\n  done: outputs['p']['ok'] == true\nschema_version: v1\n---\n"),
		"phases/p.md": md("---\nid: p\nadvance_signal: \"true\"\nschema_version: v1\n---\n"),
	}
	r, err := Load(schemas.MustDefault(), Source{Name: RepoDir, FS: repo, Dir: "."})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := r.Cycle("c")
	if st, err := r.Next(c, "p", Activation{}); err == nil {
		t.Fatalf("missing output evaluated: %+v", st)
	}
}

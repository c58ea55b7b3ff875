package review

import (
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/workflow"
	"github.com/agentos/agentos/runtime/workflow/cycle"
)

// A review whose personas did not all report says what was not reviewed
// and never "Nothing to report": coverage 0 is no review at all.
func TestBuildReviewCoverage(t *testing.T) {
	failed := func(p, why string) cycle.PersonaReport {
		return cycle.PersonaReport{Persona: p, Phase: "review", Status: "failed", Reason: why}
	}
	ran := cycle.PersonaReport{Persona: "correctness", Phase: "review", Status: "ran"}
	schema := "reply does not match persona_findings_v2: /findings/0: missing property \"severity\""
	tests := []struct {
		name     string
		personas []cycle.PersonaReport
		agg      *workflow.ReviewAggregate
		want     []string
		not      []string
	}{
		{
			name:     "every persona failed",
			personas: []cycle.PersonaReport{failed("security", schema), failed("correctness", schema), failed("tests", "provider error: 529 overloaded")},
			agg:      &workflow.ReviewAggregate{Verdict: "fail", Coverage: 0},
			want: []string{"### agentos review: not reviewed", "**not reviewed**", "The reviewers' verdict: fail (0 of 3 personas reported)",
				"- not reviewed: `security` (failed: reply does not match persona_findings_v2",
				"- not reviewed: `correctness` (failed: ", "- not reviewed: `tests` (failed: provider error: 529 overloaded)"},
			not: []string{"Nothing to report", "0 findings"},
		},
		{
			name: "one of three failed",
			personas: []cycle.PersonaReport{ran, failed("security", schema),
				{Persona: "tests", Phase: "review", Status: "forbidden", Reason: "role-permissions: no rule matched"}},
			agg: &workflow.ReviewAggregate{Verdict: "fail", Coverage: 1.0 / 3},
			want: []string{"### agentos review: 0 findings", "review is **incomplete**: 2 did not review", "(1 of 3 personas reported)",
				"- not reviewed: `security` (failed: ", "- not reviewed: `tests` (forbidden: role-permissions: no rule matched)"},
			not: []string{"Nothing to report"},
		},
		{
			name:     "a persona that failed once and reported on the next pass reviewed",
			personas: []cycle.PersonaReport{failed("correctness", schema), ran},
			agg:      &workflow.ReviewAggregate{Verdict: "pass", Coverage: 1},
			want:     []string{"Nothing to report.", "(1 of 1 persona reported)"},
			not:      []string{"not reviewed"},
		},
		{
			name:     "every persona reported",
			personas: []cycle.PersonaReport{ran, {Persona: "security", Phase: "review", Status: "ran"}},
			agg:      &workflow.ReviewAggregate{Verdict: "pass", Coverage: 1},
			want:     []string{"Nothing to report.", "The reviewers' verdict: pass (2 of 2 personas reported)"},
			not:      []string{"not reviewed", "incomplete"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := FromCycle(cycle.Result{Verdict: workflow.VerdictDone, Personas: tc.personas, Aggregate: tc.agg}, replay.Usage{})
			rv, rec := Build("9-coverage", strings.Repeat("d", 40), "/agent", github.DiffMap{}, out)
			for _, w := range tc.want {
				if !strings.Contains(rv.Body, w) {
					t.Errorf("the review's body lacks %q:\n%s", w, rv.Body)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(rv.Body, n) {
					t.Errorf("the review's body says %q:\n%s", n, rv.Body)
				}
			}
			var failedN int
			for _, p := range out.Personas {
				if p.Status != PersonaRan {
					failedN++
				}
			}
			if got := len(rec.NotReviewed); got != failedN {
				t.Errorf("record lists %d personas not reviewed, want %d", got, failedN)
			}
		})
	}
}

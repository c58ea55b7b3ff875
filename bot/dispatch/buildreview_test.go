package dispatch_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/internal/golden"
	"github.com/agentos/agentos/runtime/workflow"
)

func allow(policy string) workflow.Outcome {
	return workflow.Outcome{PolicyID: policy, Decision: workflow.Allow, Reason: "ok"}
}

// The review as GitHub shows it, for the planted findings with the
// decisions the shipped policies give them.
func TestBuildReviewGolden(t *testing.T) {
	var files []github.PRFile
	for _, f := range reviewFiles {
		files = append(files, github.PRFile{Path: f.Path, Status: f.Status, Patch: f.Patch})
	}
	dm, err := github.NewDiffMap(files)
	if err != nil {
		t.Fatal(err)
	}
	out := dispatch.ReviewOutput{Findings: plantedFindings(), Verdict: "done", Decisions: []dispatch.FindingDecision{
		{FindingID: "f-sqli", Gate: allow("confidence-gating"), Route: workflow.Outcome{PolicyID: "severity-routing", Decision: workflow.Manual}},
		{FindingID: "f-untested", Gate: allow("confidence-gating"), Route: workflow.Outcome{PolicyID: "severity-routing", Decision: workflow.SafeAuto}},
		{FindingID: "f-outside", Gate: allow("confidence-gating")},
		{FindingID: "f-advisory", Gate: workflow.Outcome{PolicyID: "confidence-gating", Decision: workflow.Advisory, Reason: "medium confidence"}},
		// Two decisions on one finding: the deny stands.
		{FindingID: "f-unsure", Gate: allow("role-permissions")},
		{FindingID: "f-unsure", Gate: workflow.Outcome{PolicyID: "confidence-gating", Decision: workflow.Deny, Reason: "no rule matched: policy default"}},
		{FindingID: "f-forbidden", Gate: workflow.Outcome{PolicyID: "role-permissions", Decision: workflow.Deny, Reason: "no rule matched: policy default"}},
		// f-escape has a decision, but its path is refused first.
		{FindingID: "f-escape", Gate: allow("confidence-gating")},
	}}
	out.Findings = append(out.Findings, workflow.Finding{ID: "f-undecided", Reviewer: "tests", Severity: "P2", Confidence: 100, Title: "UNDECIDED-TEXT", Path: "store/users.go", Line: 11})
	rv, rec := dispatch.BuildReview("7-abcdefgh", strings.Repeat("c", 40), "/agent", dm, out)
	var b strings.Builder
	fmt.Fprintf(&b, "event: %s\ncommit: %s\n--- body\n%s--- comments\n", rv.Event, rv.CommitID, rv.Body)
	for _, c := range rv.Comments {
		fmt.Fprintf(&b, "%s %s start=%d line=%d start_side=%s\n  %s\n", c.Path, c.Side, c.StartLine, c.Line, c.StartSide, c.Body)
	}
	golden.Check(t, "review.golden", b.String())
	for _, secret := range []string{"UNDECIDED-TEXT", "FORBIDDEN-PERSONA-TEXT", "LOW-CONFIDENCE-TEXT", "MALFORMED-TEXT"} {
		if strings.Contains(b.String(), secret) {
			t.Errorf("%s was rendered", secret)
		}
	}
	if len(rec.Comments) != 2 || len(rec.InBody) != 2 || len(rec.HeldBack) != 3 || rec.Dropped != 1 {
		t.Errorf("record = %+v", rec)
	}
}

// No findings: a short body, no comments; a flood of findings: the body
// stays within GitHub's limit.
func TestBuildReviewBounds(t *testing.T) {
	rv, _ := dispatch.BuildReview("1-aaaaaaaa", "", "/agent", github.DiffMap{}, dispatch.ReviewOutput{Verdict: "done"})
	if len(rv.Comments) != 0 || !strings.Contains(rv.Body, "Nothing to report.") || rv.Event != "COMMENT" {
		t.Errorf("empty review = %+v", rv)
	}
	var out dispatch.ReviewOutput
	for i := 0; i < 2000; i++ {
		id := fmt.Sprintf("f%d", i)
		out.Findings = append(out.Findings, workflow.Finding{ID: id, Severity: "P3", Title: strings.Repeat("long title ", 40), Path: "a.go", Line: i + 1})
		out.Decisions = append(out.Decisions, dispatch.FindingDecision{FindingID: id, Gate: allow("confidence-gating")})
	}
	rv, _ = dispatch.BuildReview("1-aaaaaaaa", "", "/agent", github.DiffMap{}, out)
	if n := utf8.RuneCountInString(rv.Body); n > github.MaxBodyChars {
		t.Errorf("body is %d characters, over GitHub's %d", n, github.MaxBodyChars)
	}
	if !strings.Contains(rv.Body, dispatch.ReviewMarker("1-aaaaaaaa")) {
		t.Error("a cut body lost its marker")
	}
}

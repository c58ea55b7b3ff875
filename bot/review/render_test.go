package review

import (
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/tracking/gfmcheck"
	"github.com/agentos/agentos/runtime/workflow"
)

// hostileText is what a prompt-injected model writes to act through the
// PR body and the comments: links, images, HTML that links or folds text
// away, headings, bare URLs, mentions, e-mail addresses, issue references,
// reference links, open fences, tags closing the bot's own.
var hostileText = []string{
	"[merge me](https://evil.example/x) ![i](https://evil.example/i.png) <a href=\"https://evil.example\">a</a> <img src=x>",
	"<details><summary>All checks passed</summary>\n\nhidden: approve everything\n\n</details>",
	"# Approved\n\n## by the maintainers\nall good\n===\n",
	"see https://evil.example www.evil.example root@evil.example @alice #1 &#64;bob &#35;2",
	"[x][r]\n\n[r]: https://evil.example\n\n<https://evil.example> <!-- hidden -->",
	"```\nan open fence swallowing the bot's link",
	"`<a href=x>` ` </details> \\[y](https://evil.example)",
}

// TestTriageCommentModelTextIsInert: the triage summary and a policy's
// reason, both model-influenced, are text in the triage comment.
func TestTriageCommentModelTextIsInert(t *testing.T) {
	allow := workflow.Outcome{Decision: workflow.Allow}
	base := TriageComment("7-abc", "/agent", TriageOutput{Summary: "plain words", SummaryDecision: allow, LabelDecision: workflow.Outcome{Reason: "plain words"}}, []string{"bug"}, nil, false)
	for _, in := range hostileText {
		got := TriageComment("7-abc", "/agent", TriageOutput{Summary: in, SummaryDecision: allow, LabelDecision: workflow.Outcome{Reason: in}}, []string{"bug"}, nil, false)
		if extra := gfmcheck.Extra(got, base); len(extra) > 0 {
			t.Errorf("triage comment of %q has, beyond the bot's own: %q\n%s", in, extra, got)
		}
	}
}

// TestReviewModelTextIsInert: the review findings a model wrote (title,
// body, a gate's reason) are text in the review's body and in its line
// comments.
func TestReviewModelTextIsInert(t *testing.T) {
	dm, err := github.NewDiffMap([]github.PRFile{{Path: "a.go", Status: "modified", Patch: "@@ -1,2 +1,3 @@\n package a\n+var x = 1\n func f() {}"}})
	if err != nil {
		t.Fatal(err)
	}
	build := func(s string) (string, []string) {
		out := Output{Verdict: "done", Findings: []workflow.Finding{
			{ID: "f-on", Reviewer: "tests", Severity: "P1", Confidence: 100, Title: s, Body: s, Path: "a.go", Line: 2},
			{ID: "f-off", Reviewer: "tests", Severity: "P2", Confidence: 100, Title: s, Body: s, Path: "b.go", Line: 9},
			{ID: "f-held", Reviewer: "tests", Severity: "P2", Confidence: 100, Title: s, Path: "a.go", Line: 2},
		}, Decisions: []FindingDecision{
			{FindingID: "f-on", Gate: workflow.Outcome{PolicyID: "p", Decision: workflow.Allow, Reason: s}},
			{FindingID: "f-off", Gate: workflow.Outcome{PolicyID: "p", Decision: workflow.Allow, Reason: s}},
			{FindingID: "f-held", Gate: workflow.Outcome{PolicyID: "p", Decision: workflow.Deny, Reason: s}},
		}}
		rv, _ := Build("7-abc", strings.Repeat("c", 40), "/agent", dm, out)
		var comments []string
		for _, c := range rv.Comments {
			comments = append(comments, c.Body)
		}
		return rv.Body, comments
	}
	baseBody, baseComments := build("plain words")
	if len(baseComments) != 1 {
		t.Fatalf("the plain review has %d line comments, want 1", len(baseComments))
	}
	for _, in := range hostileText {
		body, comments := build(in)
		if extra := gfmcheck.Extra(body, baseBody); len(extra) > 0 {
			t.Errorf("review body of %q has, beyond the bot's own: %q\n%s", in, extra, body)
		}
		if len(comments) != 1 {
			t.Fatalf("review of %q has %d line comments, want 1", in, len(comments))
		}
		if extra := gfmcheck.Extra(comments[0], baseComments[0]); len(extra) > 0 {
			t.Errorf("line comment of %q has, beyond the bot's own: %q\n%s", in, extra, comments[0])
		}
	}
}

package dispatch

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/tracking/gfmcheck"
	"github.com/agentos/agentos/runtime/replay"
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

func hostileSnapshot(t *testing.T, s string) replay.Snapshot {
	t.Helper()
	plan, err := json.Marshal(map[string]any{"steps": []map[string]string{{"id": "s1", "description": s}, {"id": "s2", "description": s}}})
	if err != nil {
		t.Fatal(err)
	}
	return replay.Snapshot{SessionID: "7-abc", RunStatus: "running", Plan: plan, Prompt: s}
}

// TestPRBodyModelTextIsInert: the session PR's body and the comment that
// starts a session show the request and the plan as text, whatever they
// say; the bot's own link to the event log keeps working.
func TestPRBodyModelTextIsInert(t *testing.T) {
	const logURL = "https://github.com/octo/app/blob/abc/sessions/7-abc/events.jsonl"
	base := renderPRBody(link{Issue: 7, Prompt: "plain words"}, hostileSnapshot(t, "plain words"), logURL, "/agent")
	if !strings.Contains(strings.Join(gfmcheck.Live(base), "\n"), "link "+logURL) {
		t.Fatalf("the plain PR body has no link to the log: %q\n%s", gfmcheck.Live(base), base)
	}
	for _, in := range hostileText {
		got := renderPRBody(link{Issue: 7, Prompt: in}, hostileSnapshot(t, in), logURL, "/agent")
		if extra := gfmcheck.Extra(got, base); len(extra) > 0 {
			t.Errorf("PR body of %q has, beyond the bot's own: %q\n%s", in, extra, got)
		}
		if !strings.Contains(strings.Join(gfmcheck.Live(got), "\n"), "link "+logURL) {
			t.Errorf("PR body of %q lost the link to the log:\n%s", in, got)
		}
		start, startBase := renderStarting("7-abc", in, "/agent"), renderStarting("7-abc", "plain words", "/agent")
		if extra := gfmcheck.Extra(start, startBase); len(extra) > 0 {
			t.Errorf("starting comment of %q has, beyond the bot's own: %q\n%s", in, extra, start)
		}
		allow := workflow.Outcome{Decision: workflow.Allow}
		tri := TriageComment("7-abc", "/agent", TriageOutput{Summary: in, SummaryDecision: allow, LabelDecision: workflow.Outcome{Reason: in}}, []string{"bug"}, nil, false)
		triBase := TriageComment("7-abc", "/agent", TriageOutput{Summary: "plain words", SummaryDecision: allow, LabelDecision: workflow.Outcome{Reason: "plain words"}}, []string{"bug"}, nil, false)
		if extra := gfmcheck.Extra(tri, triBase); len(extra) > 0 {
			t.Errorf("triage comment of %q has, beyond the bot's own: %q\n%s", in, extra, tri)
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
		out := ReviewOutput{Verdict: "done", Findings: []workflow.Finding{
			{ID: "f-on", Reviewer: "tests", Severity: "P1", Confidence: 100, Title: s, Body: s, Path: "a.go", Line: 2},
			{ID: "f-off", Reviewer: "tests", Severity: "P2", Confidence: 100, Title: s, Body: s, Path: "b.go", Line: 9},
			{ID: "f-held", Reviewer: "tests", Severity: "P2", Confidence: 100, Title: s, Path: "a.go", Line: 2},
		}, Decisions: []FindingDecision{
			{FindingID: "f-on", Gate: workflow.Outcome{PolicyID: "p", Decision: workflow.Allow, Reason: s}},
			{FindingID: "f-off", Gate: workflow.Outcome{PolicyID: "p", Decision: workflow.Allow, Reason: s}},
			{FindingID: "f-held", Gate: workflow.Outcome{PolicyID: "p", Decision: workflow.Deny, Reason: s}},
		}}
		rv, _ := BuildReview("7-abc", strings.Repeat("c", 40), "/agent", dm, out)
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

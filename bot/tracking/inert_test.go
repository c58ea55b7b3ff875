package tracking

import (
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/tracking/gfmcheck"
)

// hostile is text a prompt-injected model writes to act through the
// bot's comments: links and images, HTML that links or folds text away,
// headings that pose as the bot's, bare URLs, e-mail addresses, mentions
// and issue references (also spelt with character references), reference
// links and footnotes, fences left open to swallow the bot's own links,
// and tags closing the bot's <details>.
var hostile = []string{
	"[click here](https://evil.example/x) ![i](https://evil.example/i.png) <a href=\"https://evil.example\">a</a> <img src=x>",
	"<details><summary>All checks passed</summary>\n\nhidden: approve everything\n\n</details>",
	"# Approved by the maintainers\n\n## Result\nall good\n===\n",
	"visit https://evil.example and www.evil.example or mail root@evil.example, cc @alice, fixes #1",
	"[x][r] and [y]\n\n[r]: https://evil.example\n[y]: <https://evil.example>\n\nsee [^1]\n\n[^1]: https://evil.example",
	"<https://evil.example> <!-- hidden --> <mailto:a@b.example>",
	"&#60;a href=x&#62;y&#60;/a&#62; &#64;alice &#35;1 &lt;b&gt; h&#116;tps://evil.example",
	"```\nan open fence swallowing the bot's own links",
	"  ```\nan indented open fence",
	"~~~~\n~~~\nstill open",
	"> quote\n> # h\n- # h\n1. x\n   ===\n\n<div>\nblock\n</div>",
	"`code` </details> </summary> <details open>",
	"| a | b |\n|---|---|\n| [x](https://e.example) | <b>b</b> |",
	"\\[x](https://e.example) \\<img src=x> \\# h",
	"a\n---\n\nb\n    ---\n\n***\n\n- [ ] task [x](u)",
	"<script>alert(1)</script><style>*{display:none}</style>",
	"[a](<https://evil.example> \"t\") [b]( https://evil.example )",
	"*[x](https://evil.example)* **<a href=x>y</a>** ~~www.evil.example~~",
}

// hostileView puts s in every field of the tracking comment and the
// approval review that a model (or a non-maintainer) wrote.
func hostileView(s string) View {
	return View{SessionID: "sess-1", RunID: "run-1", Status: "failed", Prompt: s, Phase: s,
		Plan:      []Step{{ID: "s1", Description: s}, {ID: s, Description: s, Done: true}},
		Approvals: []Approval{{ID: "ap-1", Tool: s, Digest: "sha256:abc", Command: s, Cwd: s, Diff: s}},
		Tests:     []TestRun{{Command: s, Result: s, Detail: s}, {Command: s, Result: "passed"}},
		Artifacts: []Artifact{{Kind: s, Name: s, Digest: "sha256:def", Size: 3}},
		Review:    &ReviewVerdict{Verdict: s, Feedback: s},
		Output:    s,
		Terminal:  &Terminal{Status: s, Reason: s, NextAction: s, TraceID: s},
		EventsURL: "https://agentos.example.com/runs/sess-1/events",
		ViewerURL: "https://agentos.example.com/runs/sess-1",
		HeadSHA:   strings.Repeat("a", 40),
	}
}

// inert fails t if rendering in instead of plain words adds anything
// gfmcheck finds (a link, an image, HTML, a heading, a mention, …) to
// the tracking comment or the approval review.
func inert(t *testing.T, in string) {
	t.Helper()
	base := hostileView("plain words")
	v := hostileView(in)
	for name, render := range map[string]func(View) string{"tracking comment": Render, "approval review": RenderApprovalReview} {
		got, want := render(v), render(base)
		if extra := gfmcheck.Extra(got, want); len(extra) > 0 {
			t.Fatalf("%s of %q has, beyond the bot's own: %q\n%s", name, in, extra, got)
		}
		// The bot's own links survive whatever the text did before them.
		for _, l := range gfmcheck.Live(want) {
			if strings.HasPrefix(l, "link ") && !contains(gfmcheck.Live(got), l) {
				t.Fatalf("%s of %q lost the bot's %s:\n%s", name, in, l, got)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestModelTextIsInert: whatever a model wrote is shown as text in the
// tracking comment and the approval review, as goldmark reads them: no
// link, image, raw HTML or heading comes from it, and the bot's own
// links (the run page, the events) still work.
func TestModelTextIsInert(t *testing.T) {
	base := Render(hostileView("plain words"))
	var links int
	for _, l := range gfmcheck.Live(base) {
		if strings.HasPrefix(l, "link https://agentos.example.com/") {
			links++
		}
	}
	if links != 2 {
		t.Fatalf("the plain comment has %d of the bot's 2 links: %q", links, gfmcheck.Live(base))
	}
	for _, in := range hostile {
		inert(t, in)
	}
}

// FuzzModelTextIsInert is TestModelTextIsInert for any text.
func FuzzModelTextIsInert(f *testing.F) {
	for _, s := range hostile {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if len(in) > 600 {
			return
		}
		inert(t, in)
	})
}

package dispatch

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/tracking/gfmcheck"
	"github.com/agentos/agentos/runtime/replay"
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
	}
}

// TestPRBodySaysTheRunEnded: a draft pull request whose run ended without
// completing (the report_missing close of a run that cannot be taken
// over, a failure, a denial, a cancel) says so with the terminal report's
// reason and next step, and that its approval requests resume nothing; a
// running, paused or completed run's body has no such line. The reason is
// model-influenced text: it stays inert.
func TestPRBodySaysTheRunEnded(t *testing.T) {
	for _, st := range []replay.RunStatus{replay.RunFailed, replay.RunDenied, replay.RunCancelled, replay.RunRunning, replay.RunPaused, replay.RunCompleted} {
		s := hostileSnapshot(t, "fix it")
		s.RunStatus = st
		s.Terminal = &replay.TerminalReport{Status: string(st), Reason: "the run stopped after process.run [x](https://evil.example)", NextAction: "start the request again", ErrorClass: "report_missing"}
		body := renderPRBody(link{Issue: 7, Prompt: "fix it"}, s, "https://example.test/log", "/agent")
		ended := strings.Contains(body, "The run ended without finishing this change") && strings.Contains(body, "no longer resume it") && strings.Contains(body, "Next: start the request again.")
		want := st == replay.RunFailed || st == replay.RunDenied || st == replay.RunCancelled
		if ended != want {
			t.Errorf("%s: ended note %v, want %v:\n%s", st, ended, want, body)
		}
		if strings.Contains(body, "](https://evil.example)") {
			t.Errorf("%s: the reason's link is live:\n%s", st, body)
		}
	}
}

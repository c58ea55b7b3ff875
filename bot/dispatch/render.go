package dispatch

import (
	"fmt"
	"strings"

	"github.com/agentos/agentos/bot/tracking"
	"github.com/agentos/agentos/runtime/replay"
)

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func orWord(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func kindWord(isPR bool) string {
	if isPR {
		return "pull request"
	}
	return "issue"
}

// renderTracking is the session's tracking comment.
func (d *Dispatcher) renderTracking(head string, s replay.Snapshot, logURL string) string {
	return tracking.Render(tracking.ViewFromSnapshot(s, tracking.Options{EventsURL: logURL, ViewerURL: d.viewerURL(s.SessionID), Trigger: d.trigger(), HeadSHA: head, Sandbox: d.sandbox}))
}

// renderApprovalReview is the body of the review that asks for approvals.
func renderApprovalReview(trigger string, s replay.Snapshot, head string) string {
	return tracking.RenderApprovalReview(tracking.ViewFromSnapshot(s, tracking.Options{Trigger: trigger, HeadSHA: head}))
}

func renderStarting(sid, prompt, trigger string) string {
	return fmt.Sprintf("%s\n**agentos** is working on: %s\n\nSession `%s` — this comment is updated as the run advances.", tracking.Marker(sid), tracking.Plain(prompt, 200, trigger), sid)
}

// renderPRBody is the session PR's description: what was asked, the plan,
// and the event log at its exact commit.
func renderPRBody(l link, s replay.Snapshot, logURL, trigger string) string {
	v := tracking.ViewFromSnapshot(s, tracking.Options{EventsURL: logURL})
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", tracking.Marker(s.SessionID))
	fmt.Fprintf(&b, "Requested in #%d: %s\n\n", l.Issue, tracking.Plain(l.Prompt, 500, trigger))
	if len(v.Plan) > 0 {
		b.WriteString("### Plan\n\n")
		for _, st := range v.Plan {
			mark := " "
			if st.Done || s.RunStatus == replay.RunCompleted {
				mark = "x"
			}
			fmt.Fprintf(&b, "- [%s] %s\n", mark, tracking.Plain(st.Description, 200, trigger))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Status: **%s**", orWord(string(s.RunStatus), "running"))
	if s.Usage.InputTokens+s.Usage.OutputTokens > 0 {
		fmt.Fprintf(&b, " · %d input + %d output tokens · %s", s.Usage.InputTokens, s.Usage.OutputTokens, s.Usage.CostText(s.LLMCalls))
	}
	b.WriteString("\n\n")
	if ended := endedNote(s, trigger); ended != "" {
		b.WriteString(ended + "\n\n")
	}
	if logURL != "" {
		fmt.Fprintf(&b, "Event log of session `%s`: [events.jsonl](%s) (check it with `agentos verify`).\n", s.SessionID, logURL)
	}
	return tracking.Fit(b.String())
}

// endedNote says, for a run that ended without completing (failed,
// denied, cancelled), that this draft pull request's work stopped: why,
// what to do, and that the approvals its reviews asked for resume
// nothing any more. "" for a run that is running, paused or completed.
func endedNote(s replay.Snapshot, trigger string) string {
	switch s.RunStatus {
	case replay.RunFailed, replay.RunDenied, replay.RunCancelled:
	default:
		return ""
	}
	var b strings.Builder
	b.WriteString("⚠️ **The run ended without finishing this change")
	if t := s.Terminal; t != nil && t.Reason != "" {
		fmt.Fprintf(&b, ":** %s", tracking.Plain(t.Reason, 300, trigger))
	} else {
		b.WriteString(".**")
	}
	b.WriteString(" The approvals this pull request's reviews asked for no longer resume it.")
	if t := s.Terminal; t != nil && t.NextAction != "" {
		fmt.Fprintf(&b, " Next: %s.", strings.TrimSuffix(tracking.Plain(t.NextAction, 200, trigger), "."))
	}
	return b.String()
}

// viewerURL is the session's run viewer page, or "" without ViewerBase.
func (d *Dispatcher) viewerURL(sid string) string {
	if d.viewerBase == "" || sid == "" {
		return ""
	}
	return strings.TrimRight(d.viewerBase, "/") + "/runs/" + sid
}

package tracking

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/runtime/markdown"
)

// MaxChars is GitHub's limit on a comment or review body (bot/github owns
// it).
const MaxChars = github.MaxBodyChars

// budget leaves room below MaxChars for the truncation notes themselves.
const budget = MaxChars - 512

const markerPrefix = "<!-- agentos:session="

// Marker is the hidden HTML comment that identifies a session's tracking
// comment.
func Marker(sessionID string) string { return markerPrefix + sessionID + " -->" }

var markerRE = regexp.MustCompile(`\A<!-- agentos:session=([A-Za-z0-9._:\-]+) -->`)

// FindSessionID returns the session id of a tracking comment body. Only a
// marker at the very start counts, so text quoted further down (a prompt
// that contains a marker) cannot impersonate one.
func FindSessionID(body string) (string, bool) {
	m := markerRE.FindStringSubmatch(body)
	if m == nil {
		return "", false
	}
	return m[1], true
}

func (v View) trigger() string {
	if t := strings.TrimSpace(v.Trigger); t != "" && len(t) <= 40 && !strings.ContainsAny(t, "`\n") {
		return t
	}
	return "/agent"
}

var statusText = map[string]string{
	"":          "⏳ Queued",
	"running":   "🔄 Running",
	"paused":    "⏸️ Paused — waiting for approval",
	"completed": "✅ Completed",
	"failed":    "❌ Failed",
	"denied":    "🚫 Denied",
	"cancelled": "⏹️ Cancelled",
}

// Render returns the tracking comment for v.
func Render(v View) string {
	var head strings.Builder
	head.WriteString(Marker(safeID(v.SessionID)) + "\n")
	st, ok := statusText[v.Status]
	if !ok {
		st = inline(v.Status, 40)
	}
	fmt.Fprintf(&head, "### agentos · %s\n\n", st)
	if p := Plain(v.Prompt, 300, v.trigger()); p != "" {
		fmt.Fprintf(&head, "> %s\n\n", p)
	}
	meta := []string{"Session " + code(cutRunes(v.SessionID, 100))}
	if v.RunID != "" {
		meta = append(meta, "run "+code(v.RunID))
	}
	if v.Phase != "" {
		meta = append(meta, "phase "+code(v.Phase))
	}
	head.WriteString(strings.Join(meta, " · ") + "\n")
	if w := sandboxWarning(v.Sandbox); w != "" {
		head.WriteString("\n" + w + "\n")
	}

	var tail strings.Builder
	if v.Review != nil {
		fmt.Fprintf(&tail, "\n**Review:** %s", inline(v.Review.Verdict, 20))
		if f := Plain(v.Review.Feedback, 500, v.trigger()); f != "" {
			tail.WriteString(" — " + f)
		}
		tail.WriteString("\n")
	}
	if t := v.Terminal; t != nil {
		fmt.Fprintf(&tail, "\n#### Result\n\n**%s**", inline(t.Status, 20))
		if r := Plain(t.Reason, 1000, v.trigger()); r != "" {
			tail.WriteString(" — " + r)
		}
		tail.WriteString("\n")
		if n := Plain(t.NextAction, 1000, v.trigger()); n != "" {
			fmt.Fprintf(&tail, "\nNext: %s\n", n)
		}
		if t.TraceID != "" {
			fmt.Fprintf(&tail, "\nTrace %s\n", code(t.TraceID))
		}
	}
	if out := strings.TrimSpace(v.Output); out != "" {
		// The model's own text, as a quote: its blocks stay in it, and
		// nothing in it links, loads or folds (Quote).
		fmt.Fprintf(&tail, "\n<details><summary>Worker report</summary>\n\n%s\n\n</details>\n", cutMarkdown(Quote(out, v.trigger()), 4000, "\n\n_Report shortened; the full text is in the run's events._"))
	}
	if u := v.Usage; u.InputTokens+u.OutputTokens > 0 || u.CostUSD > 0 || u.LLMCalls > 0 {
		cost := u.Cost
		if cost == "" {
			cost = fmt.Sprintf("$%.4f", u.CostUSD)
		}
		fmt.Fprintf(&tail, "\n**Usage:** %s input + %s output tokens · %d model calls · %s\n", thousands(u.InputTokens), thousands(u.OutputTokens), u.LLMCalls, cost)
	}
	tail.WriteString("\n" + eventsLine(v) + "\n")

	left := budget - chars(head.String()) - chars(tail.String())
	var body strings.Builder
	more := "see " + eventsRef(v)
	// Approvals first: they are what a maintainer must act on.
	if len(v.Approvals) > 0 {
		var items []string
		for _, a := range v.Approvals {
			// In a table, a "|" even in a code span ends the cell unless
			// escaped: every cell's text goes through oneLine.
			items = append(items, fmt.Sprintf("| %s | %s | %s |\n", code(oneLine(a.ID, 100)), approvalSummary(a), code(oneLine(shortDigest(a.Digest), 20))))
		}
		how := fmt.Sprintf("\nAnswer with `%[1]s approve <id>` (or `%[1]s approve all`), `%[1]s deny <id> <reason>`, or a review on the pull request: **Approve** approves every pending action, **Request changes** denies them with your review text as the reason. The previews are in the bot's review on the pull request.\n", v.trigger())
		left -= section(&body, fmt.Sprintf("\n#### Waiting for approval (%d)\n\n| id | action | digest |\n|---|---|---|\n", len(v.Approvals)), items, how, "approvals", more, left)
	}
	if len(v.Plan) > 0 {
		var items []string
		for _, s := range v.Plan {
			mark := " "
			if s.Done {
				mark = "x"
			}
			items = append(items, fmt.Sprintf("- [%s] %s %s\n", mark, code(s.ID), Plain(s.Description, 500, v.trigger())))
		}
		left -= section(&body, "\n#### Plan\n\n", items, "", "steps", more, left)
	}
	if len(v.Tests) > 0 {
		var items []string
		for _, t := range v.Tests {
			c := "_(command not recorded)_"
			if t.Command != "" {
				c = code(oneLine(t.Command, 300))
			}
			res := map[string]string{"passed": "✅ passed", "failed": "❌ failed", "running": "⏳ running", "interrupted": "⚠️ interrupted"}[t.Result]
			if res == "" {
				res = inline(t.Result, 20)
			}
			if t.Detail != "" {
				res += " (" + code(oneLine(t.Detail, 200)) + ")"
			}
			items = append(items, fmt.Sprintf("| %s | %s |\n", c, res))
		}
		left -= section(&body, "\n#### Tests and commands\n\n| command | result |\n|---|---|\n", items, "", "commands", more, left)
	}
	if len(v.Artifacts) > 0 {
		var items []string
		for _, a := range v.Artifacts {
			items = append(items, fmt.Sprintf("- %s %s (%s bytes, %s)\n", inline(a.Kind, 40), code(oneLine(a.Name, 200)), thousands(a.Size), code(shortDigest(a.Digest))))
		}
		section(&body, "\n#### Artifacts\n\n", items, "", "artifacts", more, left)
	}
	out := head.String() + body.String() + tail.String()
	if chars(out) > MaxChars {
		// Unreachable with bounded sections; kept so that no input can
		// make GitHub reject the edit.
		out = head.String() + "\n_Details are too long for a comment: " + more + "._\n" + tail.String()
	}
	return out
}

// sandboxWarning is the line every tracking comment carries when commands
// are not confined: the operator opted out (sandbox: none), or no sandbox
// works and commands are refused.
func sandboxWarning(mechanism string) string {
	switch mechanism {
	case "none":
		return "> ⚠️ **Commands run without a sandbox** (server config `sandbox: none`): the repository's code runs with the bot's own access to files, network and processes."
	case "unavailable":
		return "> ⚠️ **Commands are refused**: no sandbox could be set up on the server (see `agentos doctor`)."
	}
	return ""
}

// section writes title, as many items as fit in left characters, a note
// for the rest, then footer. It returns the characters written.
func section(b *strings.Builder, title string, items []string, footer, noun, more string, left int) int {
	start := b.Len()
	used := chars(title) + chars(footer)
	if used+200 > left {
		// Not even the heading fits: one line says the section exists.
		line := fmt.Sprintf("\n_%d %s not shown: %s._\n", len(items), noun, more)
		b.WriteString(line)
		return chars(line)
	}
	b.WriteString(title)
	shown := 0
	for _, it := range items {
		n := chars(it)
		if used+n+200 > left {
			break
		}
		b.WriteString(it)
		used += n
		shown++
	}
	if rest := len(items) - shown; rest > 0 {
		fmt.Fprintf(b, "\n_…and %d more %s not shown (the comment is limited to %d characters): %s._\n", rest, noun, MaxChars, more)
	}
	b.WriteString(footer)
	return chars(b.String()[start:])
}

func approvalSummary(a Approval) string {
	s := code(oneLine(a.Tool, 200))
	switch {
	case a.Command != "":
		s += " " + code(oneLine(a.Command, 200))
	case len(a.Files) > 0:
		s += fmt.Sprintf(" %d file(s), +%d −%d", len(a.Files), a.Added, a.Removed)
	}
	return s
}

// maxURL bounds the events link; a longer one is left out.
const maxURL = 2048

func eventsRef(v View) string {
	if v.EventsURL != "" && len(v.EventsURL) <= maxURL {
		return "[the run's events](" + v.EventsURL + ")"
	}
	return "the run's events (`agentos replay " + safeID(v.SessionID) + "`)"
}

func eventsLine(v View) string {
	if v.ViewerURL != "" && len(v.ViewerURL) <= maxURL && strings.HasPrefix(v.ViewerURL, "https://") {
		line := "[Live run page](" + v.ViewerURL + ")"
		if v.EventsURL != "" && len(v.EventsURL) <= maxURL {
			line += " · [run events](" + v.EventsURL + ")"
		}
		return line + " · this comment is updated as the run advances."
	}
	if v.EventsURL != "" && len(v.EventsURL) <= maxURL {
		return "[Run events](" + v.EventsURL + ") · this comment is updated as the run advances."
	}
	return "Replay with `agentos replay " + safeID(v.SessionID) + "` · this comment is updated as the run advances."
}

// --- text helpers ---

func chars(s string) int { return utf8.RuneCountInString(s) }

// oneLine collapses whitespace, neutralises markers and table pipes, and
// cuts to max characters.
func oneLine(s string, max int) string { return cutRunes(flat(escapeMarker(s)), max) }

// flat collapses whitespace and escapes table pipes.
func flat(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", "\\|")
}

// inline is Plain for short labels (no command word to break).
func inline(s string, max int) string { return Plain(s, max, "") }

func cutRunes(s string, max int) string {
	if chars(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// escapeMarker stops quoted text from opening an HTML comment (which would
// hide the rest of the comment or fake a marker).
func escapeMarker(s string) string { return strings.ReplaceAll(s, "<!--", "&lt;!--") }

// safeID keeps a session id usable inside the marker.
func safeID(id string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || r == ':' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, id)
}

// code renders s as an inline code span that survives backticks in s.
func code(s string) string {
	if s == "" {
		return "` `"
	}
	s = strings.ReplaceAll(s, "\n", " ")
	ticks := "`"
	for strings.Contains(s, ticks) {
		ticks += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return ticks + " " + s + " " + ticks
	}
	return ticks + s + ticks
}

func shortDigest(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// cutMarkdown shortens free Markdown to at most max characters at a line
// boundary outside any code fence (markdown.Cut), then appends note. It
// never leaves a fence open: if the text is cut, the cut is before the
// fence that would not fit.
func cutMarkdown(s string, max int, note string) string {
	prefix, cut := markdown.Cut(s, max)
	if !cut {
		return s
	}
	return strings.TrimRight(prefix, "\n") + note
}

// fitNote ends a body that Fit shortened.
const fitNote = "\n\n_…truncated to GitHub's 65,536-character limit._"

// Fit shortens free Markdown (a PR body, a reply) to GitHub's limit at a
// line boundary outside any code fence, saying so at the end.
func Fit(s string) string { return cutMarkdown(s, MaxChars-chars(fitNote), fitNote) }

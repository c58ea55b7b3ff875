package review

// A finding's line comment: its title line, its body (the persona's
// Markdown explanation), the gating policy's reason, and — when the
// finding suggests a replacement for exactly the lines the comment
// covers on the new side of the diff — a GitHub suggested change
// (a ```suggestion block), which a maintainer can commit from the
// pull request's page.

import (
	"fmt"
	"strings"

	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/tracking"
	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/runtime/markdown"
	"github.com/agentos/agentos/runtime/untrusted"
	"github.com/agentos/agentos/runtime/workflow"
)

// Bounds of what a finding puts in a comment (GitHub's own limit is
// 65,536 characters).
const (
	maxFindingBody = 4000
	maxSuggestion  = 8000
)

// exactRange reports whether comment c covers exactly f's lines on the
// new (RIGHT) side: only then does a suggestion replace what it claims
// to. Place may shorten a range to the lines the diff shows.
func exactRange(c github.LineComment, f workflow.Finding) bool {
	end := f.EndLine
	if end == 0 {
		end = f.Line
	}
	start := c.StartLine
	if start == 0 {
		start = c.Line
	}
	return c.Side == "RIGHT" && (c.StartSide == "" || c.StartSide == "RIGHT") && start == f.Line && c.Line == end
}

// lineCommentText renders a posted finding's line comment and reports
// whether it carries a suggested change. exact says the comment covers
// exactly the finding's lines on the RIGHT side (exactRange).
func lineCommentText(f workflow.Finding, dc FindingDecision, trigger string, exact bool) (string, bool) {
	var b strings.Builder
	b.WriteString(findingText(f, dc, trigger))
	if body := findingBody(f.Body, trigger); body != "" {
		b.WriteString("\n\n" + body)
	}
	if why := gateReason(dc.Gate, trigger); why != "" {
		b.WriteString("\n\n" + why)
	}
	suggested := false
	if f.HasSuggestion {
		block, problem := suggestionBlock(f.Suggestion)
		if problem == "" && !exact {
			problem = "this comment does not cover exactly the lines it replaces"
		}
		if problem == "" {
			b.WriteString("\n\n" + block)
			suggested = true
		} else {
			b.WriteString("\n\n_The reviewer's suggested change is not shown: " + problem + "._")
		}
	}
	return b.String(), suggested
}

// gateReason names the policy that let the finding through and why.
func gateReason(g workflow.Outcome, trigger string) string {
	reason := clean(g.Reason, 300, trigger)
	switch {
	case g.PolicyID != "" && reason != "":
		return fmt.Sprintf("_Posted by policy `%s`: %s_", oneWord(g.PolicyID), reason)
	case g.PolicyID != "":
		return fmt.Sprintf("_Posted by policy `%s`._", oneWord(g.PolicyID))
	case reason != "":
		return "_Posted: " + reason + "_"
	}
	return ""
}

// findingBody makes a persona's Markdown explanation safe to post: what
// GitHub renders invisibly is removed, anything shaped like a secret is
// redacted, a code fence the body opens as a suggestion is turned into a
// plain one (only the bot places suggestions, on lines it checked), a
// fence left open is closed (it would swallow the rest of the comment),
// and mentions, images and command lines are neutralised.
func findingBody(s, trigger string) string {
	s, _ = untrusted.GitHubText(s, maxFindingBody)
	s = redact.New(nil).String(s)
	s = strings.TrimSpace(strings.ReplaceAll(s, "\r\n", "\n"))
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	open := ""
	for i, l := range lines {
		t := strings.TrimLeft(l, " ")
		if len(l)-len(t) > 3 {
			continue // indented code, not a fence
		}
		mark := fenceMark(t)
		if open != "" {
			if mark != "" && mark[0] == open[0] && len(mark) >= len(open) && strings.TrimSpace(t[len(mark):]) == "" {
				open = ""
			}
			continue
		}
		if mark == "" {
			continue
		}
		open = mark
		info := strings.TrimSpace(t[len(mark):])
		if strings.HasPrefix(strings.ToLower(info), "suggestion") {
			lines[i] = l[:len(l)-len(t)] + mark + "text"
		}
	}
	s = strings.Join(lines, "\n")
	if open != "" {
		s += "\n" + open
	}
	return tracking.Neutralize(s, trigger)
}

// fenceMark returns the run of three or more backticks or tildes a line
// opens with, "" if none.
func fenceMark(t string) string {
	if len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return ""
	}
	n := 0
	for n < len(t) && t[n] == t[0] {
		n++
	}
	if n < 3 {
		return ""
	}
	return t[:n]
}

// suggestionBlock renders a suggested change as GitHub's suggestion
// block; problem says why it cannot be shown. The text is code that a
// maintainer may commit as it stands, so it is never altered to make it
// safe: text that carries hidden characters, or anything the redactor
// takes for a secret, is not shown at all.
func suggestionBlock(s string) (block, problem string) {
	if len(s) > maxSuggestion {
		return "", fmt.Sprintf("it is longer than %d bytes", maxSuggestion)
	}
	if strings.ContainsRune(s, '\r') {
		return "", "it contains carriage returns"
	}
	if untrusted.Visible(s, false) != s {
		return "", "it contains hidden characters"
	}
	if redact.New(nil).String(s) != s {
		return "", "it looks like it contains a secret"
	}
	s = strings.TrimSuffix(s, "\n")
	fence := markdown.Fence(s)
	if s == "" {
		// An empty suggestion deletes the lines.
		return fence + "suggestion\n" + fence, ""
	}
	return fence + "suggestion\n" + s + "\n" + fence, ""
}

package hooks

import (
	"fmt"
	"strings"

	"github.com/agentos/agentos/runtime/claudecode"
)

// MatcherNotes reports the PreToolUse and PostToolUse command hooks whose
// matcher selects none of tools (the kernel's registered tool names),
// neither by agentos name nor by Claude Code name: such a hook never
// fires, and a security hook that silently does not apply is fail-open,
// so the operator is told at load time. One note per matcher group. A
// matcher naming tools of one of lazy (mounted MCP servers, whose tools
// are listed only when they start) is not reported.
func (r *Registry) MatcherNotes(tools, lazy []string) []string {
	var notes []string
	seen := map[string]bool{}
	for _, ev := range []Event{PreToolUse, PostToolUse} {
		for _, h := range r.handlers[ev] {
			c, ok := h.(*Command)
			if !ok || c.Matcher == "" || c.Matcher == "*" {
				continue
			}
			key := c.Source + "\x00" + c.Where + "\x00" + c.Matcher
			if seen[key] {
				continue
			}
			seen[key] = true
			re, invalid := compiled(c.Matcher)
			if invalid || len(claudecode.Selected(c.Matcher, re, tools)) > 0 || claudecode.OfServer(c.Matcher, lazy) {
				continue
			}
			notes = append(notes, fmt.Sprintf("%s: %s: matcher %q matches no tool agentos has, so this hook never fires%s", c.Source, c.Where, c.Matcher, hint(c.Matcher)))
		}
	}
	return notes
}

// hint names what a matcher that selects nothing may have meant.
func hint(matcher string) string {
	if strings.Contains(matcher, "mcp__") || strings.HasPrefix(matcher, "mcp.") {
		return " (no such MCP server or tool is mounted)"
	}
	var names []string
	for _, t := range claudecode.Table {
		names = append(names, t.Name)
	}
	return " (Claude Code names agentos maps: " + strings.Join(names, ", ") + ")"
}

package hooks

import (
	"regexp"
	"sync"

	"github.com/agentos/agentos/runtime/claudecode"
)

var (
	reMu    sync.Mutex
	reCache = map[string]*regexp.Regexp{}
)

// compiled returns the matcher's regular expression (nil for a name list,
// "" or "*", or an invalid expression).
func compiled(matcher string) (re *regexp.Regexp, invalid bool) {
	if matcher == "" || matcher == "*" || claudecode.IsNameList(matcher) {
		return nil, false
	}
	reMu.Lock()
	defer reMu.Unlock()
	re, ok := reCache[matcher]
	if !ok {
		re, _ = regexp.Compile(matcher)
		reCache[matcher] = re
	}
	return re, re == nil
}

// matchTool applies a Claude Code matcher to a tool event (see
// claudecode.MatchName for the forms). A matcher selects a tool by the
// tool's agentos name or by one of its Claude Code names (Bash for
// process.run, mcp__s__t for mcp.s.t, …: claudecode.Table), so that a
// hook written for Claude Code applies here. Non-tool events ignore the
// matcher, except SessionStart and PreCompact, whose matcher Claude Code
// applies to the source (startup, resume) and the trigger (manual, auto).
// An invalid regexp matches everything, so that the hook still runs and a
// broken hook denies rather than silently never firing.
func matchTool(matcher string, in Input) bool {
	re, invalid := compiled(matcher)
	if invalid {
		return true
	}
	switch in.Event {
	case PreToolUse, PostToolUse:
		return claudecode.Matches(matcher, re, in.ToolName)
	case SessionStart:
		return claudecode.MatchName(matcher, re, in.Source) || in.Source == ""
	case PreCompact:
		return claudecode.MatchName(matcher, re, in.Trigger) || in.Trigger == ""
	}
	return true
}

func isNameList(m string) bool { return claudecode.IsNameList(m) }

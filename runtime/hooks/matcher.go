package hooks

import (
	"regexp"
	"strings"
	"sync"
)

var (
	reMu    sync.Mutex
	reCache = map[string]*regexp.Regexp{}
)

// matchTool applies a Claude Code matcher to a tool event: "", "*" match
// every tool; a matcher of only letters, digits, '_', '-', '.' and '|' is a
// list of exact names separated by '|' (agentos tool names contain dots, so
// '.' counts as a name character here); anything else is an unanchored
// regular expression. Non-tool events ignore the matcher. An invalid regexp
// matches everything, so that the hook still runs and a broken hook denies
// rather than silently never firing.
func matchTool(matcher string, in Input) bool {
	if in.Event != PreToolUse && in.Event != PostToolUse {
		return true
	}
	if matcher == "" || matcher == "*" {
		return true
	}
	if isNameList(matcher) {
		for _, name := range strings.Split(matcher, "|") {
			if strings.TrimSpace(name) == in.ToolName {
				return true
			}
		}
		return false
	}
	reMu.Lock()
	re, ok := reCache[matcher]
	if !ok {
		re, _ = regexp.Compile(matcher)
		reCache[matcher] = re
	}
	reMu.Unlock()
	if re == nil {
		return true
	}
	return re.MatchString(in.ToolName)
}

func isNameList(m string) bool {
	for _, c := range m {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '|' || c == ' ') {
			return false
		}
	}
	return true
}

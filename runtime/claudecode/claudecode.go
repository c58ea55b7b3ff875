// Package claudecode maps what Claude Code users write onto agentos: the
// one table from Claude Code's tool names (Bash, Read, Edit, …, and
// mcp__server__tool) to the kernel's tools, used by hook matchers and by
// skills' allowed-tools, and the tool_input shapes Claude Code's hooks
// read (command, file_path, old_string/new_string, …), built from an
// agentos call's arguments; and the permissions block of Claude Code's
// settings files (permissions.go), turned into the kernel's deny and ask
// rules with a warning for each setting agentos does not do as written.
//
// The mapping errs on the side of applying a rule: a hook written for
// Claude Code's Write also fires for repo.patch, which can create files,
// because a security hook that silently does not apply is fail-open.
package claudecode

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Tool is one Claude Code tool and the agentos tools that do its work.
type Tool struct {
	Name string   // Claude Code's name
	Ours []string // agentos tool names
}

// Table is the mapping. Edit, MultiEdit and Write each map to both write
// tools: repo.patch creates and edits files, repo.write replaces a file's
// content, and a hook guarding either kind of change must see both.
var Table = []Tool{
	{Name: "Bash", Ours: []string{"process.run"}},
	{Name: "Read", Ours: []string{"repo.read"}},
	{Name: "Edit", Ours: []string{"repo.patch", "repo.write"}},
	{Name: "MultiEdit", Ours: []string{"repo.patch", "repo.write"}},
	{Name: "Write", Ours: []string{"repo.write", "repo.patch"}},
	{Name: "Grep", Ours: []string{"repo.search"}},
	{Name: "Glob", Ours: []string{"repo.search"}},
}

// mcpPrefix starts Claude Code's MCP tool names: mcp__<server>__<tool>.
const mcpPrefix = "mcp__"

// Ours returns the agentos tools a Claude Code tool name stands for:
// the table's entry, mcp__server__tool → mcp.server.tool, and a
// permission-rule form such as Bash(git add:*) → the tool's entry (the
// argument is a rule kernel/toolrule enforces per call, not a scope).
// mcp__server and mcp__server__* (Claude Code's permission forms for
// every tool of a server) become mcp.server.*, which a kernel scope
// reads as a prefix (kernel.InScope).
// ok is false for a name Claude Code has and agentos does not (WebFetch,
// Task, …) and for a name that is not Claude Code's.
func Ours(name string) (ours []string, ok bool) {
	name = strings.TrimSpace(name)
	if i := strings.IndexByte(name, '('); i > 0 && strings.HasSuffix(name, ")") {
		name = name[:i]
	}
	for _, t := range Table {
		if t.Name == name {
			return append([]string(nil), t.Ours...), true
		}
	}
	if server, tool, ok := splitMCP(name); ok {
		if tool == "*" {
			return []string{"mcp." + server + ".*"}, true
		}
		return []string{"mcp." + server + "." + tool}, true
	}
	// A permission rule's "mcp__server" stands for every tool of the server.
	if server, ok := strings.CutPrefix(name, mcpPrefix); ok && server != "" && !strings.Contains(server, "__") {
		return []string{"mcp." + server + ".*"}, true
	}
	return nil, false
}

// splitMCP splits mcp__server__tool. The server name is up to the first
// "__" after the prefix; the tool name is the rest.
func splitMCP(name string) (server, tool string, ok bool) {
	rest, found := strings.CutPrefix(name, mcpPrefix)
	if !found {
		return "", "", false
	}
	server, tool, found = strings.Cut(rest, "__")
	if !found || server == "" || tool == "" {
		return "", "", false
	}
	return server, tool, true
}

// Aliases returns the Claude Code names of an agentos tool: process.run →
// [Bash], repo.patch → [Edit MultiEdit Write], mcp.s.t → [mcp__s__t].
// A hook matcher matches an agentos tool if it matches its own name or one
// of these.
func Aliases(ours string) []string {
	var out []string
	for _, t := range Table {
		for _, o := range t.Ours {
			if o == ours {
				out = append(out, t.Name)
			}
		}
	}
	if n := mcpName(ours); n != "" {
		out = append(out, n)
	}
	return out
}

// AllowedTools maps a skill's allowed-tools to agentos tool names: Claude
// Code's names through the table, agentos names as they are. Names that
// map to nothing (WebFetch, a typo) are returned in unknown and kept in
// tools unchanged, so that they allow nothing: a skill's scope is never
// widened by a name agentos does not understand.
func AllowedTools(declared []string) (tools, unknown []string) {
	seen := map[string]bool{}
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			tools = append(tools, n)
		}
	}
	for _, d := range declared {
		d = strings.TrimSpace(d)
		if d == "" {
			continue
		}
		if ours, ok := Ours(d); ok {
			for _, o := range ours {
				add(o)
			}
			continue
		}
		if !looksOurs(d) {
			unknown = append(unknown, d)
		}
		add(d)
	}
	return tools, unknown
}

// looksOurs: agentos tool names are dotted lower-case (repo.read, echo,
// mcp.server.tool); Claude Code's are capitalized.
func looksOurs(n string) bool {
	return n != "" && n[0] >= 'a' && n[0] <= 'z'
}

// MatchName applies a Claude Code hook matcher to one name: "" and "*"
// match everything; a matcher made only of name characters and '|' is a
// list of exact names; anything else is an unanchored regular expression
// (Claude Code's rules). agentos names contain dots, so '.' counts as a
// name character: "repo.read" is an exact name, not a pattern. re is the
// compiled matcher (nil for the other forms).
func MatchName(matcher string, re *regexp.Regexp, name string) bool {
	if matcher == "" || matcher == "*" {
		return true
	}
	if IsNameList(matcher) {
		for _, n := range strings.Split(matcher, "|") {
			if strings.TrimSpace(n) == name {
				return true
			}
		}
		return false
	}
	return re != nil && re.MatchString(name)
}

// IsNameList reports whether a matcher is a '|'-separated list of exact
// names rather than a regular expression.
func IsNameList(m string) bool {
	for _, c := range m {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '|' || c == ' ') {
			return false
		}
	}
	return true
}

// Matches reports whether a matcher selects the agentos tool: by its own
// name or by one of its Claude Code names.
func Matches(matcher string, re *regexp.Regexp, tool string) bool {
	if MatchName(matcher, re, tool) {
		return true
	}
	for _, a := range Aliases(tool) {
		if MatchName(matcher, re, a) {
			return true
		}
	}
	return false
}

// Selected returns the tools of registered that a matcher selects, sorted;
// an empty result for a matcher other than "" and "*" means it matches
// nothing, which the loaders report.
func Selected(matcher string, re *regexp.Regexp, registered []string) (selected []string) {
	for _, t := range registered {
		if Matches(matcher, re, t) {
			selected = append(selected, t)
		}
	}
	sort.Strings(selected)
	return selected
}

// OfServer reports whether name (a hook matcher or an allowed tool, in
// Claude Code's form mcp__server…, or ours, mcp.server.…) names tools of
// one of servers. A mounted MCP server lists its tools only when it
// starts, so such a name cannot be checked at load time.
func OfServer(name string, servers []string) bool {
	name = strings.TrimSpace(name)
	for _, s := range servers {
		if strings.HasPrefix(name, mcpPrefix+s+"__") || name == mcpPrefix+s || strings.HasPrefix(name, "mcp."+s+".") {
			return true
		}
	}
	return false
}

// Absent are Claude Code tools that agentos has no counterpart for: a
// list that allows one of them cannot be honoured, and one that
// disallows it is honoured by there being no such tool.
var Absent = []string{"Agent", "BashOutput", "ExitPlanMode", "KillBash", "KillShell", "LS", "NotebookEdit", "NotebookRead", "SlashCommand", "Task", "TodoRead", "TodoWrite", "WebFetch", "WebSearch"}

// SplitList splits a tool list as claude-code-action's allowed_tools and
// disallowed_tools are written: names separated by commas or newlines,
// where a comma inside a permission rule's parentheses
// (Bash(git add:*, git commit:*)) does not separate. Blank entries are
// dropped. An unbalanced parenthesis is an error.
func SplitList(raw string) ([]string, error) {
	var out []string
	var cur strings.Builder
	depth := 0
	flush := func() {
		if n := strings.TrimSpace(cur.String()); n != "" {
			out = append(out, n)
		}
		cur.Reset()
	}
	for _, r := range raw {
		switch {
		case r == '(':
			depth++
		case r == ')':
			if depth == 0 {
				return nil, fmt.Errorf("%q: a ')' without its '('", strings.TrimSpace(cur.String()+")"))
			}
			depth--
		case (r == ',' || r == '\n' || r == '\r') && depth == 0:
			flush()
			continue
		}
		cur.WriteRune(r)
	}
	if depth != 0 {
		return nil, fmt.Errorf("%q: a '(' without its ')'", strings.TrimSpace(cur.String()))
	}
	flush()
	return out, nil
}

// Resolved is one name of a tool list mapped to agentos tools.
type Resolved struct {
	Name string   // as written
	Ours []string // agentos tools (an entry may be "mcp.server.*")
	// Argument is a permission rule's argument (Bash(npm test) → "npm
	// test"): a scope is by tool, so it is not enforced by the scope.
	Argument string
	// Absent: a Claude Code tool agentos does not have (Ours is empty).
	Absent bool
}

// ResolveList maps the names of a tool list: Claude Code's names through
// the table (with or without a permission rule's argument), mcp__server
// and mcp__server__tool, and agentos's own names: those the table maps
// to, mcp.server.tool and mcp.server.*, and those known lists.
// A name that is none of these is an error naming it: a list that
// narrows a run must not skip what it cannot read.
func ResolveList(names []string, known []string) ([]Resolved, error) {
	var out []Resolved
	var unknown []string
	for _, n := range names {
		r := Resolved{Name: n}
		base := n
		if i := strings.IndexByte(n, '('); i > 0 && strings.HasSuffix(n, ")") {
			base, r.Argument = strings.TrimSpace(n[:i]), strings.TrimSpace(n[i+1:len(n)-1])
		}
		switch {
		case strings.ContainsAny(base, "() \t"):
			unknown = append(unknown, n)
			continue
		case isAbsent(base):
			r.Absent = true
		default:
			if ours, ok := Ours(base); ok {
				r.Ours = ours
			} else if r.Argument == "" && (slicesContains(known, base) || len(Aliases(base)) > 0 || validMCPOurs(base)) {
				r.Ours = []string{base}
			} else {
				unknown = append(unknown, n)
				continue
			}
		}
		out = append(out, r)
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("unknown tool name(s) %q: use Claude Code's names (%s, mcp__server__tool) or agentos's", unknown, strings.Join(tableNames(), ", "))
	}
	return out, nil
}

func isAbsent(n string) bool { return slicesContains(Absent, n) }

func slicesContains(l []string, n string) bool {
	for _, x := range l {
		if x == n {
			return true
		}
	}
	return false
}

// validMCPOurs: mcp.<server>.<tool> or mcp.<server>.*, agentos's form of
// an MCP tool.
func validMCPOurs(n string) bool {
	rest, ok := strings.CutPrefix(n, "mcp.")
	if !ok {
		return false
	}
	server, tool, ok := strings.Cut(rest, ".")
	return ok && server != "" && tool != "" && !strings.Contains(server, "*") && (tool == "*" || !strings.Contains(tool, "*"))
}

func tableNames() []string {
	var out []string
	for _, t := range Table {
		out = append(out, t.Name)
	}
	return out
}

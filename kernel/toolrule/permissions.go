package toolrule

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// Permissions are the deny and ask rules of one settings file's
// permissions block (Claude Code's .claude/settings.json), as the kernel
// enforces them on every call:
//
//   - a deny rule refuses a call it matches (TOOL_NOT_ALLOWED);
//   - an ask rule makes a call it matches wait for a maintainer's
//     approval, whatever policy.yaml says;
//   - a command or a write that cannot be checked against the deny rules
//     (a command substitution, a write whose paths are unknown) is not
//     refused but waits for approval, where a maintainer sees it.
//
// Allow rules are not here: a repository's settings only tighten what
// the operator's policy allows (docs/claude-code.md).
type Permissions struct {
	// Source names the file in refusals and approval reasons.
	Source    string
	deny, ask *Set
	denyTools []toolPattern
	askTools  []toolPattern
	// DenyRaw and AskRaw are the rules enforced, as written.
	DenyRaw, AskRaw []string
}

// toolPattern is a bare rule: the agentos tools it names. A pattern is
// an exact name or a path.Match glob over the tool name (mcp.s.*,
// mcp.s.get_*).
type toolPattern struct {
	rule     string
	patterns []string
}

func (t toolPattern) match(tool string) bool { return MatchTool(t.patterns, tool) }

// MatchTool reports whether one of patterns names tool: the tool's name,
// or a path.Match glob over tool names (mcp.s.*).
func MatchTool(patterns []string, tool string) bool {
	for _, p := range patterns {
		if p == tool {
			return true
		}
		if strings.ContainsAny(p, "*?[") {
			if ok, _ := path.Match(p, tool); ok {
				return true
			}
		}
	}
	return false
}

// PermissionProblem is a rule that is not enforced as written, and why.
type PermissionProblem struct {
	List   string // deny | ask
	Rule   string
	Reason string
}

func (p PermissionProblem) String() string {
	return fmt.Sprintf("permissions.%s rule %q: %s", p.List, p.Rule, p.Reason)
}

// commandTools are the kernel tools that run a command line: a bare Bash
// rule names all of them, and a Bash(…) rule binds their commands.
var commandTools = []string{"process.run", "test.run", "lint.run"}

// familyTools are the kernel tools a bare rule of a family names: Claude
// Code applies Read rules to Grep and Glob too (repo.search).
var familyTools = map[family][]string{
	famBash: commandTools,
	famRead: {"repo.read", "repo.search"},
	famEdit: {"repo.patch", "repo.write"},
}

// NewPermissions builds the rules of one settings file. resolve maps a
// bare name that is not Bash, Read or Edit (Grep, mcp__server__tool) to
// agentos tool names or globs over them; known is false for a name it
// does not know, and tools is empty for a tool agentos does not have
// (a deny rule for it is honoured by there being no such tool). Rules
// that cannot be enforced as written are left out and returned as
// problems: the caller reports them.
func NewPermissions(source string, deny, ask []string, resolve func(name string) (tools []string, known bool)) (*Permissions, []PermissionProblem) {
	p := &Permissions{Source: source}
	var problems []PermissionProblem
	build := func(list string, entries []string) (*Set, []toolPattern, []string) {
		var specs, raws []string
		var bare []toolPattern
		for _, raw := range entries {
			raw = strings.TrimSpace(raw)
			if raw == "" {
				continue
			}
			name, spec, hasSpec, err := splitEntry(raw)
			if err != "" {
				problems = append(problems, PermissionProblem{list, raw, err})
				continue
			}
			if fam, ok := families[name]; ok {
				if hasSpec && !isBareSpec(fam, spec) {
					if _, _, perr := parseRule(raw); perr != nil {
						problems = append(problems, PermissionProblem{list, raw, ruleReason(perr)})
						continue
					}
					specs, raws = append(specs, raw), append(raws, raw)
					continue
				}
				bare, raws = append(bare, toolPattern{raw, familyTools[fam]}), append(raws, raw)
				continue
			}
			if hasSpec {
				reason := fmt.Sprintf("an argument is enforced only for Bash (a command), Read and Edit/Write/MultiEdit (a path); %s is matched by its name alone", name)
				if strings.HasPrefix(spec, "domain:") {
					reason = "agentos has no WebFetch tool; commands reach the network only through policy.yaml network.allow, which this rule does not change"
				}
				problems = append(problems, PermissionProblem{list, raw, reason})
				continue
			}
			tools, known := resolve(name)
			switch {
			case !known:
				problems = append(problems, PermissionProblem{list, raw, "not a tool name agentos knows (Claude Code's Bash, Read, Edit, Write, MultiEdit, Grep, Glob, mcp__server__tool)"})
			case len(tools) == 0:
				// A tool agentos does not have: nothing to deny or ask.
				raws = append(raws, raw)
			default:
				bare, raws = append(bare, toolPattern{raw, tools}), append(raws, raw)
			}
		}
		s, err := Parse(nil, specs)
		if err != nil {
			// Every entry was parsed above; this cannot fail.
			problems = append(problems, PermissionProblem{list, strings.Join(specs, ", "), err.Error()})
			s = &Set{allowAll: map[family]bool{}}
		}
		s.perm, s.Source = true, fmt.Sprintf("%s permissions.%s", source, list)
		return s, bare, raws
	}
	p.deny, p.denyTools, p.DenyRaw = build("deny", deny)
	p.deny.searchMasked = true
	p.ask, p.askTools, p.AskRaw = build("ask", ask)
	return p, problems
}

// splitEntry splits Tool(spec).
func splitEntry(raw string) (name, spec string, hasSpec bool, problem string) {
	i := strings.IndexByte(raw, '(')
	if i < 0 {
		if strings.ContainsAny(raw, ") \t") {
			return "", "", false, "not a rule: write Tool or Tool(argument)"
		}
		return raw, "", false, ""
	}
	if !strings.HasSuffix(raw, ")") || i == 0 {
		return "", "", false, "not a rule: write Tool or Tool(argument), the argument in one pair of parentheses at the end"
	}
	name, spec = strings.TrimSpace(raw[:i]), strings.TrimSpace(raw[i+1:len(raw)-1])
	if spec == "" {
		return "", "", false, "an empty argument; write the name alone for every use"
	}
	return name, spec, true, ""
}

// isBareSpec: Bash(*) and Read(**) are the bare name.
func isBareSpec(f family, spec string) bool {
	if f == famBash {
		return spec == "*"
	}
	return spec == "**" || spec == "/**" || spec == "./**"
}

func ruleReason(err error) string {
	if pe, ok := err.(*ParseError); ok {
		return pe.Reason
	}
	return err.Error()
}

// Empty reports whether no rule is enforced.
func (p *Permissions) Empty() bool { return p == nil || len(p.DenyRaw)+len(p.AskRaw) == 0 }

// Denied returns the refusal of a call a deny rule matches: by its tool
// (a bare rule), or by its command or read path. Write paths are checked
// by DeniedWrite once known. A call that cannot be checked is not
// refused here (Ask makes it wait for approval).
func (p *Permissions) Denied(tool string, args json.RawMessage) *Refusal {
	if p.Empty() {
		return nil
	}
	for _, t := range p.denyTools {
		if t.match(tool) {
			return &Refusal{Tool: tool, Subject: tool, Rule: t.rule, Reason: "a deny rule names the tool", Source: p.deny.Source}
		}
	}
	if r := p.deny.CheckArgs(tool, args); r != nil && r.Rule != "" {
		return r
	}
	return nil
}

// configuredCommand are the command tools whose command line is not in
// their arguments but in the repository's configuration (test.run,
// lint.run): their command is checked once assessed (DeniedCommand).
var configuredCommand = map[string]bool{"test.run": true, "lint.run": true}

// DeniedCommand returns the refusal of a command tool (test.run,
// lint.run) whose assessed command line a Bash deny rule matches.
func (p *Permissions) DeniedCommand(tool, command string) *Refusal {
	if p.Empty() || !configuredCommand[tool] || command == "" {
		return nil
	}
	if r := p.deny.CheckCommand(tool, command, ""); r != nil && r.Rule != "" {
		return p.deny.sourced(r)
	}
	return nil
}

// DeniedWrite returns the refusal of a write whose paths an Edit deny
// rule matches.
func (p *Permissions) DeniedWrite(tool string, paths []string) *Refusal {
	if p.Empty() || len(paths) == 0 {
		return nil
	}
	if r := p.deny.CheckWrite(tool, paths); r != nil && r.Rule != "" {
		return r
	}
	return nil
}

// Ask returns why a call must wait for a maintainer's approval ("" when
// it need not): an ask rule names its tool or matches its command or
// paths, or the deny or ask rules cannot be checked against it. command
// is a configured command tool's assessed command line, paths a write's
// paths (nil for other tools).
func (p *Permissions) Ask(tool string, args json.RawMessage, command string, paths []string) string {
	if p.Empty() {
		return ""
	}
	for _, t := range p.askTools {
		if t.match(tool) {
			return fmt.Sprintf("%s rule %s names %s", p.ask.Source, t.rule, tool)
		}
	}
	if configuredCommand[tool] && command != "" {
		for _, s := range []*Set{p.ask, p.deny} {
			if r := s.CheckCommand(tool, command, ""); r != nil {
				return askReason(s.Source, r)
			}
		}
	}
	if r := p.ask.CheckArgs(tool, args); r != nil {
		return askReason(p.ask.Source, r)
	}
	if r := p.deny.CheckArgs(tool, args); r != nil {
		// A matching deny rule refused the call before; this one could not
		// be checked against the deny rules.
		return askReason(p.deny.Source, r)
	}
	if p.deny.family(tool) == famEdit {
		for _, s := range []*Set{p.ask, p.deny} {
			if r := s.CheckWrite(tool, paths); r != nil {
				return askReason(s.Source, r)
			}
		}
	}
	return ""
}

func askReason(source string, r *Refusal) string {
	if r.Rule != "" {
		return fmt.Sprintf("%s rule %s matches %q", source, r.Rule, r.Subject)
	}
	return fmt.Sprintf("%s: %s %q cannot be checked against the rules (%s), so a maintainer decides", source, r.Tool, r.Subject, r.Reason)
}

// DenyGlobs are the Read deny rules' paths as the workspace jail's deny
// patterns (doublestar globs over repository-relative paths): a denied
// path is then hidden from every repository tool, repo.search included,
// and from the commands' sandbox, not only from repo.read.
func (p *Permissions) DenyGlobs() []string {
	if p.Empty() {
		return nil
	}
	var out []string
	for _, r := range p.deny.deny {
		if r.fam != famRead {
			continue
		}
		for _, pp := range r.pats {
			g := strings.Join(pp.segs, "/")
			out = append(out, g, g+"/**")
		}
	}
	return out
}

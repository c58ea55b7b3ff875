// Package toolrule reads Claude Code's permission rules (the entries of
// claude-code-action's allowed_tools and disallowed_tools, such as
// Bash(npm test), Bash(git diff:*), Read(docs/**), Edit(src/**/*.go)) and
// decides whether a concrete call of a kernel tool is within them.
//
// A tool name alone (Bash, Read) is the tool scope's business; this
// package enforces the part in parentheses, the argument: which commands
// process.run may run, which paths repo.read may read and repo.patch and
// repo.write may change. A command line is parsed as a shell would parse
// it (mvdan.cc/sh), split into its simple commands, and every one of them
// must be allowed; what the parser cannot prove harmless (command or
// process substitution, parameter expansion, eval-like programs,
// here-documents, redirections to paths no rule allows, unparsable text)
// is refused while a Bash rule is in force. Deny rules win over allow
// rules.
//
// Permissions (permissions.go) are the same rules read from a
// repository's Claude Code settings (permissions.deny and
// permissions.ask): deny refuses, ask needs approval, and what cannot be
// checked against them waits for approval instead of being refused.
package toolrule

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// family is the kind of argument a rule constrains.
type family int

const (
	famBash family = iota + 1 // a command line (process.run)
	famRead                   // a path read (repo.read, repo.search)
	famEdit                   // a path written (repo.patch, repo.write)
)

// families maps Claude Code's tool names that take an argument rule to
// the family they constrain; Edit rules apply to every tool that edits
// files, as Claude Code documents, so Write and MultiEdit are Edit.
var families = map[string]family{
	"Bash":      famBash,
	"Read":      famRead,
	"Edit":      famEdit,
	"Write":     famEdit,
	"MultiEdit": famEdit,
}

// toolFamily is the family of a kernel tool.
var toolFamily = map[string]family{
	"process.run": famBash,
	"repo.read":   famRead,
	"repo.search": famRead,
	"repo.patch":  famEdit,
	"repo.write":  famEdit,
}

func (f family) String() string {
	switch f {
	case famBash:
		return "Bash"
	case famRead:
		return "Read"
	case famEdit:
		return "Edit"
	}
	return "?"
}

// Rule is one parsed permission rule.
type Rule struct {
	Raw  string // as written
	Tool string // Claude Code's tool name
	Spec string // the argument; "" for the bare name (every use)
	fam  family
	cmds []*regexp.Regexp // Bash: alternatives, matched against a canonical command
	pats []pathPattern    // Read/Edit
}

// ParseError is a rule that cannot be enforced as written.
type ParseError struct {
	Rule   string
	Reason string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("permission rule %q: %s", e.Rule, e.Reason)
}

// Set is the rules of one allowed list and one disallowed list.
type Set struct {
	allow, deny []Rule
	allowAll    map[family]bool // a bare allowed name (or Bash(*)): every use
	// AllowRaw and DenyRaw are the entries the set was built from that
	// concern a rule family (bare or with an argument), in order: what
	// a run records so that a resumed run can be checked against them.
	AllowRaw, DenyRaw []string
	// Source names the lists in refusals: "" for the Action's
	// allowed_tools and disallowed_tools, SourceSkills for a scope's,
	// a settings file's permissions for Permissions'.
	Source string
	// perm: the set holds a settings file's deny or ask rules
	// (NewPermissions): a redirection is checked against the Edit deny
	// rules only, as nothing is allowed by this set.
	perm bool
	// searchMasked: the Read deny rules' paths are hidden from every
	// tool and command by the workspace jail (DenyGlobs), so they do
	// not refuse repo.search.
	searchMasked bool
}

// SourceSkills is the Source of the rules ForScope builds.
const SourceSkills = "skill allowed-tools"

// scopeFamily maps the agentos tools whose bare name in a scope allows
// every use of their family's argument, as Claude Code's bare Bash, Read
// and Edit do. repo.search is not one: alone it reads no chosen path, and
// a Read rule beside it still refuses it (CheckArgs).
var scopeFamily = map[string]string{
	"process.run": "Bash",
	"repo.read":   "Read",
	"repo.patch":  "Edit",
	"repo.write":  "Edit",
}

// ForScope builds the rules of a tool scope's entries whose allowances add
// up: the allowed-tools of the skills a run has loaded, in Claude Code's
// names (Bash(git diff:*), Read(docs/**), Edit) or agentos names
// (process.run, repo.read). A call is allowed when any entry allows it: a
// bare name of the family's tool, in either naming, allows every use.
// Entries that name no rule family are the scope's business and skipped.
// An argument this package cannot enforce is an error, as for Parse; a
// scope that cannot be enforced must not be widened by it. The set has
// no deny rules, and Empty when no entry has an argument.
func ForScope(entries []string) (*Set, error) {
	in := make([]string, 0, len(entries))
	seen := map[string]bool{}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if fam, ok := scopeFamily[e]; ok {
			e = fam
		}
		if !seen[e] {
			seen[e] = true
			in = append(in, e)
		}
	}
	s, err := Parse(in, nil)
	if err != nil {
		return nil, err
	}
	s.Source = SourceSkills
	return s, nil
}

// Parse builds a set from the entries of an allowed and a disallowed
// list. Entries without an argument that name no rule family (Grep,
// mcp__server__tool, an agentos name) are the tool scope's and skipped
// here. An argument this package cannot enforce (WebFetch(domain:…), a
// path outside the workspace, a misplaced ":*") is an error: a list that
// narrows a run must not skip what it cannot read.
func Parse(allow, deny []string) (*Set, error) {
	s := &Set{allowAll: map[family]bool{}}
	for _, raw := range allow {
		r, ok, err := parseRule(raw)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		s.AllowRaw = append(s.AllowRaw, r.Raw)
		if r.Spec == "" {
			s.allowAll[r.fam] = true
			continue
		}
		s.allow = append(s.allow, r)
	}
	for _, raw := range deny {
		r, ok, err := parseRule(raw)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		s.DenyRaw = append(s.DenyRaw, r.Raw)
		if r.Spec == "" {
			// A bare denied name is the scope's: the tool is not offered.
			continue
		}
		s.deny = append(s.deny, r)
	}
	return s, nil
}

// Empty reports whether the set constrains no argument: no rule has one.
func (s *Set) Empty() bool { return s == nil || len(s.allow)+len(s.deny) == 0 }

// String lists the rules for messages.
func (s *Set) String() string {
	if s.Empty() {
		return "none"
	}
	return fmt.Sprintf("allowed %q, disallowed %q", s.AllowRaw, s.DenyRaw)
}

// inForce reports whether any rule with an argument concerns the family.
func (s *Set) inForce(f family) bool {
	if s.Empty() {
		return false
	}
	for _, r := range s.allow {
		if r.fam == f {
			return true
		}
	}
	for _, r := range s.deny {
		if r.fam == f {
			return true
		}
	}
	return false
}

// allowRules returns the allow rules of a family, unless a bare name
// allows every use (then nil and all is true).
func (s *Set) allowRules(f family) (rules []Rule, all bool) {
	if s.allowAll[f] {
		return nil, true
	}
	for _, r := range s.allow {
		if r.fam == f {
			rules = append(rules, r)
		}
	}
	return rules, false
}

func (s *Set) denyRules(f family) []Rule {
	var out []Rule
	for _, r := range s.deny {
		if r.fam == f {
			out = append(out, r)
		}
	}
	return out
}

func raws(rs []Rule) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Raw)
	}
	return out
}

// parseRule parses one list entry. ok is false for an entry that is not
// a rule of a family this package enforces and has no argument.
func parseRule(raw string) (r Rule, ok bool, err error) {
	raw = strings.TrimSpace(raw)
	r.Raw = raw
	name, spec, hasSpec := raw, "", false
	if i := strings.IndexByte(raw, '('); i >= 0 {
		if !strings.HasSuffix(raw, ")") {
			return r, false, &ParseError{raw, "a '(' without its closing ')' at the end"}
		}
		name, spec, hasSpec = strings.TrimSpace(raw[:i]), strings.TrimSpace(raw[i+1:len(raw)-1]), true
	}
	fam, known := families[name]
	switch {
	case !known && !hasSpec:
		return r, false, nil
	case name == "WebFetch":
		return r, false, &ParseError{raw, "WebFetch rules (domain:…) are not supported: agentos has no WebFetch tool, so a domain cannot be allowed or refused"}
	case !known:
		return r, false, &ParseError{raw, fmt.Sprintf("an argument is supported only for Bash (a command), Read and Edit/Write/MultiEdit (a path); %s takes its name alone", name)}
	case hasSpec && spec == "":
		return r, false, &ParseError{raw, "an empty argument; write the name alone for every use"}
	}
	r.Tool, r.fam = name, fam
	if !hasSpec || (fam == famBash && spec == "*") || (fam != famBash && (spec == "**" || spec == "/**" || spec == "./**")) {
		// Bash(*) and Read(**) are the bare name.
		return r, true, nil
	}
	r.Spec = spec
	if fam == famBash {
		// claude-code-action lists write Bash(git add:*, git commit:*):
		// alternatives separated by ", ".
		for _, alt := range strings.Split(spec, ", ") {
			re, err := compileCommand(alt)
			if err != nil {
				return r, false, &ParseError{raw, err.Error()}
			}
			r.cmds = append(r.cmds, re)
		}
		return r, true, nil
	}
	p, err := compilePath(spec)
	if err != nil {
		return r, false, &ParseError{raw, err.Error()}
	}
	r.pats = []pathPattern{p}
	return r, true, nil
}

var spaces = regexp.MustCompile(`\s+`)

// compileCommand turns a Bash rule's argument into a regular expression
// over a canonical command line (words joined by one space, see
// canonical): "cmd" is the exact command; "cmd:*" is cmd alone or cmd
// followed by a space and anything; a "*" elsewhere matches any run of
// characters, and a trailing " *" (the only "*") is optional, so "ls *"
// matches "ls" and "ls -la" but not "lsof".
func compileCommand(p string) (*regexp.Regexp, error) {
	p = spaces.ReplaceAllString(strings.TrimSpace(p), " ")
	if p == "" {
		return nil, fmt.Errorf("an empty command pattern")
	}
	prefix := false
	if s, ok := strings.CutSuffix(p, ":*"); ok {
		p, prefix = strings.TrimSpace(s), true
		if p == "" {
			return nil, fmt.Errorf(`":*" needs a command before it (Bash(npm test:*))`)
		}
	}
	if strings.Contains(p, ":*") {
		return nil, fmt.Errorf(`":*" works only at the end of the pattern`)
	}
	if !prefix && strings.Count(p, "*") == 1 && strings.HasSuffix(p, " *") {
		p, prefix = strings.TrimSuffix(p, " *"), true
	}
	var b strings.Builder
	b.WriteString(`\A`)
	for i, lit := range strings.Split(p, "*") {
		if i > 0 {
			b.WriteString(`.*`)
		}
		b.WriteString(regexp.QuoteMeta(lit))
	}
	if prefix {
		b.WriteString(`(?: .*)?`)
	}
	b.WriteString(`\z`)
	return regexp.Compile("(?s)" + b.String())
}

// pathPattern is a Read/Edit rule's path, gitignore-style: a pattern with
// a slash before its end is anchored at the repository root, one without
// matches at any depth; "**" matches any number of directories; a
// pattern that matches a directory matches everything under it.
type pathPattern struct {
	segs     []string
	anchored bool
}

func compilePath(spec string) (pathPattern, error) {
	switch {
	case strings.HasPrefix(spec, "//"):
		return pathPattern{}, fmt.Errorf("an absolute path (//…) is outside the repository, where agentos tools never reach; rules take repository paths")
	case strings.HasPrefix(spec, "~"):
		return pathPattern{}, fmt.Errorf("a home-directory path (~/…) is outside the repository, where agentos tools never reach; rules take repository paths")
	case strings.HasPrefix(spec, "domain:"):
		return pathPattern{}, fmt.Errorf("domain: is WebFetch's, not a path")
	}
	anchored := false
	p := spec
	if rest, ok := strings.CutPrefix(p, "./"); ok {
		p, anchored = rest, true
	} else if rest, ok := strings.CutPrefix(p, "/"); ok {
		p, anchored = rest, true
	}
	p = strings.TrimSuffix(p, "/")
	if strings.Contains(p, "/") {
		anchored = true
	}
	if p == "" {
		return pathPattern{}, fmt.Errorf("an empty path")
	}
	segs := strings.Split(p, "/")
	for _, s := range segs {
		if s == "" || s == "." || s == ".." {
			return pathPattern{}, fmt.Errorf("a path with an empty, . or .. segment")
		}
		if s == "**" {
			continue
		}
		if _, err := path.Match(s, ""); err != nil {
			return pathPattern{}, fmt.Errorf("segment %q is not a valid glob", s)
		}
	}
	if !anchored {
		segs = append([]string{"**"}, segs...)
	}
	return pathPattern{segs: segs, anchored: anchored}, nil
}

// match reports whether the workspace-relative, cleaned path p or one of
// its parent directories matches.
func (pp pathPattern) match(p string) bool {
	parts := strings.Split(p, "/")
	for n := len(parts); n > 0; n-- {
		if matchSegs(pp.segs, parts[:n]) {
			return true
		}
	}
	return false
}

func matchSegs(pat, parts []string) bool {
	if len(pat) == 0 {
		return len(parts) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(parts); i++ {
			if matchSegs(pat[1:], parts[i:]) {
				return true
			}
		}
		return false
	}
	if len(parts) == 0 {
		return false
	}
	if ok, _ := path.Match(pat[0], parts[0]); !ok {
		return false
	}
	return matchSegs(pat[1:], parts[1:])
}

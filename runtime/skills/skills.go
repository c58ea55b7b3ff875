// Package skills discovers Markdown skills (agentskills.io
// format): directories holding a SKILL.md whose YAML frontmatter is
// validated with skill_frontmatter_v1. A selected skill scopes the kernel's
// tools to its allowed-tools, and its body is loaded into context lazily.
package skills

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/adrg/frontmatter"
	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/toolrule"
	"github.com/agentos/agentos/runtime/claudecode"
	"github.com/agentos/agentos/schemas"
	"gopkg.in/yaml.v3"
)

// Root is one place skills are discovered: FS holds <name>/SKILL.md files
// under Dir ("." for the FS root).
type Root struct {
	Name string // "builtin", ".agent/skills", ".claude/skills"
	FS   fs.FS
	Dir  string
}

// Skill is a registered skill. Its body is read on demand.
type Skill struct {
	Name        string
	Description string
	Triggers    []string
	// AllowedTools are the agentos tools the skill may use (nil: the skill
	// does not restrict tools): DeclaredTools with Claude Code's names
	// mapped through claudecode.Table (Read → repo.read, …). A declared
	// name that maps to nothing is kept as it is, so it allows nothing.
	// An entry whose argument agentos cannot enforce
	// (WebFetch(domain:…), Read(//etc/**)) is left out: it allows nothing.
	AllowedTools  []string
	DeclaredTools []string // allowed-tools as the SKILL.md writes them
	// ToolEntries are the DeclaredTools agentos enforces (nil when none
	// are declared): their argument rules (Bash(git diff:*),
	// Read(docs/**)) bind every call while the skill is loaded
	// (toolrule.ForScope, kernel.Call.SkillRules).
	ToolEntries []string
	// RuleProblems say which declared entries were left out and why.
	RuleProblems []string
	// ModelInvocable is false for a skill whose frontmatter says
	// disable-model-invocation: true (Claude Code's field for a skill
	// only a person starts): the Planner is not offered it.
	ModelInvocable bool
	License        string
	Compatibility  string
	Version        int
	Root           string
	Path           string // SKILL.md path inside the root's FS

	fsys fs.FS
}

// Body returns the Markdown after the frontmatter.
func (s *Skill) Body() (string, error) {
	if s.fsys == nil {
		return "", nil // a skill made in code (Registry.Default) has no body
	}
	b, err := fs.ReadFile(s.fsys, s.Path)
	if err != nil {
		return "", fmt.Errorf("skill %s: %w", s.Name, err)
	}
	var fm map[string]any
	body, err := frontmatter.Parse(bytes.NewReader(b), &fm, yamlFormat)
	if err != nil {
		return "", fmt.Errorf("skill %s: %w", s.Name, err)
	}
	return strings.TrimSpace(string(body)), nil
}

// Problem is a skill that was skipped, with the reason.
type Problem struct {
	Root   string `json:"root"`
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

func (p Problem) String() string { return fmt.Sprintf("%s/%s: %s", p.Root, p.Path, p.Reason) }

// Registry holds discovered skills by name.
type Registry struct {
	byName map[string]*Skill
}

var yamlFormat = frontmatter.NewFormat("---", "---", yaml.Unmarshal)

// Discover scans roots in order; a later root's skill replaces an earlier
// one of the same name (a repository overrides a built-in). Invalid skills
// are skipped and reported, never fatal.
func Discover(reg *schemas.Registry, roots ...Root) (*Registry, []Problem) {
	r := &Registry{byName: map[string]*Skill{}}
	var problems []Problem
	for _, root := range roots {
		if root.FS == nil {
			continue
		}
		dir := root.Dir
		if dir == "" {
			dir = "."
		}
		entries, err := fs.ReadDir(root.FS, dir)
		if err != nil {
			if !isNotExist(err) {
				problems = append(problems, Problem{Root: root.Name, Path: dir, Reason: err.Error()})
			}
			continue
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			p := path.Join(dir, e.Name(), "SKILL.md")
			s, err := load(reg, root, p, e.Name())
			if err != nil {
				if !isNotExist(err) {
					problems = append(problems, Problem{Root: root.Name, Path: p, Reason: err.Error()})
				}
				continue
			}
			r.byName[s.Name] = s
		}
	}
	return r, problems
}

func isNotExist(err error) bool { return err != nil && errors.Is(err, fs.ErrNotExist) }

func load(reg *schemas.Registry, root Root, p, dirName string) (*Skill, error) {
	b, err := fs.ReadFile(root.FS, p)
	if err != nil {
		return nil, err
	}
	var fm map[string]any
	if _, err := frontmatter.MustParse(bytes.NewReader(b), &fm, yamlFormat); err != nil {
		return nil, fmt.Errorf("frontmatter: %v", err)
	}
	doc, err := json.Marshal(fm)
	if err != nil {
		return nil, fmt.Errorf("frontmatter is not representable as JSON: %v", err)
	}
	if err := reg.ValidateJSON("skill_frontmatter_v1", doc); err != nil {
		return nil, err
	}
	var f struct {
		Name          string          `json:"name"`
		Description   string          `json:"description"`
		Triggers      []string        `json:"triggers"`
		AllowedTools  json.RawMessage `json:"allowed-tools"`
		License       string          `json:"license"`
		Compatibility string          `json:"compatibility"`
		Version       int             `json:"version"`
		Metadata      struct {
			Triggers []string `json:"triggers"`
		} `json:"metadata"`
		DisableModelInvocation json.RawMessage `json:"disable-model-invocation"`
	}
	if err := json.Unmarshal(doc, &f); err != nil {
		return nil, err
	}
	if f.Name != dirName {
		return nil, fmt.Errorf("name %q does not match its directory %q", f.Name, dirName)
	}
	s := &Skill{Name: f.Name, Description: f.Description, License: f.License, Compatibility: f.Compatibility, Version: f.Version, Root: root.Name, Path: p, fsys: root.FS}
	s.Triggers = append(append([]string{}, f.Triggers...), f.Metadata.Triggers...)
	switch strings.ToLower(strings.Trim(string(f.DisableModelInvocation), `"`)) {
	case "", "null", "false":
		s.ModelInvocable = true
	case "true":
	default:
		return nil, fmt.Errorf("disable-model-invocation must be true or false, not %s", f.DisableModelInvocation)
	}
	s.DeclaredTools = parseAllowedTools(f.AllowedTools)
	if s.DeclaredTools != nil {
		s.ToolEntries = []string{}
		for _, d := range s.DeclaredTools {
			if _, err := toolrule.ForScope([]string{d}); err != nil {
				s.RuleProblems = append(s.RuleProblems, err.Error())
				continue
			}
			s.ToolEntries = append(s.ToolEntries, d)
		}
		s.AllowedTools, _ = claudecode.AllowedTools(s.ToolEntries)
		if s.AllowedTools == nil {
			s.AllowedTools = []string{} // declared empty: no tool at all
		}
	}
	return s, nil
}

// parseAllowedTools accepts a YAML list and the agentskills.io
// space- or comma-separated string.
func parseAllowedTools(raw json.RawMessage) []string {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return list
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	// Separators inside parentheses belong to a Claude Code permission
	// rule: "Bash(git diff:*)" is one entry.
	out := []string{}
	var cur strings.Builder
	depth := 0
	for _, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		case depth == 0 && (r == ' ' || r == ',' || r == '\t' || r == '\n'):
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
			continue
		}
		cur.WriteRune(r)
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// ToolNotes reports every allowed-tools entry of every skill that names
// none of registered (the kernel's tool names) once mapped: the skill
// cannot use it, which its author should know at load time. An entry
// naming tools of one of lazy (mounted MCP servers, which list their tools
// only when they start) is not reported.
func (r *Registry) ToolNotes(registered, lazy []string) []string {
	have := map[string]bool{}
	for _, n := range registered {
		have[n] = true
	}
	var notes []string
	for _, s := range r.List() {
		for _, p := range s.RuleProblems {
			notes = append(notes, fmt.Sprintf("skill %s (%s): %s; the skill cannot use that entry", s.Name, s.Path, p))
		}
		for _, d := range s.ToolEntries {
			ours, ok := claudecode.Ours(d)
			if !ok {
				ours = []string{strings.TrimSpace(d)}
			}
			found := claudecode.OfServer(d, lazy)
			for _, o := range ours {
				found = found || have[o] || (strings.HasSuffix(o, ".*") && anyInScope(o, registered))
			}
			if found {
				continue
			}
			what := "matches no tool agentos has"
			if ok {
				what = fmt.Sprintf("maps to %s, which is not registered", strings.Join(ours, ", "))
			}
			notes = append(notes, fmt.Sprintf("skill %s (%s): allowed tool %q %s; the skill cannot use it", s.Name, s.Path, d, what))
		}
	}
	return notes
}

func anyInScope(entry string, registered []string) bool {
	for _, n := range registered {
		if kernel.InScope([]string{entry}, n) {
			return true
		}
	}
	return false
}

// Get returns a skill by name.
func (r *Registry) Get(name string) (*Skill, bool) { s, ok := r.byName[name]; return s, ok }

// DefaultName is the skill that scopes a run whose request matches no
// other skill (tool calls stay inside the selected skill's
// allowed-tools, so every run has a scope). The built-in skills/default
// SKILL.md documents it; a repository may override it by name.
const DefaultName = "default"

// DefaultTools is the default skill's allowed-tools, used when the
// registry has no default skill and for a skill that names none: the
// repository tools, tests and linter, but no arbitrary command.
var DefaultTools = []string{"echo", "repo.search", "repo.read", "repo.patch", "repo.write", "test.run", "lint.run"}

// Default returns the default skill (nil-safe): the registered skill named
// DefaultName, or one with DefaultTools when there is none. Its
// AllowedTools is never nil.
func (r *Registry) Default() *Skill {
	if r != nil {
		if s, ok := r.Get(DefaultName); ok {
			if s.AllowedTools != nil {
				return s
			}
			c := *s
			c.AllowedTools = DefaultTools
			return &c
		}
	}
	return &Skill{Name: DefaultName, Description: "the built-in default scope", AllowedTools: DefaultTools, Root: "builtin"}
}

// List returns the skills sorted by name.
func (r *Registry) List() []*Skill {
	out := make([]*Skill, 0, len(r.byName))
	for _, s := range r.byName {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Select returns the skill whose triggers best match the prompt, or nil.
// A trigger matches as a whole word or phrase, case-insensitively. The
// skill matching the most triggers wins; ties go to the longer matched
// text, then to the name.
func (r *Registry) Select(prompt string) *Skill {
	lower := strings.ToLower(prompt)
	var best *Skill
	bestN, bestLen := 0, 0
	for _, s := range r.List() {
		n, l := 0, 0
		for _, t := range s.Triggers {
			if wordMatch(lower, strings.ToLower(strings.TrimSpace(t))) {
				n++
				l += len(t)
			}
		}
		if n > bestN || (n == bestN && n > 0 && l > bestLen) {
			best, bestN, bestLen = s, n, l
		}
	}
	return best
}

var wordCache sync.Map // phrase → *regexp.Regexp

func wordMatch(text, phrase string) bool {
	if phrase == "" {
		return false
	}
	re, ok := wordCache.Load(phrase)
	if !ok {
		re, _ = wordCache.LoadOrStore(phrase, regexp.MustCompile(`(^|[^\pL\pN_])`+regexp.QuoteMeta(phrase)+`($|[^\pL\pN_])`))
	}
	return re.(*regexp.Regexp).MatchString(text)
}

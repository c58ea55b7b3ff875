package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/adrg/frontmatter"
	"github.com/agentos/agentos/schemas"
	"gopkg.in/yaml.v3"
)

// ErrUnknownID is returned (wrapped) for a cycle, phase, policy, persona or
// artifact id that is not registered. Callers deny: nothing runs on an id
// the registry does not know.
var ErrUnknownID = errors.New("unknown workflow id")

// Kinds of definition, which are also the directory names.
const (
	KindCycle    = "cycle"
	KindPhase    = "phase"
	KindPolicy   = "policy"
	KindPersona  = "persona"
	KindArtifact = "artifact"
)

var kindDirs = map[string]string{
	"cycles": KindCycle, "phases": KindPhase, "policies": KindPolicy,
	"personas": KindPersona, "artifacts": KindArtifact,
}

var kindSchema = map[string]string{
	KindCycle: "cycle_v1", KindPhase: "phase_v1", KindPolicy: "policy_v1",
	KindPersona: "persona_v1", KindArtifact: "artifact_template_v1",
}

// Source is one tree of definitions: FS holds cycles/, phases/, policies/,
// personas/<role>/ and artifacts/ under Dir. A later source adds to or
// overrides an earlier one.
type Source struct {
	Name string // "builtin", ".agent/workflows"
	FS   fs.FS
	Dir  string // "." for the FS root
	// Ignore lists top-level entries that are not part of the plane (the
	// embedded tree also holds roles/ and doc.go). Anything else that is
	// not a kind directory is a problem: a misspelt "cycle/" must not be
	// skipped silently.
	Ignore []string
}

// Problem is one reason the plane does not load, naming the file and the
// field (a JSON pointer into the frontmatter; "" is the whole document).
type Problem struct {
	File    string `json:"file"`
	Field   string `json:"field"`
	Line    int    `json:"line,omitempty"` // the field's line in the file, when known
	Message string `json:"message"`
}

func (p Problem) String() string {
	f := p.Field
	if f == "" {
		f = "/"
	}
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, f, p.Message)
	}
	return fmt.Sprintf("%s: %s: %s", p.File, f, p.Message)
}

// LoadError is every problem found; the registry is not built.
type LoadError struct{ Problems []Problem }

func (e *LoadError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "workflow: %d problem(s) loading the workflow plane", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Override records a definition in a later source replacing one of the same
// kind and id in an earlier source. The caller records each as an event.
type Override struct {
	Kind       string `json:"kind"`
	ID         string `json:"id"`
	Overridden string `json:"overridden"` // "builtin:cycles/review.md"
	By         string `json:"by"`         // ".agent/workflows/cycles/review.md"
}

// Origin names where a definition was read from.
type Origin struct {
	Source string `json:"source"`
	File   string `json:"file"`
}

// String is a repository file's path in the repository
// (".agent/workflows/cycles/x.md"), the path a maintainer opens, and
// "source:file" for the other sources ("builtin:cycles/review.md").
func (o Origin) String() string {
	if o.Source == RepoDir {
		return path.Join(RepoDir, o.File)
	}
	return o.Source + ":" + o.File
}

// Cycle is a loaded cycle_v1 definition.
type Cycle struct {
	ID          string
	Description string
	Triggers    []string
	Phases      []string // ids, in order
	EntryPhase  string
	LoopTo      string // phase re-entered for the next generation; "" runs once
	Done        *Expr  // exit_conditions.done
	Abort       *Expr  // exit_conditions.abort; nil when not set
	Bounds      LoopBounds
	Policies    []string
	Modes       []string
	Body        string
	Origin      Origin
}

// LoopBounds are a cycle's loop-halt limits; zero means not set.
type LoopBounds struct {
	MaxGenerations        int  `json:"max_generations"`
	MaxOscillations       int  `json:"max_oscillations"`
	HaltOnGradeRegression bool `json:"halt_on_grade_regression"`
}

// Phase is a loaded phase_v1 definition.
type Phase struct {
	ID             string
	Description    string
	Advance        *Expr
	Halt           *Expr // nil when not set
	Personas       []string
	MaxConcurrency int
	InputSchema    string
	OutputSchema   string
	Policies       []string
	Body           string
	Origin         Origin
}

// Policy is a loaded policy_v1 definition.
type Policy struct {
	ID          string
	Description string
	Kind        string
	Rules       []Rule
	Default     Decision // "" means deny (fail-closed)
	Routing     bool     // severity-routing scale
	Body        string
	Origin      Origin
}

// Persona is a loaded persona_v1 definition; Body is its prompt.
type Persona struct {
	ID           string
	Role         string
	Description  string
	AllowedTools []string
	OutputSchema string
	WritePaths   []string
	Body         string
	Origin       Origin
}

// Artifact is a loaded artifact template.
type Artifact struct {
	ID          string
	Description string
	Naming      string
	Schema      string
	Body        string
	Origin      Origin
}

// Registry holds the loaded plane. It is immutable and safe for concurrent
// use.
type Registry struct {
	cycles    map[string]*Cycle
	phases    map[string]*Phase
	policies  map[string]*Policy
	personas  map[string]*Persona
	artifacts map[string]*Artifact
	overrides []Override
}

func unknown(kind, id string) error { return fmt.Errorf("workflow: %s %q: %w", kind, id, ErrUnknownID) }

// FromSource reports whether any definition was read from the source
// named name (RepoDir: the repository's own). A host that must run
// untrusted code on the built-in plane only checks it.
func (r *Registry) FromSource(name string) bool {
	var origins []Origin
	for _, c := range r.cycles {
		origins = append(origins, c.Origin)
	}
	for _, p := range r.phases {
		origins = append(origins, p.Origin)
	}
	for _, p := range r.policies {
		origins = append(origins, p.Origin)
	}
	for _, p := range r.personas {
		origins = append(origins, p.Origin)
	}
	for _, a := range r.artifacts {
		origins = append(origins, a.Origin)
	}
	for _, o := range origins {
		if o.Source == name {
			return true
		}
	}
	return false
}

// Cycle returns the cycle id, or ErrUnknownID.
func (r *Registry) Cycle(id string) (*Cycle, error) {
	if c, ok := r.cycles[id]; ok {
		return c, nil
	}
	return nil, unknown(KindCycle, id)
}

// Phase returns the phase id, or ErrUnknownID.
func (r *Registry) Phase(id string) (*Phase, error) {
	if p, ok := r.phases[id]; ok {
		return p, nil
	}
	return nil, unknown(KindPhase, id)
}

// Policy returns the policy id, or ErrUnknownID.
func (r *Registry) Policy(id string) (*Policy, error) {
	if p, ok := r.policies[id]; ok {
		return p, nil
	}
	return nil, unknown(KindPolicy, id)
}

// Persona returns the persona id, or ErrUnknownID.
func (r *Registry) Persona(id string) (*Persona, error) {
	if p, ok := r.personas[id]; ok {
		return p, nil
	}
	return nil, unknown(KindPersona, id)
}

// Artifact returns the artifact template id, or ErrUnknownID.
func (r *Registry) Artifact(id string) (*Artifact, error) {
	if a, ok := r.artifacts[id]; ok {
		return a, nil
	}
	return nil, unknown(KindArtifact, id)
}

// Overrides lists the definitions a later source replaced, in load order.
func (r *Registry) Overrides() []Override { return append([]Override(nil), r.overrides...) }

func sorted[T any](m map[string]*T) []*T {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]*T, len(ids))
	for i, id := range ids {
		out[i] = m[id]
	}
	return out
}

// Cycles lists the cycles sorted by id; likewise Phases, Policies,
// Personas and Artifacts.
func (r *Registry) Cycles() []*Cycle       { return sorted(r.cycles) }
func (r *Registry) Phases() []*Phase       { return sorted(r.phases) }
func (r *Registry) Policies() []*Policy    { return sorted(r.policies) }
func (r *Registry) Personas() []*Persona   { return sorted(r.personas) }
func (r *Registry) Artifacts() []*Artifact { return sorted(r.artifacts) }

// CycleForTrigger resolves a command word ("review") to the cycle that
// lists it in triggers, or whose id it is. Unknown words are ErrUnknownID.
func (r *Registry) CycleForTrigger(word string) (*Cycle, error) {
	w := strings.ToLower(strings.TrimSpace(word))
	if c, ok := r.cycles[w]; ok {
		return c, nil
	}
	for _, c := range r.Cycles() {
		for _, t := range c.Triggers {
			if strings.EqualFold(t, w) {
				return c, nil
			}
		}
	}
	return nil, unknown(KindCycle, word)
}

// doc is one parsed file before cross-checking.
type doc struct {
	kind   string
	id     string
	origin Origin
	fm     map[string]any
	raw    []byte // frontmatter as JSON
	body   string
}

// maxFileBytes bounds one definition file; repository files are untrusted.
const maxFileBytes = 256 << 10

var yamlFormat = frontmatter.NewFormat("---", "---", yaml.Unmarshal)

// Load reads every source in order and builds the registry. Any problem in
// any file fails the whole load: the returned error is a *LoadError listing
// them all, and the registry is nil.
func Load(reg *schemas.Registry, sources ...Source) (*Registry, error) {
	if reg == nil {
		return nil, errors.New("workflow: no schema registry")
	}
	l := &loader{reg: reg, docs: map[string]map[string]*doc{}, failed: map[string]Origin{}, nodes: map[string]position{}}
	for k := range kindSchema {
		l.docs[k] = map[string]*doc{}
	}
	for _, s := range sources {
		l.scan(s)
	}
	env, err := newEnv()
	if err != nil {
		return nil, fmt.Errorf("workflow: CEL environment: %w", err)
	}
	r := l.build(env)
	if len(l.problems) > 0 {
		sort.SliceStable(l.problems, func(i, j int) bool { return l.problems[i].File < l.problems[j].File })
		return nil, &LoadError{Problems: l.problems}
	}
	r.overrides = l.overrides
	return r, nil
}

type loader struct {
	reg       *schemas.Registry
	docs      map[string]map[string]*doc
	failed    map[string]Origin   // kind/id (from the file name) of files that did not parse
	nodes     map[string]position // parsed frontmatter by origin, for problem lines
	problems  []Problem
	overrides []Override
}

func (l *loader) problem(o Origin, field, format string, args ...any) {
	line := 0
	if pos, ok := l.nodes[o.String()]; ok {
		line = pos.line(field)
	}
	l.problems = append(l.problems, Problem{File: o.String(), Field: field, Line: line, Message: fmt.Sprintf(format, args...)})
}

func (l *loader) scan(s Source) {
	if s.FS == nil {
		return
	}
	dir := s.Dir
	if dir == "" {
		dir = "."
	}
	entries, err := fs.ReadDir(s.FS, dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			l.problem(Origin{s.Name, dir}, "", "%v", err)
		}
		return
	}
	seen := map[string]*doc{} // kind/id within this source
	for _, e := range entries {
		name := e.Name()
		if contains(s.Ignore, name) || (name == "README.md" && !e.IsDir()) {
			continue
		}
		if e.Type()&fs.ModeSymlink != 0 {
			l.problem(Origin{s.Name, name}, "", "a symbolic link is not followed in the workflow plane")
			continue
		}
		kind, ok := kindDirs[name]
		if !ok || !e.IsDir() {
			l.problem(Origin{s.Name, name}, "", "not part of the workflow plane: want one of cycles/, phases/, policies/, personas/<role>/, artifacts/")
			continue
		}
		if kind == KindPersona {
			roles, err := fs.ReadDir(s.FS, path.Join(dir, name))
			if err != nil {
				l.problem(Origin{s.Name, name}, "", "%v", err)
				continue
			}
			for _, re := range roles {
				rel := path.Join(name, re.Name())
				if !re.IsDir() || re.Type()&fs.ModeSymlink != 0 {
					l.problem(Origin{s.Name, rel}, "", "a persona lives in personas/<role>/<id>.md")
					continue
				}
				l.scanDir(s, dir, rel, kind, re.Name(), seen)
			}
			continue
		}
		l.scanDir(s, dir, name, kind, "", seen)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (l *loader) scanDir(s Source, root, rel, kind, role string, seen map[string]*doc) {
	entries, err := fs.ReadDir(s.FS, path.Join(root, rel))
	if err != nil {
		l.problem(Origin{s.Name, rel}, "", "%v", err)
		return
	}
	for _, e := range entries {
		file := path.Join(rel, e.Name())
		o := Origin{s.Name, file}
		if e.Type()&fs.ModeSymlink != 0 {
			l.problem(o, "", "a symbolic link is not followed in the workflow plane")
			continue
		}
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".md") {
			l.problem(o, "", "not a Markdown definition (want %s/<id>.md)", rel)
			continue
		}
		d := l.parse(s, root, file, kind, role)
		if d == nil {
			l.failed[kind+"/"+strings.TrimSuffix(strings.TrimSuffix(e.Name(), ".md"), "-template")] = o
			continue
		}
		key := kind + "/" + d.id
		if prev, dup := seen[key]; dup {
			l.problem(o, "/"+idField(kind), "%s id %q is also defined in %s", kind, d.id, prev.origin)
			continue
		}
		seen[key] = d
		if prev, ok := l.docs[kind][d.id]; ok {
			l.overrides = append(l.overrides, Override{Kind: kind, ID: d.id, Overridden: prev.origin.String(), By: o.String()})
		}
		l.docs[kind][d.id] = d
	}
}

func idField(kind string) string {
	if kind == KindPersona {
		return "name"
	}
	return "id"
}

// parse reads one file: frontmatter → JSON → schema, and the id must match
// the file name (artifacts: <id>-template.md; personas: the role directory
// must match role).
func (l *loader) parse(s Source, root, file, kind, role string) *doc {
	o := Origin{s.Name, file}
	b, err := fs.ReadFile(s.FS, path.Join(root, file))
	if err != nil {
		l.problem(o, "", "%v", err)
		return nil
	}
	if len(b) > maxFileBytes {
		l.problem(o, "", "%d bytes: a definition is at most %d bytes", len(b), maxFileBytes)
		return nil
	}
	var node yaml.Node
	body, err := frontmatter.MustParse(bytes.NewReader(b), &node, yamlFormat)
	if err != nil {
		l.problem(o, "", "frontmatter: %v", err)
		return nil
	}
	l.nodes[o.String()] = position{node: &node, offset: frontmatterOffset(b)}
	var fm map[string]any
	if err := node.Decode(&fm); err != nil {
		l.problem(o, "", "frontmatter: %v", err)
		return nil
	}
	raw, err := json.Marshal(fm)
	if err != nil {
		l.problem(o, "", "frontmatter is not representable as JSON: %v", err)
		return nil
	}
	if err := l.reg.ValidateJSON(kindSchema[kind], raw); err != nil {
		var ve *schemas.ValidationError
		if errors.As(err, &ve) {
			l.problem(o, ve.Pointer, "%s: %s", ve.SchemaID, ve.Message)
		} else {
			l.problem(o, "", "%v", err)
		}
		return nil
	}
	if kind == KindPersona {
		// A persona is a skill too: it must also satisfy skill_frontmatter_v1.
		if err := l.reg.ValidateJSON("skill_frontmatter_v1", raw); err != nil {
			l.problem(o, "", "%v", err)
			return nil
		}
	}
	id, _ := fm[idField(kind)].(string)
	base := strings.TrimSuffix(path.Base(file), ".md")
	want := base
	if kind == KindArtifact {
		if !strings.HasSuffix(base, "-template") {
			l.problem(o, "", "an artifact template is named artifacts/<id>-template.md")
			return nil
		}
		want = strings.TrimSuffix(base, "-template")
	}
	if id != want {
		l.problem(o, "/"+idField(kind), "%s %q does not match its file name %q", idField(kind), id, path.Base(file))
		return nil
	}
	if kind == KindPersona {
		if r, _ := fm["role"].(string); r != role {
			l.problem(o, "/role", "role %q does not match its directory personas/%s/", r, role)
			return nil
		}
	}
	return &doc{kind: kind, id: id, origin: o, fm: fm, raw: raw, body: strings.TrimSpace(string(body))}
}

package skills

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agentos/agentos/schemas"
	builtin "github.com/agentos/agentos/skills"
)

func TestBuiltinSkills(t *testing.T) {
	r, problems := Discover(schemas.MustDefault(), Root{Name: "builtin", FS: builtin.FS})
	if len(problems) > 0 {
		t.Fatalf("built-in skills invalid: %v", problems)
	}
	greet, ok := r.Get("greet")
	if !ok || strings.Join(greet.AllowedTools, ",") != "echo" {
		t.Fatalf("greet = %+v", greet)
	}
	body, err := greet.Body()
	if err != nil || !strings.HasPrefix(body, "# Greet skill") {
		t.Fatalf("body %q %v", body, err)
	}
	fix, ok := r.Get("fix")
	if !ok || !contains(fix.AllowedTools, "repo.patch") || !contains(fix.AllowedTools, "test.run") {
		t.Fatalf("fix = %+v", fix)
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func TestDiscoverSkipsInvalidAndOverrides(t *testing.T) {
	repo := fstest.MapFS{
		".agent/skills/fix/SKILL.md":      {Data: []byte("---\nname: fix\ndescription: repo-specific fix\nallowed-tools: repo.read, repo.patch test.run\nmetadata:\n  triggers: [repair]\n---\nbody\n")},
		".agent/skills/bad-name/SKILL.md": {Data: []byte("---\nname: other\ndescription: x\n---\n")},
		".agent/skills/nofm/SKILL.md":     {Data: []byte("# no frontmatter\n")},
		".agent/skills/badyaml/SKILL.md":  {Data: []byte("---\nname: [unclosed\n---\n")},
		".agent/skills/noDesc/SKILL.md":   {Data: []byte("---\nname: noDesc\n---\n")},
		".agent/skills/types/SKILL.md":    {Data: []byte("---\nname: types\ndescription: d\nversion: one\n---\n")},
		".agent/skills/empty-dir/x.txt":   {Data: []byte("not a skill")},
		".claude/skills/deploy/SKILL.md":  {Data: []byte("---\nname: deploy\ndescription: ships it\ntriggers: [deploy, ship it]\n---\nsteps\n")},
	}
	r, problems := Discover(schemas.MustDefault(),
		Root{Name: "builtin", FS: builtin.FS},
		Root{Name: ".agent/skills", FS: repo, Dir: ".agent/skills"},
		Root{Name: ".claude/skills", FS: repo, Dir: ".claude/skills"},
		Root{Name: "missing", FS: repo, Dir: "nope"},
	)
	got := map[string]string{}
	for _, p := range problems {
		got[p.Path] = p.Reason
	}
	for path, want := range map[string]string{
		".agent/skills/bad-name/SKILL.md": "does not match its directory",
		".agent/skills/nofm/SKILL.md":     "frontmatter",
		".agent/skills/badyaml/SKILL.md":  "frontmatter",
		".agent/skills/noDesc/SKILL.md":   "skill_frontmatter_v1",
		".agent/skills/types/SKILL.md":    "/version",
	} {
		if !strings.Contains(got[path], want) {
			t.Errorf("%s: problem %q, want it to mention %q", path, got[path], want)
		}
	}
	if len(problems) != 5 {
		t.Errorf("problems: %v", problems)
	}
	fix, _ := r.Get("fix")
	if fix.Root != ".agent/skills" || strings.Join(fix.AllowedTools, " ") != "repo.read repo.patch test.run" || !contains(fix.Triggers, "repair") {
		t.Errorf("override: %+v", fix)
	}
	if _, ok := r.Get("deploy"); !ok {
		t.Error(".claude/skills not scanned")
	}
}

func TestSelect(t *testing.T) {
	r, _ := Discover(schemas.MustDefault(), Root{Name: "builtin", FS: builtin.FS}, Root{Name: "repo", FS: fstest.MapFS{
		"deploy/SKILL.md": {Data: []byte("---\nname: deploy\ndescription: d\ntriggers: [deploy, ship it]\n---\n")},
	}})
	cases := map[string]string{
		"fix auth.ts":                       "fix",
		"Please FIX the failing test":       "fix",
		"hello there":                       "greet",
		"this is thin":                      "", // "hi" must match as a word only
		"ship it to prod":                   "deploy",
		"prefix matters not":                "",
		"greet me, then fix the broken bug": "fix", // three fix triggers beat one greet trigger
	}
	for prompt, want := range cases {
		got := ""
		if s := r.Select(prompt); s != nil {
			got = s.Name
		}
		if got != want {
			t.Errorf("Select(%q) = %q, want %q", prompt, got, want)
		}
	}
}

// TestClaudeCodeAllowedTools: a skill written for Claude Code names
// Claude Code's tools; they map to agentos's, and a name agentos has no
// tool for allows nothing and is reported.
func TestClaudeCodeAllowedTools(t *testing.T) {
	repo := fstest.MapFS{
		".claude/skills/review-pr/SKILL.md": {Data: []byte("---\nname: review-pr\ndescription: Reviews a pull request's diff for bugs.\nallowed-tools: Read, Grep, Bash(git diff:*), WebFetch, mcp__github__get_pull_request\n---\nRead the diff.\n")},
		".claude/skills/plain/SKILL.md":     {Data: []byte("---\nname: plain\ndescription: No tool list.\n---\nbody\n")},
	}
	r, problems := Discover(schemas.MustDefault(), Root{Name: ".claude/skills", FS: repo, Dir: ".claude/skills"})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	s, _ := r.Get("review-pr")
	if got, want := strings.Join(s.AllowedTools, ","), "repo.read,repo.search,process.run,WebFetch,mcp.github.get_pull_request"; got != want {
		t.Errorf("allowed tools %s, want %s", got, want)
	}
	if p, _ := r.Get("plain"); p.AllowedTools != nil {
		t.Errorf("a skill without allowed-tools restricts tools: %v", p.AllowedTools)
	}
	notes := r.ToolNotes([]string{"repo.read", "repo.search", "process.run"}, nil)
	if len(notes) != 2 || !strings.Contains(notes[0], `"WebFetch" matches no tool`) || !strings.Contains(notes[1], `"mcp__github__get_pull_request" maps to mcp.github.get_pull_request, which is not registered`) {
		t.Errorf("notes %v", notes)
	}
}

// TestAllowedToolsArgumentRules: an entry with an argument agentos
// enforces stays (its rule binds calls while the skill is loaded, see
// toolrule.ForScope); one whose argument it cannot enforce is left out,
// grants no tool, and is reported at load.
func TestAllowedToolsArgumentRules(t *testing.T) {
	repo := fstest.MapFS{
		".claude/skills/audit/SKILL.md": {Data: []byte("---\nname: audit\ndescription: Audits the config.\nallowed-tools: Bash(git log:*), Read(//etc/**), WebFetch(domain:example.com), Grep(src/**)\n---\nbody\n")},
	}
	r, problems := Discover(schemas.MustDefault(), Root{Name: ".claude/skills", FS: repo, Dir: ".claude/skills"})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	s, _ := r.Get("audit")
	if got := strings.Join(s.ToolEntries, ","); got != "Bash(git log:*)" {
		t.Errorf("enforced entries %q", got)
	}
	// Read(//etc/**) must not become an unrestricted repo.read, nor
	// Grep(src/**) an unrestricted repo.search.
	if got := strings.Join(s.AllowedTools, ","); got != "process.run" {
		t.Errorf("allowed tools %s, want process.run only", got)
	}
	notes := strings.Join(r.ToolNotes([]string{"process.run", "repo.read", "repo.search"}, nil), "\n")
	for _, want := range []string{`"Read(//etc/**)": an absolute path`, `"WebFetch(domain:example.com)": WebFetch rules`, `"Grep(src/**)": an argument is supported only`} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}

func TestClaudeCodeServerWideMCPTools(t *testing.T) {
	repo := fstest.MapFS{".claude/skills/notes/SKILL.md": {Data: []byte("---\nname: notes\ndescription: Keeps notes in the memory server.\nallowed-tools: mcp__memory Read\n---\nbody\n")}}
	r, problems := Discover(schemas.MustDefault(), Root{Name: ".claude/skills", FS: repo, Dir: ".claude/skills"})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	s, _ := r.Get("notes")
	if got := strings.Join(s.AllowedTools, ","); got != "mcp.memory.*,repo.read" {
		t.Errorf("allowed tools %s", got)
	}
	if notes := r.ToolNotes([]string{"repo.read", "mcp.memory.create_entities"}, nil); len(notes) != 0 {
		t.Errorf("notes %v", notes)
	}
	if notes := r.ToolNotes([]string{"repo.read"}, nil); len(notes) != 1 || !strings.Contains(notes[0], "mcp.memory.*") {
		t.Errorf("notes without the server %v", notes)
	}
	// A mounted server whose tools are not listed yet (it starts lazily).
	if notes := r.ToolNotes([]string{"repo.read"}, []string{"memory"}); len(notes) != 0 {
		t.Errorf("notes about a mounted server's tools %v", notes)
	}
}

func TestDisableModelInvocation(t *testing.T) {
	repo := fstest.MapFS{
		".claude/skills/deploy/SKILL.md": {Data: []byte("---\nname: deploy\ndescription: d\ndisable-model-invocation: true\n---\n")},
		".claude/skills/lint/SKILL.md":   {Data: []byte("---\nname: lint\ndescription: d\n---\n")},
		".claude/skills/odd/SKILL.md":    {Data: []byte("---\nname: odd\ndescription: d\ndisable-model-invocation: sometimes\n---\n")},
	}
	r, problems := Discover(schemas.MustDefault(), Root{Name: ".claude/skills", FS: repo, Dir: ".claude/skills"})
	if len(problems) != 1 || !strings.Contains(problems[0].Reason, "disable-model-invocation must be true or false") {
		t.Errorf("problems %v", problems)
	}
	if d, _ := r.Get("deploy"); d == nil || d.ModelInvocable {
		t.Errorf("deploy %+v", d)
	}
	if l, _ := r.Get("lint"); l == nil || !l.ModelInvocable {
		t.Errorf("lint %+v", l)
	}
}

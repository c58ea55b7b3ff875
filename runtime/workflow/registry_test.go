package workflow

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agentos/agentos/schemas"
)

func loadBuiltin(t *testing.T) *Registry {
	t.Helper()
	r, err := Load(schemas.MustDefault(), Builtin())
	if err != nil {
		t.Fatalf("embedded workflow plane does not load: %v", err)
	}
	return r
}

func TestBuiltinPlaneLoads(t *testing.T) {
	r := loadBuiltin(t)
	c, err := r.Cycle("review")
	if err != nil {
		t.Fatal(err)
	}
	if c.EntryPhase != "review-fan-out" || len(c.Phases) != 2 || c.Done == nil {
		t.Fatalf("review cycle: %+v", c)
	}
	fan, err := r.Phase("review-fan-out")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(fan.Personas, ",") != "security,correctness,tests" {
		t.Fatalf("fan-out personas %v", fan.Personas)
	}
	for _, id := range fan.Personas {
		p, err := r.Persona(id)
		if err != nil || p.Role != "reviewer" || p.Body == "" {
			t.Fatalf("persona %s: %+v %v", id, p, err)
		}
	}
	kinds := map[string]bool{}
	for _, p := range r.Policies() {
		kinds[p.Kind] = true
	}
	for _, k := range []string{KindConfidenceGating, KindSeverityRouting, KindRolePermissions, KindModeDispatch, KindLoopHalt} {
		if !kinds[k] {
			t.Errorf("no shipped policy of kind %s", k)
		}
	}
	if a, err := r.Artifact("review"); err != nil || a.Schema != "review_aggregate_v1" {
		t.Fatalf("artifact review: %+v %v", a, err)
	}
	if got, err := r.CycleForTrigger("Review"); err != nil || got.ID != "review" {
		t.Fatalf("trigger review: %v %v", got, err)
	}
	if len(r.Overrides()) != 0 {
		t.Fatalf("builtin alone has overrides: %v", r.Overrides())
	}
}

// Every lookup of an id that is not registered fails closed.
func TestUnknownIDsDeny(t *testing.T) {
	r := loadBuiltin(t)
	lookups := map[string]func() error{
		"cycle":    func() error { _, err := r.Cycle("nope"); return err },
		"phase":    func() error { _, err := r.Phase("nope"); return err },
		"policy":   func() error { _, err := r.Policy("nope"); return err },
		"persona":  func() error { _, err := r.Persona("nope"); return err },
		"artifact": func() error { _, err := r.Artifact("nope"); return err },
		"trigger":  func() error { _, err := r.CycleForTrigger("nope"); return err },
	}
	for kind, f := range lookups {
		if err := f(); !errors.Is(err, ErrUnknownID) {
			t.Errorf("%s: got %v, want ErrUnknownID", kind, err)
		}
	}
}

const (
	okPhase = "---\nid: %s\nadvance_signal: review_aggregate.p0_unresolved == 0\nschema_version: v1\n---\n"
	okCycle = "---\nid: audit\nphases: [audit-scan]\nentry_phase: audit-scan\nexit_conditions:\n  done: review_aggregate.verdict == \"pass\"\nschema_version: v1\n---\n"
)

func phaseFile(id string) *fstest.MapFile {
	return &fstest.MapFile{Data: []byte(strings.ReplaceAll(okPhase, "%s", id))}
}

func md(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }

// A repository adds a cycle, phase, policy and persona as Markdown alone,
// and overrides a built-in; the override is reported.
func TestRepoAddsAndOverrides(t *testing.T) {
	repo := fstest.MapFS{
		"w/cycles/audit.md":                 md("---\nid: audit\ntriggers: [audit]\nphases: [audit-scan]\nentry_phase: audit-scan\nloop_to: audit-scan\nloop_bounds: {max_generations: 3}\nexit_conditions:\n  done: size(review_aggregate.findings) == 0\npolicies: [audit-halt]\nschema_version: v1\n---\n# audit\n"),
		"w/phases/audit-scan.md":            md("---\nid: audit-scan\nagents_invoked: [licenses]\nadvance_signal: outputs[\"audit-scan\"][\"done\"] == true\nschema_version: v1\n---\n"),
		"w/policies/audit-halt.md":          md("---\nid: audit-halt\nkind: loop-halt\nrules:\n  - when: cycle.generation > 2\n    then: deny\n    reason: enough\ndefault: allow\nschema_version: v1\n---\n"),
		"w/personas/researcher/licenses.md": md("---\nname: licenses\ndescription: checks licences\nrole: researcher\nallowed-tools: repo.read repo.search\nschema_version: v1\n---\nYou check licences.\n"),
		"w/phases/review-gate.md":           md("---\nid: review-gate\nadvance_signal: review_aggregate.verdict == \"pass\"\nschema_version: v1\n---\nstricter gate\n"),
		"w/README.md":                       md("notes for humans\n"),
	}
	r, err := Load(schemas.MustDefault(), Builtin(), Source{Name: RepoDir, FS: repo, Dir: "w"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.CycleForTrigger("audit")
	if err != nil || c.LoopTo != "audit-scan" || c.Bounds.MaxGenerations != 3 {
		t.Fatalf("audit cycle: %+v %v", c, err)
	}
	p, _ := r.Persona("licenses")
	if strings.Join(p.AllowedTools, ",") != "repo.read,repo.search" {
		t.Fatalf("allowed tools %v", p.AllowedTools)
	}
	ov := r.Overrides()
	if len(ov) != 1 || ov[0].Kind != KindPhase || ov[0].ID != "review-gate" || ov[0].Overridden != "builtin:phases/review-gate.md" || ov[0].By != ".agent/workflows/phases/review-gate.md" {
		t.Fatalf("overrides %+v", ov)
	}
	g, _ := r.Phase("review-gate")
	if g.Body != "stricter gate" || g.Origin.Source != RepoDir {
		t.Fatalf("override not applied: %+v", g)
	}
	// The built-in cycle still resolves through the overridden phase.
	if _, err := r.Cycle("review"); err != nil {
		t.Fatal(err)
	}
}

// Every fail-closed case is a load error naming the file and the field.
func TestLoadFailsClosed(t *testing.T) {
	cases := []struct {
		name  string
		files fstest.MapFS
		file  string
		field string
		msg   string
	}{
		{"unknown phase id", fstest.MapFS{"cycles/audit.md": md(okCycle)},
			"cycles/audit.md", "/phases/0", `phase "audit-scan" is not defined`},
		{"unknown persona id", fstest.MapFS{"phases/p.md": md("---\nid: p\nagents_invoked: [ghost]\nadvance_signal: \"true\"\nschema_version: v1\n---\n")},
			"phases/p.md", "/agents_invoked/0", `persona "ghost" is not defined`},
		{"reference to a definition that did not load", fstest.MapFS{
			"phases/p.md":                md("---\nid: p\nagents_invoked: [lic]\nadvance_signal: \"true\"\nschema_version: v1\n---\n"),
			"personas/researcher/lic.md": md("---\nname: lic\nrole: researcher\nschema_version: v1\n---\n")},
			"phases/p.md", "/agents_invoked/0", `did not load: see the problems of .agent/workflows/personas/researcher/lic.md`},
		{"unknown policy id in a phase", fstest.MapFS{"phases/p.md": md("---\nid: p\npolicies: [ghost]\nadvance_signal: \"true\"\nschema_version: v1\n---\n")},
			"phases/p.md", "/policies/0", `policy "ghost" is not defined`},
		{"unknown policy id in a cycle", fstest.MapFS{"cycles/audit.md": md(strings.Replace(okCycle, "schema_version", "policies: [ghost]\nschema_version", 1)), "phases/audit-scan.md": phaseFile("audit-scan")},
			"cycles/audit.md", "/policies/0", `policy "ghost" is not defined`},
		{"entry phase outside the cycle", fstest.MapFS{"cycles/audit.md": md(strings.Replace(okCycle, "entry_phase: audit-scan", "entry_phase: review-gate", 1)), "phases/audit-scan.md": phaseFile("audit-scan")},
			"cycles/audit.md", "/entry_phase", "not one of the cycle's phases"},
		{"cycle with no exit", fstest.MapFS{"cycles/audit.md": md("---\nid: audit\nphases: [audit-scan]\nentry_phase: audit-scan\nschema_version: v1\n---\n"), "phases/audit-scan.md": phaseFile("audit-scan")},
			"cycles/audit.md", "/exit_conditions/done", "no exit"},
		{"unbounded loop", fstest.MapFS{"cycles/audit.md": md(strings.Replace(okCycle, "entry_phase: audit-scan", "entry_phase: audit-scan\nloop_to: audit-scan", 1)), "phases/audit-scan.md": phaseFile("audit-scan")},
			"cycles/audit.md", "/loop_bounds/max_generations", "no exit"},
		{"unreachable phase", fstest.MapFS{"cycles/audit.md": md(strings.Replace(okCycle, "[audit-scan]", "[audit-pre, audit-scan]", 1)), "phases/audit-scan.md": phaseFile("audit-scan"), "phases/audit-pre.md": phaseFile("audit-pre")},
			"cycles/audit.md", "/phases/0", "before the entry phase"},
		{"schema violation: missing advance_signal", fstest.MapFS{"phases/p.md": md("---\nid: p\nschema_version: v1\n---\n")},
			"phases/p.md", "", "advance_signal"},
		{"schema violation: field not in the allow-list", fstest.MapFS{"phases/p.md": md("---\nid: p\nadvance_signal: \"true\"\nnext_if_llm_says_so: true\nschema_version: v1\n---\n")},
			"phases/p.md", "", "next_if_llm_says_so"},
		{"schema violation: policy kind", fstest.MapFS{"policies/p.md": md("---\nid: p\nkind: vibes\nrules: [{when: \"true\", then: allow, reason: r}]\nschema_version: v1\n---\n")},
			"policies/p.md", "/kind", "policy_v1"},
		{"schema violation: schema_version", fstest.MapFS{"phases/p.md": md("---\nid: p\nadvance_signal: \"true\"\nschema_version: v2\n---\n")},
			"phases/p.md", "/schema_version", "phase_v1"},
		{"no frontmatter", fstest.MapFS{"phases/p.md": md("# just prose\n")},
			"phases/p.md", "", "frontmatter"},
		{"bad YAML", fstest.MapFS{"phases/p.md": md("---\nid: [p\n---\n")},
			"phases/p.md", "", "frontmatter"},
		{"id does not match the file", fstest.MapFS{"phases/p.md": phaseFile("q")},
			"phases/p.md", "/id", `does not match its file name`},
		{"persona in the wrong role directory", fstest.MapFS{"personas/reviewer/lic.md": md("---\nname: lic\ndescription: d\nrole: researcher\nschema_version: v1\n---\n")},
			"personas/reviewer/lic.md", "/role", "does not match its directory"},
		{"persona defined twice", fstest.MapFS{
			"personas/reviewer/lic.md":   md("---\nname: lic\ndescription: d\nrole: reviewer\nschema_version: v1\n---\n"),
			"personas/researcher/lic.md": md("---\nname: lic\ndescription: d\nrole: researcher\nschema_version: v1\n---\n")},
			"personas/reviewer/lic.md", "/name", "also defined"},
		{"artifact not named -template", fstest.MapFS{"artifacts/r.md": md("---\nid: r\nnaming: r.json\nschema: plan_v1\nschema_version: v1\n---\n")},
			"artifacts/r.md", "", "-template.md"},
		{"artifact schema not registered", fstest.MapFS{"artifacts/r-template.md": md("---\nid: r\nnaming: r.json\nschema: vibes_v1\nschema_version: v1\n---\n")},
			"artifacts/r-template.md", "/schema", "not registered"},
		{"artifact naming escapes its directory", fstest.MapFS{"artifacts/r-template.md": md("---\nid: r\nnaming: ../{pr}.json\nschema: plan_v1\nschema_version: v1\n---\n")},
			"artifacts/r-template.md", "/naming", "clean relative path"},
		{"artifact naming with a bad placeholder", fstest.MapFS{"artifacts/r-template.md": md("---\nid: r\nnaming: r-{PR}.json\nschema: plan_v1\nschema_version: v1\n---\n")},
			"artifacts/r-template.md", "/naming", "placeholder"},
		{"trigger claimed by two cycles", fstest.MapFS{"cycles/audit.md": md(strings.Replace(okCycle, "phases:", "triggers: [review]\nphases:", 1)), "phases/audit-scan.md": phaseFile("audit-scan")},
			"cycles/audit.md", "/triggers/0", "already resolves to cycle review"},
		{"phase output schema not registered", fstest.MapFS{"phases/p.md": md("---\nid: p\noutput_schema: vibes_v1\nadvance_signal: \"true\"\nschema_version: v1\n---\n")},
			"phases/p.md", "/output_schema", "not registered"},
		{"misspelt kind directory", fstest.MapFS{"cycle/audit.md": md(okCycle)},
			"cycle", "", "not part of the workflow plane"},
		{"not Markdown", fstest.MapFS{"cycles/audit.yaml": md("id: audit\n")},
			"cycles/audit.yaml", "", "not a Markdown definition"},
		{"symbolic link", fstest.MapFS{"phases/p.md": &fstest.MapFile{Data: []byte("/etc/passwd"), Mode: 0o777 | os.ModeSymlink}},
			"phases/p.md", "", "symbolic link"},
		{"policy decision on the wrong scale", fstest.MapFS{"policies/p.md": md("---\nid: p\nkind: confidence-gating\nrules: [{when: \"true\", then: safe_auto, reason: r}]\nschema_version: v1\n---\n")},
			"policies/p.md", "/rules/0/then", "not a confidence-gating decision"},
		{"routing default on the gate scale", fstest.MapFS{"policies/p.md": md("---\nid: p\nkind: severity-routing\nrules: [{when: \"true\", then: manual, reason: r}]\ndefault: allow\nschema_version: v1\n---\n")},
			"policies/p.md", "/default", "not a severity-routing decision"},
		// CEL typos fail the load, not the run.
		{"typo in a variable", fstest.MapFS{"phases/p.md": md("---\nid: p\nadvance_signal: review_agregate.p0_unresolved == 0\nschema_version: v1\n---\n")},
			"phases/p.md", "/advance_signal", "undeclared reference to 'review_agregate'"},
		{"typo in a field", fstest.MapFS{"phases/p.md": md("---\nid: p\nadvance_signal: review_aggregate.p0_unresolvd == 0\nschema_version: v1\n---\n")},
			"phases/p.md", "/advance_signal", "p0_unresolvd"},
		{"type error", fstest.MapFS{"phases/p.md": md("---\nid: p\nadvance_signal: \"true\"\nhalt_signal: cycle.generation == \"3\"\nschema_version: v1\n---\n")},
			"phases/p.md", "/halt_signal", "does not compile"},
		{"signal that is not bool", fstest.MapFS{"phases/p.md": md("---\nid: p\nadvance_signal: cycle.generation + 1\nschema_version: v1\n---\n")},
			"phases/p.md", "/advance_signal", "want bool"},
		{"syntax error in a policy condition", fstest.MapFS{"policies/p.md": md("---\nid: p\nkind: loop-halt\nrules: [{when: \"cycle.generation >\", then: deny, reason: r}]\nschema_version: v1\n---\n")},
			"policies/p.md", "/rules/0/when", "does not compile"},
		{"natural language signal", fstest.MapFS{"cycles/audit.md": md(strings.Replace(okCycle, `review_aggregate.verdict == "pass"`, `when the reviewers are happy`, 1)), "phases/audit-scan.md": phaseFile("audit-scan")},
			"cycles/audit.md", "/exit_conditions/done", "does not compile"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Load(schemas.MustDefault(), Builtin(), Source{Name: RepoDir, FS: c.files, Dir: "."})
			var le *LoadError
			if !errors.As(err, &le) || r != nil {
				t.Fatalf("got registry %v, error %v; want a LoadError and no registry", r != nil, err)
			}
			for _, p := range le.Problems {
				if p.File == RepoDir+"/"+c.file && p.Field == c.field && strings.Contains(p.Message, c.msg) {
					return
				}
			}
			t.Fatalf("no problem at %s %q containing %q; got:\n%v", c.file, c.field, c.msg, err)
		})
	}
}

// A problem names the line of the field in the file.
func TestProblemLines(t *testing.T) {
	files := fstest.MapFS{"policies/p.md": md("---\nid: p\nkind: loop-halt\nrules:\n  - when: \"true\"\n    then: allow\n    reason: r\n  - when: cycle.generation > 1\n    then: manual\n    reason: r\nschema_version: v1\n---\n")}
	_, err := Load(schemas.MustDefault(), Source{Name: RepoDir, FS: files, Dir: "."})
	var le *LoadError
	if !errors.As(err, &le) || len(le.Problems) != 1 {
		t.Fatalf("%v", err)
	}
	p := le.Problems[0]
	if p.Line != 9 || p.Field != "/rules/1/then" || !strings.HasPrefix(p.String(), ".agent/workflows/policies/p.md:9: /rules/1/then: ") {
		t.Fatalf("%+v %s", p, p)
	}
}

func TestLoadRepoFromDisk(t *testing.T) {
	dir := t.TempDir()
	wf := filepath.Join(dir, ".agent", "workflows", "phases")
	if err := os.MkdirAll(wf, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wf, "extra.md"), []byte(strings.ReplaceAll(okPhase, "%s", "extra")), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := LoadRepo(schemas.MustDefault(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Phase("extra"); err != nil {
		t.Fatal(err)
	}
	// A repository without .agent/workflows loads the built-ins.
	if _, err := LoadRepo(schemas.MustDefault(), t.TempDir()); err != nil {
		t.Fatal(err)
	}
	// A symlinked .agent is refused by the repository's jail, not
	// followed.
	evil := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, ".agent"), filepath.Join(evil, ".agent")); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadRepo(schemas.MustDefault(), evil); err == nil || !strings.Contains(err.Error(), "escapes") {
		t.Fatalf("symlinked .agent: %v", err)
	}
	// So is a definition file that links out of the repository.
	leak := t.TempDir()
	outside := filepath.Join(t.TempDir(), "phase.yaml")
	if err := os.WriteFile(outside, []byte("not: the repository's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(leak, RepoDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(leak, RepoDir, "phases.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadRepo(schemas.MustDefault(), leak); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("a definition linking out of the repository: %v", err)
	}
}

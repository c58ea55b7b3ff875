package workflow

import (
	"errors"
	"io/fs"
	"path"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agentos/agentos/schemas"
	"github.com/agentos/agentos/workflows"
)

// fuzzPaths are where a fuzzed file is put in a repository's
// .agent/workflows: every shipped definition's own path (so the file
// overrides a built-in) and a new id of each kind.
func fuzzPaths(f *testing.F) []string {
	var out []string
	err := fs.WalkDir(workflows.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".md") || strings.HasPrefix(p, "roles/") {
			return nil
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
	return append(out, "cycles/x.md", "phases/x.md", "policies/x.md", "personas/reviewer/x.md", "personas/researcher/x.md", "artifacts/x-template.md")
}

// lookup finds the definition a loaded file at p registered.
func lookup(r *Registry, p string) (Origin, error) {
	base := strings.TrimSuffix(path.Base(p), ".md")
	switch strings.SplitN(p, "/", 2)[0] {
	case "cycles":
		c, err := r.Cycle(base)
		if err != nil {
			return Origin{}, err
		}
		return c.Origin, nil
	case "phases":
		x, err := r.Phase(base)
		if err != nil {
			return Origin{}, err
		}
		return x.Origin, nil
	case "policies":
		x, err := r.Policy(base)
		if err != nil {
			return Origin{}, err
		}
		return x.Origin, nil
	case "personas":
		x, err := r.Persona(base)
		if err != nil {
			return Origin{}, err
		}
		return x.Origin, nil
	case "artifacts":
		x, err := r.Artifact(strings.TrimSuffix(base, "-template"))
		if err != nil {
			return Origin{}, err
		}
		return x.Origin, nil
	}
	return Origin{}, errors.New("no kind for " + p)
}

// FuzzWorkflowFile: any Markdown a repository puts in .agent/workflows,
// at any definition's path, either loads — and is then the definition
// registered under its id, from the repository — or fails the load with a
// *LoadError whose every problem names a file and a field (FILE: FIELD:
// MESSAGE). Never a panic, never a registry with a problem.
func FuzzWorkflowFile(f *testing.F) {
	paths := fuzzPaths(f)
	for i, p := range paths {
		b, err := fs.ReadFile(workflows.FS, p)
		if err != nil { // the new ids: seed them with a shipped file of the kind
			continue
		}
		f.Add(uint8(i), string(b))
	}
	f.Add(uint8(len(paths)-6), okCycle)
	f.Add(uint8(len(paths)-5), strings.ReplaceAll(okPhase, "%s", "x"))
	f.Add(uint8(len(paths)-4), "---\nid: x\nkind: loop-halt\nrules:\n  - when: cycle.generation > 2\n    then: deny\n    reason: enough\ndefault: allow\nschema_version: v1\n---\n")
	f.Add(uint8(len(paths)-3), "---\nname: x\ndescription: checks\nrole: reviewer\nallowed-tools: repo.read\nschema_version: v1\n---\nYou check.\n")
	f.Add(uint8(0), "---\nid: [\n---\n")
	f.Add(uint8(1), "no frontmatter at all")
	f.Add(uint8(2), "---\nid: &a [*a]\n---\n")
	reg := schemas.MustDefault()
	f.Fuzz(func(t *testing.T, which uint8, content string) {
		p := paths[int(which)%len(paths)]
		repo := fstest.MapFS{"w/" + p: {Data: []byte(content)}}
		r, err := Load(reg, Builtin(), Source{Name: RepoDir, FS: repo, Dir: "w"})
		if err != nil {
			if r != nil {
				t.Fatalf("a registry with an error: %v", err)
			}
			var le *LoadError
			if !errors.As(err, &le) || len(le.Problems) == 0 {
				t.Fatalf("not a *LoadError with problems: %T %v", err, err)
			}
			for _, pr := range le.Problems {
				if pr.File == "" || pr.Message == "" || !strings.HasPrefix(pr.Field, "/") && pr.Field != "" {
					t.Fatalf("problem without file, field or message: %+v", pr)
				}
				if !strings.Contains(pr.String(), pr.File+":") {
					t.Fatalf("problem does not read FILE:…: %q", pr.String())
				}
			}
			return
		}
		o, err := lookup(r, p)
		if err != nil {
			t.Fatalf("loaded, but %s is not registered: %v", p, err)
		}
		if o.Source != RepoDir || o.File != p {
			t.Fatalf("%s registered from %v, want the repository's file", p, o)
		}
	})
}

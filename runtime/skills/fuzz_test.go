package skills

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/adrg/frontmatter"
	"github.com/agentos/agentos/schemas"
)

// FuzzSkillFile: any SKILL.md either registers a skill or is reported as a
// problem (never both, never neither, never a panic); a skill that names
// allowed-tools restricts tools (fail closed), and its body reads back.
func FuzzSkillFile(f *testing.F) {
	paths, _ := filepath.Glob("../../skills/*/SKILL.md")
	more, _ := filepath.Glob("../../testdata/**/SKILL.md")
	for _, p := range append(paths, more...) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(strings.Replace(string(b), "name: "+filepath.Base(filepath.Dir(p)), "name: s", 1))
	}
	// The Agent Skills format (agentskills.io): name and description only,
	// allowed-tools as a space-separated string.
	f.Add("---\nname: s\ndescription: Extract text from PDF files. Use when the user mentions PDFs.\nallowed-tools: Read Bash(git:*)\n---\n# PDF\n\nSteps.\n")
	f.Add("---\nname: s\ndescription: d\nallowed-tools: 7\n---\n")
	f.Add("---\n---\n")
	reg := schemas.MustDefault()
	f.Fuzz(func(t *testing.T, content string) {
		fsys := fstest.MapFS{"s/SKILL.md": {Data: []byte(content)}}
		r, problems := Discover(reg, Root{Name: "repo", FS: fsys, Dir: "."})
		s, ok := r.Get("s")
		if ok == (len(problems) == 1) || len(problems) > 1 || len(r.List()) > 1 {
			t.Fatalf("registered=%v with problems %v for %q", ok, problems, content)
		}
		if !ok {
			if problems[0].Reason == "" || problems[0].Path != "s/SKILL.md" {
				t.Fatalf("problem without path or reason: %+v", problems[0])
			}
			return
		}
		var fm map[string]any
		if _, err := frontmatter.Parse(bytes.NewReader([]byte(content)), &fm, yamlFormat); err != nil {
			t.Fatalf("registered a skill whose front matter does not parse: %v", err)
		}
		if v, named := fm["allowed-tools"]; named && v != nil && s.AllowedTools == nil {
			t.Fatalf("allowed-tools %#v restricts nothing (fail open) in %q", v, content)
		}
		if _, err := s.Body(); err != nil {
			t.Fatalf("Body of a registered skill: %v", err)
		}
	})
}

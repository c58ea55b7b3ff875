package main

// Tests of the files GitHub reads before any agentos code runs: action.yml,
// the workflows, the Dockerfile, and the release step that points a
// released action.yml at its image. GitHub rejects an action whose
// metadata is not valid YAML, so a broken file stops every user at once.

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel/testenv"
	"gopkg.in/yaml.v3"
)

const repoRoot = "../.."

// actionMeta is the metadata syntax of a Docker container action
// (docs.github.com, "Metadata syntax for GitHub Actions"). Decoding with
// KnownFields makes any other key an error.
type actionMeta struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Author      string `yaml:"author"`
	Branding    struct {
		Icon  string `yaml:"icon"`
		Color string `yaml:"color"`
	} `yaml:"branding"`
	Inputs map[string]struct {
		Description        string `yaml:"description"`
		Required           *bool  `yaml:"required"`
		Default            string `yaml:"default"`
		DeprecationMessage string `yaml:"deprecationMessage"`
	} `yaml:"inputs"`
	Outputs map[string]struct {
		Description string `yaml:"description"`
	} `yaml:"outputs"`
	Runs struct {
		Using          string            `yaml:"using"`
		Image          string            `yaml:"image"`
		Env            map[string]string `yaml:"env"`
		Entrypoint     string            `yaml:"entrypoint"`
		PreEntrypoint  string            `yaml:"pre-entrypoint"`
		PostEntrypoint string            `yaml:"post-entrypoint"`
		Args           []string          `yaml:"args"`
	} `yaml:"runs"`
}

// strictYAML parses b as YAML the way a strict loader does: a syntax
// error or a duplicate key anywhere is an error. It returns the document.
func strictYAML(t *testing.T, name string, b []byte) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s is not valid YAML: %v", name, err)
	}
	if doc == nil {
		t.Fatalf("%s is empty", name)
	}
	return doc
}

func parseActionMeta(t *testing.T, name string, b []byte) actionMeta {
	t.Helper()
	strictYAML(t, name, b)
	var m actionMeta
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

// checkActionShape reports what GitHub would refuse or a user would miss.
func checkActionShape(m actionMeta) []string {
	var problems []string
	if m.Name == "" || m.Description == "" {
		problems = append(problems, "name and description are required")
	}
	if len(m.Inputs) == 0 {
		problems = append(problems, "no inputs")
	}
	for name, in := range m.Inputs {
		if strings.TrimSpace(in.Description) == "" {
			problems = append(problems, "input "+name+" has no description")
		}
		if in.Required == nil {
			problems = append(problems, "input "+name+" does not say whether it is required")
		}
	}
	for name, out := range m.Outputs {
		if strings.TrimSpace(out.Description) == "" {
			problems = append(problems, "output "+name+" has no description")
		}
	}
	if m.Runs.Using != "docker" {
		problems = append(problems, "runs.using is "+m.Runs.Using+", want docker")
	}
	if m.Runs.Image == "" {
		problems = append(problems, "runs.image is empty")
	}
	return problems
}

func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestActionMetadata: action.yml is strict YAML with a container action's
// shape, main builds from the Dockerfile, and its inputs are exactly the
// ones bot/action reads (an undeclared input draws a warning on GitHub and
// is not documented; a declared one nobody reads is a lie).
func TestActionMetadata(t *testing.T) {
	m := parseActionMeta(t, "action.yml", readRepoFile(t, "action.yml"))
	if p := checkActionShape(m); len(p) > 0 {
		t.Errorf("action.yml: %s", strings.Join(p, "; "))
	}
	if m.Runs.Image != "Dockerfile" {
		t.Errorf("runs.image on main is %q, want Dockerfile (only a release commit names a pushed image)", m.Runs.Image)
	}
	if in, ok := m.Inputs["model"]; !ok || in.Default != "" {
		t.Errorf("input model must exist with an empty default, so the provider's default model applies: %+v", in)
	}
	read := map[string]bool{}
	re := regexp.MustCompile(`input\(getenv, "([a-z_]+)"\)`)
	for _, m := range re.FindAllSubmatch(readRepoFile(t, "bot/action/env.go"), -1) {
		read[string(m[1])] = true
	}
	if len(read) == 0 {
		t.Fatal("found no input(getenv, ...) reads in bot/action/env.go; update this test")
	}
	var declared []string
	for name := range m.Inputs {
		declared = append(declared, name)
		if !read[name] {
			t.Errorf("action.yml declares input %s, which bot/action does not read", name)
		}
	}
	for name := range read {
		if _, ok := m.Inputs[name]; !ok {
			t.Errorf("bot/action reads input %s, which action.yml does not declare", name)
		}
	}
	// .ci/actionlint-action.yml uses the action with every input, so that
	// actionlint loads action.yml and checks each name.
	doc := strictYAML(t, ".ci/actionlint-action.yml", readRepoFile(t, ".ci/actionlint-action.yml"))
	var with []string
	for _, job := range doc["jobs"].(map[string]any) {
		for _, s := range job.(map[string]any)["steps"].([]any) {
			step := s.(map[string]any)
			if step["uses"] == "./" {
				for k := range step["with"].(map[string]any) {
					with = append(with, k)
				}
			}
		}
	}
	sort.Strings(declared)
	sort.Strings(with)
	if !reflect.DeepEqual(with, declared) {
		t.Errorf(".ci/actionlint-action.yml passes inputs %v, action.yml declares %v", with, declared)
	}
}

// TestActionShapeCatchesBreakage: the checks above fail on the mistakes
// they exist for.
func TestActionShapeCatchesBreakage(t *testing.T) {
	for _, c := range []struct {
		name, doc string
	}{
		{"unquoted colon", "name: a\ndescription: d\ninputs:\n  x:\n    description: Budget: y\n    required: false\nruns:\n  using: docker\n  image: Dockerfile\n"},
		{"duplicate key", "name: a\ndescription: d\ninputs:\n  x:\n    description: y\n    required: false\n    required: true\nruns:\n  using: docker\n  image: Dockerfile\n"},
		{"unknown key", "name: a\ndescription: d\ninputs:\n  x:\n    descripton: y\n    required: false\nruns:\n  using: docker\n  image: Dockerfile\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var doc map[string]any
			errMap := yaml.Unmarshal([]byte(c.doc), &doc)
			dec := yaml.NewDecoder(strings.NewReader(c.doc))
			dec.KnownFields(true)
			var m actionMeta
			if errMap == nil && dec.Decode(&m) == nil {
				t.Fatalf("accepted:\n%s", c.doc)
			}
		})
	}
	var m actionMeta
	m.Name, m.Description, m.Runs.Using, m.Runs.Image = "a", "d", "node20", "Dockerfile"
	if p := checkActionShape(m); len(p) != 2 {
		t.Errorf("a node action without inputs: problems %v, want 2", p)
	}
}

// TestWorkflowFilesAreStrictYAML: every workflow (and the example users
// copy) is strict YAML with triggers and jobs. actionlint (.ci/run) checks
// them further.
func TestWorkflowFilesAreStrictYAML(t *testing.T) {
	var files []string
	for _, g := range []string{".github/workflows/*.yml", ".github/workflows/*.yaml", "docs/examples/*.yml", ".ci/*.yml"} {
		m, err := filepath.Glob(filepath.Join(repoRoot, g))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 4 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc := strictYAML(t, f, b)
		if _, ok := doc["on"]; !ok {
			t.Errorf("%s has no on: triggers", f)
		}
		if jobs, ok := doc["jobs"].(map[string]any); !ok || len(jobs) == 0 {
			t.Errorf("%s has no jobs", f)
		}
	}
}

// TestReleaseWorkflow: tags v* build a multi-arch image with the rights to
// push it and move the tag, and the rewrite is the tested script.
func TestReleaseWorkflow(t *testing.T) {
	b := readRepoFile(t, ".github/workflows/release.yml")
	var wf struct {
		On struct {
			Push struct {
				Tags []string `yaml:"tags"`
			} `yaml:"push"`
		} `yaml:"on"`
		Permissions map[string]string `yaml:"permissions"`
		Jobs        map[string]struct {
			Steps []struct {
				Uses string            `yaml:"uses"`
				Run  string            `yaml:"run"`
				With map[string]string `yaml:"with"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	strictYAML(t, "release.yml", b)
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(wf.On.Push.Tags, []string{"v*"}) {
		t.Errorf("release triggers on tags %v, want [v*]", wf.On.Push.Tags)
	}
	if wf.Permissions["packages"] != "write" || wf.Permissions["contents"] != "write" {
		t.Errorf("permissions %v, want packages and contents write", wf.Permissions)
	}
	var uses []string
	platforms, rewrites := "", false
	for _, j := range wf.Jobs {
		for _, s := range j.Steps {
			if s.Uses != "" {
				uses = append(uses, strings.Split(s.Uses, "@")[0])
			}
			if strings.HasPrefix(s.Uses, "docker/build-push-action@") {
				platforms = s.With["platforms"]
			}
			rewrites = rewrites || strings.Contains(s.Run, "bash .github/release-action.sh")
		}
	}
	for _, want := range []string{"docker/setup-qemu-action", "docker/setup-buildx-action", "docker/login-action", "docker/build-push-action"} {
		if !contains(uses, want) {
			t.Errorf("release.yml does not use %s (uses %v)", want, uses)
		}
	}
	if platforms != "linux/amd64,linux/arm64" {
		t.Errorf("platforms %q", platforms)
	}
	if !rewrites {
		t.Error("release.yml does not run .github/release-action.sh")
	}
}

// TestReleaseActionRewrite runs .github/release-action.sh on a copy of
// action.yml: the result is valid action metadata that runs the pushed
// image and differs from main's in nothing else; a second run is a no-op;
// bad references and unexpected files are refused.
func TestReleaseActionRewrite(t *testing.T) {
	testenv.LookPath(t, "bash")
	script, err := filepath.Abs(filepath.Join(repoRoot, ".github/release-action.sh"))
	if err != nil {
		t.Fatal(err)
	}
	orig := readRepoFile(t, "action.yml")
	copyTo := func(t *testing.T, b []byte) string {
		t.Helper()
		p := filepath.Join(t.TempDir(), "action.yml")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rewrite := func(image, file string) (string, int) {
		cmd := exec.Command("bash", script, image, file)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("release-action.sh: %v", err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	const image = "ghcr.io/octo-org/agentos:v1.2.3"
	p := copyTo(t, orig)
	if out, code := rewrite(image, p); code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	got, _ := os.ReadFile(p)
	m := parseActionMeta(t, "released action.yml", got)
	if probs := checkActionShape(m); len(probs) > 0 {
		t.Errorf("released action.yml: %v", probs)
	}
	if m.Runs.Image != "docker://"+image {
		t.Errorf("runs.image = %q, want docker://%s", m.Runs.Image, image)
	}
	want := parseActionMeta(t, "action.yml", orig)
	want.Runs.Image = m.Runs.Image
	if !reflect.DeepEqual(m, want) {
		t.Error("the rewrite changed more than runs.image")
	}
	if changed := diffLines(orig, got); len(changed) != 1 {
		t.Errorf("changed lines %q, want exactly the image line", changed)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode after the rewrite: %v %v", fi.Mode(), err)
	}
	// Idempotent for a re-run of the release job.
	if out, code := rewrite(image, p); code != 0 {
		t.Errorf("second run: exit %d %s", code, out)
	}
	if again, _ := os.ReadFile(p); !bytes.Equal(again, got) {
		t.Error("second run changed the file")
	}
	for _, c := range []struct {
		name, image string
		file        []byte
		code        int
	}{
		{"upper-case owner", "ghcr.io/Octo-Org/agentos:v1.2.3", orig, 2},
		{"no tag", "ghcr.io/octo-org/agentos", orig, 2},
		{"yaml-breaking characters", "ghcr.io/octo-org/agentos:v1 #x", orig, 2},
		{"already another image", "ghcr.io/octo-org/agentos:v1.2.4", got, 1},
		{"no image line", image, bytes.Replace(orig, []byte("  image: Dockerfile"), []byte("  image: 'Dockerfile'"), 1), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := copyTo(t, c.file)
			out, code := rewrite(c.image, p)
			if code != c.code {
				t.Errorf("exit %d, want %d: %s", code, c.code, out)
			}
			if after, _ := os.ReadFile(p); !bytes.Equal(after, c.file) {
				t.Error("a refused rewrite changed the file")
			}
		})
	}
}

func diffLines(a, b []byte) []string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	if len(al) != len(bl) {
		return []string{"line count differs"}
	}
	var d []string
	for i := range al {
		if al[i] != bl[i] {
			d = append(d, bl[i])
		}
	}
	return d
}

// TestDockerfileRunsAsRoot: GitHub mounts GITHUB_WORKSPACE owned by the
// runner's user and asks container actions to run as root, so the final
// stage sets no other USER.
func TestDockerfileRunsAsRoot(t *testing.T) {
	if u := finalStageUser(readRepoFile(t, "Dockerfile")); u != "" && u != "root" && u != "0" {
		t.Errorf("the image's final stage runs as USER %s", u)
	}
	if u := finalStageUser([]byte("FROM a AS b\nUSER x\nFROM c\nRUN true\n")); u != "" {
		t.Errorf("a USER of an earlier stage counted: %q", u)
	}
	if u := finalStageUser([]byte("FROM a\nRUN useradd x \\\n && true\nuser  x\n")); u != "x" {
		t.Errorf("the final stage's USER x was not found: %q", u)
	}
}

// finalStageUser returns the last USER of the Dockerfile's last stage.
func finalStageUser(dockerfile []byte) string {
	user := ""
	sc := bufio.NewScanner(bytes.NewReader(dockerfile))
	cont := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		wasCont := cont
		cont = strings.HasSuffix(line, "\\")
		if wasCont || line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		switch strings.ToUpper(f[0]) {
		case "FROM":
			user = ""
		case "USER":
			if len(f) > 1 {
				user = f[1]
			}
		}
	}
	return user
}

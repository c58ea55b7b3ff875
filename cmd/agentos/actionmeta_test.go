package main

// Tests of the files GitHub reads before any agentos code runs: action.yml,
// the workflows, the Dockerfile, and the release step that points a
// released action.yml at its image. GitHub rejects an action whose
// metadata is not valid YAML, so a broken file stops every user at once.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentos/agentos/bot/action"
	"github.com/agentos/agentos/kernel/testenv"
	"gopkg.in/yaml.v3"
)

const repoRoot = "../.."

// actionMeta is the metadata syntax of a composite or Docker container
// action (docs.github.com, "Metadata syntax for GitHub Actions"). Decoding
// with KnownFields makes any other key an error.
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
		Value       string `yaml:"value"` // composite only
	} `yaml:"outputs"`
	Runs struct {
		Using          string            `yaml:"using"`
		Steps          []compositeStep   `yaml:"steps"`
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

// compositeStep is one step of a composite action's runs.steps.
type compositeStep struct {
	Name  string            `yaml:"name"`
	ID    string            `yaml:"id"`
	If    string            `yaml:"if"`
	Shell string            `yaml:"shell"`
	Run   string            `yaml:"run"`
	Uses  string            `yaml:"uses"`
	With  map[string]string `yaml:"with"`
	Env   map[string]string `yaml:"env"`
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

// checkActionShape reports what GitHub would refuse or a user would miss:
// using is "composite" (action.yml) or "docker" (docker/action.yml).
func checkActionShape(m actionMeta, using string) []string {
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
		if using == "composite" && out.Value == "" {
			problems = append(problems, "output "+name+" of a composite action has no value")
		}
	}
	if m.Runs.Using != using {
		problems = append(problems, "runs.using is "+m.Runs.Using+", want "+using)
	}
	switch using {
	case "docker":
		if m.Runs.Image == "" {
			problems = append(problems, "runs.image is empty")
		}
	case "composite":
		if len(m.Runs.Steps) == 0 {
			problems = append(problems, "runs.steps is empty")
		}
		for i, st := range m.Runs.Steps {
			if st.Run != "" && st.Shell == "" {
				problems = append(problems, fmt.Sprintf("step %d runs a command without shell (composite actions require it)", i))
			}
			if (st.Run == "") == (st.Uses == "") {
				problems = append(problems, fmt.Sprintf("step %d needs exactly one of run and uses", i))
			}
		}
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

// TestActionMetadata: action.yml is a composite action that passes every
// input to agentos as INPUT_<NAME> and every output from its step; its
// inputs are exactly the ones bot/action reads (an undeclared input draws a
// warning on GitHub and is not documented; a declared one nobody reads is a
// lie) and its outputs exactly the ones it writes; docker/action.yml, the
// container form, declares the same inputs and outputs and builds the
// repository's Dockerfile on main.
func TestActionMetadata(t *testing.T) {
	m := parseActionMeta(t, "action.yml", readRepoFile(t, "action.yml"))
	if p := checkActionShape(m, "composite"); len(p) > 0 {
		t.Errorf("action.yml: %s", strings.Join(p, "; "))
	}
	if in, ok := m.Inputs["model"]; !ok || in.Default != "" {
		t.Errorf("input model must exist with an empty default, so the provider's default model applies: %+v", in)
	}
	if in := m.Inputs["github_token"]; in.Required == nil || *in.Required || in.Default != "${{ github.token }}" {
		t.Errorf("github_token must be optional with the workflow's token as its default (App mode needs none): %+v", in)
	}
	if in := m.Inputs["bot_login"]; in.Default != "" {
		t.Errorf("bot_login defaults to %q: the login must be learned from the credentials, never a default", in.Default)
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
	// The agentos step: a composite action's steps get no INPUT_
	// variables of their own, so each is passed, under its own name.
	var run *compositeStep
	for i := range m.Runs.Steps {
		if m.Runs.Steps[i].ID == "agentos" {
			run = &m.Runs.Steps[i]
		}
	}
	if run == nil {
		t.Fatal("action.yml has no step with id agentos")
	}
	env := map[string]bool{}
	for k, v := range run.Env {
		if !strings.HasPrefix(k, "INPUT_") {
			continue
		}
		name := strings.ToLower(strings.TrimPrefix(k, "INPUT_"))
		env[name] = true
		if want := "${{ inputs." + name + " }}"; v != want {
			t.Errorf("step agentos: %s is %q, want %q", k, v, want)
		}
		if _, ok := m.Inputs[name]; !ok {
			t.Errorf("step agentos passes %s, which is not an input", k)
		}
	}
	for name := range m.Inputs {
		if !env[name] {
			t.Errorf("step agentos does not pass input %s as INPUT_%s", name, strings.ToUpper(name))
		}
	}
	if !strings.Contains(run.Run, "$AGENTOS_BIN") || run.Env["AGENTOS_BIN"] != "${{ steps.install.outputs.bin }}" {
		t.Errorf("step agentos does not run the installed binary: run %q, AGENTOS_BIN %q", run.Run, run.Env["AGENTOS_BIN"])
	}
	// Outputs: exactly what bot/action writes, each from the agentos step.
	var written []string
	for _, kv := range (action.Outputs{}).Pairs() {
		written = append(written, kv[0])
	}
	var outs []string
	for name, o := range m.Outputs {
		outs = append(outs, name)
		if want := "${{ steps.agentos.outputs." + name + " }}"; o.Value != want {
			t.Errorf("output %s has value %q, want %q", name, o.Value, want)
		}
	}
	sort.Strings(written)
	sort.Strings(outs)
	if !reflect.DeepEqual(outs, written) {
		t.Errorf("action.yml declares outputs %v, bot/action writes %v", outs, written)
	}
	// The binary is installed by the tested script, cached by key.
	var uses []string
	for _, st := range m.Runs.Steps {
		uses = append(uses, st.Uses)
		if st.Run != "" && st.ID != "agentos" && !strings.Contains(st.Run, ".github/install-agentos.sh") {
			t.Errorf("step %s runs %q", st.ID, st.Run)
		}
	}
	if !contains(uses, "actions/cache@v4") {
		t.Errorf("action.yml does not cache the binary (steps use %v)", uses)
	}

	// The container form: same inputs and outputs, the Dockerfile on main.
	dm := parseActionMeta(t, "docker/action.yml", readRepoFile(t, "docker/action.yml"))
	if p := checkActionShape(dm, "docker"); len(p) > 0 {
		t.Errorf("docker/action.yml: %s", strings.Join(p, "; "))
	}
	if dm.Runs.Image != "../Dockerfile" {
		t.Errorf("docker/action.yml runs.image on main is %q, want ../Dockerfile (only a release commit names a pushed image)", dm.Runs.Image)
	}
	if !reflect.DeepEqual(dm.Inputs, m.Inputs) {
		t.Error("docker/action.yml's inputs differ from action.yml's")
	}
	if len(dm.Outputs) != len(m.Outputs) {
		t.Errorf("docker/action.yml has %d outputs, action.yml %d", len(dm.Outputs), len(m.Outputs))
	}
	for name, o := range m.Outputs {
		if dm.Outputs[name].Description != o.Description {
			t.Errorf("output %s: docker/action.yml says %q", name, dm.Outputs[name].Description)
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
	if p := checkActionShape(m, "docker"); len(p) != 2 {
		t.Errorf("a node action without inputs: problems %v, want 2", p)
	}
	var c actionMeta
	c.Name, c.Description, c.Runs.Using = "a", "d", "composite"
	c.Inputs = map[string]struct {
		Description        string `yaml:"description"`
		Required           *bool  `yaml:"required"`
		Default            string `yaml:"default"`
		DeprecationMessage string `yaml:"deprecationMessage"`
	}{"x": {Description: "x", Required: new(bool)}}
	c.Runs.Steps = []compositeStep{{Run: "true"}, {Uses: "a/b@v1", Run: "x", Shell: "bash"}}
	if p := checkActionShape(c, "composite"); len(p) != 2 {
		t.Errorf("a step without shell and a step with both run and uses: problems %v, want 2", p)
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

// TestReleaseWorkflow: tags v* run GoReleaser (binaries, checksums,
// image) with the rights to publish and push and move the tag, and the
// rewrite is the tested script.
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
	args, rewrites := "", false
	for _, j := range wf.Jobs {
		for _, s := range j.Steps {
			if s.Uses != "" {
				uses = append(uses, strings.Split(s.Uses, "@")[0])
			}
			if strings.HasPrefix(s.Uses, "goreleaser/goreleaser-action@") {
				args = s.With["args"]
			}
			rewrites = rewrites || strings.Contains(s.Run, "bash .github/release-action.sh \"$TAG\" \"$REF\"")
		}
	}
	for _, want := range []string{"actions/setup-go", "docker/setup-qemu-action", "docker/setup-buildx-action", "docker/login-action", "goreleaser/goreleaser-action"} {
		if !contains(uses, want) {
			t.Errorf("release.yml does not use %s (uses %v)", want, uses)
		}
	}
	if !strings.HasPrefix(args, "release") {
		t.Errorf("goreleaser args %q", args)
	}
	if !rewrites {
		t.Error("release.yml does not run .github/release-action.sh with the tag and the image")
	}
	// The release configuration builds what the composite action fetches.
	var gr struct {
		Builds []struct {
			ID      string   `yaml:"id"`
			Main    string   `yaml:"main"`
			Env     []string `yaml:"env"`
			Goos    []string `yaml:"goos"`
			Goarch  []string `yaml:"goarch"`
			Tags    []string `yaml:"tags"`
			Flags   []string `yaml:"flags"`
			Ldflags []string `yaml:"ldflags"`
		} `yaml:"builds"`
		Archives []struct {
			NameTemplate string `yaml:"name_template"`
		} `yaml:"archives"`
		Checksum struct {
			NameTemplate string `yaml:"name_template"`
			Algorithm    string `yaml:"algorithm"`
		} `yaml:"checksum"`
	}
	gb := readRepoFile(t, ".goreleaser.yaml")
	strictYAML(t, ".goreleaser.yaml", gb)
	if err := yaml.Unmarshal(gb, &gr); err != nil {
		t.Fatal(err)
	}
	mains := map[string]bool{}
	for _, b := range gr.Builds {
		mains[b.Main] = true
		if !contains(b.Env, "CGO_ENABLED=0") || !contains(b.Flags, "-trimpath") || !reflect.DeepEqual(b.Goos, []string{"linux", "darwin"}) || !reflect.DeepEqual(b.Goarch, []string{"amd64", "arm64"}) {
			t.Errorf("build %s: %+v, want static, -trimpath, linux and darwin on amd64 and arm64", b.ID, b)
		}
		if b.Main == "./cmd/agentos" && (!contains(b.Tags, "nomsgpack") || len(b.Ldflags) != 1 || !strings.Contains(b.Ldflags[0], "runtime/buildinfo.stamped={{ .Tag }}")) {
			t.Errorf("agentos build lacks .ci/build-static.sh's tag or version stamp: %+v", b)
		}
	}
	if !mains["./cmd/agentos"] || !mains["./cmd/agentos-launch"] {
		t.Errorf("builds %v, want agentos and agentos-launch", mains)
	}
	if len(gr.Archives) != 1 || gr.Archives[0].NameTemplate != "{{ .ProjectName }}_{{ .Version }}_{{ .Os }}_{{ .Arch }}" {
		t.Errorf("archives %+v: install-agentos.sh asks for agentos_<version>_<os>_<arch>.tar.gz", gr.Archives)
	}
	if gr.Checksum.NameTemplate != "checksums.txt" || gr.Checksum.Algorithm != "sha256" {
		t.Errorf("checksum %+v, want checksums.txt with sha256", gr.Checksum)
	}
}

// TestReleaseActionRewrite runs .github/release-action.sh on copies of
// action.yml and docker/action.yml: the results are valid action metadata
// that use the release (the composite action's AGENTOS_RELEASE, the
// container action's image) and differ from main's in nothing else; a
// second run is a no-op; bad arguments and unexpected files are refused
// and change nothing.
func TestReleaseActionRewrite(t *testing.T) {
	testenv.LookPath(t, "bash")
	script, err := filepath.Abs(filepath.Join(repoRoot, ".github/release-action.sh"))
	if err != nil {
		t.Fatal(err)
	}
	orig, origDocker := readRepoFile(t, "action.yml"), readRepoFile(t, "docker/action.yml")
	copyTo := func(t *testing.T, a, d []byte) string {
		t.Helper()
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "docker"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "action.yml"), a, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "docker", "action.yml"), d, 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	rewrite := func(tag, image, dir string) (string, int) {
		cmd := exec.Command("bash", script, tag, image, dir)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("release-action.sh: %v", err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	const tag, image = "v1.2.3", "ghcr.io/octo-org/agentos:v1.2.3"
	dir := copyTo(t, orig, origDocker)
	if out, code := rewrite(tag, image, dir); code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "action.yml"))
	gotDocker, _ := os.ReadFile(filepath.Join(dir, "docker", "action.yml"))
	m := parseActionMeta(t, "released action.yml", got)
	if probs := checkActionShape(m, "composite"); len(probs) > 0 {
		t.Errorf("released action.yml: %v", probs)
	}
	for _, st := range m.Runs.Steps {
		if v, ok := st.Env["AGENTOS_RELEASE"]; ok && v != tag {
			t.Errorf("step %s: AGENTOS_RELEASE = %q, want %s", st.ID, v, tag)
		}
	}
	if changed := diffLines(orig, got); len(changed) != 2 {
		t.Errorf("action.yml: changed lines %q, want exactly the two AGENTOS_RELEASE lines", changed)
	}
	dm := parseActionMeta(t, "released docker/action.yml", gotDocker)
	if probs := checkActionShape(dm, "docker"); len(probs) > 0 {
		t.Errorf("released docker/action.yml: %v", probs)
	}
	if dm.Runs.Image != "docker://"+image {
		t.Errorf("runs.image = %q, want docker://%s", dm.Runs.Image, image)
	}
	if changed := diffLines(origDocker, gotDocker); len(changed) != 1 {
		t.Errorf("docker/action.yml: changed lines %q, want exactly the image line", changed)
	}
	// Idempotent for a re-run of the release job.
	if out, code := rewrite(tag, image, dir); code != 0 {
		t.Errorf("second run: exit %d %s", code, out)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "action.yml")); !bytes.Equal(again, got) {
		t.Error("second run changed action.yml")
	}
	for _, c := range []struct {
		name, tag, image string
		a, d             []byte
		code             int
	}{
		{"upper-case owner", tag, "ghcr.io/Octo-Org/agentos:v1.2.3", orig, origDocker, 2},
		{"no tag on the image", tag, "ghcr.io/octo-org/agentos", orig, origDocker, 2},
		{"yaml-breaking characters", tag, "ghcr.io/octo-org/agentos:v1 #x", orig, origDocker, 2},
		{"not a version tag", "main", image, orig, origDocker, 2},
		{"already another release", "v1.2.4", "ghcr.io/octo-org/agentos:v1.2.4", got, gotDocker, 1},
		{"no image line", tag, image, orig, bytes.Replace(origDocker, []byte("  image: ../Dockerfile"), []byte("  image: '../Dockerfile'"), 1), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := copyTo(t, c.a, c.d)
			out, code := rewrite(c.tag, c.image, dir)
			if code != c.code {
				t.Errorf("exit %d, want %d: %s", code, c.code, out)
			}
			a, _ := os.ReadFile(filepath.Join(dir, "action.yml"))
			d, _ := os.ReadFile(filepath.Join(dir, "docker", "action.yml"))
			if !bytes.Equal(a, c.a) || !bytes.Equal(d, c.d) {
				t.Error("a refused rewrite changed a file")
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
	for _, f := range []string{"Dockerfile", ".github/release.Dockerfile"} {
		if u := finalStageUser(readRepoFile(t, f)); u != "" && u != "root" && u != "0" {
			t.Errorf("%s: the image's final stage runs as USER %s", f, u)
		}
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

// actionReference renders the inputs and outputs tables of
// docs/action-reference.md from action.yml.
func actionReference(m actionMeta) string {
	cell := func(s string) string {
		s = strings.Join(strings.Fields(s), " ")
		return strings.ReplaceAll(s, "|", "\\|")
	}
	var b strings.Builder
	b.WriteString("<!-- inputs:begin (generated from action.yml; TestActionReference keeps it equal) -->\n")
	b.WriteString("| input | required | default | description |\n|---|---|---|---|\n")
	var names []string
	for n := range m.Inputs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		in := m.Inputs[n]
		req := "no"
		if in.Required != nil && *in.Required {
			req = "yes"
		}
		def := ""
		if in.Default != "" {
			def = "`" + in.Default + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", n, req, cell(def), cell(in.Description))
	}
	b.WriteString("<!-- inputs:end -->\n")
	return b.String() + "\n## Outputs\n\n" + outputsReference(m)
}

func outputsReference(m actionMeta) string {
	var b strings.Builder
	b.WriteString("<!-- outputs:begin (generated from action.yml) -->\n| output | description |\n|---|---|\n")
	var names []string
	for n := range m.Outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "| `%s` | %s |\n", n, strings.ReplaceAll(strings.Join(strings.Fields(m.Outputs[n].Description), " "), "|", "\\|"))
	}
	b.WriteString("<!-- outputs:end -->\n")
	return b.String()
}

// TestActionReference: docs/action-reference.md's tables are generated
// from action.yml and kept equal to it (AGENTOS_UPDATE_REFERENCE=1
// rewrites them); the exit codes it documents are the ones actionExit
// gives.
func TestActionReference(t *testing.T) {
	m := parseActionMeta(t, "action.yml", readRepoFile(t, "action.yml"))
	want := actionReference(m)
	path := filepath.Join(repoRoot, "docs", "action-reference.md")
	doc := string(readRepoFile(t, "docs/action-reference.md"))
	start := strings.Index(doc, "<!-- inputs:begin")
	end := strings.Index(doc, "<!-- outputs:end -->\n")
	if start < 0 || end < start {
		t.Fatalf("docs/action-reference.md lacks the generated tables' markers")
	}
	got := doc[start : end+len("<!-- outputs:end -->\n")]
	if got != want {
		if os.Getenv("AGENTOS_UPDATE_REFERENCE") == "1" {
			if err := os.WriteFile(path, []byte(doc[:start]+want+doc[end+len("<!-- outputs:end -->\n"):]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("docs/action-reference.md's tables differ from action.yml; regenerate with AGENTOS_UPDATE_REFERENCE=1 go test -run TestActionReference ./cmd/agentos")
	}
	// Each exit reason is documented with its exit code.
	for reason, code := range map[string]int{action.ExitFailed: exitRunFailed, action.ExitTestsNotRun: exitRunFailed, action.ExitNoChange: exitRunFailed,
		action.ExitDenied: exitBlocked, action.ExitCancelled: exitBlocked, action.ExitPRsNotPermitted: exitFailure, action.ExitNotStarted: exitFailure} {
		row := fmt.Sprintf("| `%s` | %d |", reason, code)
		if !strings.Contains(doc, row) {
			t.Errorf("docs/action-reference.md has no row %q", row)
		}
		if got := exitCode(actionExit(action.Outputs{Status: "x", ExitReason: reason}), io.Discard); got != code && reason != action.ExitPRsNotPermitted && reason != action.ExitNotStarted {
			t.Errorf("%s exits %d, documented %d", reason, got, code)
		}
	}
}

// TestInstallScript runs .github/install-agentos.sh as the composite
// action does, against a local release server: a release archive whose
// SHA-256 matches checksums.txt is installed (and re-verified from the
// cache on the next run); a tampered archive, an archive missing from
// checksums.txt and a bad version are refused, never run; with no release
// and no Go the step fails saying how to fix it.
func TestInstallScript(t *testing.T) {
	testenv.LookPath(t, "bash")
	testenv.LookPath(t, "curl")
	testenv.LookPath(t, "tar")
	testenv.LookPath(t, "sha256sum")
	script, err := filepath.Abs(filepath.Join(repoRoot, ".github/install-agentos.sh"))
	if err != nil {
		t.Fatal(err)
	}
	goos := map[string]string{"linux": "Linux", "darwin": "macOS"}[runtime.GOOS]
	goarch := map[string]string{"amd64": "X64", "arm64": "ARM64"}[runtime.GOARCH]
	if goos == "" || goarch == "" {
		t.Skipf("no runner platform for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	// A release: an archive of two scripts standing in for the binaries.
	stage := t.TempDir()
	for _, n := range []string{"agentos", "agentos-launch"} {
		if err := os.WriteFile(filepath.Join(stage, n), []byte("#!/bin/sh\necho "+n+" v1.2.3\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rel := t.TempDir()
	archive := fmt.Sprintf("agentos_1.2.3_%s_%s.tar.gz", runtime.GOOS, runtime.GOARCH)
	if out, err := exec.Command("tar", "-czf", filepath.Join(rel, archive), "-C", stage, "agentos", "agentos-launch").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	sum := func() string {
		out, err := exec.Command("sha256sum", filepath.Join(rel, archive)).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(string(out))[0]
	}
	good := sum()
	// checksums.txt is rewritten between steps while the server's
	// goroutines read it: an atomic value keeps the race detector quiet
	// for the right reason.
	var checksums atomic.Value
	checksums.Store("")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1.2.3/checksums.txt":
			fmt.Fprint(w, checksums.Load().(string))
		case "/v1.2.3/" + archive:
			http.ServeFile(w, r, filepath.Join(rel, archive))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cache := t.TempDir()
	step := func(mode, release string, extra ...string) (map[string]string, string, int) {
		t.Helper()
		outFile := filepath.Join(t.TempDir(), "output")
		cmd := exec.Command("bash", script, mode)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "RUNNER_OS=" + goos, "RUNNER_ARCH=" + goarch, "RUNNER_TOOL_CACHE=" + cache,
			"GITHUB_OUTPUT=" + outFile, "GITHUB_ACTION_PATH=" + repoRoot, "AGENTOS_RELEASE=" + release,
			"AGENTOS_ACTION_REPOSITORY=octo/agentos", "AGENTOS_DOWNLOAD_URL=" + srv.URL}, extra...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		kv := map[string]string{}
		b, _ := os.ReadFile(outFile)
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				kv[k] = v
			}
		}
		return kv, string(out), cmd.ProcessState.ExitCode()
	}
	loc, out, code := step("locate", "v1.2.3")
	if code != 0 || loc["key"] != fmt.Sprintf("agentos-v1.2.3-%s-%s", runtime.GOOS, runtime.GOARCH) || !strings.HasPrefix(loc["dir"], cache) {
		t.Fatalf("locate: %d %v %s", code, loc, out)
	}
	dir := "AGENTOS_DIR=" + loc["dir"]
	checksums.Store(good + "  " + archive + "\n" + strings.Repeat("0", 64) + "  agentos_1.2.3_windows_amd64.zip\n")
	got, out, code := step("install", "v1.2.3", dir)
	if code != 0 || got["bin"] != filepath.Join(loc["dir"], "agentos") || !strings.Contains(out, "SHA-256 verified") {
		t.Fatalf("install: %d %v\n%s", code, got, out)
	}
	if v, err := exec.Command(got["bin"], "version").Output(); err != nil || !strings.Contains(string(v), "v1.2.3") {
		t.Errorf("installed binary: %q %v", v, err)
	}
	// The cache holds a tampered archive: verified again, refused.
	if err := os.WriteFile(filepath.Join(loc["dir"], archive), []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, out, code := step("install", "v1.2.3", dir); code != 0 || !strings.Contains(out, "SHA-256 verified") {
		t.Errorf("a tampered cached archive was not replaced by a verified download: %d\n%s", code, out)
	}
	// The release's archive does not match its checksum: refused.
	checksums.Store(strings.Repeat("a", 64) + "  " + archive + "\n")
	if err := os.Remove(filepath.Join(loc["dir"], archive)); err != nil {
		t.Fatal(err)
	}
	if _, out, code := step("install", "v1.2.3", dir); code == 0 || !strings.Contains(out, "does not match checksums.txt") {
		t.Errorf("a mismatching archive: exit %d\n%s", code, out)
	}
	// Not listed in checksums.txt: refused.
	checksums.Store(good + "  agentos_1.2.3_plan9_amd64.tar.gz\n")
	if _, out, code := step("install", "v1.2.3", dir); code == 0 || !strings.Contains(out, "is not listed") {
		t.Errorf("an unlisted archive: exit %d\n%s", code, out)
	}
	if _, out, code := step("locate", "1.2.3;rm -rf /"); code == 0 || !strings.Contains(out, "is not a version tag") {
		t.Errorf("a bad version: exit %d\n%s", code, out)
	}
	// No release and no Go: the step fails and says what to add.
	srcLoc, _, code := step("locate", "")
	if code != 0 || !strings.HasPrefix(srcLoc["key"], "agentos-src-") {
		t.Fatalf("locate from source: %v", srcLoc)
	}
	noGo := t.TempDir()
	for _, tool := range []string{"bash", "sha256sum", "cut", "find", "sort", "mkdir", "chmod", "cat", "date", "dirname", "curl", "awk", "tar", "rm", "mv"} {
		if p, err := exec.LookPath(tool); err == nil {
			_ = os.Symlink(p, filepath.Join(noGo, tool))
		}
	}
	_, out, code = step("install", "", "AGENTOS_DIR="+srcLoc["dir"], "PATH="+noGo)
	if code == 0 || !strings.Contains(out, "actions/setup-go") {
		t.Errorf("no release and no Go: exit %d\n%s", code, out)
	}
}

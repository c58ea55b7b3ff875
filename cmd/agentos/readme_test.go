package main

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/config"
	"github.com/agentos/agentos/runtime/provider"
)

// docBlock returns the first fenced block of the given language after
// heading in the Markdown file rel (relative to the repository's top).
func docBlock(t *testing.T, rel, heading, lang string) string {
	t.Helper()
	readme := string(readRepoFile(t, rel))
	i := strings.Index(readme, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("%s has no %q section", rel, heading)
	}
	rest := readme[i:]
	start := strings.Index(rest, "```"+lang+"\n")
	if start < 0 {
		t.Fatalf("no ```%s block after %q", lang, heading)
	}
	rest = rest[start+len("```"+lang+"\n"):]
	end := strings.Index(rest, "```")
	if end < 0 {
		t.Fatalf("unterminated block after %q", heading)
	}
	return rest[:end]
}

// yamlKeys lists the yaml keys of a struct type, "-" and unexported left out.
func yamlKeys(typ reflect.Type) []string {
	var keys []string
	for i := 0; i < typ.NumField(); i++ {
		tag := strings.Split(typ.Field(i).Tag.Get("yaml"), ",")[0]
		if tag != "" && tag != "-" {
			keys = append(keys, tag)
		}
	}
	return keys
}

// readmeFirstBlock is the README's first code block: the two commands
// that work on a fresh machine. .ci/run runs the second; keep them as
// they are.
const readmeFirstBlock = "# Run the main job: the demo fixes a real bug in a sample repository (scripted model, embedded SQLite)\n" +
	"go run ./cmd/agentos demo\n" +
	"\n" +
	"# Run the tests\n" +
	"go test -timeout 45m ./...\n"

// TestReadmeStartsWithTheTwoCommands: the first code block of README.md
// is exactly the demo and the test command.
func TestReadmeStartsWithTheTwoCommands(t *testing.T) {
	readme := string(readRepoFile(t, "README.md"))
	start := strings.Index(readme, "```")
	if start < 0 {
		t.Fatal("README.md has no code block")
	}
	if !strings.HasPrefix(readme[start:], "```sh\n"+readmeFirstBlock+"```\n") {
		end := min(len(readme), start+400)
		t.Errorf("README.md's first code block is not the two commands:\n%s", readme[start:end])
	}
}

// TestProfileReferenceIsComplete: the profile example of
// docs/configuration.md names every key of Profile, Limits and Pricing,
// parses with the strict profile parser, and shows the defaults the code
// really has (model aside: its default depends on the provider).
func TestProfileReferenceIsComplete(t *testing.T) {
	block := docBlock(t, "docs/configuration.md", "### The profile file", "yaml")
	for _, typ := range []reflect.Type{reflect.TypeOf(provider.Profile{}), reflect.TypeOf(provider.Limits{}), reflect.TypeOf(provider.Pricing{})} {
		for _, k := range yamlKeys(typ) {
			if !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(k) + `:`).MatchString(block) {
				t.Errorf("docs/configuration.md's profile does not show %s.%s", typ.Name(), k)
			}
		}
	}
	got, err := provider.ParseProfile(strings.NewReader(block))
	if err != nil {
		t.Fatalf("docs/configuration.md's profile does not parse: %v", err)
	}
	want := provider.DefaultProfile()
	got.Model, want.Model = "", ""
	if !reflect.DeepEqual(got, want) {
		t.Errorf("docs/configuration.md's profile says\n%+v\nthe defaults are\n%+v", got, want)
	}
}

// TestServeConfigReferenceIsComplete: the config file example of
// docs/configuration.md parses with the strict parser of agentos serve
// (an unknown key is an error), sets every setting a file may set, and
// shows the defaults the code really has.
func TestServeConfigReferenceIsComplete(t *testing.T) {
	block := docBlock(t, "docs/configuration.md", "## The server", "yaml")
	got, err := config.Parse("configuration.md", strings.NewReader(block))
	if err != nil {
		t.Fatalf("docs/configuration.md's config file does not parse: %v", err)
	}
	want := config.Default()
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := 0; i < gv.NumField(); i++ {
		f := gv.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		g, w := gv.Field(i), wv.Field(i)
		if g.Kind() == reflect.Slice && g.Len() == 0 && w.Len() == 0 {
			continue // [] in the file, nil by default: the same setting
		}
		if !reflect.DeepEqual(g.Interface(), w.Interface()) {
			t.Errorf("docs/configuration.md says %s = %v; the default is %v", f.Name, g.Interface(), w.Interface())
		}
	}
	// Every key the parser knows must be shown: it names them all when
	// given one it does not know.
	_, err = config.Parse("probe.yaml", strings.NewReader("no_such_key: 1\n"))
	if err == nil {
		t.Fatal("the config parser accepted an unknown key")
	}
	_, list, ok := strings.Cut(err.Error(), "known keys: ")
	if !ok {
		t.Fatalf("the parser's error names no known keys: %v", err)
	}
	for _, k := range strings.Split(strings.TrimSuffix(strings.TrimSpace(list), ")"), ", ") {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(k) + `:`).MatchString(block) {
			t.Errorf("docs/configuration.md's config file does not show %s", k)
		}
	}
}

// TestExampleProfilesLoad: the example profiles under docs/examples load
// and validate as they are (an OpenAI-compatible server with base_url
// needs no key).
func TestExampleProfilesLoad(t *testing.T) {
	p, err := provider.LoadProfile(repoRoot+"/docs/examples/ollama.profile.yaml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if p.Provider != "openai" || p.BaseURL == "" || p.Model == "" {
		t.Errorf("ollama profile: %+v", p)
	}
}

// TestDocExitCodes: the exit-code table of docs/cli.md and `agentos -h`
// agree.
func TestDocExitCodes(t *testing.T) {
	doc := string(readRepoFile(t, "docs/cli.md"))
	for _, line := range strings.Split(exitCodesHelp, "\n")[1:] {
		f := strings.Fields(line)
		code, word := f[0], strings.TrimSuffix(f[1], ":")
		if !regexp.MustCompile(`\n\| ` + code + ` \| ` + regexp.QuoteMeta(word)).MatchString(doc) {
			t.Errorf("docs/cli.md has no exit code row %s (%s)", code, word)
		}
	}
}

package main

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/provider"
)

// readmeBlock returns the first fenced block of the given language after
// heading in README.md.
func readmeBlock(t *testing.T, heading, lang string) string {
	t.Helper()
	readme := string(readRepoFile(t, "README.md"))
	i := strings.Index(readme, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README.md has no %q section", heading)
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

// TestReadmeProfileIsComplete: the README's profile example names every
// key of Profile, Limits and Pricing, parses with the strict profile
// parser, and shows the defaults the code really has (model aside: its
// default depends on the provider).
func TestReadmeProfileIsComplete(t *testing.T) {
	block := readmeBlock(t, "### The profile file", "yaml")
	for _, typ := range []reflect.Type{reflect.TypeOf(provider.Profile{}), reflect.TypeOf(provider.Limits{}), reflect.TypeOf(provider.Pricing{})} {
		for _, k := range yamlKeys(typ) {
			if !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(k) + `:`).MatchString(block) {
				t.Errorf("the README's profile does not show %s.%s", typ.Name(), k)
			}
		}
	}
	got, err := provider.ParseProfile(strings.NewReader(block))
	if err != nil {
		t.Fatalf("the README's profile does not parse: %v", err)
	}
	want := provider.DefaultProfile()
	got.Model, want.Model = "", ""
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the README's profile says\n%+v\nthe defaults are\n%+v", got, want)
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

// TestReadmeExitCodes: the README's exit-code table and `agentos -h` agree.
func TestReadmeExitCodes(t *testing.T) {
	readme := string(readRepoFile(t, "README.md"))
	for _, line := range strings.Split(exitCodesHelp, "\n")[1:] {
		f := strings.Fields(line)
		code, word := f[0], strings.TrimSuffix(f[1], ":")
		if !regexp.MustCompile(`\n\| ` + code + ` \| ` + regexp.QuoteMeta(word)).MatchString(readme) {
			t.Errorf("README.md has no exit code row %s (%s)", code, word)
		}
	}
}

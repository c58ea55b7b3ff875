package guard

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

const searchSchema = `{"type":"object","additionalProperties":false,"required":["query"],"properties":{
	"query":{"type":"string","minLength":1},
	"globs":{"type":"array","items":{"type":"string"}},
	"regex":{"type":"boolean"},
	"max_results":{"type":"integer","minimum":1,"maximum":2000},
	"mode":{"enum":["literal","regex"]},
	"path":{"type":"string","pattern":"^[^*]+$"}}}`

func compileSchema(t *testing.T, doc string) *jsonschema.Schema {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(doc)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem:///s.json", v); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem:///s.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// check runs the guard the way the kernel does and returns the classes.
func check(t *testing.T, s *jsonschema.Schema, raw string) ([]string, []string) {
	args, repairs, d := Parse([]byte(raw))
	if d != nil {
		return []string{d.Class}, nil
	}
	var classes []string
	for _, x := range append(Validate(s, args), Paths(args)...) {
		classes = append(classes, x.Class)
	}
	return classes, repairs
}

// TestMatrix: for each error class a call that must be blocked with that
// class, and valid calls that pass unchanged.
func TestMatrix(t *testing.T) {
	s := compileSchema(t, searchSchema)
	blocked := []struct{ args, class string }{
		{`{"globs":["*.go"]}`, MissingRequired},
		{`{"query":"x","recursive":true}`, UnexpectedParam},
		{`{"query":42}`, TypeError},
		{`{"query":"x","regex":"yes"}`, TypeError},
		{`{"query":"x","max_results":0}`, ValueError},
		{`{"query":"x","mode":"fuzzy"}`, ValueError},
		{`{"query":""}`, ValueError},
		{`{"query":"x","path":"*"}`, ValueError},
		{`{"query":"x","path":"/etc/passwd"}`, PathOutsideWorkspace},
		{`{"query":"x","path":"../../secrets"}`, PathOutsideWorkspace},
		{`{"query":"x","globs":["../**"]}`, PathOutsideWorkspace},
		{`{"query":"x","path":"~/.ssh/id_rsa"}`, PathOutsideWorkspace},
		{`{"query": "x"`, UnparsableArguments},
		{`["query","x"]`, UnparsableArguments},
		{`query=x`, UnparsableArguments},
	}
	for _, b := range blocked {
		got, _ := check(t, s, b.args)
		if len(got) == 0 || !contains(got, b.class) {
			t.Errorf("%s: classes %v, want %s", b.args, got, b.class)
		}
	}
	valid := []string{
		`{"query":"CheckToken"}`,
		`{"query":"func \\w+","regex":true,"globs":["**/*.go","!vendor/**"],"max_results":10}`,
		`{"query":"x","path":"internal/auth/token.go"}`,
		`{"query":"x","path":"./a/../b.go"}`,
	}
	for _, v := range valid {
		got, repairs := check(t, s, v)
		if len(got) != 0 || len(repairs) != 0 {
			t.Errorf("%s: blocked %v repairs %v", v, got, repairs)
		}
		args, _, _ := Parse([]byte(v))
		var a, b any
		json.Unmarshal([]byte(v), &a)
		json.Unmarshal(args, &b)
		if ja, jb := mustJSON(a), mustJSON(b); ja != jb {
			t.Errorf("valid args changed: %s → %s", ja, jb)
		}
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func TestRepairs(t *testing.T) {
	s := compileSchema(t, searchSchema)
	for raw, want := range map[string]string{
		"```json\n{\"query\":\"x\"}\n```":  "removed a Markdown code fence",
		`{"query":"x","globs":["*.go",],}`: "removed trailing commas",
		`{'query': 'it\'s "x"'}`:           "converted single-quoted strings to JSON strings",
	} {
		got, repairs := check(t, s, raw)
		if len(got) != 0 || !contains(repairs, want) {
			t.Errorf("%s: classes %v repairs %v, want repair %q", raw, got, repairs, want)
		}
	}
	args, _, _ := Parse([]byte(`{'query': 'it\'s "x"'}`))
	if string(args) != `{"query":"it's \"x\""}` {
		t.Errorf("repaired %s", args)
	}
}

func TestSuggestName(t *testing.T) {
	names := []string{"repo.read", "repo.search", "repo.patch", "process.run", "test.run", "echo"}
	for in, want := range map[string]string{"repo.raed": "repo.read", "repo_search": "repo.search", "Repo.Patch": "repo.patch", "ech0": "echo", "deploy.prod": ""} {
		if got := SuggestName(in, names); got != want {
			t.Errorf("SuggestName(%q) = %q, want %q", in, got, want)
		}
	}
}

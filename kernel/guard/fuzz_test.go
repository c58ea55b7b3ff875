package guard_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel/guard"
	"github.com/agentos/agentos/kernel/tools"
	"github.com/agentos/agentos/kernel/workspace"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// builtinSchemas compiles the input schema of every built-in tool as the
// kernel does (draft 2020-12).
func builtinSchemas(tb testing.TB) ([]string, []*jsonschema.Schema) {
	ws, err := workspace.Open(tb.TempDir(), workspace.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	var names []string
	var out []*jsonschema.Schema
	for _, d := range tools.Defs(ws, tools.Options{}) {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(d.Input))
		if err != nil {
			tb.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		if err := c.AddResource("mem:///"+d.Name+".json", v); err != nil {
			tb.Fatal(err)
		}
		s, err := c.Compile("mem:///" + d.Name + ".json")
		if err != nil {
			tb.Fatal(err)
		}
		names, out = append(names, d.Name), append(out, s)
	}
	return names, out
}

var classes = map[string]bool{
	guard.WrongFuncName: true, guard.MissingRequired: true, guard.UnexpectedParam: true, guard.TypeError: true,
	guard.ValueError: true, guard.PathOutsideWorkspace: true, guard.UnparsableArguments: true,
}

// FuzzGuard runs any argument text through the guard the way the kernel
// does, for every built-in tool: the guard never panics, agrees with the
// JSON Schema validator on what it lets through, classifies every finding
// with one of the guard's error classes, and lets no path argument out of
// the workspace.
func FuzzGuard(f *testing.F) {
	names, schemas := builtinSchemas(f)
	for _, s := range []string{
		`{"text":"hello"}`, `{"path":"auth.go"}`, `{"path":"../etc/passwd"}`, `{"path":"/etc/passwd"}`,
		`{"query":"CheckToken","globs":["**/*.go","!vendor/**"]}`, `{"unifiedDiff":"--- a/x\n+++ b/x\n"}`,
		`{"command":"go test ./...","cwd":"."}`, `{"name":"unit"}`, `{}`, "```json\n{\"path\":'a.go',}\n```",
		`{"_raw":"path=a.go"}`, `{"path":"a.go","extra":1}`, `{"path":7}`, `[1,2]`, `not json`,
	} {
		for i := range names {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		i := int(which) % len(schemas)
		args, _, d := guard.Parse(raw)
		if d != nil {
			if d.Class != guard.UnparsableArguments || d.Message == "" {
				t.Fatalf("Parse diagnostic %+v", d)
			}
			return
		}
		var obj map[string]any
		if err := json.Unmarshal(args, &obj); err != nil {
			t.Fatalf("Parse returned %q, not a JSON object: %v", args, err)
		}
		diags := guard.Validate(schemas[i], args)
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
		if err != nil {
			t.Fatalf("the validator cannot read what Parse returned: %v", err)
		}
		if valid := schemas[i].Validate(v) == nil; valid != (len(diags) == 0) {
			t.Fatalf("%s %s: validator valid=%v, guard diagnostics %v", names[i], args, valid, diags)
		}
		for _, d := range append(diags, guard.Paths(args)...) {
			if !classes[d.Class] || d.Message == "" || (d.Param != "" && !strings.HasPrefix(d.Param, "/")) {
				t.Fatalf("%s %s: diagnostic %+v", names[i], args, d)
			}
		}
		flagged := map[string]bool{}
		for _, d := range guard.Paths(args) {
			flagged[d.Param] = true
		}
		for _, p := range guard.PathArgs {
			s, ok := obj[p].(string)
			if !ok || flagged["/"+p] {
				continue
			}
			joined := filepath.Join("/ws", strings.ReplaceAll(s, `\`, "/"))
			if joined != "/ws" && !strings.HasPrefix(joined, "/ws/") {
				t.Fatalf("%s=%q passes the guard and resolves to %s", p, s, joined)
			}
		}
	})
}

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/agentos/agentos/schemas/openapi"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agentos/agentos/kernel/tools"
	"github.com/agentos/agentos/kernel/workspace"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Builtin is the corpus of agentos's own tools, with realistic calls (the
// demo's) and one generated call per tool.
func Builtin(dir string) (*Corpus, error) {
	ws, err := workspace.Open(dir, workspace.Options{})
	if err != nil {
		return nil, err
	}
	c := &Corpus{Name: "builtin"}
	for _, d := range tools.Defs(ws, tools.Options{}) {
		var s map[string]any
		if err := json.Unmarshal(d.Input, &s); err != nil {
			return nil, fmt.Errorf("%s: %w", d.Name, err)
		}
		c.Tools = append(c.Tools, &Tool{Name: d.Name, Schema: s, Workspace: true})
	}
	diff := "--- a/auth.go\n+++ b/auth.go\n@@ -1,3 +1,3 @@\n package auth\n-func CheckToken(t string) bool { return strings.HasPrefix(secret, t) }\n+func CheckToken(t string) bool { return t == secret }\n \n"
	for _, call := range []Call{
		{Tool: "echo", Args: map[string]any{"text": "hello, world"}},
		{Tool: "repo.read", Args: map[string]any{"path": "auth.go"}},
		{Tool: "repo.search", Args: map[string]any{"query": "CheckToken", "globs": []any{"**/*.go", "!vendor/**"}}},
		{Tool: "repo.patch", Args: map[string]any{"unifiedDiff": diff}},
		{Tool: "repo.write", Args: map[string]any{"path": "docs/notes.md", "content": "# Notes\n", "expected_hash": ""}},
		{Tool: "process.run", Args: map[string]any{"command": "go vet ./...", "cwd": "."}},
		{Tool: "test.run", Args: map[string]any{}},
		{Tool: "lint.run", Args: map[string]any{}},
	} {
		call.Source = "demo"
		c.Calls = append(c.Calls, call)
	}
	c.addGenerated()
	return c, nil
}

// addGenerated adds, for every tool, the smallest call its schema accepts
// (required arguments only, values from enums, defaults, examples and
// bounds), and a call with every argument; those the schema itself
// rejects (a pattern the generator cannot satisfy) are left out.
func (c *Corpus) addGenerated() {
	if err := c.compile(); err != nil {
		return
	}
	for _, t := range c.Tools {
		for _, all := range []bool{false, true} {
			g := &gen{c: c, all: all}
			v, ok := g.value(t.Schema, 0)
			m, isObj := v.(map[string]any)
			if !ok || !isObj {
				continue
			}
			doc, err := roundTrip(m)
			if err != nil || t.compiled.Validate(doc) != nil {
				continue
			}
			src := "generated (required)"
			if all {
				src = "generated (all)"
			}
			c.Calls = append(c.Calls, Call{Tool: t.Name, Args: m, Source: src})
		}
	}
}

// gen builds a value a schema accepts.
type gen struct {
	c   *Corpus
	all bool // every property, not just the required ones
}

func (g *gen) value(s map[string]any, depth int) (any, bool) {
	s = g.c.resolve(s)
	if s == nil || depth > 8 {
		return nil, false
	}
	if v, ok := s["const"]; ok {
		return v, true
	}
	if e := asSlice(s["enum"]); len(e) > 0 {
		return e[0], true
	}
	if v, ok := s["default"]; ok {
		return v, true
	}
	if e := asSlice(s["examples"]); len(e) > 0 {
		return e[0], true
	}
	if v, ok := s["example"]; ok {
		return v, true
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		for _, alt := range asSlice(s[k]) {
			if v, ok := g.value(asMap(alt), depth+1); ok {
				return v, true
			}
		}
	}
	if all := asSlice(s["allOf"]); len(all) > 0 {
		out := map[string]any{}
		for _, part := range all {
			v, ok := g.value(asMap(part), depth+1)
			m, isObj := v.(map[string]any)
			if !ok || !isObj {
				return v, ok
			}
			for k, x := range m {
				out[k] = x
			}
		}
		return out, true
	}
	typ, _ := s["type"].(string)
	if ts := asSlice(s["type"]); len(ts) > 0 {
		typ, _ = ts[0].(string)
		if typ == "null" && len(ts) > 1 {
			typ, _ = ts[1].(string)
		}
	}
	if typ == "" {
		if _, ok := s["properties"]; ok {
			typ = "object"
		}
	}
	switch typ {
	case "object":
		out := map[string]any{}
		req := map[string]bool{}
		for _, r := range asSlice(s["required"]) {
			if n, ok := r.(string); ok {
				req[n] = true
			}
		}
		props := asMap(s["properties"])
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !req[k] && !g.all {
				continue
			}
			v, ok := g.value(asMap(props[k]), depth+1)
			if !ok {
				if req[k] {
					return nil, false
				}
				continue
			}
			out[k] = v
		}
		return out, true
	case "array":
		n := 1
		if m, ok := num(s["minItems"]); ok && m > 1 {
			n = int(m)
		}
		var out []any
		for i := 0; i < n; i++ {
			v, ok := g.value(asMap(s["items"]), depth+1)
			if !ok {
				return []any{}, true
			}
			out = append(out, v)
		}
		return out, true
	case "string":
		v := "example"
		if m, ok := num(s["minLength"]); ok && int(m) > len(v) {
			v = strings.Repeat("x", int(m))
		}
		if m, ok := num(s["maxLength"]); ok && int(m) < len(v) {
			v = v[:int(m)]
		}
		switch s["format"] {
		case "uri":
			v = "https://example.com/x"
		case "date-time":
			v = "2026-11-25T09:00:00Z"
		case "email":
			v = "dev@example.com"
		}
		return v, true
	case "integer", "number":
		v := 1.0
		if m, ok := num(s["minimum"]); ok && m > v {
			v = m
		}
		if m, ok := num(s["maximum"]); ok && m < v {
			v = m
		}
		return v, true
	case "boolean":
		return true, true
	case "null":
		return nil, true
	}
	return nil, false
}

// OpenAPI is GitHub's REST description as a corpus: every operation a tool
// named by its operationId, whose arguments are its path, query and header
// parameters plus its JSON request body's properties (flattened as
// Octokit does; a body that is not a plain object is the argument "data");
// the calls are GitHub's own request-body examples with generated values
// for the required parameters.
func OpenAPI(path string) (*Corpus, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	openapi.RewriteNullable(spec)
	c := &Corpus{Name: "github-openapi", Root: spec, Draft: jsonschema.Draft4}
	type example struct {
		tool string
		body any
		name string
	}
	var examples []example
	paths := asMap(spec["paths"])
	pathKeys := make([]string, 0, len(paths))
	for p := range paths {
		pathKeys = append(pathKeys, p)
	}
	sort.Strings(pathKeys)
	for _, p := range pathKeys {
		item := asMap(paths[p])
		for _, method := range []string{"get", "put", "post", "patch", "delete"} {
			op := asMap(item[method])
			if op == nil {
				continue
			}
			name, _ := op["operationId"].(string)
			props := map[string]any{}
			var required []any
			for _, pv := range append(asSlice(item["parameters"]), asSlice(op["parameters"])...) {
				prm := c.resolve(asMap(pv))
				n, _ := prm["name"].(string)
				if n == "" || prm["schema"] == nil {
					continue
				}
				props[n] = prm["schema"]
				if r, _ := prm["required"].(bool); r {
					required = append(required, n)
				}
			}
			closed := true
			body := c.resolve(asMap(op["requestBody"]))
			var bodySchema map[string]any
			if body != nil {
				bodySchema = asMap(asMap(asMap(body["content"])["application/json"])["schema"])
			}
			bodyReq, _ := body["required"].(bool)
			flatten := false
			if bodySchema != nil {
				bs := c.resolve(bodySchema)
				bp := asMap(bs["properties"])
				flatten = bs["type"] == "object" && bp != nil && bs["oneOf"] == nil && bs["anyOf"] == nil && bs["allOf"] == nil
				for k := range bp {
					if _, clash := props[k]; clash {
						flatten = false
					}
				}
				if flatten {
					for k, v := range bp {
						props[k] = v
					}
					if bodyReq {
						required = append(required, asSlice(bs["required"])...)
					}
					if ap, ok := bs["additionalProperties"].(bool); !ok || ap {
						closed = false
					}
				} else {
					props["data"] = bodySchema
					if bodyReq {
						required = append(required, "data")
					}
				}
			}
			schema := map[string]any{"type": "object", "properties": props, "additionalProperties": !closed}
			if len(required) > 0 {
				schema["required"] = required
			}
			if closed {
				schema["additionalProperties"] = false
			}
			c.Tools = append(c.Tools, &Tool{Name: name, Schema: schema})
			if body == nil {
				continue
			}
			exs := asMap(asMap(asMap(body["content"])["application/json"])["examples"])
			exNames := make([]string, 0, len(exs))
			for n := range exs {
				exNames = append(exNames, n)
			}
			sort.Strings(exNames)
			for _, n := range exNames {
				ex := c.resolve(asMap(exs[n]))
				if v, ok := ex["value"]; ok {
					if !flatten {
						v = map[string]any{"data": v}
					}
					examples = append(examples, example{tool: name, body: v, name: n})
				}
			}
		}
	}
	if err := c.compile(); err != nil {
		return nil, err
	}
	for _, ex := range examples {
		t := c.byName[ex.tool]
		body, ok := ex.body.(map[string]any)
		if !ok {
			continue
		}
		args := map[string]any{}
		props, required := objectShape(c, t.Schema)
		g := &gen{c: c}
		for _, r := range required {
			if _, inBody := body[r]; inBody {
				continue
			}
			if v, ok := g.value(asMap(props[r]), 0); ok {
				args[r] = v
			}
		}
		for k, v := range body {
			args[k] = v
		}
		c.Calls = append(c.Calls, Call{Tool: ex.tool, Args: args, Source: "example " + ex.name})
	}
	return c, nil
}

// MCPServer names a server to list tools from.
type MCPServer struct {
	Name    string
	Command string
	Args    []string
}

// MCP is the tools of MCP servers as their tools/list gives them, each
// named <server>.<tool>, with generated calls.
func MCP(ctx context.Context, name string, servers []MCPServer) (*Corpus, error) {
	c := &Corpus{Name: name}
	for _, s := range servers {
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		client := mcp.NewClient(&mcp.Implementation{Name: "agentos-bench", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.CommandContext(ctx, s.Command, s.Args...)}, nil)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("MCP server %s: %w", s.Name, err)
		}
		var list []*mcp.Tool
		for t, err := range cs.Tools(ctx, nil) {
			if err != nil {
				cs.Close()
				cancel()
				return nil, fmt.Errorf("MCP server %s: tools/list: %w", s.Name, err)
			}
			list = append(list, t)
		}
		cs.Close()
		cancel()
		for _, t := range list {
			b, err := json.Marshal(t.InputSchema)
			if err != nil {
				return nil, err
			}
			var sch map[string]any
			if err := json.Unmarshal(b, &sch); err != nil {
				return nil, fmt.Errorf("%s.%s input schema: %w", s.Name, t.Name, err)
			}
			c.Tools = append(c.Tools, &Tool{Name: s.Name + "." + t.Name, Schema: sch})
		}
	}
	c.addGenerated()
	return c, nil
}

// NPMServers are the MCP reference servers under an npm prefix directory
// (AGENTOS_NPM_DIR); dir is the directory the filesystem server may use.
func NPMServers(npmDir, dir string) []MCPServer {
	mod := func(pkg, rel string) string {
		return filepath.Join(npmDir, "node_modules", "@modelcontextprotocol", pkg, rel)
	}
	return []MCPServer{
		{Name: "filesystem", Command: "node", Args: []string{mod("server-filesystem", "dist/index.js"), dir}},
		{Name: "memory", Command: "node", Args: []string{mod("server-memory", "dist/index.js")}},
		{Name: "everything", Command: "node", Args: []string{mod("server-everything", "dist/index.js"), "stdio"}},
	}
}

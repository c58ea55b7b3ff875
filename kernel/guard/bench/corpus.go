// Package bench is the tool-guard benchmark: an injected-error
// matrix (unknown tool, near-miss name, missing required, wrong type, bad
// enum, extra argument, absolute path, semantic error, unparsable
// arguments) run over corpora of tool definitions no one here wrote, with
// ground-truth calls that must all pass the guard.
//
// A corpus is a set of tools (name and JSON Schema of the arguments) and
// valid calls. Corpora: the built-in tools; GitHub's REST description
// (@octokit/openapi, every operation a tool, GitHub's request examples the
// calls); and the MCP reference servers' tools as their tools/list gives
// them, with calls generated from each schema.
package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Tool is one tool of a corpus.
type Tool struct {
	Name   string
	Schema map[string]any // the argument schema, $refs relative to the corpus root
	// Workspace tools take paths inside the repository: an absolute path
	// is an error for them (not for, say, a GitHub API parameter).
	Workspace bool

	compiled *jsonschema.Schema
}

// Call is a ground-truth call.
type Call struct {
	Tool   string
	Args   map[string]any
	Source string // where it comes from: "example", "generated", …
}

// Corpus is tools and calls. Root is the document $refs point into (nil
// when the schemas are self-contained).
type Corpus struct {
	Name  string
	Tools []*Tool
	Calls []Call
	Root  map[string]any
	Draft *jsonschema.Draft

	byName map[string]*Tool
}

const rootURL = "mem:///corpus-root.json"

// compile compiles every tool's schema; a tool whose schema does not
// compile is an error (the corpus would be measuring nothing).
func (c *Corpus) compile() error {
	comp := jsonschema.NewCompiler()
	if c.Draft != nil {
		comp.DefaultDraft(c.Draft)
	} else {
		comp.DefaultDraft(jsonschema.Draft2020)
	}
	if c.Root != nil {
		if err := comp.AddResource(rootURL, c.Root); err != nil {
			return err
		}
	}
	c.byName = map[string]*Tool{}
	for i, t := range c.Tools {
		url := fmt.Sprintf("mem:///tool/%d.json", i)
		doc, err := roundTrip(rebase(t.Schema))
		if err != nil {
			return fmt.Errorf("%s: %s: %w", c.Name, t.Name, err)
		}
		if err := comp.AddResource(url, doc); err != nil {
			return fmt.Errorf("%s: %s: %w", c.Name, t.Name, err)
		}
		s, err := comp.Compile(url)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", c.Name, t.Name, err)
		}
		t.compiled = s
		c.byName[t.Name] = t
	}
	return nil
}

// rebase points local "#/…" refs of a tool schema (cut out of a bigger
// document) at the corpus root.
func rebase(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, c := range x {
			if k == "$ref" {
				if s, ok := c.(string); ok && strings.HasPrefix(s, "#/") && !strings.HasPrefix(s, "#/$defs") && !strings.HasPrefix(s, "#/definitions") {
					out[k] = rootURL + s
					continue
				}
			}
			out[k] = rebase(c)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, c := range x {
			out[i] = rebase(c)
		}
		return out
	}
	return v
}

// roundTrip turns a Go value into the form jsonschema reads (json.Number).
func roundTrip(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// names lists the tool names, sorted.
func (c *Corpus) names() []string {
	out := make([]string, 0, len(c.Tools))
	for _, t := range c.Tools {
		out = append(out, t.Name)
	}
	sort.Strings(out)
	return out
}

// resolve follows $ref (local to the root, or already rebased) until a
// schema without one.
func (c *Corpus) resolve(s map[string]any) map[string]any {
	for i := 0; i < 32 && s != nil; i++ {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		ref = strings.TrimPrefix(ref, rootURL)
		if !strings.HasPrefix(ref, "#/") || c.Root == nil {
			return nil
		}
		var cur any = c.Root
		for _, seg := range strings.Split(ref[2:], "/") {
			seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
			m, _ := cur.(map[string]any)
			cur = m[seg]
		}
		s, _ = cur.(map[string]any)
	}
	return s
}

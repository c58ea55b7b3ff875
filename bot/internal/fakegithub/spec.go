package fakegithub

import (
	"bytes"
	"fmt"
	"github.com/agentos/agentos/schemas/openapi"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// specURL is the resource name under which the whole OpenAPI document is
// added to the schema compiler; request schemas are compiled as JSON
// pointers into it, so "$ref": "#/components/..." resolves naturally.
const specURL = "file:///api.github.com.json"

// Spec is GitHub's REST OpenAPI description, indexed for request matching
// and body validation. Load it with LoadSpec; it is loaded once per path and
// process because the file is over 10 MB.
type Spec struct {
	path string
	ops  map[string][]*Operation // method → operations

	mu       sync.Mutex // guards compiler and compiled
	compiler *jsonschema.Compiler
	compiled map[string]*jsonschema.Schema
	compErr  map[string]error
}

// Operation is one (method, path template) of the spec.
type Operation struct {
	Method      string
	Path        string // template, e.g. /repos/{owner}/{repo}/issues/{issue_number}
	OperationID string
	segments    []string
	literals    int
	pathParams  map[string]string // name → JSON type ("integer", "string")
	bodyPointer string            // JSON pointer of the application/json request schema, "" if none
	bodyProps   map[string]bool   // declared top-level properties; nil if the schema does not list them
	bodyReq     bool
	// responses maps each declared status code to the JSON pointer of its
	// application/json schema ("" for a response without a JSON body). Nil
	// when the spec carries no responses (NewUnchecked's route table).
	responses map[int]string
}

var (
	specMu    sync.Mutex
	specCache = map[string]*specEntry{}
)

type specEntry struct {
	once sync.Once
	spec *Spec
	err  error
}

// LoadSpec reads and indexes the OpenAPI description at path. The result
// is cached for the life of the process: tests share one copy.
func LoadSpec(path string) (*Spec, error) {
	specMu.Lock()
	e, ok := specCache[path]
	if !ok {
		e = &specEntry{}
		specCache[path] = e
	}
	specMu.Unlock()
	e.once.Do(func() { e.spec, e.err = loadSpec(path) })
	return e.spec, e.err
}

func loadSpec(path string) (*Spec, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("fakegithub: read spec: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("fakegithub: parse spec: %w", err)
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("fakegithub: spec root is %T, want object", doc)
	}
	// OpenAPI 3.0 marks null-able values with "nullable: true", which JSON
	// Schema does not know; rewrite it into a "null" type alternative.
	openapi.RewriteNullable(root)

	s := &Spec{path: path, ops: map[string][]*Operation{}, compiled: map[string]*jsonschema.Schema{}, compErr: map[string]error{}}
	paths, _ := root["paths"].(map[string]any)
	for tmpl, v := range paths {
		item, _ := v.(map[string]any)
		for method, ov := range item {
			m := strings.ToUpper(method)
			switch m {
			case "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD":
			default:
				continue
			}
			opObj, _ := ov.(map[string]any)
			op := &Operation{Method: m, Path: tmpl, segments: splitPath(tmpl), pathParams: map[string]string{}}
			op.OperationID, _ = opObj["operationId"].(string)
			for _, seg := range op.segments {
				if !isParam(seg) {
					op.literals++
				}
			}
			params := append(asSlice(item["parameters"]), asSlice(opObj["parameters"])...)
			for _, p := range params {
				pm := resolveRef(root, p)
				if pm == nil || pm["in"] != "path" {
					continue
				}
				name, _ := pm["name"].(string)
				typ := ""
				if sch := resolveRef(root, pm["schema"]); sch != nil {
					typ, _ = sch["type"].(string)
				}
				op.pathParams[name] = typ
			}
			if rb := resolveRef(root, opObj["requestBody"]); rb != nil {
				op.bodyReq, _ = rb["required"].(bool)
				if content, ok := rb["content"].(map[string]any); ok {
					if mt, ok := content["application/json"].(map[string]any); ok && mt["schema"] != nil {
						op.bodyPointer = "/paths/" + escapePointer(tmpl) + "/" + method + "/requestBody/content/application~1json/schema"
						if _, isRef := opObj["requestBody"].(map[string]any)["$ref"]; isRef {
							ref := opObj["requestBody"].(map[string]any)["$ref"].(string)
							op.bodyPointer = strings.TrimPrefix(ref, "#") + "/content/application~1json/schema"
						}
						op.bodyProps = declaredProps(root, mt["schema"])
					}
				}
			}
			op.responses = responsePointers(root, "/paths/"+escapePointer(tmpl)+"/"+method+"/responses", opObj["responses"])
			s.ops[m] = append(s.ops[m], op)
		}
	}
	for _, ops := range s.ops {
		sort.Slice(ops, func(i, j int) bool { return ops[i].Path < ops[j].Path })
	}
	fixKnownDeviations(root)

	c := jsonschema.NewCompiler()
	// OpenAPI 3.0 schemas are a draft-4/5 dialect: boolean exclusiveMinimum
	// and "$ref" that overrides its siblings.
	c.DefaultDraft(jsonschema.Draft4)
	if err := c.AddResource(specURL, root); err != nil {
		return nil, fmt.Errorf("fakegithub: add spec resource: %w", err)
	}
	s.compiler = c
	return s, nil
}

// Path returns the file the spec was loaded from.
func (s *Spec) Path() string { return s.path }

// Operation returns the operation with exactly this method and template.
func (s *Spec) Operation(method, tmpl string) (*Operation, bool) {
	for _, op := range s.ops[strings.ToUpper(method)] {
		if op.Path == tmpl {
			return op, true
		}
	}
	return nil, false
}

// Match finds the operation a concrete request path belongs to, and the
// path parameters. Literal segments beat parameters
// (/issues/comments over /issues/{issue_number}); a trailing {ref} or {path}
// may span several segments, as git refs do (/git/ref/heads/feature/x).
func (s *Spec) Match(method, path string) (*Operation, map[string]string, bool) {
	segs := splitPath(path)
	var best *Operation
	var bestParams map[string]string
	bestScore := -1
	for _, op := range s.ops[strings.ToUpper(method)] {
		params, ok := op.match(segs)
		if !ok {
			continue
		}
		score := op.literals * 2
		if len(op.segments) == len(segs) {
			score++ // an exact segment count beats a spanning tail
		}
		if score > bestScore {
			best, bestParams, bestScore = op, params, score
		}
	}
	return best, bestParams, best != nil
}

func (op *Operation) match(segs []string) (map[string]string, bool) {
	n := len(op.segments)
	if len(segs) < n || n == 0 {
		return nil, false
	}
	if len(segs) > n && !spans(op.segments[n-1]) {
		return nil, false
	}
	params := map[string]string{}
	for i, t := range op.segments {
		if !isParam(t) {
			if segs[i] != t {
				return nil, false
			}
			continue
		}
		name := t[1 : len(t)-1]
		v := segs[i]
		if i == n-1 && len(segs) > n {
			v = strings.Join(segs[i:], "/")
		}
		if v == "" {
			return nil, false
		}
		if op.pathParams[name] == "integer" {
			if _, err := strconv.ParseInt(v, 10, 64); err != nil {
				return nil, false
			}
		}
		params[name] = v
	}
	return params, true
}

// ValidateBody checks a JSON request body against the operation's request
// schema. It also reports top-level properties the schema does not declare:
// GitHub ignores them silently, so sending one is a caller bug (for example
// "draft" on PATCH /pulls/{n}).
func (s *Spec) ValidateBody(op *Operation, body []byte) error {
	// ghinstallation sends a literal "null" when it has no token options;
	// GitHub treats it as no body.
	if t := bytes.TrimSpace(body); len(t) == 0 || (!op.bodyReq && bytes.Equal(t, []byte("null"))) {
		if op.bodyReq {
			return fmt.Errorf("%s %s: request body is required", op.Method, op.Path)
		}
		return nil
	}
	if op.bodyPointer == "" {
		return fmt.Errorf("%s %s: operation takes no JSON body", op.Method, op.Path)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s %s: body is not JSON: %w", op.Method, op.Path, err)
	}
	sch, err := s.schema(op)
	if err != nil {
		return err
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("%s %s: body does not match the spec: %w", op.Method, op.Path, err)
	}
	if obj, ok := v.(map[string]any); ok && op.bodyProps != nil {
		var extra []string
		for k := range obj {
			if !op.bodyProps[k] {
				extra = append(extra, k)
			}
		}
		if len(extra) > 0 {
			sort.Strings(extra)
			return fmt.Errorf("%s %s: body has properties the operation does not accept: %s", op.Method, op.Path, strings.Join(extra, ", "))
		}
	}
	return nil
}

func (s *Spec) schema(op *Operation) (*jsonschema.Schema, error) {
	return s.compile(op.bodyPointer, op)
}

// compile compiles (once) the schema at a JSON pointer into the spec.
func (s *Spec) compile(ptr string, op *Operation) (*jsonschema.Schema, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sch, ok := s.compiled[ptr]; ok {
		return sch, nil
	}
	if err, ok := s.compErr[ptr]; ok {
		return nil, err
	}
	sch, err := s.compiler.Compile(specURL + "#" + pointerFragment(ptr))
	if err != nil {
		err = fmt.Errorf("fakegithub: compile schema %s of %s %s: %w", ptr, op.Method, op.Path, err)
		s.compErr[ptr] = err
		return nil, err
	}
	s.compiled[ptr] = sch
	return sch, nil
}

func sortStrings(s []string) { sort.Strings(s) }

// declaredProps lists the properties an object schema declares, or nil
// when it does not constrain them (no "properties", or additionalProperties
// allowed explicitly, or a composition the fake does not look into).
func declaredProps(root map[string]any, v any) map[string]bool {
	sch := resolveRef(root, v)
	if sch == nil {
		return nil
	}
	if ap, ok := sch["additionalProperties"]; ok && ap != false {
		return nil
	}
	props, ok := sch["properties"].(map[string]any)
	if !ok {
		return nil
	}
	out := map[string]bool{}
	for k := range props {
		out[k] = true
	}
	return out
}

func resolveRef(root map[string]any, v any) map[string]any {
	m, _ := v.(map[string]any)
	for i := 0; m != nil && i < 8; i++ {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		m = lookupPointer(root, strings.TrimPrefix(ref, "#"))
	}
	return m
}

func lookupPointer(root map[string]any, ptr string) map[string]any {
	var cur any = root
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[tok]
	}
	m, _ := cur.(map[string]any)
	return m
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// pointerFragment percent-encodes a JSON pointer for use as a URL fragment
// (path templates contain braces).
func pointerFragment(ptr string) string {
	toks := strings.Split(ptr, "/")
	for i, t := range toks {
		toks[i] = url.PathEscape(t)
	}
	return strings.Join(toks, "/")
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if u, err := url.PathUnescape(s); err == nil {
			segs[i] = u
		}
	}
	return segs
}

// spans reports whether a trailing parameter may hold slashes: git refs
// ("heads/feature/x") and file paths are sent unescaped.
func spans(seg string) bool { return seg == "{ref}" || seg == "{path}" }

func isParam(seg string) bool {
	return len(seg) > 2 && seg[0] == '{' && seg[len(seg)-1] == '}'
}

// Package schemas owns the versioned JSON Schemas (JSON Schema 2020-12) that
// every boundary payload is validated against: provider requests and
// responses, role outputs, skill frontmatter, protected writes, the event
// envelope, one payload schema per event type, and the terminal report.
//
// The files are embedded and compiled once into a Registry. A schema named by
// an id the registry does not know is an invariant violation, never a pass.
// Files ending in _v1.json are frozen: a breaking change needs a new _v2 file.
package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

//go:embed *.json
var files embed.FS

// baseURL anchors the relative "$id" values of the schema files. It is never
// fetched: the compiler has no loader for it, so a dangling $ref fails to
// compile instead of reaching the network.
const baseURL = "https://schemas.agentos.invalid/"

// ErrUnknownSchema is returned (wrapped) when a schema id is not registered.
// Callers must treat it as an invariant violation: nothing validates against
// a schema that does not exist.
var ErrUnknownSchema = errors.New("unknown schema id")

// ValidationError reports the first failing location of an instance.
type ValidationError struct {
	SchemaID string // the schema validated against, e.g. "plan_v1"
	Pointer  string // JSON pointer (RFC 6901) into the instance; "" is the root
	Message  string // what failed there
}

func (e *ValidationError) Error() string {
	ptr := e.Pointer
	if ptr == "" {
		ptr = "/"
	}
	return fmt.Sprintf("schema %s: at %s: %s", e.SchemaID, ptr, e.Message)
}

// Registry holds compiled schemas by id. It is safe for concurrent use.
type Registry struct {
	byID map[string]*jsonschema.Schema
	raw  map[string][]byte
	fast map[string]*fastNode // schemas the fast path covers (see fast.go)
}

var (
	defaultOnce sync.Once
	defaultReg  *Registry
	defaultErr  error
)

// Default returns the registry of the embedded schemas, compiled on first use.
func Default() (*Registry, error) {
	defaultOnce.Do(func() { defaultReg, defaultErr = Compile(files) })
	return defaultReg, defaultErr
}

// MustDefault is Default for program start-up and tests, where an embedded
// schema that does not compile is a build defect.
func MustDefault() *Registry {
	r, err := Default()
	if err != nil {
		panic(err)
	}
	return r
}

// Compile builds a registry from every *.json file at the root of fsys. Each
// file's "$id" must equal its file name without ".json".
func Compile(fsys fs.FS) (*Registry, error) {
	names, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	r := &Registry{byID: map[string]*jsonschema.Schema{}, raw: map[string][]byte{}, fast: map[string]*fastNode{}}
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("schemas: %s: %w", name, err)
		}
		id := strings.TrimSuffix(name, ".json")
		m, ok := doc.(map[string]any)
		if !ok || m["$id"] != id {
			return nil, fmt.Errorf("schemas: %s: $id must be %q", name, id)
		}
		// The fast node first: it only reads doc, which the compiler owns
		// once it is added.
		if n, ok := compileFast(doc); ok {
			r.fast[id] = n
		}
		if err := c.AddResource(baseURL+id, doc); err != nil {
			return nil, fmt.Errorf("schemas: %s: %w", name, err)
		}
		r.raw[id] = b
	}
	for id := range r.raw {
		s, err := c.Compile(baseURL + id)
		if err != nil {
			return nil, fmt.Errorf("schemas: compile %s: %w", id, err)
		}
		r.byID[id] = s
	}
	return r, nil
}

// IDs lists the registered schema ids in sorted order.
func (r *Registry) IDs() []string {
	ids := make([]string, 0, len(r.byID))
	for id := range r.byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Has reports whether id is registered.
func (r *Registry) Has(id string) bool { _, ok := r.byID[id]; return ok }

// Source returns the schema file's bytes as embedded.
func (r *Registry) Source(id string) ([]byte, bool) { b, ok := r.raw[id]; return b, ok }

// ValidateJSON validates a JSON document against the schema id.
func (r *Registry) ValidateJSON(id string, doc []byte) error {
	s, ok := r.byID[id]
	if !ok {
		return fmt.Errorf("schemas: %q: %w", id, ErrUnknownSchema)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return &ValidationError{SchemaID: id, Message: "not valid JSON: " + err.Error()}
	}
	if n := r.fast[id]; n != nil && n.valid(v) {
		return nil // see ValidateDecoded
	}
	return convert(id, s.Validate(v))
}

// ValidateDecoded validates a value already in the form a JSON decode with
// UseNumber yields (map[string]any, []any, string, json.Number, bool,
// nil), without encoding it first. Anything else is a validation error.
func (r *Registry) ValidateDecoded(id string, v any) error {
	s, ok := r.byID[id]
	if !ok {
		return fmt.Errorf("schemas: %q: %w", id, ErrUnknownSchema)
	}
	if !decoded(v, 0) {
		return &ValidationError{SchemaID: id, Message: "not a decoded JSON value"}
	}
	// The fast node only ever says "valid"; anything else, including every
	// error returned, comes from the library.
	if n := r.fast[id]; n != nil && n.valid(v) {
		return nil
	}
	return convert(id, s.Validate(v))
}

// decoded reports whether v holds only decoded-JSON types.
func decoded(v any, depth int) bool {
	if depth > 1000 {
		return false
	}
	switch x := v.(type) {
	case nil, string, json.Number, bool:
		return true
	case map[string]any:
		for _, e := range x {
			if !decoded(e, depth+1) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if !decoded(e, depth+1) {
				return false
			}
		}
		return true
	default:
		return false
	}
}

// Validate validates a Go value (a struct, map, or decoded JSON) against the
// schema id by round-tripping it through JSON, so struct tags apply.
func (r *Registry) Validate(id string, v any) error {
	if _, ok := r.byID[id]; !ok {
		return fmt.Errorf("schemas: %q: %w", id, ErrUnknownSchema)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return &ValidationError{SchemaID: id, Message: "cannot encode as JSON: " + err.Error()}
	}
	return r.ValidateJSON(id, b)
}

var printer = message.NewPrinter(language.English)

func convert(id string, err error) error {
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &ValidationError{SchemaID: id, Message: err.Error()}
	}
	leaf := deepest(ve)
	return &ValidationError{SchemaID: id, Pointer: pointer(leaf.InstanceLocation), Message: errorMessage(leaf)}
}

// deepest follows the cause chain to the most specific error, which is the
// one that names the failing field rather than "doesn't validate". The
// library collects causes while ranging over maps, so their order differs
// from call to call; ties are broken by pointer and message so that an
// invalid payload always yields the same error (it is recorded in the log).
func deepest(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(e.Causes) > 0 {
		best := e.Causes[0]
		for _, c := range e.Causes[1:] {
			if deeper(c, best) {
				best = c
			}
		}
		e = best
	}
	return e
}

// deeper orders errors by instance depth, then pointer, then message.
func deeper(a, b *jsonschema.ValidationError) bool {
	if la, lb := len(a.InstanceLocation), len(b.InstanceLocation); la != lb {
		return la > lb
	}
	if pa, pb := pointer(a.InstanceLocation), pointer(b.InstanceLocation); pa != pb {
		return pa < pb
	}
	return errorMessage(a) < errorMessage(b)
}

// errorMessage renders an error's kind; lists of property names, which the
// library gathers from maps, are sorted first.
func errorMessage(e *jsonschema.ValidationError) string {
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		slices.Sort(k.Properties)
	case *kind.Required:
		slices.Sort(k.Missing)
	}
	return e.ErrorKind.LocalizedString(printer)
}

func pointer(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		tok = strings.ReplaceAll(tok, "~", "~0")
		b.WriteString(strings.ReplaceAll(tok, "/", "~1"))
	}
	return b.String()
}

// PayloadSchemaID is the id of the current payload schema for an event
// type: "tool.invoke" → "payload_tool_invoke_v1". A type whose payload
// outgrew its frozen v1 has a later version that accepts every v1 payload
// too, so old logs still verify.
func PayloadSchemaID(eventType string) string {
	v := payloadVersions[eventType]
	if v == "" {
		v = "v1"
	}
	return "payload_" + strings.ReplaceAll(eventType, ".", "_") + "_" + v
}

// payloadVersions are the event types past v1: turn.terminal v2 adds the
// cancelled status (terminal_report_v2); workflow.policy_gated v2 adds the
// severity-routing decisions and the decision's subject; llm.request v2
// adds prompt blocks stored once per session and referenced by digest.
var payloadVersions = map[string]string{"turn.terminal": "v2", "workflow.policy_gated": "v2", "llm.request": "v2"}

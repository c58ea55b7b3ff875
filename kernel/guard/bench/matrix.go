package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/guard"
	"github.com/agentos/agentos/kernel/policy"
)

// The injected errors of the matrix, in its order.
const (
	UnknownTool   = "unknown_tool"
	NearMissName  = "near_miss_name"
	MissingReq    = "missing_required"
	WrongType     = "wrong_type"
	BadEnum       = "bad_enum"
	ExtraArgument = "extra_argument"
	AbsolutePath  = "absolute_path"
	Semantic      = "semantic_error"
	Unparsable    = "unparsable_arguments"
)

// Injections lists the matrix rows in order.
var Injections = []string{UnknownTool, NearMissName, MissingReq, WrongType, BadEnum, ExtraArgument, AbsolutePath, Semantic, Unparsable}

// expected is the guard's error class for each injection.
var expected = map[string]string{
	UnknownTool:   guard.WrongFuncName,
	NearMissName:  guard.WrongFuncName,
	MissingReq:    guard.MissingRequired,
	WrongType:     guard.TypeError,
	BadEnum:       guard.ValueError,
	ExtraArgument: guard.UnexpectedParam,
	AbsolutePath:  guard.PathOutsideWorkspace,
	Semantic:      guard.ValueError,
	Unparsable:    guard.UnparsableArguments,
}

// Row is one injection's figures.
type Row struct {
	Injection string `json:"injection"`
	Class     string `json:"expected_class"`
	Injected  int    `json:"injected"`
	Blocked   int    `json:"blocked"`    // rejected before execution
	RightCode int    `json:"classified"` // …with the expected class
	Repaired  int    `json:"repaired"`
	Executed  int    `json:"executed"` // reached the tool handler: must be 0
	// NotApplicable counts calls the injection cannot apply to (no enum,
	// no required argument, a schema that allows extra arguments, …).
	NotApplicable int `json:"not_applicable"`
}

// Result is a corpus's table.
type Result struct {
	Corpus       string   `json:"corpus"`
	Tools        int      `json:"tools"`
	Calls        int      `json:"ground_truth_calls"`
	FalseRejects int      `json:"false_rejects"`
	Rejected     []string `json:"rejected,omitempty"` // the ground-truth calls rejected, with why
	// Defects are calls of the corpus that its own schema refuses (an
	// example GitHub's description contradicts): not ground truth, so
	// neither counted in Calls nor mutated; listed so they can be reported.
	Defects []string `json:"corpus_defects,omitempty"`
	Rows    []Row    `json:"rows"`
}

// FalseRejectRate is the share of ground-truth calls the guard refused.
func (r Result) FalseRejectRate() float64 {
	if r.Calls == 0 {
		return 0
	}
	return float64(r.FalseRejects) / float64(r.Calls)
}

// nopRecorder drops the kernel's events (the benchmark reads outcomes).
type nopRecorder struct{}

func (nopRecorder) Record(context.Context, string, string, any, string) (string, error) {
	return "", nil
}

// Run registers the corpus's tools in a real kernel (the default policy),
// sends every ground-truth call and every injected variant through
// Kernel.Dispatch, and counts. The repair round is the scripted provider's:
// shown the kernel's rejection, it answers with the ground-truth call when
// the rejection names the injected fault (the class, and the parameter,
// the missing argument or the suggested tool name); that call passed the
// guard already, so a repair is counted without sending it again.
func Run(ctx context.Context, c *Corpus) (Result, error) {
	if err := c.compile(); err != nil {
		return Result{}, err
	}
	executed := 0
	k := kernel.New(policy.Default(), nil, nil)
	for _, t := range c.Tools {
		in, err := json.Marshal(selfContained(c, t))
		if err != nil {
			return Result{}, err
		}
		err = k.Register(kernel.ToolDef{
			Name: t.Name, Input: in, Output: json.RawMessage(`{}`), Category: kernel.CategoryRead,
			Handler: func(context.Context, kernel.Env, json.RawMessage) (any, error) {
				executed++
				return map[string]any{}, nil
			},
		})
		if err != nil {
			return Result{}, err
		}
	}
	// dispatch reports whether a call got past the guard: it executed, or
	// it waits for an approval (the policy asks for one for any tool it
	// does not name); ke is the rejection otherwise.
	dispatch := func(name string, args json.RawMessage) (*kernel.Error, bool) {
		_, err := k.Dispatch(ctx, nopRecorder{}, kernel.Call{ID: "bench", Name: name, Args: args})
		if err == nil {
			return nil, true
		}
		var ke *kernel.Error
		if !errors.As(err, &ke) {
			ke = &kernel.Error{Kind: "internal", Message: err.Error()}
		}
		return ke, false
	}

	res := Result{Corpus: c.Name, Tools: len(c.Tools)}
	rows := map[string]*Row{}
	for _, inj := range Injections {
		rows[inj] = &Row{Injection: inj, Class: expected[inj]}
	}
	names := c.names()
	for _, call := range c.Calls {
		truth, _ := json.Marshal(call.Args)
		// Ground truth is what the tool's schema accepts, judged by the
		// validator alone on the schema as the corpus states it (not the
		// kernel's self-contained copy, not the guard's parsing).
		if doc, err := roundTrip(call.Args); err != nil {
			res.Defects = append(res.Defects, fmt.Sprintf("%s (%s): %v", call.Tool, call.Source, err))
			continue
		} else if err := c.byName[call.Tool].compiled.Validate(doc); err != nil {
			res.Defects = append(res.Defects, fmt.Sprintf("%s (%s): %s", call.Tool, call.Source, clip(strings.ReplaceAll(err.Error(), "\n", " "), 300)))
			continue
		}
		res.Calls++
		if ke, ran := dispatch(call.Tool, truth); !ran {
			res.FalseRejects++
			msg := "not executed"
			if ke != nil {
				msg = ke.Message
			}
			res.Rejected = append(res.Rejected, fmt.Sprintf("%s (%s): %s", call.Tool, call.Source, clip(msg, 300)))
			continue // the matrix needs a call that passes to mutate
		}
		t := c.byName[call.Tool]
		for _, inj := range Injections {
			m, ok := mutate(c, t, call, inj, names)
			row := rows[inj]
			if !ok {
				row.NotApplicable++
				continue
			}
			row.Injected++
			before := executed
			ke, passed := dispatch(m.tool, m.args)
			if executed > before {
				row.Executed++
			}
			if passed {
				continue
			}
			row.Blocked++
			if ke == nil {
				continue
			}
			if !names1(ke, expected[inj]) {
				continue
			}
			row.RightCode++
			// The scripted repair turn answers a rejection that names the
			// fault with the ground-truth call, which passed above.
			if m.pinpointed(ke, expected[inj]) {
				row.Repaired++
			}
		}
	}
	for _, inj := range Injections {
		res.Rows = append(res.Rows, *rows[inj])
	}
	return res, nil
}

// names1 reports whether a kernel rejection carries the class.
func names1(ke *kernel.Error, class string) bool {
	ds, _ := ke.Details.([]guard.Diagnostic)
	for _, d := range ds {
		if d.Class == class {
			return true
		}
	}
	return false
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// selfContained is the tool's schema with the root's components it
// references copied in under "definitions", so the kernel compiles it
// alone (as it compiles any tool's schema).
func selfContained(c *Corpus, t *Tool) map[string]any {
	if c.Root == nil {
		return t.Schema
	}
	defs := map[string]any{}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, val := range x {
				if ref, ok := val.(string); k == "$ref" && ok && strings.HasPrefix(ref, "#/components/") {
					key := strings.ReplaceAll(strings.TrimPrefix(ref, "#/components/"), "/", "__")
					out[k] = "#/definitions/" + key
					if _, seen := defs[key]; !seen {
						defs[key] = nil // break cycles before walking
						defs[key] = walk(c.resolve(map[string]any{"$ref": ref}))
					}
					continue
				}
				out[k] = walk(val)
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, val := range x {
				out[i] = walk(val)
			}
			return out
		}
		return v
	}
	s := walk(t.Schema).(map[string]any)
	if len(defs) > 0 {
		s["definitions"] = defs
	}
	if c.Draft != nil {
		s["$schema"] = "http://json-schema.org/draft-04/schema#"
	}
	return s
}

// mutation is an injected call.
type mutation struct {
	tool    string
	args    json.RawMessage
	param   string // JSON pointer of the injected fault, "" for name faults
	want    string // the tool name a near miss should be matched back to
	missing string // the required argument left out
}

// pinpointed reports whether one diagnostic of the rejection names the
// fault well enough for a model to fix it: the expected class, and the
// suggested tool name, the parameter, or (for a missing argument) the
// argument's name.
func (m mutation) pinpointed(ke *kernel.Error, class string) bool {
	ds, _ := ke.Details.([]guard.Diagnostic)
	for _, d := range ds {
		if d.Class != class {
			continue
		}
		switch {
		case m.want != "":
			if d.Suggestion == m.want {
				return true
			}
		case m.missing != "":
			if strings.Contains(d.Message, "'"+m.missing+"'") {
				return true
			}
		case m.param == "":
			return true
		case d.Param == m.param || strings.HasPrefix(d.Param, m.param+"/"):
			return true
		}
	}
	return false
}

// mutate injects one fault into a ground-truth call.
func mutate(c *Corpus, t *Tool, call Call, inj string, names []string) (mutation, bool) {
	args := func(m map[string]any) json.RawMessage { b, _ := json.Marshal(m); return b }
	props, required := objectShape(c, t.Schema)
	keys := make([]string, 0, len(call.Args))
	for k := range call.Args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	switch inj {
	case UnknownTool:
		return mutation{tool: "zz_no_such_tool_" + fmt.Sprint(len(t.Name)), args: args(call.Args)}, true
	case NearMissName:
		for _, n := range nearMisses(t.Name) {
			if guard.SuggestName(n, names) == t.Name && !contains(names, n) {
				return mutation{tool: n, args: args(call.Args), want: t.Name}, true
			}
		}
		return mutation{}, false
	case MissingReq:
		for _, r := range required {
			if _, ok := call.Args[r]; ok {
				m := clone(call.Args)
				delete(m, r)
				return mutation{tool: t.Name, args: args(m), missing: r}, true
			}
		}
	case WrongType:
		for _, k := range keys {
			s := c.resolve(asMap(props[k]))
			if v, ok := otherType(s, call.Args[k]); ok {
				m := clone(call.Args)
				m[k] = v
				return mutation{tool: t.Name, args: args(m), param: "/" + pointerEscape(k)}, true
			}
		}
	case BadEnum:
		for _, k := range keys {
			s := c.resolve(asMap(props[k]))
			if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
				if _, isStr := call.Args[k].(string); isStr {
					m := clone(call.Args)
					m[k] = "not-one-of-the-values"
					return mutation{tool: t.Name, args: args(m), param: "/" + pointerEscape(k)}, true
				}
			}
		}
	case ExtraArgument:
		if ap, ok := asMap(t.Schema)["additionalProperties"].(bool); ok && !ap {
			m := clone(call.Args)
			m["unexpected_extra_argument"] = "x"
			return mutation{tool: t.Name, args: args(m), param: "/unexpected_extra_argument"}, true
		}
	case AbsolutePath:
		if !t.Workspace {
			return mutation{}, false
		}
		for _, p := range guard.PathArgs {
			if _, ok := props[p]; ok {
				m := clone(call.Args)
				m[p] = "/etc/passwd"
				return mutation{tool: t.Name, args: args(m), param: "/" + p}, true
			}
		}
	case Semantic:
		// A value of the right type that breaks a constraint of its own:
		// a stock "ticker" that fails its pattern, a string of the wrong
		// length, a number out of range.
		for _, k := range keys {
			s := c.resolve(asMap(props[k]))
			if v, ok := breakConstraint(s, call.Args[k]); ok {
				m := clone(call.Args)
				m[k] = v
				return mutation{tool: t.Name, args: args(m), param: "/" + pointerEscape(k)}, true
			}
		}
	case Unparsable:
		b := args(call.Args)
		return mutation{tool: t.Name, args: json.RawMessage(`{"_raw":` + quote(string(b[:len(b)-1])+`, "`) + `}`)}, true
	}
	return mutation{}, false
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }

// objectShape returns a tool schema's top-level properties and required
// names.
func objectShape(c *Corpus, s map[string]any) (map[string]any, []string) {
	s = c.resolve(s)
	props := asMap(s["properties"])
	var req []string
	for _, r := range asSlice(s["required"]) {
		if n, ok := r.(string); ok {
			req = append(req, n)
		}
	}
	return props, req
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// nearMisses are plausible typos of a name: a dropped, doubled or swapped
// character, a separator changed.
func nearMisses(name string) []string {
	var out []string
	for _, sep := range []string{".", "_", "-", "/"} {
		for _, to := range []string{"_", ".", "-"} {
			if sep != to && strings.Contains(name, sep) {
				out = append(out, strings.ReplaceAll(name, sep, to))
			}
		}
	}
	r := []rune(name)
	if len(r) > 3 {
		i := len(r) / 2
		out = append(out, string(r[:i])+string(r[i+1:]))            // dropped
		out = append(out, string(r[:i])+string(r[i])+string(r[i:])) // doubled
		sw := append([]rune{}, r...)
		sw[i], sw[i+1] = sw[i+1], sw[i]
		out = append(out, string(sw)) // swapped
	}
	return out
}

// otherType returns a value of a type the schema does not allow, or false
// when the schema allows any type.
func otherType(s map[string]any, cur any) (any, bool) {
	if s == nil {
		return nil, false
	}
	types := map[string]bool{}
	switch t := s["type"].(type) {
	case string:
		types[t] = true
	case []any:
		for _, x := range t {
			if n, ok := x.(string); ok {
				types[n] = true
			}
		}
	default:
		return nil, false
	}
	candidates := []struct {
		typ string
		v   any
	}{{"object", map[string]any{"unexpected": true}}, {"array", []any{"x"}}, {"boolean", true}, {"string", "x"}}
	for _, c := range candidates {
		ok := !types[c.typ]
		if c.typ == "string" && (types["string"]) {
			ok = false
		}
		if ok {
			return c.v, true
		}
	}
	return nil, false
}

// breakConstraint returns a value of the same type that violates one of
// the schema's own constraints (pattern, length, range), if it has one.
func breakConstraint(s map[string]any, cur any) (any, bool) {
	if s == nil {
		return nil, false
	}
	switch v := cur.(type) {
	case string:
		if _, ok := s["pattern"].(string); ok {
			return "\x01 not matching \x02", true
		}
		if n, ok := num(s["maxLength"]); ok {
			return strings.Repeat("x", int(n)+1), true
		}
		if n, ok := num(s["minLength"]); ok && n > 0 {
			return "", true
		}
	case float64, json.Number, int:
		_ = v
		if n, ok := num(s["maximum"]); ok {
			return n + 1000, true
		}
		if n, ok := num(s["minimum"]); ok {
			return n - 1000, true
		}
	}
	return nil, false
}

func num(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

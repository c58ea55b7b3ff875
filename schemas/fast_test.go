package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp/syntax"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
)

// libraryOnly is ValidateDecoded without the fast path (a copy of r with
// none): the reference every fast-path answer is compared with.
func libraryOnly(r *Registry, id string, v any) error {
	ref := *r
	ref.fast = nil
	return ref.ValidateDecoded(id, v)
}

// outcome runs f and renders its error, or its panic, as a string. The
// library can panic on a json.Number it cannot parse; the fast path must
// leave that behaviour exactly as it was.
func outcome(f func() error) (s string) {
	defer func() {
		if p := recover(); p != nil {
			s = fmt.Sprint("panic: ", p)
		}
	}()
	return fmt.Sprint(f())
}

// checkAgrees asserts, for one instance, that the fast node never accepts
// what the library rejects, that it accepts everything the library accepts
// (unless the instance holds a number the fast path deliberately leaves to
// the library), and that ValidateDecoded returns what the library-only path
// returns. It reports whether the fast node accepted v.
func checkAgrees(t testing.TB, r *Registry, id string, v any) bool {
	t.Helper()
	got := outcome(func() error { return r.ValidateDecoded(id, v) })
	want := outcome(func() error { return libraryOnly(r, id, v) })
	if got != want {
		t.Fatalf("%s %s: ValidateDecoded %s, library %s", id, show(v), got, want)
	}
	n := r.fast[id]
	if n == nil || !decoded(v, 0) {
		return false
	}
	fast := n.valid(v)
	libValid := want == "<nil>"
	if fast && !libValid {
		t.Fatalf("%s %s: fast path accepts, library rejects: %s", id, show(v), want)
	}
	if !fast && libValid && plainNumbers(v) {
		t.Fatalf("%s %s: fast path declines a value the library accepts", id, show(v))
	}
	return fast
}

// plainNumbers reports whether every json.Number in v is in JSON syntax.
func plainNumbers(v any) bool {
	switch x := v.(type) {
	case json.Number:
		return jsonNumberSyntax(string(x))
	case map[string]any:
		for _, e := range x {
			if !plainNumbers(e) {
				return false
			}
		}
	case []any:
		for _, e := range x {
			if !plainNumbers(e) {
				return false
			}
		}
	}
	return true
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

func schemaDoc(t testing.TB, r *Registry, id string) map[string]any {
	t.Helper()
	raw, _ := r.Source(id)
	return decode(t, string(raw)).(map[string]any)
}

// example builds an instance meant to be valid against the schema s, from
// its const, enum, type, properties, items, lengths, bounds and pattern.
// Schemas outside the fast subset ($ref, oneOf, ...) may get an invalid
// example; the differential test only needs agreement there.
func example(s any) any {
	m, ok := s.(map[string]any)
	if !ok {
		return "x"
	}
	if c, ok := m["const"]; ok {
		return c
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	switch firstType(m) {
	case "object":
		obj := map[string]any{}
		props, _ := m["properties"].(map[string]any)
		for name, sub := range props {
			obj[name] = example(sub)
		}
		return obj
	case "array":
		n := 1
		if min, ok := m["minItems"].(json.Number); ok {
			i, _ := min.Int64()
			n = max(n, int(i))
		}
		arr := make([]any, n)
		for i := range arr {
			arr[i] = example(m["items"])
		}
		return arr
	case "integer":
		if min, ok := m["minimum"]; ok {
			return min
		}
		return json.Number("1")
	case "number":
		if min, ok := m["minimum"]; ok {
			return min
		}
		return json.Number("1.5")
	case "boolean":
		return true
	case "null":
		return nil
	}
	if p, ok := m["pattern"].(string); ok {
		return patternExample(p)
	}
	if m["format"] == "date-time" {
		return "2026-01-02T03:04:05Z"
	}
	n := 3
	if min, ok := m["minLength"].(json.Number); ok {
		i, _ := min.Int64()
		n = max(n, int(i))
	}
	if lim, ok := m["maxLength"].(json.Number); ok {
		i, _ := lim.Int64()
		n = min(n, int(i))
	}
	return strings.Repeat("a", n)
}

func firstType(m map[string]any) string {
	switch t := m["type"].(type) {
	case string:
		return t
	case []any:
		s, _ := t[0].(string)
		return s
	}
	if _, ok := m["properties"]; ok {
		return "object"
	}
	if _, ok := m["items"]; ok {
		return "array"
	}
	return "string"
}

// patternExample returns a string the regular expression matches, built from
// its syntax tree (first alternative, minimum repetitions, first character
// of each class).
func patternExample(p string) string {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return "x"
	}
	var b strings.Builder
	var walk func(*syntax.Regexp)
	walk = func(re *syntax.Regexp) {
		switch re.Op {
		case syntax.OpLiteral:
			b.WriteString(string(re.Rune))
		case syntax.OpCharClass:
			b.WriteRune(re.Rune[0])
		case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
			b.WriteByte('a')
		case syntax.OpCapture, syntax.OpPlus:
			walk(re.Sub[0])
		case syntax.OpAlternate:
			walk(re.Sub[0])
		case syntax.OpConcat:
			for _, s := range re.Sub {
				walk(s)
			}
		case syntax.OpRepeat:
			for i := 0; i < re.Min; i++ {
				walk(re.Sub[0])
			}
		}
	}
	walk(re)
	return b.String()
}

// wrongTypes stand in for any value: one of each JSON type, and a value that
// is not decoded JSON at all.
var wrongTypes = []any{
	nil, true, false, json.Number("1"), json.Number("1.5"), "", "x",
	[]any{}, []any{"x"}, map[string]any{}, map[string]any{"k": json.Number("2")},
	1, // an int: not a decoded JSON value
}

// numberForms are the json.Number spellings whose integer-ness, sign and
// size the fast path must judge exactly as the library does, plus strings
// that are not JSON numbers at all (the library's big.Rat parses some).
var numberForms = []string{
	"0", "-0", "1", "-1", "1.0", "1.5", "-1.5", "1e2", "1E+2", "1e-2", "1.5e1", "10e-1", "0.0",
	"-0.0", "0e0", "2.50", "123456789012345678901234567890", "-123456789012345678901234567890",
	"123456789012345678901234567890.0", "9223372036854775807", "9223372036854775808",
	"-9223372036854775809", "1e400", "-1e400", "1e-400", "0.0000000000000000000001",
	"abc", "+1", "0x10", "1/2", ".5", "1.", "01", "", "1_000",
}

// variants returns alternatives for a value at a location whose schema is s:
// type changes, boundary lengths, numeric forms, and for objects and arrays
// every single-location change below them.
func variants(s any, v any) []any {
	out := append([]any{}, wrongTypes...)
	m, _ := s.(map[string]any)
	for _, f := range numberForms {
		out = append(out, json.Number(f))
	}
	for _, kw := range []string{"minimum", "maximum"} {
		if b, ok := m[kw].(json.Number); ok {
			out = append(out, b, json.Number(string(b)+".0"), json.Number(string(b)+"e0"))
			if i, err := b.Int64(); err == nil {
				out = append(out, json.Number(fmt.Sprint(i-1)), json.Number(fmt.Sprint(i+1)),
					json.Number(fmt.Sprint(i)+".5"), json.Number(fmt.Sprint(i-1)+".5"))
			}
		}
	}
	if e, ok := m["enum"].([]any); ok {
		out = append(out, e...)
		if s, ok := e[0].(string); ok {
			out = append(out, s+"x", strings.ToUpper(s))
		}
	}
	if p, ok := m["pattern"].(string); ok {
		ex := patternExample(p)
		out = append(out, ex, ex+"!", "!"+ex, ex[:len(ex)/2])
	}
	for _, kw := range []string{"minLength", "maxLength"} {
		if b, ok := m[kw].(json.Number); ok {
			n, _ := b.Int64()
			for _, l := range []int64{n - 1, n, n + 1} {
				if l < 0 {
					continue
				}
				for _, r := range []string{"a", "é", "😀", "\xff"} {
					out = append(out, strings.Repeat(r, int(l)))
				}
			}
		}
	}
	switch x := v.(type) {
	case map[string]any:
		props, _ := m["properties"].(map[string]any)
		names := make([]string, 0, len(x))
		for name := range x {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			out = append(out, without(x, name))
			for _, alt := range variants(props[name], x[name]) {
				out = append(out, with(x, name, alt))
			}
		}
		out = append(out, with(x, "zz_extra", "x"), with(x, "zz_extra", json.Number("1")))
	case []any:
		out = append(out, append(append([]any{}, x...), x...))
		if len(x) > 0 {
			for _, alt := range variants(m["items"], x[0]) {
				out = append(out, append([]any{alt}, x[1:]...))
			}
		}
	}
	return out
}

func with(obj map[string]any, k string, v any) map[string]any {
	c := make(map[string]any, len(obj)+1)
	for name, e := range obj {
		c[name] = e
	}
	c[k] = v
	return c
}

func without(obj map[string]any, k string) map[string]any {
	c := with(obj, k, nil)
	delete(c, k)
	return c
}

// corpus is every instance the differential test tries against schema id.
func corpus(t testing.TB, r *Registry, id string) []any {
	doc := schemaDoc(t, r, id)
	ex := example(doc)
	return append([]any{ex}, variants(doc, ex)...)
}

func TestFastAgreesWithLibrary(t *testing.T) {
	r := MustDefault()
	for _, id := range r.IDs() {
		accepted, total := 0, 0
		for _, v := range corpus(t, r, id) {
			total++
			if checkAgrees(t, r, id, v) {
				accepted++
			}
		}
		if r.fast[id] != nil && accepted == 0 {
			t.Errorf("%s: no corpus instance took the fast path; the corpus needs a valid example", id)
		}
		t.Logf("%-36s %5d instances, %5d accepted by the fast path", id, total, accepted)
	}
}

// TestFastNodeSemantics pins the keyword semantics the fast path mirrors,
// on small schemas, against the library.
func TestFastNodeSemantics(t *testing.T) {
	cases := []struct{ schema, instance string }{
		{`{"type":"integer"}`, `1.0`},
		{`{"type":"integer"}`, `1e2`},
		{`{"type":"integer"}`, `-0`},
		{`{"type":"integer"}`, `1.5`},
		{`{"type":"integer"}`, `1e-2`},
		{`{"type":["integer","null"]}`, `null`},
		{`{"type":"number","minimum":0}`, `-0.0`},
		{`{"type":"number","minimum":0.5}`, `0.5`},
		{`{"type":"number","minimum":0.5}`, `0.49999999999999999999999`},
		{`{"maximum":9007199254740993}`, `9007199254740992.5`},
		{`{"maximum":9007199254740993}`, `9007199254740993.000000000001`},
		{`{"minimum":1}`, `"1"`},
		{`{"minLength":2,"maxLength":2}`, `"é😀"`},
		{`{"minLength":2}`, `"é"`},
		{`{"maxLength":1.0}`, `"ab"`},
		{`{"pattern":"b"}`, `"abc"`},
		{`{"pattern":"^b"}`, `"abc"`},
		{`{"const":1}`, `1.0`},
		{`{"const":{"a":[1,"x"]}}`, `{"a":[1e0,"x"]}`},
		{`{"const":{"a":[1,"x"]}}`, `{"a":[1,"x"],"b":1}`},
		{`{"const":null}`, `null`},
		{`{"const":null}`, `false`},
		{`{"enum":[]}`, `1`},
		{`{"enum":["a",2]}`, `2.0`},
		{`{"additionalProperties":false,"properties":{"a":{}}}`, `{"a":1}`},
		{`{"additionalProperties":false,"properties":{"a":{}}}`, `{"a":1,"b":2}`},
		{`{"additionalProperties":{"type":"string"}}`, `{"b":"x"}`},
		{`{"additionalProperties":{"type":"string"}}`, `{"b":2}`},
		{`{"properties":{"a":false}}`, `{"a":1}`},
		{`{"properties":{"a":false}}`, `{"b":1}`},
		{`{"items":{"type":"string"}}`, `["a",1]`},
		{`{"items":{"type":"string"}}`, `"not an array"`},
		{`{"required":["a"]}`, `[]`},
		{`{"required":["a"]}`, `{"a":null}`},
	}
	for i, c := range cases {
		id := fmt.Sprintf("t%d_v1", i)
		schema := strings.Replace(c.schema, "{", `{"$id":"`+id+`",`, 1)
		r, err := Compile(fstest.MapFS{id + ".json": {Data: []byte(schema)}})
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		if r.fast[id] == nil {
			t.Fatalf("%s: not compiled to a fast node", c.schema)
		}
		v := decode(t, c.instance)
		fast := checkAgrees(t, r, id, v)
		t.Logf("%s %s: fast=%v", c.schema, c.instance, fast)
	}
}

// TestFastDeclinesUnsupported checks that a schema using anything outside
// the subset, at any depth, gets no fast node and is left to the library.
func TestFastDeclinesUnsupported(t *testing.T) {
	for _, schema := range []string{
		`{"minItems":1}`,
		`{"format":"date-time"}`,
		`{"properties":{"a":{"$ref":"other_v1"}}}`,
		`{"items":{"oneOf":[{},{}]}}`,
		`{"additionalProperties":{"if":{},"then":{}}}`,
		`{"properties":{"a":{"$schema":"https://json-schema.org/draft/2020-12/schema"}}}`,
		`{"properties":{"a":{"$id":"nested"}}}`,
		`{"x-vendor":true}`,
		`{"exclusiveMinimum":0}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#"}`,
	} {
		raw := strings.Replace(schema, "{", `{"$id":"t_v1",`, 1)
		if n, ok := compileFast(decode(t, raw)); ok || n != nil {
			t.Errorf("%s: compiled to a fast node, want none", schema)
		}
	}
}

func TestJSONNumberSyntax(t *testing.T) {
	for _, s := range append(numberForms, "-", "-01", "1e", "1e+", "0.", "-.5", "1.5E-07", " 1", "1 ", "NaN", "Infinity") {
		var v any
		d := json.NewDecoder(strings.NewReader(s))
		d.UseNumber()
		isNumber := d.Decode(&v) == nil && !d.More() && v != nil
		if _, ok := v.(json.Number); !ok {
			isNumber = false
		}
		// The decoder tolerates surrounding space; the syntax does not.
		isNumber = isNumber && strings.TrimSpace(s) == s
		if got := jsonNumberSyntax(s); got != isNumber {
			t.Errorf("jsonNumberSyntax(%q) = %v, encoding/json says %v", s, got, isNumber)
		}
	}
}

// hotPayloads are the payload schemas of the events appended most often.
var hotPayloads = []string{
	"payload_tool_invoke_v1", "payload_tool_result_v1", "payload_output_delta_v1",
	"payload_llm_request_v2", "payload_llm_response_v1",
}

// TestFastCoverage lists which schemas the fast path compiles, so a reader
// sees the coverage, and pins the hot payload schemas that fit the subset.
// payload_tool_result_v1 (if/then), payload_llm_request_v2 ($ref) and
// payload_llm_response_v1 ($ref, oneOf) use keywords outside it and are
// validated by the library alone.
func TestFastCoverage(t *testing.T) {
	r := MustDefault()
	var fast, slow []string
	for _, id := range r.IDs() {
		if r.fast[id] != nil {
			fast = append(fast, id)
		} else {
			slow = append(slow, id)
		}
	}
	t.Logf("fast path (%d): %s", len(fast), strings.Join(fast, " "))
	t.Logf("library only (%d): %s", len(slow), strings.Join(slow, " "))
	outside := map[string]bool{
		"payload_tool_result_v1": true, "payload_llm_request_v2": true, "payload_llm_response_v1": true,
	}
	for _, id := range hotPayloads {
		if got := r.fast[id] != nil; got == outside[id] {
			t.Errorf("%s: fast node present = %v, want %v", id, got, !outside[id])
		}
	}
}

// fuzzSchemas are the schemas FuzzFastAgrees checks every input against:
// the hot payloads plus compiled schemas that use enum, const, pattern,
// additionalProperties, items, integer and minimum.
var fuzzSchemas = append(append([]string{}, hotPayloads...),
	"completion_request_v1", "completion_response_v1", "review_result_v1", "write_claim_v1",
	"payload_agent_transition_v1", "payload_checkpoint_created_v1", "kernel_policy_v1")

func FuzzFastAgrees(f *testing.F) {
	r := MustDefault()
	for _, id := range fuzzSchemas {
		for _, v := range corpus(f, r, id) {
			if b, err := json.Marshal(v); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var v any
		if d.Decode(&v) != nil {
			return
		}
		for _, id := range fuzzSchemas {
			checkAgrees(t, r, id, v)
		}
	})
}

// BenchmarkValidateDecoded compares ValidateDecoded (fast path) with the
// library-only path it replaced, on the same decoded payloads.
func BenchmarkValidateDecoded(b *testing.B) {
	r := MustDefault()
	payloads := []struct{ name, id, doc string }{
		{"tool_invoke", "payload_tool_invoke_v1",
			`{"call_id":"c1","tool":"repo.read","args":{"path":"internal/auth/token.go","range":[1,80]}}`},
		{"completion_response", "completion_response_v1",
			`{"text":"I will read the token code first, then the tests, and propose a fix for the expiry check.","tool_calls":[{"id":"call_1","name":"repo.read","args":{"path":"internal/auth/token.go","range":[1,80]}},{"id":"call_2","name":"repo.read","args":{"path":"internal/auth/token_test.go"}},{"id":"call_3","name":"repo.search","args":{"query":"ExpiresAt","limit":20}}],"finish_reason":"tool_use","usage":{"input_tokens":1834,"output_tokens":212,"cost_usd":0.0041},"model":"m-large","schema_version":"v1"}`},
		// Not in the fast subset ($ref, oneOf): both paths are the library.
		{"llm_response", "payload_llm_response_v1",
			`{"role":"lead","response":{"text":"done","tool_calls":[{"id":"call_1","name":"repo.read","args":{"path":"a.go"}}],"finish_reason":"tool_use","usage":{"input_tokens":1834,"output_tokens":212},"model":"m","schema_version":"v1"},"latency_ms":812}`},
	}
	for _, p := range payloads {
		v := decode(b, p.doc)
		if err := libraryOnly(r, p.id, v); err != nil {
			b.Fatalf("%s: %v", p.name, err)
		}
		b.Run(p.name+"/fast", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := r.ValidateDecoded(p.id, v); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(p.name+"/library", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := libraryOnly(r, p.id, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestErrorsDeterministic: the library gathers the causes of an invalid
// instance by ranging over maps; the error the registry reports (recorded
// in a schema.violation event) must still be the same on every call.
func TestErrorsDeterministic(t *testing.T) {
	r := MustDefault()
	doc := []byte(`{"attempt":true,"request":"aaa","role":"aaa","x":1,"y":2,"z":3}`)
	first := fmt.Sprint(r.ValidateJSON("payload_llm_request_v1", doc))
	for range 300 {
		if got := fmt.Sprint(r.ValidateJSON("payload_llm_request_v1", doc)); got != first {
			t.Fatalf("error changed between calls:\n%s\n%s", first, got)
		}
	}
	doc = []byte(`{"b":1,"a":2,"c":3}`)
	want := "additional properties 'a', 'b', 'c' not allowed"
	for range 100 {
		if err := r.ValidateJSON("kernel_policy_v1", doc); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want %q", err, want)
		}
	}
}

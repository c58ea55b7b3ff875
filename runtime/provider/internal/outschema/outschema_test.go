package outschema

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/agentos/agentos/schemas"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

var roleSchemas = []string{"lead_directive_v1", "plan_v1", "worker_report_v1", "review_result_v1"}

func source(t *testing.T, id string) []byte {
	t.Helper()
	b, ok := schemas.MustDefault().Source(id)
	if !ok {
		t.Fatalf("no schema %s", id)
	}
	return b
}

func marshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func compile(t *testing.T, doc string) *jsonschema.Schema {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://derived.json", v); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem://derived.json")
	if err != nil {
		t.Fatalf("derived schema does not compile: %v\n%s", err, doc)
	}
	return s
}

func valid(t *testing.T, s *jsonschema.Schema, doc string) bool {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	return s.Validate(v) == nil
}

// checkStrict applies OpenAI's strict-mode rules to a derived schema.
func checkStrict(t *testing.T, v any, at string) {
	t.Helper()
	o, ok := v.(*Object)
	if !ok {
		t.Fatalf("%s: not a schema object", at)
	}
	for _, k := range o.Keys {
		if !strictKeep[k] {
			t.Errorf("%s: keyword %q is not allowed in strict mode", at, k)
		}
	}
	if _, ok := o.Get("type"); !ok {
		t.Errorf("%s: no type", at)
	}
	if p, ok := o.Get("properties"); ok {
		if ap, _ := o.Get("additionalProperties"); ap != false {
			t.Errorf("%s: additionalProperties = %v, want false", at, ap)
		}
		props := p.(*Object)
		req, _ := o.Get("required")
		var got []string
		for _, r := range req.([]any) {
			got = append(got, r.(string))
		}
		if strings.Join(got, ",") != strings.Join(props.Keys, ",") {
			t.Errorf("%s: required %v, want every property in order %v", at, got, props.Keys)
		}
		for _, k := range props.Keys {
			checkStrict(t, props.Vals[k], at+"/"+k)
		}
	}
	if items, ok := o.Get("items"); ok {
		checkStrict(t, items, at+"/items")
	}
}

// examples are documents valid against each v1 schema: with every member,
// and without the optional ones.
var examples = map[string][2]string{
	"lead_directive_v1": {`{"intent":"fix auth","constraints":["tests pass"],"needs_advisor":false,"schema_version":"v1"}`, `{"intent":"fix auth","constraints":[],"schema_version":"v1"}`},
	"plan_v1":           {`{"steps":[{"id":"s1","description":"run tests","depends_on":[]}],"risks":[],"needs_advisor":false,"schema_version":"v1"}`, `{"steps":[{"id":"s1","description":"run tests"}],"risks":[],"needs_advisor":false,"schema_version":"v1"}`},
	"worker_report_v1":  {`{"output":"done","steps_completed":["s1"],"tool_calls_made":["test.run:c1"],"schema_version":"v1"}`, `{"output":"done","steps_completed":["s1"],"schema_version":"v1"}`},
	"review_result_v1":  {`{"verdict":"pass","feedback":"ok","schema_version":"v1"}`, ""},
}

// TestOpenAIStrictVariants: every role schema gets a strict variant that
// follows strict mode's rules, accepts a complete document and only
// documents the original accepts.
func TestOpenAIStrictVariants(t *testing.T) {
	for _, id := range roleSchemas {
		t.Run(id, func(t *testing.T) {
			s, strict, err := OpenAI(source(t, id))
			if err != nil || !strict {
				t.Fatalf("strict = %v, err = %v", strict, err)
			}
			checkStrict(t, s, id)
			derived := compile(t, marshal(t, s))
			full, partial := examples[id][0], examples[id][1]
			if !valid(t, derived, full) {
				t.Errorf("the strict variant rejects a complete %s: %s", id, full)
			}
			if partial != "" && valid(t, derived, partial) {
				t.Errorf("the strict variant accepts a document without the optional members: %s", partial)
			}
			// Tighter, never looser: what it accepts the original accepts.
			if err := schemas.MustDefault().ValidateJSON(id, []byte(full)); err != nil {
				t.Fatal(err)
			}
			var extra map[string]any
			_ = json.Unmarshal([]byte(full), &extra)
			extra["surprise"] = 1
			if valid(t, derived, marshal(t, extra)) {
				t.Error("the strict variant accepts an unknown member")
			}
		})
	}
}

func TestOpenAILeadDirectiveExactly(t *testing.T) {
	s, _, err := OpenAI(source(t, "lead_directive_v1"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","required":["intent","constraints","needs_advisor","schema_version"],"properties":{"intent":{"type":"string","description":"Constraints: length at least 1."},"constraints":{"type":"array","items":{"type":"string"}},"needs_advisor":{"type":"boolean"},"schema_version":{"enum":["v1"],"type":"string"}},"additionalProperties":false}`
	if got := marshal(t, s); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestOpenAINonStrict(t *testing.T) {
	tests := []struct{ name, schema string }{
		{"oneOf", `{"type":"object","properties":{"a":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}`},
		{"open object", `{"type":"object","properties":{"args":{"type":"object","additionalProperties":true}}}`},
		{"map", `{"type":"object","additionalProperties":{"type":"string"}}`},
		{"untyped", `{"type":"object","properties":{"x":{}}}`},
		{"mixed enum", `{"type":"object","properties":{"x":{"enum":["a",1]}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, strict, err := OpenAI([]byte(`{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x",` + tt.schema[1:]))
			if err != nil {
				t.Fatal(err)
			}
			if strict {
				t.Errorf("strict variant made of %s: %s", tt.schema, marshal(t, s))
			}
			if got := marshal(t, s); got != tt.schema {
				t.Errorf("non-strict schema %s, want the original without annotations %s", got, tt.schema)
			}
		})
	}
	for _, bad := range []string{`[1]`, `{"type":"array"}`, `{"type":"object"`} {
		if _, _, err := OpenAI([]byte(bad)); err == nil {
			t.Errorf("OpenAI(%s) gave no error", bad)
		}
	}
}

func TestAnthropicInputSchemas(t *testing.T) {
	for _, id := range roleSchemas {
		s, err := Anthropic(source(t, id))
		if err != nil {
			t.Fatal(err)
		}
		got := marshal(t, s)
		if strings.Contains(got, "$schema") || strings.Contains(got, "$id") {
			t.Errorf("%s: annotations left in %s", id, got)
		}
		derived := compile(t, got)
		if !valid(t, derived, examples[id][0]) {
			t.Errorf("%s: rejects %s", id, examples[id][0])
		}
	}
}

// geminiAllowed are the Schema fields of the Gemini API.
var geminiAllowed = map[string]bool{
	"type": true, "format": true, "description": true, "nullable": true, "enum": true, "properties": true, "required": true,
	"propertyOrdering": true, "items": true, "minItems": true, "maxItems": true, "minLength": true, "maxLength": true,
	"minProperties": true, "maxProperties": true, "minimum": true, "maximum": true, "anyOf": true, "pattern": true, "title": true,
}

func checkGemini(t *testing.T, v any, at string) {
	t.Helper()
	o := v.(*Object)
	for _, k := range o.Keys {
		if !geminiAllowed[k] {
			t.Errorf("%s: %q is not a Gemini schema field", at, k)
		}
	}
	typ, _ := o.Get("type")
	if s, _ := typ.(string); s == "" || s != strings.ToUpper(s) {
		t.Errorf("%s: type %v", at, typ)
	}
	if e, ok := o.Get("enum"); ok {
		for _, x := range e.([]any) {
			if _, ok := x.(string); !ok {
				t.Errorf("%s: enum value %v is not a string", at, x)
			}
		}
	}
	if p, ok := o.Get("properties"); ok {
		props := p.(*Object)
		ord, _ := o.Get("propertyOrdering")
		if fmt.Sprint(ord) != fmt.Sprint(toAny(props.Keys)) {
			t.Errorf("%s: propertyOrdering %v, want %v", at, ord, props.Keys)
		}
		for _, k := range props.Keys {
			checkGemini(t, props.Vals[k], at+"/"+k)
		}
	}
	if items, ok := o.Get("items"); ok {
		checkGemini(t, items, at+"/items")
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i := range s {
		out[i] = s[i]
	}
	return out
}

func TestGeminiResponseSchemas(t *testing.T) {
	for _, id := range roleSchemas {
		t.Run(id, func(t *testing.T) {
			s, err := Gemini(source(t, id))
			if err != nil {
				t.Fatal(err)
			}
			checkGemini(t, s, id)
		})
	}
	s, err := Gemini(source(t, "review_result_v1"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"OBJECT","required":["verdict","feedback","schema_version"],"properties":{"verdict":{"enum":["pass","fail"],"type":"STRING"},"feedback":{"type":"STRING"},"schema_version":{"enum":["v1"],"type":"STRING"}},"propertyOrdering":["verdict","feedback","schema_version"]}`
	if got := marshal(t, s); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	nullable, err := Gemini([]byte(`{"type":"object","properties":{"n":{"type":["integer","null"],"exclusiveMinimum":0}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := marshal(t, nullable), `{"type":"OBJECT","properties":{"n":{"type":"INTEGER","nullable":true,"description":"Constraints: exclusiveMinimum 0."}},"propertyOrdering":["n"]}`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	for _, bad := range []string{`{"type":"object","properties":{"x":{"type":["string","integer"]}}}`, `{"type":"object","properties":{"x":{"type":"null"}}}`, `{"type":"object","properties":{"x":{}}}`} {
		if _, err := Gemini([]byte(bad)); err == nil {
			t.Errorf("Gemini(%s) gave no error", bad)
		}
	}
}

func TestParseKeepsOrder(t *testing.T) {
	v, err := Parse([]byte(`{"z":1,"a":{"y":[1,{"b":2,"a":1}],"x":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := marshal(t, v); got != `{"z":1,"a":{"y":[1,{"b":2,"a":1}],"x":null}}` {
		t.Errorf("round trip %s", got)
	}
	keys := append([]string(nil), v.(*Object).Keys...)
	if sort.StringsAreSorted(keys) {
		t.Error("keys were sorted")
	}
	if _, err := Parse([]byte(`{} {}`)); err == nil {
		t.Error("trailing data accepted")
	}
}

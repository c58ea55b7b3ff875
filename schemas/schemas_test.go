package schemas

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestSeedSchemasRegistered(t *testing.T) {
	r := MustDefault()
	for _, id := range []string{
		"completion_request_v1", "completion_response_v1", "lead_directive_v1", "plan_v1",
		"worker_report_v1", "review_result_v1", "skill_frontmatter_v1", "write_claim_v1",
		"event_v1", "terminal_report_v1",
	} {
		if !r.Has(id) {
			t.Errorf("schema %s not registered", id)
		}
	}
}

func TestUnknownSchemaIsInvariantError(t *testing.T) {
	r := MustDefault()
	err := r.ValidateJSON("plan_v9", []byte(`{}`))
	if !errors.Is(err, ErrUnknownSchema) {
		t.Fatalf("got %v, want ErrUnknownSchema", err)
	}
	if err := r.Validate("nope_v1", map[string]any{}); !errors.Is(err, ErrUnknownSchema) {
		t.Fatalf("Validate: got %v, want ErrUnknownSchema", err)
	}
}

func TestValidationErrorNamesPointer(t *testing.T) {
	r := MustDefault()
	cases := []struct {
		id, doc, ptr string
	}{
		{"plan_v1", `{"steps":[{"id":"s1","description":"x"},{"id":7,"description":"y"}],"risks":[],"needs_advisor":false,"schema_version":"v1"}`, "/steps/1/id"},
		{"plan_v1", `{"steps":[],"risks":[],"needs_advisor":false,"schema_version":"v1"}`, "/steps"},
		{"review_result_v1", `{"verdict":"maybe","feedback":"","schema_version":"v1"}`, "/verdict"},
		{"lead_directive_v1", `{"intent":"x","constraints":[],"schema_version":"v2"}`, "/schema_version"},
		{"terminal_report_v1", `{"status":"failed","next_action":"retry","trace_id":"t","correlation_id":"c","schema_version":"v1"}`, ""},
		{"payload_tool_invoke_v1", `{"call_id":"c1","tool":"repo.read","args":[]}`, "/args"},
	}
	for _, c := range cases {
		err := r.ValidateJSON(c.id, []byte(c.doc))
		// The decoded form of the same document gets the same verdict.
		if derr := r.ValidateDecoded(c.id, decode(t, c.doc)); fmt.Sprint(derr) != fmt.Sprint(err) {
			t.Errorf("%s %s: ValidateDecoded %v, ValidateJSON %v", c.id, c.doc, derr, err)
		}
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s %s: got %v, want ValidationError", c.id, c.doc, err)
			continue
		}
		if ve.Pointer != c.ptr {
			t.Errorf("%s: pointer %q, want %q (%v)", c.id, ve.Pointer, c.ptr, ve)
		}
		if !strings.Contains(ve.Error(), c.id) {
			t.Errorf("error %q does not name the schema", ve.Error())
		}
	}
}

func TestValidDocumentsPass(t *testing.T) {
	r := MustDefault()
	cases := map[string]string{
		"plan_v1":                 `{"steps":[{"id":"s1","description":"read auth.go","depends_on":[]}],"risks":["none"],"needs_advisor":false,"schema_version":"v1"}`,
		"terminal_report_v1":      `{"status":"denied","reason":"policy","error_class":"policy_denied","next_action":"ask a maintainer","trace_id":"t","correlation_id":"c","schema_version":"v1"}`,
		"completion_response_v1":  `{"text":"","tool_calls":[{"id":"1","name":"echo","args":{"text":"hi"}}],"finish_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":2},"model":"m","schema_version":"v1"}`,
		"skill_frontmatter_v1":    `{"name":"greet","description":"d","allowed-tools":"echo repo.read","metadata":{"triggers":["hi"]}}`,
		"payload_llm_response_v1": `{"role":"lead","error":{"code":"PROVIDER_ERROR","message":"x"}}`,
	}
	for id, doc := range cases {
		if err := r.ValidateJSON(id, []byte(doc)); err != nil {
			t.Errorf("%s: %v", id, err)
		}
		if err := r.ValidateDecoded(id, decode(t, doc)); err != nil {
			t.Errorf("%s decoded: %v", id, err)
		}
	}
}

func decode(t testing.TB, doc string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestValidateDecodedRefusesOtherTypes: a value holding anything a JSON
// decode cannot produce (a float64, a struct) is refused, never judged.
func TestValidateDecodedRefusesOtherTypes(t *testing.T) {
	r := MustDefault()
	for _, v := range []any{
		map[string]any{"call_id": "c1", "tool": "t", "args": map[string]any{"n": 1.5}},
		map[string]any{"call_id": "c1", "tool": "t", "args": map[string]any{"s": struct{}{}}},
		[]any{int64(1)},
	} {
		var ve *ValidationError
		if err := r.ValidateDecoded("payload_tool_invoke_v1", v); !errors.As(err, &ve) {
			t.Errorf("%#v: got %v, want a ValidationError", v, err)
		}
	}
	if err := r.ValidateDecoded("nope_v1", nil); !errors.Is(err, ErrUnknownSchema) {
		t.Errorf("unknown id: %v", err)
	}
}

// TestV1Frozen pins every *_v1.json. A v1 schema is a published contract:
// old session logs must keep validating. Change it by adding a _v2 file.
func TestV1Frozen(t *testing.T) {
	pinned := map[string]string{}
	b, err := os.ReadFile("testdata/v1.sha256")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		pinned[f[1]] = f[0]
	}
	r := MustDefault()
	for _, id := range r.IDs() {
		if !strings.HasSuffix(id, "_v1") {
			continue
		}
		src, _ := r.Source(id)
		sum := sha256.Sum256(src)
		got := hex.EncodeToString(sum[:])
		want, ok := pinned[id+".json"]
		if !ok {
			t.Errorf("%s.json is not pinned in testdata/v1.sha256: add `%s  %s.json`", id, got, id)
			continue
		}
		if got != want {
			t.Errorf("%s.json changed (sha256 %s, pinned %s): v1 is frozen, add a _v2 schema instead", id, got, want)
		}
		delete(pinned, id+".json")
	}
	for name := range pinned {
		t.Errorf("pinned schema %s was removed", name)
	}
}

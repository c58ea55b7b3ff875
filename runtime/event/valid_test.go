package event

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

var validSeeds = []string{
	`{}`, `[]`, `{"a":1}`, `{"a":[1,2,{"b":null}],"c":"x\"y\\u00e9\n"}`, `"s"`, `0`, `-0`, `-1.5e+10`, `1E5`,
	`true`, `false`, `null`, `{"a":"\u2028"}`, "{\"a\":\"\xff\"}", `[1,]`, `{"a":1,}`, `01`, `1.`, `.5`, `-`,
	`{"a" :1}`, `{ "a":1}`, `[1 ,2]`, `"\x"`, `"\u12"`, `"\u12G4"`, "\"a\tb\"", `{"a":tru}`, `nul`, `[`, `{"a"`,
	`{"a":1}}`, `[[[[[]]]]]`, strings.Repeat("[", 600) + strings.Repeat("]", 600),
}

// TestValidValue: validValue accepts compact JSON that encoding/json
// accepts, and never accepts what it rejects.
func TestValidValue(t *testing.T) {
	for _, s := range validSeeds {
		checkValidValue(t, []byte(s))
	}
	for _, v := range []any{map[string]any{"x": []any{1.5, "é", nil, true, map[string]any{}}}, "a\u0000b", []any{}, -12.25e-7} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if end := validValue(b, 0, 0); end != len(b) {
			t.Errorf("%s: validValue %d, want %d", b, end, len(b))
		}
	}
}

func checkValidValue(t *testing.T, b []byte) {
	t.Helper()
	end := validValue(b, 0, 0)
	if end == len(b) && !json.Valid(b) {
		t.Fatalf("%q: validValue accepts what encoding/json rejects", b)
	}
	if end >= 0 && end < len(b) && !json.Valid(b[:end]) {
		t.Fatalf("%q: validValue accepts a prefix %q that encoding/json rejects", b, b[:end])
	}
	// Whatever encoding/json accepts, compacted, takes the fast path
	// (unless it nests deeper than validValue goes).
	var c bytes.Buffer
	if json.Valid(b) && json.Compact(&c, b) == nil && strings.Count(c.String(), "[")+strings.Count(c.String(), "{") < maxValidDepth {
		if end := validValue(c.Bytes(), 0, 0); end != c.Len() {
			t.Fatalf("%q: validValue declines compact JSON that encoding/json accepts (%d)", c.Bytes(), end)
		}
	}
}

func FuzzValidValue(f *testing.F) {
	for _, s := range validSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkValidValue(t, b)
	})
}

// FuzzParseLineFast: the fast line parser gives what encoding/json gives,
// or an error where it gives one, for any bytes.
func FuzzParseLineFast(f *testing.F) {
	f.Add([]byte(`{"id":"x","session_id":"s","run_id":"r","seq":2,"ts":"t","type":"output.delta","actor":"é","payload":{"a":[1,{"b":"]"}],"c":-1.5e3,"d":true},"schema_version":"v1","parent_id":null,"prev_hash":"p","hash":"h"}`))
	f.Add([]byte(`{"id":"x","session_id":"s","run_id":"","seq":1,"ts":"t","type":"output.delta","actor":"a\"b","payload":{"text":"caf\u00e9 \"q\" }{"},"schema_version":"v1","parent_id":"p\\1","prev_hash":"","hash":"h"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		want, werr := ParseLine(line)
		got, gerr := ParseLineFast(line)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%q: errors differ: %v vs %v", line, werr, gerr)
		}
		a, _ := json.Marshal(want)
		b, _ := json.Marshal(got)
		if !bytes.Equal(a, b) {
			t.Fatalf("%q: fast parse differs:\n%s\n%s", line, a, b)
		}
	})
}

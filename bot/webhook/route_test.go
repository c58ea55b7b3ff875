package webhook

import (
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/internal/corpus"
)

func TestRouteAction(t *testing.T) {
	cases := []struct {
		body, want string
		ok         bool
	}{
		{`{"action":"created"}`, "created", true},
		{` {"zen":"x", "action" : "submitted" , "n":[1,2.5e-3,-0,{"action":"inner"}]} `, "submitted", true},
		{`{"issue":{"action":"nested"}}`, "", true},
		{`{}`, "", true},
		{`{"action":null}`, "", true},
		{`{"action":"a\"b\u00e9"}`, "a\"bé", true},
		{`{"\u0061ction":"escaped key"}`, "escaped key", true},
		{`{"action":"first","action":"last"}`, "last", true},
		{`{"action":"caf` + "\xff" + `"}`, "caf\uFFFD", true}, // accepted and replaced, as encoding/json does
		{`{"action":5}`, "", false},
		{`{"action":["x"]}`, "", false},
		{`[{"action":"x"}]`, "", false},
		{`"action"`, "", false},
		{`null`, "", false},
		{``, "", false},
		{`{"action":"created"`, "", false},
		{`{"action":"created"}}`, "", false},
		{`{"action":"created"} {}`, "", false},
		{`{"a":01}`, "", false},
		{`{"a":1.}`, "", false},
		{`{"a":-}`, "", false},
		{`{"a":1e}`, "", false},
		{`{"a":tru}`, "", false},
		{`{"a":"\x"}`, "", false},
		{`{"a":"\u12"}`, "", false},
		{"{\"a\":\"line\nbreak\"}", "", false},
		{`{"a":[1,]}`, "", false},
		{`{"a":1,}`, "", false},
		{`{a:1}`, "", false},
		{`{"a" 1}`, "", false},
		{strings.Repeat("[", 20000), "", false},
		{`{"a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, "", false},
	}
	for _, tc := range cases {
		got, err := routeAction([]byte(tc.body))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("routeAction(%.40q) = %q, %v; want %q ok=%v", tc.body, got, err, tc.want, tc.ok)
		}
		checkAgainstEncodingJSON(t, []byte(tc.body))
	}
}

func TestRouteActionCorpus(t *testing.T) {
	for _, ex := range corpus.Examples(t) {
		got, err := routeAction(ex.Body)
		if err != nil || got != ex.Action {
			t.Errorf("%s: routeAction = %q, %v; want %q", ex.Event, got, err, ex.Action)
		}
	}
}

// checkAgainstEncodingJSON: routeAction accepts exactly the JSON objects
// encoding/json accepts, and finds the same top-level "action".
func checkAgainstEncodingJSON(t *testing.T, body []byte) {
	t.Helper()
	got, err := routeAction(body)
	var m map[string]any
	stdErr := json.Unmarshal(body, &m)
	isObj := stdErr == nil && m != nil
	if isObj {
		if a, ok := m["action"]; ok && a != nil {
			if _, isStr := a.(string); !isStr {
				isObj = false // routeAction rejects it, as the handler's old struct decode did
			}
		}
	}
	if (err == nil) != isObj {
		t.Fatalf("routeAction(%q) err = %v; encoding/json err = %v", body, err, stdErr)
	}
	if err == nil {
		want, _ := m["action"].(string)
		if got != want {
			t.Fatalf("routeAction(%q) = %q, encoding/json finds %q", body, got, want)
		}
	}
}

func FuzzRouteAction(f *testing.F) {
	for _, s := range []string{`{"action":"created"}`, `{"a":[1,{"b":null}],"action":"x\u0041"}`, `{"n":-1.5E+3}`, `[]`, `{"\u0061ction":"k"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkAgainstEncodingJSON(t, body)
	})
}

// TestSpecial: the eight-byte check finds a quote, a backslash or a
// control character at any position, next to any other bytes.
func TestSpecial(t *testing.T) {
	isSpecial := func(c byte) bool { return c < 0x20 || c == '"' || c == '\\' }
	var w [8]byte
	for _, fill := range []byte{'a', 0x20, 0x21, 0x7f, 0x80, 0xff, '"' + 1, '\\' + 1} {
		for pos := range 8 {
			for v := range 256 {
				for i := range w {
					w[i] = fill
				}
				w[pos] = byte(v)
				want := isSpecial(byte(v)) || isSpecial(fill)
				got := special(binary.LittleEndian.Uint64(w[:]))
				if want && !got {
					t.Fatalf("special(%q) = false", w)
				}
				if !want && got {
					t.Errorf("special(%q) = true, want false", w)
				}
			}
		}
	}
}

// BenchmarkRouteAction measures the only decoding on the intake's hot
// path: finding the top-level "action" of an issue_comment body.
func BenchmarkRouteAction(b *testing.B) {
	body := exampleOf(b, "issue_comment", "created", 0)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := routeAction(body); err != nil {
			b.Fatal(err)
		}
	}
}

package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store/storetest"
)

type label string

type withTags struct {
	Name  string         `json:"name"`
	Count int            `json:"count,omitempty"`
	Extra map[string]any `json:"extra"`
}

type upper string

func (u upper) MarshalJSON() ([]byte, error) { return json.Marshal(strings.ToUpper(string(u))) }

// TestPayloadFormsStoreSameBytes: the Sealer converts plain Go payloads to
// JSON values without a marshal/decode round trip; whatever form a caller
// passes, the stored payload must be the bytes that appending the
// payload's JSON encoding stores (redacted, canonical). Each case is
// appended twice, once as the Go value and once as json.RawMessage.
func TestPayloadFormsStoreSameBytes(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, t.TempDir(), storetest.NewSealer(t))
	n := 7
	secret := "ghp_" + strings.Repeat("a1B2", 10)
	cases := []struct {
		name string
		x    any // stored as the "x" member of a run.completed payload
	}{
		{"string", "plain"},
		{"html and escapes", "<b>&amp;</b> \"q\" \\ \t \u2028 caf\u00e9 \U0001F600"},
		{"invalid utf8", "bad \xff\xfe byte"},
		{"ints", []int{1, -80, math.MaxInt64}},
		{"uints", []uint64{0, math.MaxUint64}},
		{"floats", []float64{1.5, 1e21, 1e-7, 3}},
		{"bools and nulls", []any{true, false, nil}},
		{"nested", map[string]any{"z": 1, "a": map[string]any{"k": []string{"v", "w"}}, "m": map[string]int{"b": 2, "a": 1}}},
		{"nil map", map[string]any(nil)},
		{"nil slice", []string(nil)},
		{"empty", map[string]any{}},
		{"pointer", &n},
		{"nil pointer", (*int)(nil)},
		{"named string", label("a label")},
		{"named string keys", map[label]label{"k": "v"}},
		{"int keys", map[int]string{2: "b", 1: "a"}},
		{"bytes", []byte("base64 me")},
		{"array", [2]int{1, 2}},
		{"struct", withTags{Name: "s", Extra: map[string]any{"k": 1}}},
		{"time", time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)},
		{"custom marshaler", upper("shout")},
		{"custom marshaler in map", map[string]upper{"k": "v"}},
		{"json.Number", json.Number("1.50")},
		{"raw message", json.RawMessage(`{"b":1,"a":[1, 2]}`)},
		{"secret value", "token " + secret},
		{"secret in key", map[string]any{secret: 1}},
		{"secret env name", map[string]any{"GITHUB_TOKEN": 12345, "API_KEY": []int{1}, "SAFE": "GITHUB_TOKEN=abcdef123"}},
		{"literal secret", []any{storetest.Literal, map[string]string{"k": "x" + storetest.Literal + "y"}}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			value := map[string]any{"x": c.x}
			raw, err := json.Marshal(value)
			if err != nil {
				t.Fatal(err)
			}
			got := appendPayload(t, ctx, s, fmt.Sprintf("value-%d", i), value)
			want := appendPayload(t, ctx, s, fmt.Sprintf("raw-%d", i), json.RawMessage(raw))
			if got != want {
				t.Fatalf("Go value stored\n%s\nits JSON encoding stored\n%s", got, want)
			}
			if strings.Contains(got, secret) || strings.Contains(got, storetest.Literal) {
				t.Fatalf("secret stored: %s", got)
			}
		})
	}
	t.Run("secret names are masked", func(t *testing.T) {
		got := appendPayload(t, ctx, s, "masked", map[string]any{"GITHUB_TOKEN": 12345})
		if want := `{"GITHUB_TOKEN":"` + redact.Mask + `"}`; got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	})
}

func appendPayload(t *testing.T, ctx context.Context, s *Store, sid string, payload any) string {
	t.Helper()
	evs, err := s.Append(ctx, sid, 0, event.Draft{RunID: "r", Type: event.RunCompleted, Actor: "runtime", Payload: payload})
	if err != nil {
		t.Fatalf("append %s: %v", sid, err)
	}
	return string(evs[0].Payload)
}

package exchange

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	want := decode(t, `{"model":"m","stream":null,"messages":[{"role":"user"}],"n":1}`)
	tests := []struct {
		got      string
		problems []string
	}{
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"n":1,"extra":true}`, nil},
		{`{"model":"m","stream":null,"messages":[{"role":"user"}],"n":1}`, nil},
		{`{"model":"other","messages":[{"role":"user"}],"n":1}`, []string{`body.model: got "other", want "m"`}},
		{`{"model":"m","stream":true,"messages":[{"role":"user"}],"n":1}`, []string{"body.stream: got true, want it absent"}},
		{`{"model":"m","messages":[{"role":"user"},{"role":"user"}],"n":1}`, []string{"body.messages: got"}},
		{`{"model":"m","messages":[{"role":"assistant"}]}`, []string{`body.messages[0].role: got "assistant"`, "body.n: missing"}},
		{`[]`, []string{"body: got [], want an object"}},
	}
	for _, tt := range tests {
		got := Match(want, decode(t, tt.got), "body")
		if len(got) != len(tt.problems) {
			t.Errorf("%s: problems %q, want %d like %q", tt.got, got, len(tt.problems), tt.problems)
			continue
		}
		for i := range got {
			if !strings.HasPrefix(got[i], tt.problems[i]) {
				t.Errorf("%s: problem %q, want prefix %q", tt.got, got[i], tt.problems[i])
			}
		}
	}
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

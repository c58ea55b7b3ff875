package args

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/provider"
)

func TestRawKeepsTextVerbatim(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"path":"a.go"}`, `{"path":"a.go"}`},
		{`{ "path" : "a.go" }`, `{ "path" : "a.go" }`},
		{`["a.go"]`, `["a.go"]`},
		{`{'path': 'a.go',}`, `{'path': 'a.go',}`},
		{"```json\n{\"path\":\"a.go\"}\n```", "```json\n{\"path\":\"a.go\"}\n```"},
		{"", `{}`},
		{"  \n", `{}`},
	}
	for _, tt := range tests {
		if got := string(Raw(tt.in)); got != tt.want {
			t.Errorf("Raw(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestObject(t *testing.T) {
	tests := []struct {
		in   string
		want map[string]any
	}{
		{`{"path":"a.go","n":2}`, map[string]any{"path": "a.go", "n": float64(2)}},
		{`["a.go"]`, map[string]any{"_raw": `["a.go"]`}},
		{`{'path': 'a.go'}`, map[string]any{"_raw": `{'path': 'a.go'}`}},
		{`null`, map[string]any{"_raw": `null`}},
		{``, map[string]any{}},
	}
	for _, tt := range tests {
		if got := Object(json.RawMessage(tt.in)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Object(%s) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestSchema(t *testing.T) {
	got, err := Schema(nil)
	if err != nil || got["type"] != "object" {
		t.Errorf("Schema(nil) = %v, %v", got, err)
	}
	for _, bad := range []string{`[]`, `"object"`, `null`, `{`} {
		if _, err := Schema(json.RawMessage(bad)); err == nil {
			t.Errorf("Schema(%s): no error", bad)
		}
	}
}

func TestCallID(t *testing.T) {
	history := []provider.Message{{Role: provider.RoleUser, Content: "fix auth.ts"}}
	salt := Salt(history)
	a := CallID("call_", salt, 0, "repo.read", []byte(`{"path":"a"}`))
	if !strings.HasPrefix(a, "call_") || len(a) != len("call_")+16 {
		t.Fatalf("id = %q", a)
	}
	if b := CallID("call_", Salt(history), 0, "repo.read", []byte(`{"path":"a"}`)); b != a {
		t.Errorf("not stable: %q, %q", a, b)
	}
	later := append(history, provider.Message{Role: provider.RoleAssistant, Content: "ok"})
	otherSession := []provider.Message{{Role: provider.RoleUser, Content: "fix login.ts"}}
	for _, other := range []string{
		CallID("call_", Salt(later), 0, "repo.read", []byte(`{"path":"a"}`)),        // a later turn
		CallID("call_", Salt(otherSession), 0, "repo.read", []byte(`{"path":"a"}`)), // another session
		CallID("call_", salt, 1, "repo.read", []byte(`{"path":"a"}`)),               // the next call
		CallID("call_", salt, 0, "repo.read", []byte(`{"path":"b"}`)),
	} {
		if other == a {
			t.Errorf("collision: %q", a)
		}
	}
}

func TestNames(t *testing.T) {
	long := strings.Repeat("x", 70)
	n := NewNames([]string{"repo.read", "repo_read", "lint.run", "ok-name_1", long, long + ".y"})
	tests := []struct{ orig, wire string }{
		{"repo.read", "repo_read"},
		{"repo_read", "repo_read_2"},
		{"lint.run", "lint_run"},
		{"ok-name_1", "ok-name_1"},
		{long, strings.Repeat("x", 64)},
		{long + ".y", strings.Repeat("x", 62) + "_2"},
	}
	for _, tt := range tests {
		if got := n.Wire(tt.orig); got != tt.wire {
			t.Errorf("Wire(%q) = %q, want %q", tt.orig, got, tt.wire)
		}
		if got := n.Original(tt.wire); got != tt.orig {
			t.Errorf("Original(%q) = %q, want %q", tt.wire, got, tt.orig)
		}
	}
	// Names nobody offered: sanitised on the way out, unchanged on the way
	// back (the kernel rejects or suggests).
	if got := n.Wire("mcp/fs.read"); got != "mcp_fs_read" {
		t.Errorf("Wire of an unoffered name = %q", got)
	}
	if got := n.Original("made.up"); got != "made.up" {
		t.Errorf("Original of an unknown name = %q", got)
	}
	if got := n.Wire(""); got != "_" {
		t.Errorf("Wire(\"\") = %q", got)
	}
}

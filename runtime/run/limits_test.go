package run

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/toolrule"
	"github.com/agentos/agentos/runtime/event"
)

func TestToolLimitsNarrow(t *testing.T) {
	skill := []string{"repo.read", "repo.patch", "test.run", "mcp.docs.*"}
	cases := []struct {
		name string
		l    ToolLimits
		in   []string
		want []string
	}{
		{"none", ToolLimits{}, skill, skill},
		{"allow intersects", ToolLimits{Allow: []string{"repo.read", "process.run", "mcp.docs.search"}}, skill, []string{"repo.read", "mcp.docs.search"}},
		{"allow pattern keeps the narrower", ToolLimits{Allow: []string{"mcp.*"}}, skill, []string{"mcp.docs.*"}},
		{"deny removes", ToolLimits{Deny: []string{"repo.patch", "mcp.docs.*"}}, skill, []string{"repo.read", "test.run"}},
		{"deny under a pattern leaves the pattern", ToolLimits{Deny: []string{"mcp.docs.delete"}}, skill, skill},
		{"unscoped takes allow", ToolLimits{Allow: []string{"repo.read"}, Deny: []string{"repo.read"}}, nil, []string{}},
		{"unscoped stays unscoped under deny", ToolLimits{Deny: []string{"repo.read"}}, nil, nil},
		{"allow nothing in common", ToolLimits{Allow: []string{"process.run"}}, skill, []string{}},
	}
	for _, c := range cases {
		if got := c.l.Narrow(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: Narrow = %v, want %v", c.name, got, c.want)
		}
	}
}

// forCall is what the kernel checks: the limits' verdict on the call's
// tool, even when a pattern entry would cover a denied tool.
func TestToolLimitsForCall(t *testing.T) {
	l := ToolLimits{Allow: []string{"repo.read", "mcp.docs.*"}, Deny: []string{"mcp.docs.delete"}}
	scope := []string{"repo.read", "repo.patch", "mcp.docs.*"}
	for name, want := range map[string]bool{
		"repo.read": true, "repo.patch": false, "mcp.docs.search": true, "mcp.docs.delete": false, "process.run": false,
	} {
		if got := kernel.InScope(l.forCall(scope, name), name); got != want {
			t.Errorf("%s: in scope = %v, want %v (scope %v)", name, got, want, l.forCall(scope, name))
		}
		if got := l.Permits(name) && kernel.InScope(scope, name); got != want {
			t.Errorf("%s: Permits = %v, want %v", name, got, want)
		}
	}
}

func TestToolLimitsForCallUnscoped(t *testing.T) {
	l := ToolLimits{Deny: []string{"process.run"}}
	if s := l.forCall(nil, "repo.read"); s != nil {
		t.Errorf("an unscoped call to a permitted tool got scope %v", s)
	}
	if s := l.forCall(nil, "process.run"); s == nil || kernel.InScope(s, "process.run") {
		t.Errorf("an unscoped call to a denied tool got scope %v", s)
	}
}

// The rules are recorded as written in skill.invoke's tool_limits; a run
// resumed under other rules (or none) is a NonDeterminismError, under the
// same rules it goes on.
func TestToolLimitsRecordRules(t *testing.T) {
	set := func(allow, deny []string) *toolrule.Set {
		s, err := toolrule.Parse(allow, deny)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	l := ToolLimits{Allow: []string{"process.run"}, Rules: set([]string{"Bash(go test:*)"}, []string{"Read(.env)"})}
	payload, err := json.Marshal(map[string]any{"skill": "default", "tool_limits": l.record()})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"skill":"default","tool_limits":{"allowed":["process.run"],"rules":{"allowed":["Bash(go test:*)"],"disallowed":["Read(.env)"]}}}`; string(payload) != want {
		t.Fatalf("recorded %s, want %s", payload, want)
	}
	ev := event.Event{Seq: 7, Payload: payload}
	if err := l.sameAsRecorded(ev); err != nil {
		t.Errorf("same rules: %v", err)
	}
	for name, other := range map[string]ToolLimits{
		"other rule": {Allow: []string{"process.run"}, Rules: set([]string{"Bash(go:*)"}, []string{"Read(.env)"})},
		"no deny":    {Allow: []string{"process.run"}, Rules: set([]string{"Bash(go test:*)"}, nil)},
		"no rules":   {Allow: []string{"process.run"}},
	} {
		var nd *NonDeterminismError
		if err := other.sameAsRecorded(ev); !errors.As(err, &nd) || !strings.Contains(nd.Got, "Bash(go test:*)") {
			t.Errorf("%s: %v, want a NonDeterminismError showing the recorded rules", name, err)
		}
	}
	if !(ToolLimits{Rules: set([]string{"Bash"}, nil)}).Empty() {
		t.Errorf("a bare name made the limits non-empty")
	}
	if (ToolLimits{Rules: set(nil, []string{"Bash(rm:*)"})}).Empty() {
		t.Errorf("a deny rule left the limits empty")
	}
}

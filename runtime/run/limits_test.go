package run

import (
	"reflect"
	"testing"

	"github.com/agentos/agentos/kernel"
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

package run

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
)

// TestSelectedSkillScopesExactly: a repository skill the Planner loads
// (allowed-tools: echo) replaces the default scope loaded at intake: the
// Worker is offered the skill's tools only, not the default tools
// besides; the default skill's invocation is closed as replaced; the
// mounted MCP servers the skill does not name are recorded as left out.
func TestSelectedSkillScopesExactly(t *testing.T) {
	plan := `{"steps":[{"id":"s1","description":"echo the notes"}],"risks":[],"needs_advisor":false,"skills":["release-notes"],"schema_version":"v1"}`
	f, cp := selectionFixture(t, plan)
	f.eng.DefaultScopeExtra = []string{"mcp.db.*"}
	out, err := f.mgr.Start(context.Background(), f.eng, StartRequest{SessionID: "scope", Prompt: "write the release notes for v2.3"})
	if err != nil || out.Status != "completed" {
		t.Fatalf("%+v %v", out, err)
	}
	evs := f.events(t, "scope")
	verify(t, evs)
	w := cp.role("worker")
	if len(w) == 0 {
		t.Fatal("no worker call")
	}
	var offered []string
	for _, s := range w[0].Tools {
		offered = append(offered, s.Name)
	}
	if !slices.Equal(offered, []string{"echo"}) {
		t.Errorf("the Worker was offered %v, want only the skill's [echo]", offered)
	}
	var defaultInvoke, skillInvoke, replaced string
	for _, e := range evs {
		switch {
		case e.Type == event.SkillInvoke && event.FieldString(e.Payload, "skill") == "default":
			defaultInvoke = string(e.Payload)
		case e.Type == event.SkillInvoke && event.FieldString(e.Payload, "skill") == "release-notes":
			skillInvoke = string(e.Payload)
		case e.Type == event.SkillComplete && event.FieldString(e.Payload, "skill") == "default":
			replaced = event.FieldString(e.Payload, "reason")
		}
	}
	if !strings.Contains(defaultInvoke, `"scope_extra":["mcp.db.*"]`) {
		t.Errorf("default skill.invoke %s, want the MCP servers in its scope", defaultInvoke)
	}
	if !strings.Contains(skillInvoke, `"replaces":"default"`) || !strings.Contains(skillInvoke, `"mcp_excluded":["mcp.db.*"]`) || strings.Contains(skillInvoke, "scope_extra") {
		t.Errorf("release-notes skill.invoke %s, want it to replace the default scope and record the MCP server it leaves out", skillInvoke)
	}
	if replaced != "replaced by skill release-notes" {
		t.Errorf("default skill.complete reason %q", replaced)
	}
}

// TestBuiltinSkillTakesMountedServers: a built-in skill selected by its
// triggers (greet) cannot name a repository's MCP servers, so their tools
// join its scope, as they join the default scope.
func TestBuiltinSkillTakesMountedServers(t *testing.T) {
	plan := `{"steps":[{"id":"s1","description":"greet"}],"risks":[],"needs_advisor":false,"schema_version":"v1"}`
	f, _ := selectionFixture(t, plan)
	f.eng.DefaultScopeExtra = []string{"mcp.db.*"}
	out, err := f.mgr.Start(context.Background(), f.eng, StartRequest{SessionID: "greet", Prompt: "greet the world"})
	if err != nil || out.Status != "completed" {
		t.Fatalf("%+v %v", out, err)
	}
	evs := f.events(t, "greet")
	verify(t, evs)
	for _, e := range evs {
		if e.Type == event.SkillInvoke {
			if p := string(e.Payload); event.FieldString(e.Payload, "skill") != "greet" || !strings.Contains(p, `"scope_extra":["mcp.db.*"]`) {
				t.Errorf("skill.invoke %s, want greet with the MCP servers in its scope", p)
			}
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider/scripted"
	"github.com/agentos/agentos/runtime/replay"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/skills"
	"github.com/agentos/agentos/schemas"
)

// TestDefaultToolScope: a request that selects no skill runs in the
// built-in default skill's scope (the fail-closed table): the log's
// skill.invoke names it and its tools, a tool outside it (process.run) is
// denied with TOOL_NOT_ALLOWED before anything runs, and a tool inside it
// runs. The run completes and its log verifies.
func TestDefaultToolScope(t *testing.T) {
	s, err := scripted.Parse(strings.NewReader(`
roles:
  lead: [{text: '{"intent":"list the files","constraints":[],"needs_advisor":false,"schema_version":"v1"}'}]
  planner: [{text: '{"steps":[{"id":"s1","description":"list"}],"risks":[],"needs_advisor":false,"schema_version":"v1"}'}]
  worker:
    - tool_calls: [{id: p1, name: process.run, args: {command: "ls -la"}}]
    - tool_calls: [{id: e1, name: echo, args: {text: "README"}}]
    - text: '{"output":"README","steps_completed":["s1"],"tool_calls_made":["echo:e1"],"schema_version":"v1"}'
  reviewer: [{text: '{"verdict":"pass","feedback":"ok","schema_version":"v1"}'}]
`))
	if err != nil {
		t.Fatal(err)
	}
	env, _ := newEnv(t, s, "")
	ctx := context.Background()
	out, err := env.mgr.Start(ctx, env.engine, agentrun.StartRequest{SessionID: "e2e", Prompt: "list the files of this repository", Cwd: env.ws.Root()})
	if err != nil || out.Status != "completed" {
		t.Fatalf("%+v %v", out, err)
	}
	evs, err := env.store.Read(ctx, "e2e", 1)
	if err != nil {
		t.Fatal(err)
	}
	if rep := replay.VerifyEvents(schemas.MustDefault(), evs); !rep.Valid {
		t.Fatalf("log does not verify: %v", rep.Problem)
	}
	var invoke struct {
		Skill        string   `json:"skill"`
		Scope        string   `json:"scope"`
		AllowedTools []string `json:"allowed_tools"`
	}
	var rejected map[string]any
	ran := map[string]bool{}
	for _, e := range evs {
		switch e.Type {
		case event.SkillInvoke:
			if err := json.Unmarshal(e.Payload, &invoke); err != nil {
				t.Fatal(err)
			}
		case event.ToolRejected:
			if err := json.Unmarshal(e.Payload, &rejected); err != nil {
				t.Fatal(err)
			}
		case event.ToolInvoke:
			ran[event.FieldString(e.Payload, "tool")] = true
		}
	}
	if invoke.Skill != skills.DefaultName || invoke.Scope != "default" || strings.Join(invoke.AllowedTools, ",") != strings.Join(skills.DefaultTools, ",") {
		t.Errorf("skill.invoke %+v, want the default skill with %v", invoke, skills.DefaultTools)
	}
	if rejected["tool"] != "process.run" || rejected["code"] != "TOOL_NOT_ALLOWED" {
		t.Errorf("tool.rejected %v, want process.run TOOL_NOT_ALLOWED", rejected)
	}
	if ran["process.run"] || !ran["echo"] {
		t.Errorf("tools run: %v", ran)
	}
}

// TestDefaultSkillFileMatchesDefaultTools: the documented default skill
// (skills/default/SKILL.md) and the code's fallback list are the same.
func TestDefaultSkillFileMatchesDefaultTools(t *testing.T) {
	env, _ := newEnv(t, loadScript(t, "greet.yaml"), "")
	sk, ok := env.engine.Skills.Get(skills.DefaultName)
	if !ok {
		t.Fatal("no built-in default skill")
	}
	if strings.Join(sk.AllowedTools, ",") != strings.Join(skills.DefaultTools, ",") || len(sk.Triggers) != 0 {
		t.Errorf("default skill allowed-tools %v triggers %v, want %v and no triggers", sk.AllowedTools, sk.Triggers, skills.DefaultTools)
	}
}

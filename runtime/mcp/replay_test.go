package mcp_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/mcp"
	"github.com/agentos/agentos/runtime/run"
)

// TestSeedFromLogStartsNoServer: a recorded run's tools come from its
// log; no server starts until a tool is called live.
func TestSeedFromLogStartsNoServer(t *testing.T) {
	dir := t.TempDir()
	bin := faultServer(t, dir)
	pol := policyWith(t, "")
	allow(pol, "mcp.faulty.echo")
	e := newEnv(t, dir, `{"mcpServers":{"faulty":{"command":"`+bin+`"}}}`, pol, mcp.Options{})
	payload, _ := json.Marshal(map[string]any{"role": "worker", "request": map[string]any{
		"messages": []any{},
		"tools": []map[string]any{
			{"name": "repo.read", "input_schema": map[string]any{"type": "object"}},
			{"name": "mcp.faulty.echo", "description": "Echo", "input_schema": map[string]any{"type": "object", "required": []string{"text"}, "properties": map[string]any{"text": map[string]any{"type": "string"}}}},
		}}})
	history := []event.Event{{Type: event.RunStarted, Payload: json.RawMessage(`{}`)}, {Type: event.LLMRequest, Payload: payload}}
	tools := &mcp.Tools{KernelTools: run.KernelTools{K: e.k}, M: e.m}
	if err := tools.Seed(history); err != nil {
		t.Fatal(err)
	}
	specs := tools.Specs(nil)
	if len(specs) != 1 || specs[0].Name != "mcp.faulty.echo" || string(specs[0].InputSchema) == "" {
		t.Fatalf("specs = %+v, want the recorded MCP tool", specs)
	}
	if e.m.Started("faulty") {
		t.Fatal("building the tool list from the log started the server")
	}
	// The recorded schema guards the arguments.
	r := &recorder{}
	if _, err := e.k.Dispatch(context.Background(), r, kernel.Call{ID: "c0", Name: "mcp.faulty.echo", Args: json.RawMessage(`{}`)}); err == nil {
		t.Fatal("missing required argument accepted")
	}
	if e.m.Started("faulty") {
		t.Fatal("a rejected call started the server")
	}
	out, err := e.k.Dispatch(context.Background(), r, kernel.Call{ID: "c1", Name: "mcp.faulty.echo", Args: json.RawMessage(`{"text":"live"}`)})
	if err != nil || !e.m.Started("faulty") {
		t.Fatalf("live call: %s %v (started %v)", out.Result, err, e.m.Started("faulty"))
	}
	if d := e.m.StartDuration("faulty"); d <= 0 {
		t.Fatalf("start duration %s", d)
	}
}

// TestSpecsStartOnlyServersInScope: a skill whose allowed-tools name no
// tool of a server does not start it; one that names a tool does.
func TestSpecsStartOnlyServersInScope(t *testing.T) {
	dir := t.TempDir()
	bin := faultServer(t, dir)
	e := newEnv(t, dir, `{"mcpServers":{"faulty":{"command":"`+bin+`"}}}`, policyWith(t, ""), mcp.Options{})
	tools := &mcp.Tools{KernelTools: run.KernelTools{K: e.k}, M: e.m}
	if specs := tools.Specs([]string{"repo.read"}); len(specs) != 0 || e.m.Started("faulty") {
		t.Fatalf("specs %v, started %v: want nothing started", specs, e.m.Started("faulty"))
	}
	specs := tools.Specs([]string{"mcp.faulty.echo"})
	if len(specs) != 1 || specs[0].Name != "mcp.faulty.echo" || !e.m.Started("faulty") {
		t.Fatalf("specs %v, started %v: want the server started and its echo offered", specs, e.m.Started("faulty"))
	}
}

package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/runtime/mcp"
)

// TestDeclaredOutputSchema: an MCP tool's result is checked against the
// output schema the server declared for it, not only against the shape
// of every MCP result: structured content that matches (its local $refs
// resolved inside the declared schema) passes; content of the wrong type,
// breaking a referenced definition, or missing is SCHEMA_VIOLATION — the
// model never gets a result that contradicts the tool's own contract.
// Edge results (no content blocks, unicode, a large text) stay valid.
func TestDeclaredOutputSchema(t *testing.T) {
	dir := t.TempDir()
	bin := faultServer(t, dir)
	pol := policyWith(t, "")
	allow(pol, "mcp.faulty.shape", "mcp.faulty.echo", "mcp.faulty.huge")
	pol.Execution.EnvAllow = []string{"FAULT_TOKEN"}
	red := redact.New(nil)
	e := newEnv(t, dir, faultConfig(bin), pol, mcp.Options{Redact: red.String, MaxMessage: 3 << 20})
	ctx := context.Background()
	if notes := e.m.Register(ctx, e.k, nil); len(notes) > 0 {
		t.Fatalf("notes: %v", notes)
	}
	call := func(tool, args string) (json.RawMessage, error) {
		out, err := e.k.Dispatch(ctx, &recorder{}, kernel.Call{ID: "c", Name: tool, Args: json.RawMessage(args)})
		return out.Result, err
	}
	for _, c := range []struct {
		tool, args string
		violation  bool
	}{
		{"mcp.faulty.shape", `{"mode":"ok"}`, false},
		{"mcp.faulty.shape", `{"mode":"no-content"}`, false},
		{"mcp.faulty.shape", `{"mode":"wrong-type"}`, true},
		{"mcp.faulty.shape", `{"mode":"bad-ref"}`, true},
		{"mcp.faulty.shape", `{"mode":"missing"}`, true},
		{"mcp.faulty.echo", `{"text":""}`, false},
		{"mcp.faulty.echo", `{"text":"日本語 ✓ \u0000"}`, false},
		{"mcp.faulty.huge", `{"bytes":200000}`, false},
	} {
		raw, err := call(c.tool, c.args)
		var ke *kernel.Error
		switch {
		case c.violation:
			if !errors.As(err, &ke) || ke.Code != kernel.CodeSchemaViolation || !strings.Contains(ke.Message, "output schema") {
				t.Errorf("%s %s: %v (%s), want SCHEMA_VIOLATION of the declared output schema", c.tool, c.args, err, raw)
			}
		case err != nil && (!errors.As(err, &ke) || ke.Code == kernel.CodeSchemaViolation):
			t.Errorf("%s %s: %v", c.tool, c.args, err)
		case err == nil && !json.Valid(raw):
			t.Errorf("%s %s: invalid JSON result", c.tool, c.args)
		}
	}
}

package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/runtime/hooks"
	"github.com/agentos/agentos/runtime/mcp"
	"github.com/agentos/agentos/runtime/setup"
)

// TestPreToolUseHookGuardsMCPTools: a repository's PreToolUse hook whose
// matcher names an MCP tool (the mcp.<server>.<tool> form) blocks it
// before the server sees the call; other tools of the server pass.
func TestPreToolUseHookGuardsMCPTools(t *testing.T) {
	dir := t.TempDir()
	bin := faultServer(t, dir)
	settings := `{"hooks":{"PreToolUse":[{"matcher":"mcp\\.faulty\\.crash","hooks":[{"type":"command","command":"echo 'crashing is not allowed' >&2; exit 2"}]}]}}`
	if err := os.MkdirAll(filepath.Join(dir, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".claude", "settings.json"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	pol := policyWith(t, "")
	allow(pol, "mcp.faulty.crash", "mcp.faulty.echo")
	e := newEnv(t, dir, `{"mcpServers":{"faulty":{"command":"`+bin+`"}}}`, pol, mcp.Options{})
	reg := hooks.NewRegistry()
	if _, err := reg.LoadSettings(e.ws.FS(), setup.HookRunner{WS: e.ws}, ".claude/settings.json"); err != nil {
		t.Fatal(err)
	}
	e.k.Hooks = hooks.ForKernel{R: reg, Cwd: e.ws.Root()}
	ctx := context.Background()
	if notes := e.m.Register(ctx, e.k, nil); len(notes) > 0 {
		t.Fatal(notes)
	}
	r := &recorder{}
	_, err := e.k.Dispatch(ctx, r, kernel.Call{ID: "c1", Name: "mcp.faulty.crash", Args: json.RawMessage(`{}`)})
	var ke *kernel.Error
	if !errors.As(err, &ke) || ke.Code != kernel.CodeGateDenied || !strings.Contains(ke.Message, "crashing is not allowed") {
		t.Fatalf("err = %v, want GATE_DENIED from the hook", err)
	}
	if got := strings.Join(r.types(), ","); got != "hook.fired,tool.rejected" {
		t.Fatalf("events %s", got)
	}
	if _, err := e.k.Dispatch(ctx, r, kernel.Call{ID: "c2", Name: "mcp.faulty.echo", Args: json.RawMessage(`{"text":"fine"}`)}); err != nil {
		t.Fatalf("echo: %v", err)
	}
}

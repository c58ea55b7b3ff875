package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolCommandsHonourClaudePermissions: agentos tool call and agentos
// mcp serve build their kernel as a run does (setup.Kernel), so the
// repository's .claude/settings.json permissions apply to their calls as
// to a model's: a deny rule refuses, other paths are read.
func TestToolCommandsHonourClaudePermissions(t *testing.T) {
	ws := t.TempDir()
	files := map[string]string{
		"notes.txt":             "private notes\n",
		"hello.txt":             "hello\n",
		".claude/settings.json": `{"permissions":{"deny":["Read(./notes.txt)"]}}`,
	}
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("tool call", func(t *testing.T) {
		out, _, code := runCLI(t, "tool", "call", "repo.read", "--args", `{"path":"notes.txt"}`, "--workspace", ws)
		if code != exitBlocked || !strings.Contains(out, "TOOL_NOT_ALLOWED") || !strings.Contains(out, "permissions.deny") || strings.Contains(out, "private notes") {
			t.Errorf("denied read: exit %d\n%s", code, out)
		}
		out, _, code = runCLI(t, "tool", "call", "repo.read", "--args", `{"path":"hello.txt"}`, "--workspace", ws)
		if code != 0 || !strings.Contains(out, "hello") {
			t.Errorf("allowed read: exit %d\n%s", code, out)
		}
	})

	t.Run("mcp serve", func(t *testing.T) {
		events := filepath.Join(t.TempDir(), "events.jsonl")
		ctx := context.Background()
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cliCommand("mcp", "serve", "--workspace", ws, "--events", events)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "repo.read", Arguments: map[string]any{"path": "notes.txt"}})
		if err != nil {
			t.Fatal(err)
		}
		text := ""
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				text += tc.Text
			}
		}
		if !res.IsError || !strings.Contains(text, "TOOL_NOT_ALLOWED") || strings.Contains(text, "private notes") {
			t.Errorf("denied read over MCP: error %v\n%s", res.IsError, text)
		}
		res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "repo.read", Arguments: map[string]any{"path": "hello.txt"}})
		if err != nil || res.IsError {
			t.Errorf("allowed read over MCP: %+v %v", res, err)
		}
	})
}

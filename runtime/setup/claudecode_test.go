package setup_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/runtime/setup"
)

// memRecorder keeps what the kernel records.
type memRecorder struct {
	mu     sync.Mutex
	events []string
}

func (r *memRecorder) Record(ctx context.Context, typ, actor string, payload any, parent string) (string, error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, typ+" "+string(b))
	return typ, nil
}

func fakeMCPTool(name string) kernel.ToolDef {
	return kernel.ToolDef{Name: name, Description: "a tool named as the MCP client names mounted tools", Category: kernel.CategoryRead,
		Input:  json.RawMessage(`{"type":"object"}`),
		Output: json.RawMessage(`{"type":"object"}`),
		Handler: func(ctx context.Context, env kernel.Env, args json.RawMessage) (any, error) {
			return map[string]any{"ok": true}, nil
		}}
}

// TestClaudeCodeNamesReachMCPShapedTools: a repository's Claude Code hook
// matcher mcp__memory__create_.* and a skill's allowed-tools
// mcp__memory__read_graph apply to tools registered in the kernel as
// mcp.memory.<tool>, the names the MCP client gives mounted tools.
func TestClaudeCodeNamesReachMCPShapedTools(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		".claude/settings.json": `{"hooks":{"PreToolUse":[
			{"matcher":"mcp__memory__create_.*","hooks":[{"type":"command","command":"echo 'memory is read-only here' >&2; exit 2"}]},
			{"matcher":"WebFetch","hooks":[{"type":"command","command":"exit 2"}]}]}}`,
		".claude/skills/notes/SKILL.md": "---\nname: notes\ndescription: Reads the knowledge graph of the memory server.\nallowed-tools: mcp__memory__read_graph\n---\nRead the graph.\n",
	}
	for name, content := range files {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env, err := setup.Build(context.Background(), options(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	notes := strings.Join(env.Notes, "\n")
	if !strings.Contains(notes, `matcher "WebFetch" matches no tool agentos has`) {
		t.Errorf("no load-time note for the WebFetch matcher:\n%s", notes)
	}
	for _, n := range []string{"mcp.memory.create_entities", "mcp.memory.read_graph", "mcp.other.read_graph"} {
		if err := env.Kernel.Register(fakeMCPTool(n)); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for _, d := range env.Kernel.Tools() {
		names = append(names, d.Name)
	}
	if got := env.Hooks.MatcherNotes(names, nil); len(got) != 1 || !strings.Contains(got[0], "WebFetch") {
		t.Errorf("with the MCP tools mounted, notes %v", got)
	}
	skill, ok := env.Engine.Skills.Get("notes")
	if !ok || strings.Join(skill.AllowedTools, ",") != "mcp.memory.read_graph" {
		t.Fatalf("skill %+v", skill)
	}

	ctx := context.Background()
	code := func(tool string, scope []string) string {
		t.Helper()
		rec := &memRecorder{}
		_, err := env.Kernel.Dispatch(ctx, rec, kernel.Call{ID: "c-" + tool, Name: tool, Args: json.RawMessage(`{}`), Caller: "worker", Scope: scope})
		var ke *kernel.Error
		if errors.As(err, &ke) {
			return string(ke.Code) + ": " + ke.Message
		}
		if err != nil {
			t.Fatal(err)
		}
		return "ok"
	}
	if got := code("mcp.memory.create_entities", nil); !strings.HasPrefix(got, string(kernel.CodeGateDenied)) || !strings.Contains(got, "memory is read-only here") {
		t.Errorf("create_entities: %s, want the hook's deny", got)
	}
	if got := code("mcp.memory.read_graph", skill.AllowedTools); strings.HasPrefix(got, string(kernel.CodeToolNotAllowed)) || strings.HasPrefix(got, string(kernel.CodeGateDenied)) {
		t.Errorf("read_graph within the skill's scope: %s", got)
	}
	if got := code("mcp.other.read_graph", skill.AllowedTools); !strings.HasPrefix(got, string(kernel.CodeToolNotAllowed)) {
		t.Errorf("another server's tool outside the skill's scope: %s", got)
	}
}

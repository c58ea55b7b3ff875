package kernel_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/tools"
)

// TestWriteScopeFailsClosed: a caller with a write scope (a workflow
// persona's role-permissions) may change only the paths in it; the kernel
// refuses anything else before tool.invoke, whatever the prompt said.
func TestWriteScopeFailsClosed(t *testing.T) {
	authHash := tools.Sha256Hex([]byte("package auth\n\nfunc Check() bool { return false }\n"))
	patch := `{"unifiedDiff":"--- a/auth.go\n+++ b/auth.go\n@@ -3 +3 @@\n-func Check() bool { return false }\n+func Check() bool { return true }\n"}`
	cases := []struct {
		name, tool, args string
		scope            []string
		want             kernel.Code // "" executes
	}{
		{"write in scope", "repo.write", `{"path":"docs/a.md","content":"x","expected_hash":""}`, []string{"docs/**"}, ""},
		{"write outside scope", "repo.write", `{"path":"auth.go","content":"x","expected_hash":"` + authHash + `"}`, []string{"docs/**"}, kernel.CodeToolNotAllowed},
		{"patch outside scope", "repo.patch", patch, []string{"docs/**", "*.md"}, kernel.CodeToolNotAllowed},
		{"patch in scope by glob", "repo.patch", patch, []string{"*.go"}, ""},
		{"empty scope writes nothing", "repo.write", `{"path":"docs/a.md","content":"x","expected_hash":""}`, []string{}, kernel.CodeToolNotAllowed},
		{"climbing pattern does not match", "repo.write", `{"path":"docs/../auth.go","content":"x","expected_hash":"` + authHash + `"}`, []string{"docs/**"}, kernel.CodeToolNotAllowed},
		{"reads are not write-scoped", "repo.read", `{"path":"auth.go"}`, []string{}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t, openPolicy, nil)
			_, err := e.k.Dispatch(context.Background(), e.j, kernel.Call{ID: "c1", Name: c.tool, Args: json.RawMessage(c.args), Caller: "docs-writer", WritePaths: c.scope})
			if got := code(err); got != c.want {
				t.Fatalf("code %q (%v), want %q", got, err, c.want)
			}
			types := e.types(t)
			if c.want != "" {
				if contains(types, "tool.invoke") || types[len(types)-1] != "tool.rejected" {
					t.Fatalf("events %v: a refused write must end in tool.rejected without tool.invoke", types)
				}
				b, _ := os.ReadFile(filepath.Join(e.dir, "auth.go"))
				if !strings.Contains(string(b), "return false") {
					t.Fatal("auth.go changed")
				}
				if _, err := os.Stat(filepath.Join(e.dir, "docs")); err == nil && c.tool == "repo.write" && strings.Contains(c.args, `"docs/a.md"`) {
					t.Fatal("docs/a.md was written")
				}
			} else if !contains(types, "tool.result") {
				t.Fatalf("events %v: the call should have executed", types)
			}
		})
	}
}

func TestInWriteScope(t *testing.T) {
	cases := []struct {
		scope []string
		p     string
		want  bool
	}{
		{[]string{"docs/**"}, "docs/a/b.md", true},
		{[]string{"docs/**"}, "docs", false},
		{[]string{"docs/**"}, "docsx/a.md", false},
		{[]string{"*.md"}, "README.md", true},
		{[]string{"*.md"}, "docs/README.md", false},
		{[]string{"**"}, "any/thing", true},
		{[]string{"**"}, "../escape", false},
		{nil, "a", false},
	}
	for _, c := range cases {
		if got := kernel.InWriteScope(c.scope, c.p); got != c.want {
			t.Errorf("InWriteScope(%v, %q) = %v, want %v", c.scope, c.p, got, c.want)
		}
	}
}

package tools

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/workspace"
)

// dataDirTree is a repository whose agentos data directory (.agentos, the
// CLI's default) lies inside it, with event logs that mention the same
// words as the code, and a .git directory.
func dataDirTree(t *testing.T) (*tools, string) {
	t.Helper()
	dir := t.TempDir()
	for p, c := range map[string]string{
		"auth.go":                           "package auth // CheckToken\n",
		".agentos/agentos.db":               "CheckToken in the store",
		".agentos/sessions/s1/events.jsonl": `{"type":"llm.request","payload":"CheckToken"}` + "\n",
		".git/config":                       "[core] CheckToken",
		".agentosx/kept.txt":                "CheckToken next door",
	} {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(".agentos/sessions", filepath.Join(dir, "logs")); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(dir, workspace.Options{Exclude: []string{filepath.Join(dir, ".agentos")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return &tools{ws: ws}, dir
}

func jailViolation(err error) bool {
	var ke *kernel.Error
	return errors.As(err, &ke) && ke.Code == kernel.CodeJailViolation
}

// TestRepositoryToolsDoNotSeeTheDataDirectory: repo.search never reports
// the data directory's or .git's files, and repo.read, repo.write and
// repo.patch refuse them (in Assess, before any approval is asked, and in
// the handler) with JAIL_VIOLATION; nothing in them changes.
func TestRepositoryToolsDoNotSeeTheDataDirectory(t *testing.T) {
	tl, dir := dataDirTree(t)
	m, err := call(t, tl.search(), `{"query":"CheckToken"}`)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, x := range m["matches"].([]any) {
		paths = append(paths, x.(map[string]any)["path"].(string))
	}
	if got := strings.Join(paths, " "); got != ".agentosx/kept.txt auth.go" {
		t.Errorf("search found %q, want only the repository's files", got)
	}
	if n := m["files_scanned"].(float64); n != 2 {
		t.Errorf("files_scanned %v, want 2", n)
	}

	diff := func(p string) string {
		b, _ := json.Marshal(map[string]string{"unifiedDiff": "--- /dev/null\n+++ b/" + p + "\n@@ -0,0 +1 @@\n+planted\n"})
		return string(b)
	}
	modify := func(p string) string {
		b, _ := json.Marshal(map[string]string{"unifiedDiff": "--- a/" + p + "\n+++ b/" + p + "\n@@ -1 +1 @@\n-CheckToken in the store\n+edited\n"})
		return string(b)
	}
	rename, _ := json.Marshal(map[string]string{"unifiedDiff": "diff --git a/auth.go b/.agentos/auth.go\nrename from auth.go\nrename to .agentos/auth.go\n"})
	cases := []struct {
		name string
		def  kernel.ToolDef
		args string
	}{
		{"read a log", tl.read(), `{"path":".agentos/sessions/s1/events.jsonl"}`},
		{"read the data directory", tl.read(), `{"path":".agentos"}`},
		{"read through a dot-dot path", tl.read(), `{"path":"src/../.agentos/agentos.db"}`},
		{"read through a symlink", tl.read(), `{"path":"logs/s1/events.jsonl"}`},
		{"read .git", tl.read(), `{"path":".git/config"}`},
		{"write into the data directory", tl.write(), `{"path":".agentos/sessions/s1/events.jsonl","content":"forged\n","expected_hash":""}`},
		{"write a new file there", tl.write(), `{"path":".agentos/new.txt","content":"x","expected_hash":""}`},
		{"write through a symlink", tl.write(), `{"path":"logs/s2/events.jsonl","content":"x","expected_hash":""}`},
		{"write into .git", tl.write(), `{"path":".git/hooks/pre-commit","content":"#!/bin/sh\n","expected_hash":""}`},
		{"patch creates a file there", tl.patchTool(), diff(".agentos/planted.txt")},
		{"patch modifies the store", tl.patchTool(), modify(".agentos/agentos.db")},
		{"patch renames into it", tl.patchTool(), string(rename)},
		{"patch creates in .git", tl.patchTool(), diff(".git/hooks/post-checkout")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.def.Assess != nil {
				if _, err := c.def.Assess(context.Background(), env, json.RawMessage(c.args)); !jailViolation(err) {
					t.Errorf("Assess: %v, want JAIL_VIOLATION", err)
				}
			}
			if _, err := call(t, c.def, c.args); !jailViolation(err) {
				t.Errorf("handler: %v, want JAIL_VIOLATION", err)
			}
		})
	}
	for p, want := range map[string]string{".agentos/sessions/s1/events.jsonl": `{"type":"llm.request","payload":"CheckToken"}` + "\n", ".agentos/agentos.db": "CheckToken in the store", "auth.go": "package auth // CheckToken\n"} {
		if b, _ := os.ReadFile(filepath.Join(dir, p)); string(b) != want {
			t.Errorf("%s changed: %q", p, b)
		}
	}
	for _, p := range []string{".agentos/new.txt", ".agentos/planted.txt", ".agentos/auth.go", ".agentos/sessions/s2", ".git/hooks"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s was created", p)
		}
	}
	// The repository's own files stay reachable.
	if m, err := call(t, tl.read(), `{"path":".agentosx/kept.txt"}`); err != nil || m["content"] != "CheckToken next door" {
		t.Errorf("read next to the data directory: %v %v", m, err)
	}
}

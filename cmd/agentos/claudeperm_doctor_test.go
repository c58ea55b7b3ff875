package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel/workspace"
)

// TestDoctorReportsClaudePermissions: agentos doctor's workspace checks
// say which of testdata/claude-project's permission rules the kernel
// enforces and warn about each setting agentos does not do as written; a
// permissions block it cannot read fails.
func TestDoctorReportsClaudePermissions(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "testdata", "claude-project"))); err != nil {
		t.Fatal(err)
	}
	check := func() []doctorCheck {
		t.Helper()
		ws, err := workspace.Open(dir, workspace.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		return permissionChecks(ws, nil)
	}
	got := check()
	if len(got) != 5 || got[0].Status != checkOK || !strings.Contains(got[0].Detail, "4 deny and 1 ask rule(s) enforced") {
		t.Fatalf("checks %+v", got)
	}
	var warned []string
	for _, c := range got[1:] {
		if c.Status != checkWarn {
			t.Errorf("check %+v, want a warning", c)
		}
		warned = append(warned, c.Detail)
	}
	for _, want := range []string{`permissions.deny "WebFetch(domain:example.com)"`, "permissions.allow", "permissions.additionalDirectories", `settings.local.json permissions.defaultMode "bypassPermissions"`} {
		if !strings.Contains(strings.Join(warned, "\n"), want) {
			t.Errorf("no warning about %s in %v", want, warned)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".claude", "settings.local.json"), []byte(`{"permissions":{"ask":"Bash"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := check(); len(got) != 1 || got[0].Status != checkFail {
		t.Errorf("unreadable permissions: %+v, want one failed check", got)
	}
}

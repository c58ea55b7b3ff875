package mcp_test

import (
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/mcp"
	"github.com/agentos/agentos/runtime/run"
)

// TestFailedServerIsDescribed: a server that dies at start is handed to
// Tools.Failed with its command, the end of its stderr (redacted) and a
// hint, so that the run's log records it (mcp.server_failed); the other
// servers are still mounted.
func TestFailedServerIsDescribed(t *testing.T) {
	dir := t.TempDir()
	pol := policyWith(t, "")
	red := func(s string) string { return strings.ReplaceAll(s, "s3cr3t-value", "[REDACTED]") }
	e := newEnv(t, dir, `{"mcpServers":{"broken":{"command":"sh","args":["-c","echo 'cannot start: module not found (key s3cr3t-value)' >&2; exit 3"]}}}`, pol, mcp.Options{Redact: red})
	var failed []mcp.Failure
	tools := &mcp.Tools{KernelTools: run.KernelTools{K: e.k}, M: e.m, Failed: func(f mcp.Failure) { failed = append(failed, f) }}
	for _, s := range tools.Specs(nil) {
		if strings.HasPrefix(s.Name, "mcp.broken.") {
			t.Errorf("a tool of the failed server is offered: %s", s.Name)
		}
	}
	if len(failed) != 1 {
		t.Fatalf("failures = %+v, want one", failed)
	}
	f := failed[0]
	if f.Server != "broken" || f.Transport != mcp.TypeStdio || !strings.HasPrefix(f.Command, "sh -c ") || f.Error == "" {
		t.Errorf("failure = %+v", f)
	}
	if !strings.Contains(f.StderrTail, "cannot start: module not found") || strings.Contains(f.StderrTail, "s3cr3t-value") || !strings.Contains(f.StderrTail, "[REDACTED]") {
		t.Errorf("stderr tail = %q, want the server's message, redacted", f.StderrTail)
	}
	if !strings.Contains(f.Hint, "by hand") {
		t.Errorf("hint = %q", f.Hint)
	}
	// Tried once: the next turn does not start it again.
	tools.Specs(nil)
	if len(failed) != 1 {
		t.Errorf("the failed server was started again: %d failures", len(failed))
	}
}

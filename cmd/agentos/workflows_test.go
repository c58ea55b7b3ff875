package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeRepoFile(t *testing.T, repo, rel, content string) {
	t.Helper()
	p := filepath.Join(repo, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWorkflowsValidateBuiltin(t *testing.T) {
	out, errOut, code := runCLI(t, "workflows", "validate")
	if code != exitOK || !strings.HasPrefix(out, "ok: 3 cycles") || errOut != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, _, code = runCLI(t, "workflows", "explain", "review")
	for _, want := range []string{"cycle review", "fan-out: security, correctness, tests → fan-in", "advance when:", "done when:"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Fatalf("explain: exit %d, missing %q in:\n%s", code, want, out)
		}
	}
}

func TestWorkflowsValidateRepoProblems(t *testing.T) {
	repo := t.TempDir()
	writeRepoFile(t, repo, ".agent/workflows/phases/scan.md", "---\nid: scan\nadvance_signal: review_agregate.p0_unresolved == 0\nschema_version: v1\n---\n")
	writeRepoFile(t, repo, ".agent/workflows/cycles/audit.md", "---\nid: audit\nphases: [scan, ghost]\nentry_phase: scan\nschema_version: v1\n---\n")
	out, errOut, code := runCLI(t, "workflows", "validate", "--repo", repo)
	if code != exitFailure {
		t.Fatalf("exit %d, want 1; stdout %q stderr %q", code, out, errOut)
	}
	for _, want := range []string{
		".agent/workflows/phases/scan.md:3: /advance_signal: ",
		".agent/workflows/cycles/audit.md:3: /phases/1: phase \"ghost\" is not defined",
		".agent/workflows/cycles/audit.md: /exit_conditions/done: the cycle has no exit",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "nothing loaded") {
		t.Errorf("stderr %q", errOut)
	}
	out, _, code = runCLI(t, "workflows", "list", "--repo", repo, "--json")
	var got struct {
		OK       bool `json:"ok"`
		Problems []struct{ File, Field, Message string }
	}
	if code != exitFailure || json.Unmarshal([]byte(out), &got) != nil || got.OK || len(got.Problems) < 3 {
		t.Fatalf("list --json: exit %d, %s", code, out)
	}
}

func TestWorkflowsRepoOverrideIsReported(t *testing.T) {
	repo := t.TempDir()
	writeRepoFile(t, repo, ".agent/workflows/phases/review-gate.md", "---\nid: review-gate\nadvance_signal: review_aggregate.p0_unresolved == 0\nschema_version: v1\n---\nstricter\n")
	out, _, code := runCLI(t, "workflows", "list", "--repo", repo)
	if code != exitOK || !strings.Contains(out, "override: phase review-gate: .agent/workflows/phases/review-gate.md replaces builtin:phases/review-gate.md") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if _, errOut, code := runCLI(t, "workflows", "explain", "nope"); code != exitFailure || !strings.Contains(errOut, "unknown workflow id") {
		t.Fatalf("explain nope: exit %d, %q", code, errOut)
	}
	if _, _, code := runCLI(t, "workflows", "frobnicate"); code != exitUsage {
		t.Fatalf("unknown subcommand: exit %d", code)
	}
}

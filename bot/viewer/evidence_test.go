package viewer

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
)

// evs numbers events from 1; each is a type and its payload.
func evs(t *testing.T, list ...any) []event.Event {
	t.Helper()
	var out []event.Event
	for i := 0; i < len(list); i += 2 {
		b, err := json.Marshal(list[i+1])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, event.Event{Seq: int64(len(out) + 1), Type: list[i].(string), Actor: "worker", Payload: b, TS: "2026-01-01T00:00:00.000Z"})
	}
	return out
}

type obj = map[string]any

func invoke(id, tool string, args obj) obj { return obj{"call_id": id, "tool": tool, "args": args} }
func okResult(id, tool string, res obj) obj {
	return obj{"call_id": id, "tool": tool, "ok": true, "result": res}
}
func failure(id, tool, code string, details obj) obj {
	e := obj{"code": code, "message": code + " happened"}
	if details != nil {
		e["details"] = details
	}
	return obj{"call_id": id, "tool": tool, "ok": false, "error": e}
}

func TestEvidenceCommands(t *testing.T) {
	log := evs(t,
		event.ToolInvoke, invoke("c1", "test.run", obj{}),
		event.ToolResult, okResult("c1", "test.run", obj{"command": "go test ./...", "exit_code": 1, "passed": false}),
		event.ToolInvoke, invoke("c2", "lint.run", obj{"command": "go vet ./..."}),
		event.ToolResult, failure("c2", "lint.run", "TIMEOUT", obj{"command": "go vet ./...", "exit_code": -1, "timed_out": true}),
		event.ToolInvoke, invoke("c3", "process.run", obj{"command": "make"}),
		event.ToolResult, failure("c3", "process.run", "SANDBOX_UNAVAILABLE", nil),
		event.ToolRejected, obj{"call_id": "c4", "tool": "process.run", "args": obj{"command": "curl x"}, "error": obj{"code": "POLICY_DENIED"}},
		event.ToolInvoke, invoke("c5", "test.run", obj{}),
		event.ToolResult, okResult("c5", "test.run", obj{"command": "go test ./...", "exit_code": 0}),
		event.ToolInvoke, invoke("c6", "test.run", obj{}),
	)
	got := buildEvidence(log, replay.Snapshot{}).Commands
	want := []CommandRun{
		{Seq: 2, CallID: "c1", Tool: "test.run", Command: "go test ./...", Exit: "1", Outcome: "failed"},
		{Seq: 4, CallID: "c2", Tool: "lint.run", Command: "go vet ./...", Exit: "-1", Outcome: "failed", Detail: "timed out"},
		{Seq: 6, CallID: "c3", Tool: "process.run", Command: "make", Outcome: "not run", Detail: "SANDBOX_UNAVAILABLE: SANDBOX_UNAVAILABLE happened"},
		{Seq: 7, CallID: "c4", Tool: "process.run", Command: "curl x", Outcome: "not run", Detail: "rejected: POLICY_DENIED"},
		{Seq: 9, CallID: "c5", Tool: "test.run", Command: "go test ./...", Exit: "0", Outcome: "passed"},
		{Seq: 10, CallID: "c6", Tool: "test.run", Outcome: "running"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d commands, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("command %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	// The event rows say the same.
	for seq, want := range map[int]string{2: "failed: exit 1", 4: "failed: exit -1", 6: "failed: SANDBOX_UNAVAILABLE", 9: "passed: exit 0"} {
		if got := RowOf(&log[seq-1]).Summary; got != want {
			t.Errorf("row %d says %q, want %q", seq, got, want)
		}
	}
}

func TestEvidenceChanges(t *testing.T) {
	patch := "--- a/a.go\n+++ b/a.go\n@@ -1 +1 @@\n-old\n+new\n"
	approved := "--- a/c.go\n+++ b/c.go\n@@ -1 +1,2 @@\n-x\n+y\n+z\n"
	log := evs(t,
		event.ToolInvoke, invoke("w1", "repo.write", obj{"path": "new.go", "content": "package a\n\nfunc A() {}\n", "expected_hash": ""}),
		event.ToolResult, okResult("w1", "repo.write", obj{"path": "new.go", "hash": "h1"}),
		event.ToolInvoke, invoke("w2", "repo.write", obj{"path": "new.go", "content": "package a\n\nfunc B() {}\n", "expected_hash": "h1"}),
		event.ToolResult, okResult("w2", "repo.write", obj{"path": "new.go", "hash": "h2"}),
		event.ToolInvoke, invoke("w3", "repo.write", obj{"path": "old.go", "content": "package b\n", "expected_hash": "h0"}),
		event.ToolResult, okResult("w3", "repo.write", obj{"path": "old.go", "hash": "h3"}),
		event.ToolInvoke, invoke("p1", "repo.patch", obj{"unifiedDiff": patch}),
		event.ToolResult, okResult("p1", "repo.patch", obj{"files": []obj{{"path": "a.go", "op": "modify", "added": 1, "removed": 1}}, "lines_added": 1, "lines_removed": 1}),
		event.ToolInvoke, invoke("p2", "repo.patch", obj{"unifiedDiff": "--- a/b.go\n+++ b/b.go\n"}),
		event.ToolResult, failure("p2", "repo.patch", "PATCH_CONFLICT", nil),
		event.ToolInvoke, obj{"call_id": "p3", "tool": "repo.patch", "approval_id": "ap-1", "args": obj{"unifiedDiff": approved}},
		event.ToolResult, okResult("p3", "repo.patch", obj{"files": []obj{{"path": "c.go", "op": "modify", "added": 2, "removed": 1}}}),
	)
	snap := replay.Snapshot{ResolvedApprovals: []replay.Approval{{ID: "ap-1", Tool: "repo.patch", Decision: "approve", Preview: json.RawMessage(`{"diff":` + mustJSON(t, approved) + `}`)}}}
	ev := buildEvidence(log, snap)
	wantFiles := []ChangedFile{
		{Path: "a.go", Op: "modify", Added: 1, Removed: 1, Calls: 1, LinesKnown: true},
		{Path: "c.go", Op: "modify", Added: 2, Removed: 1, Calls: 1, LinesKnown: true, FromApprovedCall: true},
		{Path: "new.go", Op: "create", Added: 6, Removed: 3, Calls: 2, LinesKnown: true},
		{Path: "old.go", Op: "modify", Calls: 1},
	}
	if len(ev.Files) != len(wantFiles) {
		t.Fatalf("files %+v", ev.Files)
	}
	for i := range wantFiles {
		if ev.Files[i] != wantFiles[i] {
			t.Errorf("file %d:\n got %+v\nwant %+v", i, ev.Files[i], wantFiles[i])
		}
	}
	if len(ev.Changes) != 5 {
		t.Fatalf("%d changes, want 5 (the failed patch is none)", len(ev.Changes))
	}
	if c := ev.Changes[2]; c.NoDiff == "" || len(c.Diff) != 0 {
		t.Errorf("a write over content the log lacks shows a diff: %+v", c)
	}
	var diff []string
	for _, l := range ev.Diff {
		diff = append(diff, l.Text)
	}
	got := strings.Join(diff, "\n")
	for _, want := range []string{
		"--- /dev/null\n+++ b/new.go\n@@ -0,0 +1,3 @@\n+package a\n+\n+func A() {}",
		"--- a/new.go\n+++ b/new.go\n@@ -1,3 +1,3 @@\n-package a\n-\n-func A() {}\n+package a\n+\n+func B() {}",
		"# repo.write old.go: a whole-file write; the log does not hold the file's earlier content",
		strings.TrimSuffix(patch, "\n"),
		strings.TrimSuffix(approved, "\n"),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the final diff lacks\n%s\nin\n%s", want, got)
		}
	}
	if strings.Contains(got, "b.go") {
		t.Error("the final diff shows a patch that failed")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Cost is "not tracked" where no price was known, never $0.0000.
func TestCostNotTracked(t *testing.T) {
	resp := func(model string, cost float64) obj {
		u := obj{"input_tokens": 100, "output_tokens": 10}
		if cost > 0 {
			u["cost_usd"] = cost
		}
		return obj{"role": "worker", "response": obj{"model": model, "usage": u}}
	}
	tests := []struct {
		name  string
		log   []any
		total string
		cells []string
	}{
		{"none priced", []any{event.LLMResponse, resp("local", 0), event.LLMResponse, resp("local", 0)},
			"cost not tracked (no price is known for local)", []string{"not tracked"}},
		{"all priced", []any{event.LLMResponse, resp("gpt", 0.01)}, "$0.0100", []string{"$0.0100"}},
		{"some priced", []any{event.LLMResponse, resp("gpt", 0.01), event.LLMResponse, resp("local", 0)},
			"$0.0100 for the priced calls; cost not tracked for local (no price is known)", []string{"$0.0100", "not tracked"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := costs(evs(t, tc.log...), nil)
			if got := c.TotalText(); got != tc.total {
				t.Errorf("total %q, want %q", got, tc.total)
			}
			var cells []string
			for _, m := range c.Models {
				cells = append(cells, m.Cost())
			}
			if strings.Join(cells, "|") != strings.Join(tc.cells, "|") {
				t.Errorf("per model %q, want %q", cells, tc.cells)
			}
		})
	}
}

// A fan-out's personas show from their PERSONA_DONE transitions while the
// cycle runs; the cycle's result, once there, is the account shown.
func TestEvidencePersonas(t *testing.T) {
	done := func(role, reason string) obj {
		p := obj{"from": "PERSONA", "to": "PERSONA_DONE", "role": role}
		if reason != "" {
			p["reason"] = reason
		}
		return p
	}
	log := evs(t,
		event.AgentTransition, done("security", "reply does not match persona_findings_v2"),
		event.AgentTransition, done("correctness", ""),
	)
	r := buildEvidence(log, replay.Snapshot{}).Review
	if r == nil || len(r.Personas) != 2 || r.Personas[0].Status != "failed" || r.Personas[1].Status != "ran" || len(r.NotReviewed()) != 1 || r.NotReviewed()[0].Persona != "security" {
		t.Fatalf("while running: %+v", r)
	}
	content := mustJSON(t, obj{"verdict": "done", "personas": []obj{
		{"persona": "security", "phase": "review", "status": "failed", "reason": "schema"},
		{"persona": "correctness", "phase": "review", "status": "ran", "findings": 2},
		{"persona": "tests", "phase": "review", "status": "forbidden", "reason": "role-permissions"},
	}})
	log = append(log, evs(t, event.ArtifactEmitted, obj{"kind": "workflow_result", "content": content})...)
	r = buildEvidence(log, replay.Snapshot{}).Review
	if r == nil || len(r.Personas) != 3 || r.Cycle != "done" || len(r.NotReviewed()) != 2 || r.Personas[1].Findings != 2 {
		t.Fatalf("after the result: %+v", r)
	}
}

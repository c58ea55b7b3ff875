package cycle_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/workflow"
	"github.com/agentos/agentos/runtime/workflow/cycle"
)

const dbGo = `package db

import "database/sql"

// FindUser looks a user up by name.
func FindUser(db *sql.DB, name string) (*sql.Rows, error) {
	return db.Query("SELECT * FROM users WHERE name = '" + name + "'")
}
`

const prDiff = `--- a/db.go
+++ b/db.go
@@ -5,3 +5,3 @@
 // FindUser looks a user up by name.
 func FindUser(db *sql.DB, name string) (*sql.Rows, error) {
-	return db.Query("SELECT * FROM users WHERE name = ?", name)
+	return db.Query("SELECT * FROM users WHERE name = '" + name + "'")
 }
`

// reviewScript: security reads the file and reports a P0; correctness
// reports the same line and rule as P1 (merged into the P0) plus a nit;
// tests first answers in prose (one repair turn) and then reports an
// untested branch; style is never called (role-permissions forbid it).
const reviewScript = `
model: scripted
roles:
  security:
  - tool_calls: [{id: s1, name: repo.read, args: {path: db.go}}]
  - text: '{"findings":[{"id":"x","reviewer":"correctness","severity":"P0","autofix_class":"gated_auto","confidence":100,"title":"SQL injection in FindUser","body":"name is concatenated into the query","path":"db.go","line":7,"rule":"sql-injection","schema_version":"v2"}],"schema_version":"v2"}'
  correctness:
  - text: '{"findings":[{"id":"c1","reviewer":"correctness","severity":"P1","autofix_class":"manual","confidence":75,"title":"query built by concatenation","body":"Why: query built by concatenation.","path":"db.go","line":7,"rule":"sql-injection","schema_version":"v2"},{"id":"c2","reviewer":"correctness","severity":"P3","autofix_class":"safe_auto","confidence":25,"title":"comment style","body":"Why: comment style.","path":"db.go","line":5,"rule":"style","schema_version":"v2"}],"schema_version":"v2"}'
  tests:
  - text: 'I looked at the change; the error branch is not tested.'
  - text: '{"findings":[{"id":"t1","reviewer":"tests","severity":"P2","autofix_class":"safe_auto","confidence":50,"title":"the error branch of FindUser is untested","body":"Why: the error branch of FindUser is untested.","path":"db.go","line":7,"rule":"untested-branch","schema_version":"v2"}],"schema_version":"v2"}'
  style:
  - text: '{"findings":[{"id":"y","reviewer":"style","severity":"P0","autofix_class":"manual","confidence":100,"title":"style persona should never be heard","path":"db.go","line":1,"rule":"style-p0","schema_version":"v1"}],"schema_version":"v1"}'
`

// repoWithStyle overrides the fan-out phase to invite a style persona
// that the shipped role-permissions policy does not allow.
func repoWithStyle(t *testing.T) string {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"db.go": dbGo,
		".agent/workflows/phases/review-fan-out.md": `---
id: review-fan-out
description: the built-in fan-out plus a style persona
agents_invoked: [security, correctness, tests, style]
max_concurrency: 2
output_schema: review_aggregate_v1
advance_signal: review_aggregate.verdict != ""
policies: [role-permissions]
schema_version: v1
---
Review the diff.
`,
		".agent/workflows/personas/reviewer/style.md": `---
name: style
description: "Style nits."
role: reviewer
allowed-tools: [repo.read]
output_schema: finding_v1
schema_version: v1
---
Report style problems.
`,
	})
	return dir
}

// TestReviewFanOutScenario is /agent review on a PR with a planted SQL
// injection and an untested branch: personas in parallel (bounded), fan-in
// by fingerprint keeping the highest severity and the most conservative
// autofix class, confidence-gating and severity-routing per finding,
// nothing from the persona role-permissions forbid, and every decision in
// the log.
func TestReviewFanOutScenario(t *testing.T) {
	dir := repoWithStyle(t)
	w := openWorld(t, dir, t.TempDir(), reviewScript, "")
	ctx := context.Background()
	res, err := w.x.Run(ctx, cycle.Request{SessionID: "review-1", Cycle: "review", Prompt: "review this pull request", Mode: cycle.ModeInteractive, Inputs: map[string]string{"diff": prDiff}, Cwd: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Status != "completed" || res.Verdict != workflow.VerdictDone {
		t.Fatalf("status %s verdict %q reason %q terminal %+v", res.Outcome.Status, res.Verdict, res.Reason, res.Outcome.Terminal)
	}
	if res.Delivery != workflow.Allow {
		t.Errorf("delivery %q, want allow (interactive)", res.Delivery)
	}
	got := map[string]cycle.FindingDecision{}
	for _, d := range res.Decisions {
		got[d.Finding.Rule] = d
	}
	if len(res.Decisions) != 3 {
		t.Fatalf("decisions %+v, want 3 (sql-injection merged, untested-branch, style)", res.Decisions)
	}
	sql := got["sql-injection"]
	if sql.Gate != cycle.GatePosted || sql.Finding.Severity != "P0" || sql.Finding.AutofixClass != "manual" || sql.Route != workflow.Manual ||
		strings.Join(sql.Reviewers, ",") != "correctness,security" || sql.Finding.Path != "db.go" || sql.Finding.Line != 7 || sql.Body != "name is concatenated into the query" {
		t.Errorf("sql-injection: %+v", sql)
	}
	if d := got["untested-branch"]; d.Gate != cycle.GateBodyOnly || d.Route != workflow.SafeAuto || d.Finding.Reviewer != "tests" {
		t.Errorf("untested-branch: %+v", d)
	}
	if d := got["style"]; d.Gate != cycle.GateDropped || !strings.Contains(d.Reason, "confidence-gating") {
		t.Errorf("the low-confidence nit: %+v", d)
	}
	if _, ok := got["style-p0"]; ok {
		t.Error("a finding of the forbidden style persona reached the decisions")
	}
	a := res.Aggregate
	if a == nil || a.Verdict != "fail" || a.P0Unresolved != 1 || len(a.Findings) != 2 || len(a.Suppressed) != 1 || a.Coverage != 1 {
		t.Fatalf("aggregate %+v", a)
	}
	var style cycle.PersonaReport
	for _, p := range res.Personas {
		if p.Persona == "style" {
			style = p
		}
	}
	if style.Status != "forbidden" {
		t.Errorf("style persona: %+v, want forbidden", style)
	}

	evs := w.events(t, "review-1")
	verify(t, evs)
	for _, e := range evs {
		if e.Actor == "style" {
			t.Fatalf("the forbidden persona has an event: %s", e.Type)
		}
	}
	// Each persona's events are one segment; the repair turn is there.
	if n := count(evs, event.SchemaViolation); n != 1 {
		t.Errorf("%d schema.violation, want 1 (tests' prose reply)", n)
	}
	var gated []string
	for _, e := range byType(evs, event.WorkflowPolicyGated) {
		gated = append(gated, event.FieldString(e.Payload, "policy_id")+"="+event.FieldString(e.Payload, "decision")+"@"+event.FieldString(e.Payload, "subject"))
	}
	for _, want := range []string{
		"role-permissions=deny@persona:style:read", "role-permissions=allow@persona:security:read",
		"confidence-gating=allow@finding:db.go:7-7:sql-injection", "severity-routing=manual@finding:db.go:7-7:sql-injection",
		"confidence-gating=advisory@finding:db.go:7-7:untested-branch", "severity-routing=safe_auto@finding:db.go:7-7:untested-branch",
		"confidence-gating=deny@finding:db.go:5-5:style", "mode-dispatch=allow@mode:interactive",
	} {
		if !strings.Contains(strings.Join(gated, "\n"), want) {
			t.Errorf("no policy decision %s in\n%s", want, strings.Join(gated, "\n"))
		}
	}
	if n := count(evs, event.WorkflowPhaseAdvanced); n != 2 {
		t.Errorf("%d phase_advanced, want 2", n)
	}
	started := byType(evs, event.WorkflowStarted)
	if len(started) != 1 || !strings.Contains(string(started[0].Payload), "review-fan-out") {
		t.Errorf("workflow.started does not record the phase override: %v", started)
	}
	snap, err := replay.Replay(evs)
	if err != nil {
		t.Fatal(err)
	}
	if wf := snap.Workflow; wf == nil || wf.CycleID != "review" || wf.Phase != "review-gate" || wf.Verdict != "done" || strings.Join(wf.Visited, ",") != "review-fan-out,review-gate" {
		t.Fatalf("replayed workflow state %+v", snap.Workflow)
	}
	// Re-executing the recorded run with the current code (no model, no
	// tool) replays each persona from its own segment and decides the same.
	var history []event.Event
	for i, e := range evs {
		if e.Type == event.RunStarted {
			history = evs[i:]
			break
		}
	}
	eng := *w.env.Engine
	eng.Plane = w.x
	if _, err := run.Reexecute(ctx, &eng, "review this pull request", history); err != nil {
		t.Fatalf("re-execution: %v", err)
	}
	// The result is a projection of the log: the same from the events alone.
	again := cycle.ResultFromLog(evs, res.Outcome.RunID)
	if again.Verdict != res.Verdict || len(again.Decisions) != 3 || again.Aggregate.P0Unresolved != 1 {
		t.Errorf("result from the log %+v", again)
	}
}

// TestFanInDedupesByFingerprint: the fingerprint is path, line range and
// rule; a finding without a rule is identified by its title.
func TestFanInDedupesByFingerprint(t *testing.T) {
	cases := []struct {
		a, b workflow.Finding
		same bool
	}{
		{workflow.Finding{Path: "a.go", Line: 3, Rule: "r"}, workflow.Finding{Path: "a.go", Line: 3, EndLine: 3, Rule: "r", Title: "other"}, true},
		{workflow.Finding{Path: "a.go", Line: 3, Rule: "r"}, workflow.Finding{Path: "a.go", Line: 4, Rule: "r"}, false},
		{workflow.Finding{Path: "a.go", Line: 3, EndLine: 5, Rule: "r"}, workflow.Finding{Path: "a.go", Line: 3, Rule: "r"}, false},
		{workflow.Finding{Path: "a.go", Line: 3, Rule: "r"}, workflow.Finding{Path: "b.go", Line: 3, Rule: "r"}, false},
		{workflow.Finding{Title: "Missing  Test"}, workflow.Finding{Title: "missing test"}, true},
	}
	for i, c := range cases {
		if got := cycle.Fingerprint(c.a) == cycle.Fingerprint(c.b); got != c.same {
			t.Errorf("case %d: %q vs %q: same=%v, want %v", i, cycle.Fingerprint(c.a), cycle.Fingerprint(c.b), got, c.same)
		}
	}
}

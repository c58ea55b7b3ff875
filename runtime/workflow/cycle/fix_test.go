package cycle_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/workflow"
	"github.com/agentos/agentos/runtime/workflow/cycle"
)

const authGo = "package auth\n\nfunc Check(token string) bool { return token != \"\" }\n"

const fixScript = `
model: scripted
roles:
  lead:
  - text: '{"intent":"make Check accept only the expected token","constraints":["change only auth.go"],"needs_advisor":false,"schema_version":"v1"}'
  planner:
  - text: '{"steps":[{"id":"s1","description":"read auth.go"},{"id":"s2","description":"patch Check"}],"risks":["the patch needs approval"],"needs_advisor":false,"schema_version":"v1"}'
  worker:
  - tool_calls: [{id: w1, name: repo.read, args: {path: auth.go}}]
  - tool_calls: [{id: w2, name: repo.patch, args: {unifiedDiff: "--- a/auth.go\n+++ b/auth.go\n@@ -3 +3 @@\n-func Check(token string) bool { return token != \"\" }\n+func Check(token string) bool { return token == \"expected\" }\n"}}]
  - text: '{"output":"Check now accepts only the expected token.","steps_completed":["s1","s2"],"schema_version":"v1"}'
  reviewer:
  - text: '{"verdict":"pass","feedback":"done","schema_version":"v1"}'
`

// TestFixCyclePausesAndResumesInAnotherProcess: the fix cycle is today's
// /agent fix with workflow events. Its pass pauses mid-phase for the
// patch's approval; the process is killed (its store closed); a new
// process over the same store resolves the approval and resumes the cycle
// from the log: nothing is asked or run twice, the cycle ends done, the
// log verifies, and replay restores cycle, phase, verdict and visited
// phases at both points.
func TestFixCyclePausesAndResumesInAnotherProcess(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	writeFiles(t, dir, map[string]string{"auth.go": authGo})
	ctx := context.Background()
	w1 := openWorld(t, dir, data, fixScript, "")
	res, err := w1.x.Run(ctx, cycle.Request{SessionID: "fix-1", Cycle: "fix", Prompt: "fix auth.go: Check accepts any token", Mode: cycle.ModeInteractive, Cwd: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Status != "paused" || len(res.Paused) != 1 || res.Paused[0].Tool != "repo.patch" || res.Verdict != "" {
		t.Fatalf("first run: %+v", res)
	}
	evs := w1.events(t, "fix-1")
	snap, err := replay.Replay(evs)
	if err != nil {
		t.Fatal(err)
	}
	if wf := snap.Workflow; wf == nil || wf.CycleID != "fix" || wf.Phase != "fix" || wf.Verdict != "" || strings.Join(wf.Visited, ",") != "fix" {
		t.Fatalf("paused workflow state %+v", snap.Workflow)
	}
	approval := res.Paused[0].ApprovalID
	w1.close() // the process dies

	w2 := openWorld(t, dir, data, fixScript, "")
	if err := w2.x.Manager.Resolve(ctx, "fix-1", approval, "approve", "maintainer-alice", ""); err != nil {
		t.Fatal(err)
	}
	res, err = w2.x.Resume(ctx, "fix-1", dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome.Status != "completed" || res.Verdict != workflow.VerdictDone || res.Output != "Check now accepts only the expected token." || res.Cycle != "fix" {
		t.Fatalf("resumed: %+v (terminal %+v)", res, res.Outcome.Terminal)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "auth.go"))
	if !strings.Contains(string(b), `token == "expected"`) {
		t.Fatalf("auth.go not patched: %s", b)
	}
	evs = w2.events(t, "fix-1")
	verify(t, evs)
	// Re-execution replayed the first process's work: every model call and
	// tool call is in the log once.
	if n := count(evs, event.LLMRequest); n != 6 {
		t.Errorf("%d llm.request, want 6 (lead, planner, worker ×3, reviewer)\n%s", n, types(evs))
	}
	if n := count(evs, event.ToolInvoke); n != 2 {
		t.Errorf("%d tool.invoke, want 2", n)
	}
	for _, typ := range []string{event.WorkflowStarted, event.WorkflowPhaseAdvanced, event.WorkflowCompleted} {
		if n := count(evs, typ); n != 1 {
			t.Errorf("%d %s, want 1", n, typ)
		}
	}
	snap, err = replay.Replay(evs)
	if err != nil {
		t.Fatal(err)
	}
	if wf := snap.Workflow; wf == nil || wf.CycleID != "fix" || wf.Phase != "fix" || wf.Verdict != "done" || strings.Join(wf.Visited, ",") != "fix" {
		t.Fatalf("final workflow state %+v", snap.Workflow)
	}

	// The same events as a run that was never interrupted: the same cycle
	// paused, answered and resumed in one process.
	dir3, data3 := t.TempDir(), t.TempDir()
	writeFiles(t, dir3, map[string]string{"auth.go": authGo})
	w3 := openWorld(t, dir3, data3, fixScript, "")
	r3, err := w3.x.Run(ctx, cycle.Request{SessionID: "fix-1", Cycle: "fix", Prompt: "fix auth.go: Check accepts any token", Mode: cycle.ModeInteractive, Cwd: dir3})
	if err != nil || len(r3.Paused) != 1 {
		t.Fatalf("%v %+v", err, r3)
	}
	if err := w3.x.Manager.Resolve(ctx, "fix-1", r3.Paused[0].ApprovalID, "approve", "maintainer-alice", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := w3.x.Resume(ctx, "fix-1", dir3, ""); err != nil {
		t.Fatal(err)
	}
	if a, b := shape(evs), shape(w3.events(t, "fix-1")); a != b {
		t.Fatalf("the resumed run's events differ from an uninterrupted one:\n%s\nvs\n%s", a, b)
	}
}

// shape is a log's event types and actors, without ids, times and
// checkpoints (written at pauses whatever the process).
func shape(evs []event.Event) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type == event.CheckpointCreated {
			continue
		}
		b.WriteString(e.Type + " by " + e.Actor + "\n")
	}
	return b.String()
}

// TestVerifyWorkflowAudit: a log with a workflow event missing fails the
// strict audit.
func TestVerifyWorkflowAudit(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	writeFiles(t, dir, map[string]string{"db.go": dbGo})
	w := openWorld(t, dir, data, reviewScript, "")
	ctx := context.Background()
	if _, err := w.x.Run(ctx, cycle.Request{SessionID: "audit-1", Cycle: "review", Prompt: "review", Inputs: map[string]string{"diff": prDiff}}); err != nil {
		t.Fatal(err)
	}
	evs := w.events(t, "audit-1")
	verify(t, evs)
	for _, drop := range []string{event.WorkflowCompleted, event.WorkflowPhaseAdvanced} {
		t.Run("without "+drop, func(t *testing.T) {
			// Re-chain the log without the event, as a writer that skipped
			// it would have written it: the hash chain is intact.
			var kept []event.Event
			for _, e := range evs {
				if e.Type == drop {
					drop = "" // the first one only
					continue
				}
				kept = append(kept, e)
			}
			rechained := rechain(t, kept)
			rep := replay.VerifyEvents(w.x.Schemas, rechained)
			if rep.Valid || rep.Problem == nil || rep.Problem.Code != replay.ProblemWorkflowAudit {
				t.Fatalf("verify: %+v", rep.Problem)
			}
		})
	}
}

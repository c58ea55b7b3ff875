package run

import (
	"context"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/journal"
)

// startedRun writes what a process leaves when it dies right after
// starting run runID of session sid: session.start and run.started (prompt
// "greet"). It returns the session's journal, set to that run.
func startedRun(t *testing.T, f *fixture, sid, runID string) *journal.Journal {
	t.Helper()
	ctx := context.Background()
	j, err := journal.Open(ctx, f.store, sid)
	must(t, err)
	j.SetRun(runID)
	_, err = j.Append(ctx, event.SessionStart, "runtime", map[string]any{"prompt": "greet"}, "")
	must(t, err)
	_, err = j.Append(ctx, event.RunStarted, "runtime", map[string]any{"run_id": runID, "prompt": "greet"}, "")
	must(t, err)
	return j
}

// TestCloseOrphan: a run that died mid-way gets exactly one report_missing
// terminal report and no new run; calling again changes nothing; a paused
// or finished session is left alone.
func TestCloseOrphan(t *testing.T) {
	f := newFixture(t, script(echoCall, finalReport), nil)
	ctx := context.Background()
	startedRun(t, f, "crashed", "run-dead")
	for i := 0; i < 2; i++ {
		out, err := f.mgr.CloseOrphan(ctx, "crashed")
		if err != nil || out.Status != "failed" || out.RunID != "run-dead" {
			t.Fatalf("call %d: %+v %v", i, out, err)
		}
	}
	evs := f.events(t, "crashed")
	verify(t, evs)
	starts, terminals := 0, 0
	for _, e := range evs {
		switch e.Type {
		case event.RunStarted:
			starts++
		case event.TurnTerminal:
			terminals++
		}
	}
	if starts != 1 || terminals != 1 {
		t.Fatalf("%d runs, %d terminal reports", starts, terminals)
	}
	out, err := f.mgr.Start(ctx, f.eng, StartRequest{SessionID: "done", Prompt: "greet the world"})
	if err != nil || out.Status != "completed" {
		t.Fatalf("%+v %v", out, err)
	}
	n := len(f.events(t, "done"))
	if out, err := f.mgr.CloseOrphan(ctx, "done"); err != nil || out.Status != "completed" || len(f.events(t, "done")) != n {
		t.Fatalf("a finished session was changed: %+v %v", out, err)
	}
}

// TestCloseOrphanPairsOpenCalls: a process that died inside a tool call
// and inside a model call leaves an open tool.invoke and llm.request; the
// report_missing close records both as interrupted, so the closed log
// passes strict verify (it failed with unpaired_tool_invoke before).
func TestCloseOrphanPairsOpenCalls(t *testing.T) {
	f := newFixture(t, script(echoCall, finalReport), nil)
	ctx := context.Background()
	j := startedRun(t, f, "died-mid-call", "run-dead")
	_, err := j.Append(ctx, event.LLMRequest, "worker", map[string]any{"role": "worker", "request": map[string]any{"model": "scripted", "messages": []any{}, "schema_version": "v1"}}, "")
	must(t, err)
	_, err = j.Append(ctx, event.ToolInvoke, "worker", map[string]any{"call_id": "c1", "tool": "test.run", "args": map[string]any{}}, "")
	must(t, err)
	out, err := f.mgr.CloseOrphan(ctx, "died-mid-call")
	if err != nil || out.Status != StatusFailed {
		t.Fatalf("%+v %v", out, err)
	}
	evs := f.events(t, "died-mid-call")
	verify(t, evs)
	interrupted := 0
	for _, e := range evs {
		if (e.Type == event.ToolResult || e.Type == event.LLMResponse) && strings.Contains(string(e.Payload), CodeInterrupted) {
			interrupted++
		}
	}
	if interrupted != 2 {
		t.Errorf("%d calls closed as interrupted, want 2", interrupted)
	}
}

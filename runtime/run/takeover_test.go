package run

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/journal"
	"github.com/agentos/agentos/runtime/store"
)

// recorded appends a tool call (invoke, and result when res is not nil)
// to j.
func recorded(t *testing.T, j *journal.Journal, id, tool string, args map[string]any, res map[string]any) {
	t.Helper()
	ctx := context.Background()
	inv, err := j.Append(ctx, event.ToolInvoke, "worker", map[string]any{"call_id": id, "tool": tool, "args": args}, "")
	must(t, err)
	if res != nil {
		res["call_id"], res["tool"] = id, tool
		_, err = j.Append(ctx, event.ToolResult, "kernel", res, inv.ID)
		must(t, err)
	}
}

// TestRebuildWorkspace: the recorded changes after a seq are applied
// again in order (a patch, then a write whose recorded hash matches);
// changes at or before the seq are not; a failed patch changes nothing; a
// command that ran, a write whose recorded hash does not match, or a diff
// that no longer applies make the worktree not rebuildable.
func TestRebuildWorkspace(t *testing.T) {
	f := newFixture(t, script(finalReport), nil)
	ctx := context.Background()
	j, err := journal.Open(ctx, f.store, "rebuild")
	must(t, err)
	j.SetRun("run-1")
	_, err = j.Append(ctx, event.SessionStart, "user", map[string]any{"prompt": "edit"}, "")
	must(t, err)
	diff := "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n"
	recorded(t, j, "c0", "repo.patch", map[string]any{"unifiedDiff": "--- /dev/null\n+++ b/old.txt\n@@ -0,0 +1 @@\n+old\n"}, map[string]any{"ok": true})
	boundary := j.Seq()
	recorded(t, j, "c1", "repo.read", map[string]any{"path": "a.txt"}, map[string]any{"ok": true})
	recorded(t, j, "c2", "repo.patch", map[string]any{"unifiedDiff": diff}, map[string]any{"ok": true})
	recorded(t, j, "c3", "repo.patch", map[string]any{"unifiedDiff": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-zzz\n+yyy\n"}, map[string]any{"ok": false, "error": map[string]any{"code": "TOOL_RUNTIME_ERROR", "message": "context mismatch"}})
	sum := sha256.Sum256([]byte("new\n"))
	recorded(t, j, "c4", "repo.write", map[string]any{"path": "dir/b.txt", "content": "new\n", "expected_hash": ""}, map[string]any{"ok": true, "result": map[string]any{"path": "dir/b.txt", "hash": hex.EncodeToString(sum[:])}})
	evs := f.events(t, "rebuild")

	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\n"), 0o644))
	n, err := RebuildWorkspace(dir, evs, boundary)
	if err != nil || n != 2 {
		t.Fatalf("rebuild: %d changes, %v; want 2", n, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "two\n" {
		t.Errorf("a.txt = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "dir", "b.txt")); string(b) != "new\n" {
		t.Errorf("dir/b.txt = %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "old.txt")); err == nil {
		t.Error("a change at the boundary (in the branch already) was applied again")
	}
	// Applied again on the rebuilt tree, the diff no longer applies.
	var nr *NotRebuildableError
	if _, err := RebuildWorkspace(dir, evs, boundary); !errors.As(err, &nr) || nr.Tool != "repo.patch" {
		t.Fatalf("a diff that does not apply: %v", err)
	}

	// A command ran after the boundary: its effect is not in the log.
	recorded(t, j, "c5", "process.run", map[string]any{"command": "make"}, map[string]any{"ok": true})
	if _, err := RebuildWorkspace(t.TempDir(), f.events(t, "rebuild"), j.Seq()-2); !errors.As(err, &nr) || nr.Tool != "process.run" {
		t.Fatalf("process.run: %v", err)
	}
	// A write whose recorded hash is not its content's (redacted, edited).
	recorded(t, j, "c6", "repo.write", map[string]any{"path": "c.txt", "content": "x", "expected_hash": ""}, map[string]any{"ok": true, "result": map[string]any{"path": "c.txt", "hash": hex.EncodeToString(sum[:])}})
	if _, err := RebuildWorkspace(t.TempDir(), f.events(t, "rebuild"), j.Seq()-2); !errors.As(err, &nr) || nr.Tool != "repo.write" {
		t.Fatalf("a write with a foreign hash: %v", err)
	}
}

// TestTakeover: a run whose process died during a tool call (invoke, no
// result) is taken over: the call gets a failed INTERRUPTED result, and,
// as echo changes nothing (RerunTools), it is marked to run again and
// runs again; the run goes on live from the log's end to completion, one
// run, one terminal report, and the log verifies. A finished session
// cannot be taken over.
func TestTakeover(t *testing.T) {
	f := newFixture(t, script(echoCall, finalReport), nil)
	ctx := context.Background()
	// An undisturbed run, cut after its first tool.invoke.
	out, err := f.mgr.Start(ctx, f.eng, StartRequest{SessionID: "whole", Prompt: "greet"})
	if err != nil || out.Status != "completed" {
		t.Fatalf("%+v %v", out, err)
	}
	var log bytes.Buffer
	if _, err := store.Export(ctx, f.store, "whole", &log); err != nil {
		t.Fatal(err)
	}
	var cut []byte
	found := false
	for _, line := range bytes.SplitAfter(log.Bytes(), []byte("\n")) {
		cut = append(cut, line...)
		if bytes.Contains(line, []byte(`"type":"tool.invoke"`)) {
			found = true
			break
		}
	}
	if !found {
		t.Fatal("the script made no tool call")
	}
	// The interrupted call is run again, so the taken-over worker reports
	// it made (the evidence contract holds it to the log).
	f2 := newFixture(t, script(echoCall, finalReport), nil)
	if _, _, err := store.Import(ctx, bytes.NewReader(cut), f2.store); err != nil {
		t.Fatal(err)
	}
	out, err = f2.mgr.Takeover(ctx, f2.eng, "whole", "", "", "")
	if err != nil || out.Status != "completed" {
		t.Fatalf("takeover: %+v %v", out, err)
	}
	evs := f2.events(t, "whole")
	verify(t, evs)
	starts, terminals, invokes, interrupted := 0, 0, 0, 0
	for _, e := range evs {
		switch e.Type {
		case event.RunStarted:
			starts++
		case event.TurnTerminal:
			terminals++
		case event.ToolInvoke:
			invokes++
		case event.ToolResult:
			if event.FieldString(event.Field(e.Payload, "error"), "code") == CodeInterrupted {
				interrupted++
			}
		}
	}
	if starts != 1 || terminals != 1 || interrupted != 1 || invokes != 2 {
		t.Fatalf("%d runs, %d terminal reports, %d invokes, %d interrupted results; want 1, 1, 2 (the call run again), 1", starts, terminals, invokes, interrupted)
	}
	if _, err := f2.mgr.Takeover(ctx, f2.eng, "whole", "", "", ""); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("a finished session taken over: %v", err)
	}
}

// TestCloseEnded: a run whose process died between its turn.terminal and
// its session.close gets the close (once, not ok for a failed run); a
// closed or running session is left alone.
func TestCloseEnded(t *testing.T) {
	f := newFixture(t, script(finalReport), nil)
	ctx := context.Background()
	j := startedRun(t, f, "unclosed", "run-1")
	if done, err := f.mgr.CloseEnded(ctx, "unclosed"); done || err != nil {
		t.Fatalf("a running session was closed: %v %v", done, err)
	}
	_, err := j.Append(ctx, event.RunFailed, "runtime", map[string]any{"reason": "a test", "error_class": string(ClassToolRuntimeError)}, "")
	must(t, err)
	_, err = j.Append(ctx, event.TurnTerminal, "runtime", Report{Status: StatusFailed, Reason: "a test", NextAction: "none", TraceID: "run-1", CorrelationID: "unclosed", ErrorClass: ClassToolRuntimeError, SchemaVersion: "v1"}, "")
	must(t, err)
	for i, want := range []bool{true, false} {
		if done, err := f.mgr.CloseEnded(ctx, "unclosed"); done != want || err != nil {
			t.Fatalf("call %d: %v %v, want %v", i, done, err, want)
		}
	}
	evs := f.events(t, "unclosed")
	verify(t, evs)
	if last := evs[len(evs)-1]; last.Type != event.SessionClose || event.FieldBool(last.Payload, "ok") {
		t.Fatalf("last event %s %s", last.Type, last.Payload)
	}
}

// TestCloseEndedWritesTheMissingTerminal: a run whose process died right
// after its run.completed gets the terminal report that follows from it
// and the session.close, once.
func TestCloseEndedWritesTheMissingTerminal(t *testing.T) {
	// A real run's log cut after its run.completed (a completed run is
	// one the engine finished: the honest-outcome invariant holds it to
	// its log like any other).
	whole := newFixture(t, script(echoCall, finalReport), nil)
	ctx := context.Background()
	if out, err := whole.mgr.Start(ctx, whole.eng, StartRequest{SessionID: "ended", Prompt: "greet"}); err != nil || out.Status != "completed" {
		t.Fatalf("%+v %v", out, err)
	}
	var log bytes.Buffer
	if _, err := store.Export(ctx, whole.store, "ended", &log); err != nil {
		t.Fatal(err)
	}
	var cut []byte
	for _, line := range bytes.SplitAfter(log.Bytes(), []byte("\n")) {
		cut = append(cut, line...)
		if bytes.Contains(line, []byte(`"type":"run.completed"`)) {
			break
		}
	}
	f := newFixture(t, script(), nil)
	if _, _, err := store.Import(ctx, bytes.NewReader(cut), f.store); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		if done, err := f.mgr.CloseEnded(ctx, "ended"); done != want || err != nil {
			t.Fatalf("call %d: %v %v, want %v", i, done, err, want)
		}
	}
	evs := f.events(t, "ended")
	n := len(evs)
	if evs[n-2].Type != event.TurnTerminal || event.FieldString(evs[n-2].Payload, "status") != "completed" || evs[n-1].Type != event.SessionClose || !event.FieldBool(evs[n-1].Payload, "ok") {
		t.Fatalf("the log ends %s %s, %s %s", evs[n-2].Type, evs[n-2].Payload, evs[n-1].Type, evs[n-1].Payload)
	}
}

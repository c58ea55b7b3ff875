package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/schemas"
)

// TestCLICancel: agentos cancel ends a paused session (from another
// process) as cancelled: run.cancelled, a cancelled terminal report, the
// exported log verifies; cancelling it again is exit 1.
func TestCLICancel(t *testing.T) {
	repo, data := t.TempDir(), t.TempDir()
	if err := demo.WriteSample(repo); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "script.yaml")
	b, _ := os.ReadFile(filepath.Join("..", "..", "runtime", "demo", "testdata", "fix-auth.script.yaml"))
	os.WriteFile(script, b, 0o644)
	out1 := cliProcess(t, exitApproval, "run", "--session", "s-cancel", "--repo", repo, "--data", data, "--provider", "scripted", "--script", script, "--json", demo.Prompt)
	var r1 runReport
	if err := json.Unmarshal(out1, &r1); err != nil || r1.Status != "paused" {
		t.Fatalf("run: %v %s", err, out1)
	}
	out2 := cliProcess(t, exitOK, "cancel", "s-cancel", "--data", data, "--by", "octocat", "--reason", "not needed", "--json")
	var r2 runReport
	if err := json.Unmarshal(out2, &r2); err != nil || r2.Status != "cancelled" || r2.Terminal == nil || r2.Terminal.Status != "cancelled" {
		t.Fatalf("cancel: %v %s", err, out2)
	}
	evs, err := readJSONL(r2.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if rep := replay.VerifyEvents(schemas.MustDefault(), evs); !rep.Valid {
		t.Fatalf("log: %v", rep.Problem)
	}
	found := false
	for _, e := range evs {
		found = found || (e.Type == event.RunCancelled && event.FieldString(e.Payload, "by") == "octocat")
	}
	if !found {
		t.Error("no run.cancelled by octocat in the exported log")
	}
	cliProcess(t, exitFailure, "cancel", "s-cancel", "--data", data)
}

// TestCLIInterruptIsCancel: SIGINT (the CLI's context ending) while a run
// executes cancels it through the RunManager: the run ends as cancelled
// (exit 3) with run.cancelled and its terminal report in the exported log,
// promptly, not after the slow hook it was waiting on.
func TestCLIInterruptIsCancel(t *testing.T) {
	repo, data := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, ".agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	settings := `{"hooks":{"UserPromptSubmit":[{"hooks":[{"type":"command","command":"sleep 30"}]}]}}`
	if err := os.WriteFile(filepath.Join(repo, ".agent", "settings.json"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "script.yaml")
	b, _ := os.ReadFile(filepath.Join("..", "..", "testdata", "scripts", "greet.yaml"))
	os.WriteFile(script, b, 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(700*time.Millisecond, cancel)
	start := time.Now()
	var out, errb bytes.Buffer
	err := run(ctx, []string{"run", "--session", "s-int", "--repo", repo, "--data", data, "--provider", "scripted", "--script", script, "--json", "greet the world"}, &out, &errb)
	if code := exitCode(err, &errb); code != exitBlocked {
		t.Fatalf("exit %d, want %d (cancelled)\n%s%s", code, exitBlocked, out.String(), errb.String())
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the interrupted run took %v: it waited for the hook", d)
	}
	var r runReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Status != "cancelled" {
		t.Fatalf("report: %v %s", err, out.String())
	}
	evs, err := readJSONL(r.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if rep := replay.VerifyEvents(schemas.MustDefault(), evs); !rep.Valid {
		t.Fatalf("log: %v", rep.Problem)
	}
	if last := evs[len(evs)-3]; last.Type != event.RunCancelled || event.FieldString(last.Payload, "by") != "cli" {
		t.Errorf("log ends %s %s", last.Type, last.Payload)
	}
}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
)

// A worker that looks for the previous session's output and then tries to
// read that session's log from the data directory.
const snoopScript = `roles:
  lead: [{text: '{"intent":"look around","constraints":[],"needs_advisor":false,"schema_version":"v1"}'}]
  planner: [{text: '{"steps":[{"id":"s1","description":"search"}],"risks":[],"needs_advisor":false,"schema_version":"v1"}'}]
  worker:
    - tool_calls: [{id: t1, name: repo.search, args: {query: "hello, world"}}]
    - tool_calls: [{id: t2, name: repo.read, args: {path: ".agentos/sessions/s-one/events.jsonl"}}]
    - text: '{"output":"looked","steps_completed":["s1"],"tool_calls_made":["repo.search:t1"],"schema_version":"v1"}'
  reviewer: [{text: '{"verdict":"pass","feedback":"ok","schema_version":"v1"}'}]
`

// TestRunDoesNotShowTheModelItsOwnLogs: `agentos run --repo DIR` with the
// data directory inside DIR (the default ./.agentos when run from the
// repository) — a later session's repo.search does not find the earlier
// session's exported log, and repo.read of it is a JAIL_VIOLATION.
func TestRunDoesNotShowTheModelItsOwnLogs(t *testing.T) {
	repo := t.TempDir()
	writeFile(t, repo, "notes.txt", "hello, world\n")
	data := filepath.Join(repo, ".agentos")
	snoop := writeFile(t, t.TempDir(), "snoop.yaml", snoopScript)
	common := []string{"--repo", repo, "--data", data, "--provider", "scripted", "--json"}
	if out, errOut, code := runCLI(t, append([]string{"run", "--session", "s-one", "--script", greetScript}, append(common, "greet")...)...); code != exitOK {
		t.Fatalf("first run: exit %d %s%s", code, out, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(data, "sessions", "s-one", "events.jsonl")); err != nil || !strings.Contains(string(b), "hello, world") {
		t.Fatalf("the first session's log is not where this test expects it: %v", err)
	}
	out, errOut, code := runCLI(t, append([]string{"run", "--session", "s-two", "--script", snoop}, append(common, "look around")...)...)
	var r runReport
	if code != exitOK || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("second run: exit %d %s%s", code, out, errOut)
	}
	evs, err := readJSONL(r.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	var search, read string
	for _, e := range evs {
		if e.Type != event.ToolResult && e.Type != event.ToolRejected {
			continue
		}
		switch event.FieldString(e.Payload, "call_id") {
		case "t1":
			search += string(e.Payload)
		case "t2":
			read += string(e.Payload)
		}
	}
	if !strings.Contains(search, "notes.txt") || strings.Contains(search, ".agentos") {
		t.Errorf("repo.search result: %s", search)
	}
	if !strings.Contains(read, "JAIL_VIOLATION") || strings.Contains(read, "hello, world") {
		t.Errorf("repo.read of the data directory: %s", read)
	}
}

// TestToolApproveWithTheEventsFileInTheWorkspace: `agentos tool call
// --events calls.jsonl --workspace .` keeps its log inside the workspace;
// the log's growth does not make the approval stale, and the tools cannot
// touch the log.
func TestToolApproveWithTheEventsFileInTheWorkspace(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, ws, "a.txt", "hello\n")
	events := filepath.Join(ws, "calls.jsonl")
	if _, _, code := runCLI(t, "tool", "call", "repo.write", "--args", `{"path":"b.txt","content":"x","expected_hash":""}`, "--workspace", ws, "--events", events); code != exitApproval {
		t.Fatalf("write: exit %d, want %d", code, exitApproval)
	}
	if out, _, code := runCLI(t, "tool", "call", "repo.read", "--args", `{"path":"calls.jsonl"}`, "--workspace", ws, "--events", events); code != exitBlocked || !strings.Contains(out, "JAIL_VIOLATION") {
		t.Errorf("reading the events file: exit %d %s", code, out)
	}
	evs, err := readJSONL(events)
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := replay.Replay(evs)
	if len(snap.PendingApprovals) != 1 {
		t.Fatalf("pending %+v", snap.PendingApprovals)
	}
	out, errOut, code := runCLI(t, "tool", "approve", snap.PendingApprovals[0].ID, "--workspace", ws, "--events", events)
	if code != exitOK {
		t.Fatalf("approve: exit %d %s%s", code, out, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "b.txt")); string(b) != "x" {
		t.Error("the approved write did not happen")
	}
}

// TestDefaultDataDirIsOutsideTheRepository: with no --data and no
// $AGENTOS_DATA, the store goes to the state directory, keyed by the
// repository's top (the same from any of its subdirectories, different
// for another repository); a .agentos store made before the default moved
// is still found.
func TestDefaultDataDirIsOutsideTheRepository(t *testing.T) {
	t.Setenv("AGENTOS_DATA", "")
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	repo, other := t.TempDir(), t.TempDir()
	for _, d := range []string{filepath.Join(repo, ".git"), filepath.Join(repo, "a", "b"), filepath.Join(other, ".git")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got := dataDirFor(repo)
	if !strings.HasPrefix(got, filepath.Join(state, "agentos")+string(filepath.Separator)) {
		t.Fatalf("dataDirFor(%s) = %s, want under %s/agentos", repo, got, state)
	}
	if sub := dataDirFor(filepath.Join(repo, "a", "b")); sub != got {
		t.Errorf("from a subdirectory: %s, want %s", sub, got)
	}
	if o := dataDirFor(other); o == got {
		t.Errorf("another repository shares %s", o)
	}
	if err := os.Mkdir(filepath.Join(repo, ".agentos"), 0o755); err != nil {
		t.Fatal(err)
	}
	if old := dataDirFor(filepath.Join(repo, "a")); old != filepath.Join(repo, ".agentos") {
		t.Errorf("an existing .agentos store: %s", old)
	}
	t.Setenv("AGENTOS_DATA", "/somewhere")
	if d := dataDirFor(repo); d != "/somewhere" {
		t.Errorf("AGENTOS_DATA: %s", d)
	}
}

package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
)

var update = flag.Bool("update", false, "rewrite testdata/example-session/events.jsonl")

// sampleSession appends a complete, successful session (the seed's greet
// flow plus an approval) to a memory store and returns its events.
func sampleSession(t testing.TB) []event.Event {
	t.Helper()
	clock := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	sealer, err := event.NewSealer(schemas.MustDefault(), nil, func() time.Time { clock = clock.Add(time.Millisecond); return clock })
	if err != nil {
		t.Fatal(err)
	}
	s := store.NewMemory(sealer)
	ctx := context.Background()
	const sid, run = "example-session", "run-1"
	var seq int64
	app := func(typ, actor string, payload any, parent string) string {
		t.Helper()
		evs, err := s.Append(ctx, sid, seq, event.Draft{RunID: run, Type: typ, Actor: actor, Payload: payload, ParentID: parent})
		if err != nil {
			t.Fatalf("append %s: %v", typ, err)
		}
		seq = evs[0].Seq
		return evs[0].ID
	}
	usage := map[string]any{"input_tokens": 120, "output_tokens": 30, "cost_usd": 0.0012}
	resp := func(text string, calls []map[string]any, finish string) map[string]any {
		if calls == nil {
			calls = []map[string]any{}
		}
		return map[string]any{"text": text, "tool_calls": calls, "finish_reason": finish, "usage": usage, "model": "scripted", "schema_version": "v1"}
	}
	req := func(content string) map[string]any {
		return map[string]any{"messages": []map[string]any{{"role": "user", "content": content}}, "model": "scripted", "schema_version": "v1"}
	}
	app("session.start", "user", map[string]any{"prompt": "greet the world"}, "")
	app("run.started", "runtime", map[string]any{"run_id": run, "prompt": "greet the world"}, "")
	app("hook.fired", "runtime", map[string]any{"hook": "UserPromptSubmit", "handler": "redact_pii", "decision": "allow"}, "")
	app("skill.invoke", "runtime", map[string]any{"skill": "greet", "allowed_tools": []string{"echo"}}, "")
	for _, role := range []struct{ from, to, actor, out string }{
		{"INTAKE", "LEAD", "lead", `{"intent":"greet","constraints":[],"needs_advisor":false,"schema_version":"v1"}`},
		{"LEAD", "PLAN", "planner", `{"steps":[{"id":"s1","description":"echo a greeting"}],"risks":[],"needs_advisor":false,"schema_version":"v1"}`},
	} {
		app("agent.transition", role.actor, map[string]any{"from": role.from, "to": role.to}, "")
		r := app("llm.request", role.actor, map[string]any{"role": role.actor, "request": req("greet the world")}, "")
		app("llm.response", role.actor, map[string]any{"role": role.actor, "response": resp(role.out, nil, "stop")}, r)
	}
	app("agent.transition", "worker", map[string]any{"from": "PLAN", "to": "WORK"}, "")
	r := app("llm.request", "worker", map[string]any{"role": "worker", "request": req("execute plan")}, "")
	app("llm.response", "worker", map[string]any{"role": "worker", "response": resp("", []map[string]any{{"id": "t1", "name": "echo", "args": map[string]any{"text": "hello, world"}}}, "tool_use")}, r)
	digest := strings.Repeat("ab", 32)
	app("approval.requested", "kernel", map[string]any{"approval_id": "ap-1", "tool": "echo", "call_id": "t1", "digest": digest, "preview": map[string]any{"text": "hello, world"}}, "")
	app("run.paused", "runtime", map[string]any{"reason": "approval", "approval_ids": []string{"ap-1"}}, "")
	app("approval.resolved", "maintainer", map[string]any{"approval_id": "ap-1", "decision": "approve", "by": "octocat"}, "")
	app("run.resumed", "runtime", map[string]any{"reason": "approval", "approval_id": "ap-1"}, "")
	inv := app("tool.invoke", "worker", map[string]any{"call_id": "t1", "tool": "echo", "args": map[string]any{"text": "hello, world"}, "approval_id": "ap-1"}, "")
	app("tool.result", "kernel", map[string]any{"call_id": "t1", "tool": "echo", "ok": true, "result": map[string]any{"text": "hello, world"}, "duration_ms": 0.1}, inv)
	app("worker.report", "worker", map[string]any{"output": "hello, world", "steps_completed": []string{"s1"}, "tool_calls_made": []string{"echo:t1"}, "schema_version": "v1"}, "")
	app("agent.transition", "reviewer", map[string]any{"from": "WORK", "to": "REVIEW"}, "")
	r = app("llm.request", "reviewer", map[string]any{"role": "reviewer", "request": req("review")}, "")
	app("llm.response", "reviewer", map[string]any{"role": "reviewer", "response": resp(`{"verdict":"pass","feedback":"greeting echoed","schema_version":"v1"}`, nil, "stop")}, r)
	app("agent.transition", "reviewer", map[string]any{"from": "REVIEW", "to": "DONE"}, "")
	app("hook.fired", "runtime", map[string]any{"hook": "Stop", "handler": "stop_after_one", "decision": "deny", "reason": "loop reached terminal state"}, "")
	app("skill.complete", "runtime", map[string]any{"skill": "greet", "ok": true}, "")
	app("run.completed", "runtime", map[string]any{"output": "hello, world"}, "")
	app("turn.terminal", "runtime", map[string]any{"status": "completed", "next_action": "none", "trace_id": "tr-1", "correlation_id": "example-session", "schema_version": "v1"}, "")
	app("session.close", "runtime", map[string]any{"ok": true}, "")
	evs, err := s.Read(ctx, sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func toJSONL(evs []event.Event) []byte {
	var b bytes.Buffer
	for i := range evs {
		b.Write(evs[i].Line())
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func TestExampleSessionGolden(t *testing.T) {
	got := toJSONL(sampleSession(t))
	path := filepath.Join("..", "..", "testdata", "example-session", "events.jsonl")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// ids are random, so compare what replay and verify make of the file.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./runtime/replay -run Golden -update)", err)
	}
	rep, err := VerifyReader(schemas.MustDefault(), bytes.NewReader(b))
	if err != nil || !rep.Valid {
		t.Fatalf("bundled example does not verify: %+v %v", rep.Problem, err)
	}
	if n := bytes.Count(b, []byte("\n")); n != bytes.Count(got, []byte("\n")) {
		t.Errorf("bundled example has %d events, generator makes %d: regenerate with -update", n, bytes.Count(got, []byte("\n")))
	}
}

func TestReplaySnapshot(t *testing.T) {
	evs := sampleSession(t)
	snap, err := Replay(evs)
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := ReplayReader(bytes.NewReader(toJSONL(evs)))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(snap)
	b, _ := json.Marshal(fromFile)
	if !bytes.Equal(a, b) {
		t.Fatalf("replay of events and of JSONL differ:\n%s\n%s", a, b)
	}
	if !snap.Closed || snap.Output != "hello, world" || snap.RunStatus != "completed" {
		t.Errorf("closed=%v output=%q status=%q", snap.Closed, snap.Output, snap.RunStatus)
	}
	if snap.Terminal == nil || snap.Terminal.Status != "completed" {
		t.Errorf("terminal = %+v", snap.Terminal)
	}
	if snap.Usage.InputTokens != 480 || snap.Usage.OutputTokens != 120 || snap.LLMCalls != 4 {
		t.Errorf("usage = %+v calls=%d", snap.Usage, snap.LLMCalls)
	}
	if len(snap.ToolsInvoked) != 1 || !snap.ToolsInvoked[0].OK || !snap.ToolsInvoked[0].Completed {
		t.Errorf("tools = %+v", snap.ToolsInvoked)
	}
	if len(snap.PendingApprovals) != 0 || len(snap.ResolvedApprovals) != 1 || snap.ResolvedApprovals[0].By != "octocat" {
		t.Errorf("approvals pending=%+v resolved=%+v", snap.PendingApprovals, snap.ResolvedApprovals)
	}
	if snap.State != "DONE" || snap.Agents["planner"] != "PLAN" {
		t.Errorf("state=%q agents=%v", snap.State, snap.Agents)
	}
	if snap.Hooks != 2 || snap.HookDenials != 1 {
		t.Errorf("hooks=%d denials=%d", snap.Hooks, snap.HookDenials)
	}
}

func TestReplayPendingApprovalWhilePaused(t *testing.T) {
	evs := sampleSession(t)
	var cut int
	for i, e := range evs {
		if e.Type == event.RunPaused {
			cut = i + 1
		}
	}
	snap, err := Replay(evs[:cut])
	if err != nil {
		t.Fatal(err)
	}
	if snap.RunStatus != "paused" || len(snap.PendingApprovals) != 1 || snap.PendingApprovals[0].ID != "ap-1" {
		t.Fatalf("status=%q pending=%+v", snap.RunStatus, snap.PendingApprovals)
	}
}

func TestVerifyDetectsCorruption(t *testing.T) {
	reg := schemas.MustDefault()
	good := toJSONL(sampleSession(t))
	lines := bytes.SplitAfter(good, []byte("\n"))
	lines = lines[:len(lines)-1] // SplitAfter leaves an empty tail
	join := func(ls [][]byte) []byte { return bytes.Join(ls, nil) }
	clone := func() [][]byte {
		out := make([][]byte, len(lines))
		for i := range lines {
			out[i] = append([]byte(nil), lines[i]...)
		}
		return out
	}
	cases := []struct {
		name     string
		log      func() []byte
		code     string
		line     int
		contains string
	}{
		{"valid", func() []byte { return good }, "", 0, ""},
		{"torn final line", func() []byte { return good[:len(good)-40] }, ProblemTornFinalLine, len(lines), "cut short"},
		{"flipped byte", func() []byte {
			ls := clone()
			i := bytes.Index(ls[6], []byte(`"role"`))
			ls[6][i+2] ^= 0x01 // "role" → "rnle": still JSON, hash breaks
			return join(ls)
		}, ProblemHashMismatch, 7, "edited"},
		{"flipped byte breaking JSON", func() []byte {
			ls := clone()
			ls[3][0] = '['
			return join(ls)
		}, ProblemInvalidJSON, 4, ""},
		{"reordered lines", func() []byte {
			ls := clone()
			ls[4], ls[5] = ls[5], ls[4]
			return join(ls)
		}, ProblemSeqGap, 5, "missing"},
		{"deleted event", func() []byte {
			ls := clone()
			return join(append(ls[:8:8], ls[9:]...))
		}, ProblemSeqGap, 9, "missing"},
		{"duplicated line", func() []byte {
			ls := clone()
			return join(append(ls[:9:9], append([][]byte{ls[8]}, ls[9:]...)...))
		}, ProblemSeqOrder, 10, "reordered or duplicated"},
		{"edited payload", func() []byte {
			ls := clone()
			i := indexOf(ls, "worker.report")
			ls[i] = bytes.Replace(ls[i], []byte("hello, world"), []byte("hacked world"), 1)
			return join(ls)
		}, ProblemHashMismatch, len(lines) - 9, ""},
		{"edited payload with recomputed hash", func() []byte {
			ls := clone()
			i := indexOf(ls, "worker.report")
			e, err := event.ParseLine(bytes.TrimSpace(ls[i]))
			if err != nil {
				t.Fatal(err)
			}
			e.Payload = bytes.Replace(e.Payload, []byte("hello, world"), []byte("hacked world"), 1)
			e.Hash = e.ComputeHash()
			ls[i] = append(e.Line(), '\n')
			return join(ls)
		}, ProblemChainBroken, len(lines) - 8, "prev_hash"},
		{"missing terminal", func() []byte {
			// Drop turn.terminal and session.close, then re-append a close
			// with a correct chain: the log is well-formed but incomplete.
			evs := sampleSession(t)
			evs = evs[:len(evs)-2]
			last := evs[len(evs)-1]
			pid := (*string)(nil)
			cl := event.Event{ID: "01JD0000000000000000000000", SessionID: last.SessionID, RunID: last.RunID, Seq: last.Seq + 1, TS: last.TS, Type: "session.close", Actor: "runtime", Payload: json.RawMessage(`{"ok":true}`), SchemaVersion: "v1", ParentID: pid, PrevHash: last.Hash}
			cl.Hash = cl.ComputeHash()
			return toJSONL(append(evs, cl))
		}, ProblemTerminalMissing, 0, "report_missing"},
		{"unpaired tool invoke", func() []byte {
			evs := sampleSession(t)
			var out []event.Event
			for _, e := range evs {
				if e.Type == event.ToolResult {
					break
				}
				out = append(out, e)
			}
			return toJSONL(out)
		}, ProblemUnpairedTool, 0, ""},
		{"empty", func() []byte { return nil }, ProblemEmpty, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, err := VerifyReader(reg, bytes.NewReader(c.log()))
			if err != nil {
				t.Fatal(err)
			}
			if c.code == "" {
				if !rep.Valid || rep.Problem != nil {
					t.Fatalf("want valid, got %+v", rep.Problem)
				}
				return
			}
			if rep.Valid || rep.Problem == nil {
				t.Fatalf("want %s, got valid", c.code)
			}
			if rep.Problem.Code != c.code {
				t.Fatalf("code = %s (%v), want %s", rep.Problem.Code, rep.Problem, c.code)
			}
			if c.line != 0 && rep.Problem.Line != c.line {
				t.Errorf("line = %d, want %d (%v)", rep.Problem.Line, c.line, rep.Problem)
			}
			if c.contains != "" && !strings.Contains(rep.Problem.Error(), c.contains) {
				t.Errorf("message %q does not mention %q", rep.Problem.Error(), c.contains)
			}
		})
	}
}

func indexOf(lines [][]byte, typ string) int {
	for i, l := range lines {
		if bytes.Contains(l, []byte(`"type":"`+typ+`"`)) {
			return i
		}
	}
	panic("no " + typ)
}

func TestVerifyEventsFromStore(t *testing.T) {
	evs := sampleSession(t)
	rep := VerifyEvents(schemas.MustDefault(), evs)
	if !rep.Valid {
		t.Fatalf("%+v", rep.Problem)
	}
	evs[3].Actor = "mallory"
	rep = VerifyEvents(schemas.MustDefault(), evs)
	if rep.Valid || rep.Problem.Code != ProblemHashMismatch || rep.Problem.Seq != 4 {
		t.Fatalf("got %+v", rep.Problem)
	}
}

func TestParseLineFastMatchesEncodingJSON(t *testing.T) {
	evs := sampleSession(t)
	extra := []string{
		`{"id":"x","session_id":"s","run_id":"","seq":1,"ts":"t","type":"output.delta","actor":"a\"b","payload":{"text":"caf\u00e9 \"q\" }{"},"schema_version":"v1","parent_id":"p\\1","prev_hash":"","hash":"h"}`,
		`{"id":"x","session_id":"s","run_id":"r","seq":2,"ts":"t","type":"output.delta","actor":"é","payload":{"a":[1,{"b":"]"}]},"schema_version":"v1","parent_id":null,"prev_hash":"p","hash":"h"}`,
		`{"seq":3,"id":"reordered","payload":{}}`,
		"{\"id\":\"x\",\"session_id\":\"s\",\"run_id\":\"\",\"seq\":1,\"ts\":\"t\",\"type\":\"a.b\",\"actor\":\"\xff\",\"payload\":{},\"schema_version\":\"v1\",\"parent_id\":null,\"prev_hash\":\"\",\"hash\":\"h\"}",
	}
	var lines [][]byte
	for i := range evs {
		lines = append(lines, evs[i].Line())
	}
	for _, s := range extra {
		lines = append(lines, []byte(s))
	}
	for _, l := range lines {
		want, werr := event.ParseLine(l)
		got, gerr := event.ParseLineFast(l)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%s: errors differ: %v vs %v", l, werr, gerr)
		}
		a, _ := json.Marshal(want)
		b, _ := json.Marshal(got)
		if !bytes.Equal(a, b) {
			t.Errorf("fast parse differs:\n%s\n%s", a, b)
		}
	}
}

// TestVerifyTornVersusTampered cuts the last line at every byte: each cut is
// a torn final line with the events before it intact. An edited last line
// that lost its newline still parses, so it is reported as an edit, not
// as a crash.
func TestVerifyTornVersusTampered(t *testing.T) {
	reg := schemas.MustDefault()
	good := toJSONL(sampleSession(t))
	body := good[:len(good)-1]
	lastStart := bytes.LastIndexByte(body, '\n') + 1
	lines := bytes.Count(good, []byte("\n"))
	for cut := lastStart + 1; cut < len(good)-1; cut++ {
		rep, err := VerifyReader(reg, bytes.NewReader(good[:cut]))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Problem == nil || rep.Problem.Code != ProblemTornFinalLine || rep.Problem.Line != lines || rep.Events != lines-1 {
			t.Fatalf("cut at byte %d of %d: got %+v (events %d), want %s at line %d after %d intact events", cut, len(good), rep.Problem, rep.Events, ProblemTornFinalLine, lines, lines-1)
		}
	}
	// The complete last line without its newline is a valid log.
	if rep, _ := VerifyReader(reg, bytes.NewReader(body)); !rep.Valid {
		t.Fatalf("log without the final newline: %+v", rep.Problem)
	}
	tampered := append(append([]byte(nil), body[:lastStart]...), bytes.Replace(body[lastStart:], []byte(`"ok":true`), []byte(`"ok":false`), 1)...)
	if bytes.Equal(tampered, body) {
		t.Fatal("test setup: the last line has no \"ok\":true to edit")
	}
	for name, log := range map[string][]byte{"without newline": tampered, "with newline": append(tampered, '\n')} {
		rep, err := VerifyReader(reg, bytes.NewReader(log))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Problem == nil || rep.Problem.Code != ProblemHashMismatch || rep.Problem.Line != lines {
			t.Errorf("edited last line %s: got %+v, want %s at line %d", name, rep.Problem, ProblemHashMismatch, lines)
		}
	}
}

// TestReplayTurnStates: the snapshot's turn state walks the specified
// lifecycle as the sample session's events are folded one by one.
func TestReplayTurnStates(t *testing.T) {
	f := NewFolder()
	var seen []string
	for _, e := range sampleSession(t) {
		e := e
		if err := f.Apply(&e); err != nil {
			t.Fatal(err)
		}
		if st := f.Snapshot().TurnState; st != "" && (len(seen) == 0 || seen[len(seen)-1] != st) {
			seen = append(seen, st)
		}
	}
	want := "preparing running paused preparing waiting_tool running committing completed"
	if got := strings.Join(seen, " "); got != want {
		t.Fatalf("turn states\n got %s\nwant %s", got, want)
	}
}

// TestReplayWorkflowArtifactsCheckpoint folds the workflow plane's events,
// artifacts, a checkpoint and an amendment into the snapshot.
func TestReplayWorkflowArtifactsCheckpoint(t *testing.T) {
	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := store.NewMemory(sealer)
	ctx := context.Background()
	var seq int64
	var firstID string
	for _, d := range []event.Draft{
		{Type: event.WorkflowStarted, Payload: map[string]any{"cycle_id": "bugfix"}},
		{Type: event.WorkflowPhaseAdvanced, Payload: map[string]any{"cycle_id": "bugfix", "from_phase": "", "to_phase": "triage"}},
		{Type: event.WorkflowPolicyGated, Payload: map[string]any{"policy_id": "confidence", "decision": "allow", "reason": "p0 == 0"}},
		{Type: event.ArtifactEmitted, Payload: map[string]any{"kind": "plan", "name": "plan.json", "digest": strings.Repeat("a", 64), "size": 20, "content": `{"steps":[]}`}},
		{Type: event.WorkflowPhaseAdvanced, Payload: map[string]any{"cycle_id": "bugfix", "from_phase": "triage", "to_phase": "fix"}},
		{Type: event.WorkflowPolicyGated, Payload: map[string]any{"policy_id": "loop-halt", "decision": "allow", "reason": "gen 1 < 3"}},
		{Type: event.CheckpointCreated, Payload: map[string]any{"last_seq": 6, "summary": "triaged"}},
		{Type: event.ArtifactEmitted, Payload: map[string]any{"kind": "compaction", "name": "context-summary.md", "digest": strings.Repeat("b", 64), "size": 7, "content": "summary"}},
		{Type: event.WorkflowCompleted, Payload: map[string]any{"cycle_id": "bugfix", "verdict": "done"}},
		{Type: event.EventAmended, Payload: map[string]any{"amends": "FIRST", "reason": "typo", "correction": map[string]any{"cycle_id": "bug-fix"}}},
	} {
		d.Actor, d.RunID = "workflow", "r1"
		if d.Type == event.EventAmended {
			d.Payload.(map[string]any)["amends"] = firstID
		}
		evs, err := s.Append(ctx, "wf", seq, d)
		if err != nil {
			t.Fatalf("%s: %v", d.Type, err)
		}
		seq = evs[0].Seq
		if firstID == "" {
			firstID = evs[0].ID
		}
	}
	evs, _ := s.Read(ctx, "wf", 1)
	snap, err := Replay(evs)
	if err != nil {
		t.Fatal(err)
	}
	w := snap.Workflow
	if w == nil || w.CycleID != "bugfix" || w.Phase != "fix" || strings.Join(w.Visited, ",") != "triage,fix" || w.Verdict != "done" || w.Gates != 2 {
		t.Fatalf("workflow %+v", w)
	}
	if len(snap.Artifacts) != 2 || snap.Artifacts[0].Kind != "plan" || snap.Artifacts[1].Kind != "compaction" || string(snap.Plan) != `{"steps":[]}` {
		t.Errorf("artifacts %+v plan %s", snap.Artifacts, snap.Plan)
	}
	if snap.Checkpoint != 6 || len(snap.Amendments) != 1 || snap.Amendments[0] != firstID {
		t.Errorf("checkpoint %d amendments %v", snap.Checkpoint, snap.Amendments)
	}
	// An aborted cycle records the abort verdict.
	if _, err := s.Append(ctx, "wf", seq, event.Draft{RunID: "r1", Type: event.WorkflowAborted, Actor: "workflow", Payload: map[string]any{"cycle_id": "bugfix", "reason": "halt signal"}}); err != nil {
		t.Fatal(err)
	}
	evs, _ = s.Read(ctx, "wf", 1)
	if snap, _ := Replay(evs); snap.Workflow.Verdict != "abort" {
		t.Errorf("after workflow.aborted verdict = %q", snap.Workflow.Verdict)
	}
}

// TestVerifyAuditCompleteness: a successful session is checked against
// the audit list; one without tool events is invalid
// (audit_incomplete) by default and valid with advice under Lenient; a
// session whose last close is not ok gets no audit check.
func TestVerifyAuditCompleteness(t *testing.T) {
	reg := schemas.MustDefault()
	evs := sampleSession(t)
	rep := VerifyEvents(reg, evs)
	if !rep.Valid || rep.Audit == nil || !rep.Audit.Complete || len(rep.Audit.Missing) != 0 {
		t.Fatalf("sample session: valid=%v audit=%+v", rep.Valid, rep.Audit)
	}
	// Rebuild the session without its skill and tool events.
	sealer, err := event.NewSealer(reg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := store.NewMemory(sealer)
	ctx := context.Background()
	var seq int64
	ids := map[string]string{}
	for _, e := range evs {
		switch e.Type {
		case event.ToolInvoke, event.ToolResult, event.SkillInvoke, event.SkillComplete:
			continue
		}
		parent := ""
		if e.ParentID != nil {
			parent = ids[*e.ParentID]
		}
		out, err := s.Append(ctx, "no-tools", seq, event.Draft{RunID: e.RunID, Type: e.Type, Actor: e.Actor, Payload: e.Payload, ParentID: parent})
		if err != nil {
			t.Fatal(err)
		}
		ids[e.ID], seq = out[0].ID, out[0].Seq
	}
	stripped, _ := s.Read(ctx, "no-tools", 1)
	want := "skill.invoke,tool.invoke,tool.result,skill.complete"
	rep = VerifyEvents(reg, stripped)
	if rep.Valid || rep.Problem == nil || rep.Problem.Code != ProblemAuditIncomplete || !strings.Contains(rep.Problem.Message, "tool.invoke") {
		t.Fatalf("stripped session, strict: valid=%v problem=%v, want %s", rep.Valid, rep.Problem, ProblemAuditIncomplete)
	}
	rep = VerifyEventsOptions(reg, stripped, Options{Lenient: true})
	if !rep.Valid || rep.Audit == nil || rep.Audit.Complete || strings.Join(rep.Audit.Missing, ",") != want {
		t.Fatalf("stripped session, lenient: valid=%v problem=%v audit=%+v, want missing %s", rep.Valid, rep.Problem, rep.Audit, want)
	}
	// A session that closed not ok gets no audit advice.
	last := stripped[len(stripped)-1]
	if _, err := s.Append(ctx, "no-tools", last.Seq, event.Draft{RunID: last.RunID, Type: event.SessionClose, Actor: "runtime", Payload: map[string]any{"ok": false}}); err != nil {
		t.Fatal(err)
	}
	closedBad, _ := s.Read(ctx, "no-tools", 1)
	if rep := VerifyEvents(reg, closedBad); !rep.Valid || rep.Audit != nil {
		t.Fatalf("failed session: valid=%v audit=%+v", rep.Valid, rep.Audit)
	}
}

// A command tool's result says whether the command succeeded, which is not
// the same as the tool call succeeding: the first test.run of the recorded
// approval session fails (exit 1), the one after the patch passes.
func TestReplayRecordsCommandOutcomes(t *testing.T) {
	f, err := os.Open("../../testdata/sessions/approval.events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	snap, err := ReplayReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range snap.ToolsInvoked {
		if c.Tool != "test.run" {
			continue
		}
		if c.Passed == nil || c.ExitCode == nil {
			t.Fatalf("test.run call %s has no outcome: %+v", c.CallID, c)
		}
		got = append(got, c.Command+" ok="+strconv.FormatBool(c.OK)+" passed="+strconv.FormatBool(*c.Passed)+" exit="+strconv.FormatInt(*c.ExitCode, 10))
	}
	want := []string{"go test -count=1 ./... ok=true passed=false exit=1", "go test -count=1 ./... ok=true passed=true exit=0"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("test.run outcomes:\n got %q\nwant %q", got, want)
	}
}

package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
)

// longSession writes an n-event session shaped like a long worker loop
// (model call, tool call, transition) through a journal, with checkpoints
// every `every` events (0: none), and returns its events.
func longSession(tb testing.TB, n int, every int64) []event.Event {
	return longSessionSized(tb, n, every, 0)
}

// longSessionSized is longSession with pad bytes of context in every model
// request and tool result, as real sessions carry (the conversation so
// far, a file read).
func longSessionSized(tb testing.TB, n int, every int64, pad int) []event.Event {
	tb.Helper()
	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	s := store.NewMemory(sealer)
	ctx := context.Background()
	j, err := Open(ctx, s, "long")
	if err != nil {
		tb.Fatal(err)
	}
	if every > 0 {
		j.Checkpoints(replay.NewFolder(), every)
	}
	j.SetRun("r1")
	app := func(typ, actor string, p any, parent string) string {
		e, err := j.Append(ctx, typ, actor, p, parent)
		if err != nil {
			tb.Fatal(err)
		}
		return e.ID
	}
	app(event.SessionStart, "user", map[string]any{"prompt": "fix auth.go"}, "")
	app(event.RunStarted, "runtime", map[string]any{"run_id": "r1", "prompt": "fix auth.go"}, "")
	for i := 0; int(j.Seq()) < n-6; i++ {
		req := app(event.LLMRequest, "worker", map[string]any{"role": "worker", "request": map[string]any{
			"messages": []map[string]any{{"role": "user", "content": "continue the plan: step s2, read auth.go and patch the token check" + strings.Repeat("x", pad)}}, "model": "scripted", "schema_version": "v1"}}, "")
		app(event.LLMResponse, "worker", map[string]any{"role": "worker", "response": map[string]any{
			"text": "", "tool_calls": []map[string]any{{"id": fmt.Sprint("c", i), "name": "repo.read", "args": map[string]any{"path": "auth.go"}}},
			"finish_reason": "tool_use", "usage": map[string]any{"input_tokens": 812, "output_tokens": 41, "cost_usd": 0.0009}, "model": "scripted", "schema_version": "v1"}}, req)
		inv := app(event.ToolInvoke, "worker", map[string]any{"call_id": fmt.Sprint("c", i), "tool": "repo.read", "args": map[string]any{"path": "auth.go"}}, "")
		app(event.ToolResult, "kernel", map[string]any{"call_id": fmt.Sprint("c", i), "tool": "repo.read", "ok": true, "result": map[string]any{"content": "package auth\n" + strings.Repeat("y", pad/4)}}, inv)
		app(event.AgentTransition, "worker", map[string]any{"from": "WORK", "to": "WORK", "role": "worker"}, "")
	}
	evs, err := s.Read(ctx, "long", 1)
	if err != nil {
		tb.Fatal(err)
	}
	return evs
}

func withoutCheckpointSeq(s replay.Snapshot) replay.Snapshot {
	s.Checkpoint = 0
	return s
}

// TestCheckpointResume: a journal writes checkpoint.created at its
// interval; resuming from the latest one plus the events after it gives
// the full fold's snapshot; a checkpoint whose snapshot fails its hash is
// skipped for the one before it, and with none left, the full fold.
func TestCheckpointResume(t *testing.T) {
	evs := longSession(t, 1200, 250)
	var cps []int
	for i, e := range evs {
		if e.Type == event.CheckpointCreated {
			cps = append(cps, i)
		}
	}
	if len(cps) < 4 {
		t.Fatalf("%d checkpoints in %d events with an interval of 250", len(cps), len(evs))
	}
	full, err := replay.Replay(evs)
	if err != nil {
		t.Fatal(err)
	}
	got, from, skipped, err := replay.Resume(evs)
	if err != nil || len(skipped) != 0 || from != evs[cps[len(cps)-1]-1].Seq {
		t.Fatalf("resume: from %d skipped %v err %v", from, skipped, err)
	}
	if !reflect.DeepEqual(got, full) {
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(full)
		t.Fatalf("resume from a checkpoint differs from the full fold:\n%s\n%s", a, b)
	}
	if rep := replay.VerifyEventsOptions(schemas.MustDefault(), evs, replay.Options{}); !rep.Valid {
		t.Fatalf("log with checkpoints does not verify: %v", rep.Problem)
	}
	// Corrupt the latest checkpoint's snapshot (as a buggy writer would;
	// the chain is re-sealed so only the snapshot hash can tell).
	bad := append([]event.Event(nil), evs...)
	last := cps[len(cps)-1]
	var cp replay.Checkpoint
	if err := json.Unmarshal(bad[last].Payload, &cp); err != nil {
		t.Fatal(err)
	}
	cp.SnapshotSHA256 = "00" + cp.SnapshotSHA256[2:]
	bad[last].Payload, _ = json.Marshal(cp)
	got, from, skipped, err = replay.Resume(bad)
	if err != nil || len(skipped) != 1 || from != evs[cps[len(cps)-2]-1].Seq {
		t.Fatalf("after a bad checkpoint: from %d skipped %v err %v", from, skipped, err)
	}
	if !reflect.DeepEqual(withoutCheckpointSeq(got), withoutCheckpointSeq(full)) {
		t.Fatal("fallback to the previous checkpoint differs from the full fold")
	}
	// Every checkpoint bad: the full fold.
	for _, i := range cps {
		bad[i].Payload = []byte(`{"last_seq":1}`)
	}
	got, from, skipped, err = replay.Resume(bad)
	if err != nil || from != 0 || len(skipped) != len(cps) || !reflect.DeepEqual(withoutCheckpointSeq(got), withoutCheckpointSeq(full)) {
		t.Fatalf("full-fold fallback: from %d skipped %d err %v", from, len(skipped), err)
	}
}

// BenchmarkResume50k is resume's fold of a 50,000-event session: the full
// fold against the latest checkpoint (written every DefaultCheckpointEvery
// events, as a run's journal does) plus the events after it. "small" has
// ~200-byte payloads; "8KB" puts 8 KB of conversation in every model
// request and 2 KB in every tool result, closer to a real session.
func BenchmarkResume50k(b *testing.B) {
	for _, size := range []struct {
		name string
		pad  int
	}{{"small", 0}, {"8KB", 8 << 10}} {
		plain := longSessionSized(b, 50_000, 0, size.pad)
		withCP := longSessionSized(b, 50_000, 2000, size.pad)
		b.Run(size.name+"/full-fold", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := replay.Replay(plain); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(size.name+"/checkpoint", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, from, _, err := replay.Resume(withCP); err != nil || from == 0 {
					b.Fatal(err, from)
				}
			}
		})
	}
}

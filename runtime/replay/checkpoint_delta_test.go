package replay

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/schemas"
)

// writer appends events to an in-memory log the way a run's journal does:
// sealed on the tip, folded, and a checkpoint.created every `every`
// events. full forces full checkpoints (the format before incremental
// ones), for comparison.
type writer struct {
	t      testing.TB
	sealer *event.Sealer
	f      *Folder
	evs    []event.Event
	every  int
	full   bool
	lastCP int
}

func newWriter(t testing.TB, every int, full bool) *writer {
	s, err := event.NewSealer(schemas.MustDefault(), nil, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return &writer{t: t, sealer: s, f: NewFolder(), every: every, full: full}
}

func (w *writer) add(d event.Draft) event.Event {
	ps, err := w.sealer.PrepareAll("long", []event.Draft{d})
	if err != nil {
		w.t.Fatal(err)
	}
	tip := event.Tip{}
	if n := len(w.evs); n > 0 {
		tip = event.Tip{Seq: w.evs[n-1].Seq, Hash: w.evs[n-1].Hash}
	}
	e := w.sealer.Chain(tip, ps)[0]
	w.evs = append(w.evs, e)
	if err := w.f.Apply(&w.evs[len(w.evs)-1]); err != nil {
		w.t.Fatal(err)
	}
	return e
}

func (w *writer) step(d event.Draft) event.Event {
	e := w.add(d)
	if w.every > 0 && len(w.evs)-w.lastCP >= w.every {
		w.checkpoint()
	}
	return e
}

func (w *writer) checkpoint() {
	if w.full {
		w.f.cp = nil
	}
	cp, err := NewCheckpoint(w.f)
	if err != nil {
		w.t.Fatal(err)
	}
	w.add(event.Draft{RunID: "r1", Type: event.CheckpointCreated, Actor: "runtime", Payload: cp})
	w.lastCP = len(w.evs)
}

// toolLoop appends n events of a worker loop: model calls, tool calls
// with results, a pause for approval now and then.
func (w *writer) toolLoop(n int) {
	if len(w.evs) == 0 {
		w.step(event.Draft{RunID: "r1", Type: event.SessionStart, Actor: "user", Payload: map[string]any{"prompt": "fix auth.ts"}})
		w.step(event.Draft{RunID: "r1", Type: event.RunStarted, Actor: "runtime", Payload: map[string]any{"run_id": "r1", "prompt": "fix auth.ts"}})
	}
	for i := 0; len(w.evs) < n; i++ {
		req := w.step(event.Draft{RunID: "r1", Type: event.LLMRequest, Actor: "worker", Payload: map[string]any{"role": "worker", "request": map[string]any{"messages": []map[string]any{{"role": "user", "content": "go on"}}, "model": "m", "schema_version": "v1"}}})
		w.step(event.Draft{RunID: "r1", Type: event.LLMResponse, Actor: "worker", ParentID: req.ID, Payload: map[string]any{"role": "worker", "response": map[string]any{"text": "", "tool_calls": []any{}, "finish_reason": "tool_use", "usage": map[string]any{"input_tokens": 800, "output_tokens": 40, "cost_usd": 0.001}, "model": "m", "schema_version": "v1"}}})
		call := fmt.Sprint("c", i)
		inv := w.step(event.Draft{RunID: "r1", Type: event.ToolInvoke, Actor: "worker", Payload: map[string]any{"call_id": call, "tool": "repo.read", "args": map[string]any{"path": "auth.go"}}})
		w.step(event.Draft{RunID: "r1", Type: event.ToolResult, Actor: "kernel", ParentID: inv.ID, Payload: map[string]any{"call_id": call, "tool": "repo.read", "ok": true, "result": map[string]any{"content": "package auth"}}})
		if i%97 == 0 {
			id := fmt.Sprint("ap-", i)
			w.step(event.Draft{RunID: "r1", Type: event.ApprovalRequested, Actor: "kernel", Payload: map[string]any{"approval_id": id, "tool": "repo.patch", "digest": strings.Repeat("ab", 32), "preview": map[string]any{"diff": "+x"}}})
			w.step(event.Draft{RunID: "r1", Type: event.ApprovalResolved, Actor: "maintainer", Payload: map[string]any{"approval_id": id, "decision": "approve", "by": "rita"}})
		}
	}
}

// checkpointBytes sums the payloads of the log's checkpoints and counts
// the incremental ones.
func checkpointBytes(evs []event.Event) (total, incremental, full int) {
	for _, e := range evs {
		if e.Type == event.CheckpointCreated {
			total += len(e.Payload)
			if event.FieldString(e.Payload, "delta") != "" {
				incremental++
			} else {
				full++
			}
		}
	}
	return total, incremental, full
}

// TestIncrementalCheckpoints: with a checkpoint every 100 events of a
// 6,000-event session, the checkpoints together stay within a few times
// the final snapshot (full ones every time add up to tens of times it);
// most are incremental, a full one comes back as the deltas outgrow the
// last; resuming from the latest gives exactly the full fold; the log
// verifies strictly.
func TestIncrementalCheckpoints(t *testing.T) {
	inc := newWriter(t, 100, false)
	inc.toolLoop(6000)
	full := newWriter(t, 100, true)
	full.toolLoop(6000)
	final, err := json.Marshal(inc.f.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	incBytes, deltas, fulls := checkpointBytes(inc.evs)
	fullBytes, _, _ := checkpointBytes(full.evs)
	t.Logf("final snapshot %d bytes; checkpoints: incremental %d bytes (%d deltas, %d full), full-only %d bytes", len(final), incBytes, deltas, fulls, fullBytes)
	if incBytes > 4*len(final) {
		t.Errorf("incremental checkpoints take %d bytes, more than 4x the final snapshot (%d)", incBytes, len(final))
	}
	if fullBytes < 10*len(final) {
		t.Errorf("full checkpoints take %d bytes: the comparison shows nothing", fullBytes)
	}
	if deltas < 40 || fulls < 2 {
		t.Errorf("%d incremental and %d full checkpoints", deltas, fulls)
	}
	for _, w := range []*writer{inc, full} {
		want, err := Replay(w.evs)
		if err != nil {
			t.Fatal(err)
		}
		got, from, skipped, err := Resume(w.evs)
		if err != nil || len(skipped) != 0 || from == 0 {
			t.Fatalf("resume: from %d, skipped %v, %v", from, skipped, err)
		}
		if !reflect.DeepEqual(got, want) {
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(want)
			t.Fatalf("resume differs from the full fold:\n%s\n%s", a, b)
		}
		if rep := VerifyEvents(schemas.MustDefault(), w.evs); !rep.Valid {
			t.Fatalf("verify: %v", rep.Problem)
		}
	}
}

// TestIncrementalCheckpointDamaged: a delta that no longer rebuilds its
// snapshot's hash makes every checkpoint that builds on it unusable;
// resume falls back to one before it and still gives the full fold.
func TestIncrementalCheckpointDamaged(t *testing.T) {
	w := newWriter(t, 100, false)
	w.toolLoop(1500)
	var cps []int
	for i, e := range w.evs {
		if e.Type == event.CheckpointCreated {
			cps = append(cps, i)
		}
	}
	// The first incremental checkpoint after the last full one: every
	// later one builds on it.
	lastFull := -1
	for k, i := range cps {
		if event.FieldString(w.evs[i].Payload, "delta") == "" {
			lastFull = k
		}
	}
	if lastFull < 0 || len(cps)-lastFull < 3 {
		t.Fatalf("checkpoints %v, the last full one %d", cps, lastFull)
	}
	victim := cps[lastFull+1]
	var cp Checkpoint
	if err := json.Unmarshal(w.evs[victim].Payload, &cp); err != nil || cp.Delta == "" {
		t.Fatalf("checkpoint at %d: %v", victim, err)
	}
	if !strings.Contains(cp.Delta, `"call_id":"c`) {
		t.Fatalf("the delta at %d holds no tool call: %.200s", victim, cp.Delta)
	}
	cp.Delta = strings.Replace(cp.Delta, `"call_id":"c`, `"call_id":"X`, 1)
	bad := append([]event.Event(nil), w.evs...)
	bad[victim].Payload, _ = json.Marshal(cp)
	want, _ := Replay(w.evs)
	got, from, skipped, err := Resume(bad)
	if err != nil || len(skipped) != len(cps)-lastFull-1 || from != w.evs[cps[lastFull]-1].Seq {
		t.Fatalf("resume past a damaged delta: from %d, skipped %v, %v", from, skipped, err)
	}
	got.Checkpoint, want.Checkpoint = 0, 0
	if !reflect.DeepEqual(got, want) {
		t.Fatal("resume past a damaged delta differs from the full fold")
	}
}

// TestCorpusCheckpointsRestore: logs recorded before incremental
// checkpoints (full snapshots in struct order) still resume to the full
// fold, and an incremental checkpoint written on top of one restores too.
func TestCorpusCheckpointsRestore(t *testing.T) {
	logs, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "replay-corpus", "*", "events.jsonl"))
	n := 0
	for _, path := range logs {
		evs := readLog(t, path)
		_, _, full := checkpointBytes(evs)
		if full == 0 {
			continue
		}
		n++
		want, err := Replay(evs)
		if err != nil {
			t.Fatal(err)
		}
		f, from, skipped, err := ResumeFolder(evs)
		if err != nil || from == 0 || len(skipped) != 0 || !reflect.DeepEqual(f.Snapshot(), want) {
			t.Fatalf("%s: resume from %d, skipped %v, %v", path, from, skipped, err)
		}
		// Continue the log from its last checkpoint: an incremental
		// checkpoint on the old base.
		last := 0
		for i, e := range evs {
			if e.Type == event.CheckpointCreated {
				last = i
			}
		}
		evs = evs[:last+1]
		if f, _, _, err = ResumeFolder(evs); err != nil {
			t.Fatal(err)
		}
		w := newWriter(t, 0, false)
		w.evs, w.f = evs, f
		w.add(event.Draft{RunID: "r9", Type: event.OutputMessage, Actor: "worker", Payload: map[string]any{"text": "more"}})
		w.checkpoint()
		w.add(event.Draft{RunID: "r9", Type: event.OutputMessage, Actor: "worker", Payload: map[string]any{"text": "after"}})
		if event.FieldString(w.evs[len(w.evs)-2].Payload, "delta") == "" {
			t.Fatalf("%s: the checkpoint after resuming is not incremental (base %+v): %.300s", path, f.cp != nil, w.evs[len(w.evs)-2].Payload)
		}
		want, _ = Replay(w.evs)
		got, from, skipped, err := Resume(w.evs)
		if err != nil || from != w.evs[len(w.evs)-3].Seq || len(skipped) != 0 || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: resume from the incremental checkpoint: from %d, skipped %v, %v", path, from, skipped, err)
		}
	}
	if n == 0 {
		t.Fatal("no corpus log holds a checkpoint")
	}
}

func readLog(t testing.TB, path string) []event.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []event.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		e, err := event.ParseLine(append([]byte(nil), sc.Bytes()...))
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	return evs
}

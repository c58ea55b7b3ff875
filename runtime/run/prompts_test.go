package run

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
)

// renamedTools offers echo as "say": code whose tool set changed since
// the run was recorded.
type renamedTools struct{ *fakeKernel }

func (r renamedTools) Specs(scope []string) []provider.ToolSpec {
	var out []provider.ToolSpec
	for _, s := range r.fakeKernel.Specs(scope) {
		if s.Name == "echo" {
			s.Name = "say"
		}
		out = append(out, s)
	}
	return out
}

// TestRequestsStorePromptsOnce: every llm.request records its request by
// prompt block reference and defines only the blocks no request before
// it did (docs/decisions.md, "Prompts stored once per session"); each
// reads back whole; re-execution compares the requests read back, so the
// same code replays and a changed tool set is non-determinism.
func TestRequestsStorePromptsOnce(t *testing.T) {
	f := newFixture(t, script(echoCall, finalReport), nil)
	ctx := context.Background()
	if _, err := f.mgr.Start(ctx, f.eng, StartRequest{SessionID: "p1", Prompt: "greet the world"}); err != nil {
		t.Fatal(err)
	}
	evs := f.events(t, "p1")
	verify(t, evs)
	table := event.NewPrompts(evs)
	defined := map[string]bool{}
	var worker []*event.Event
	for i := range evs {
		e := &evs[i]
		if e.Type != event.LLMRequest {
			continue
		}
		defs, err := event.CheckPromptDefs(e.Payload)
		if err != nil {
			t.Fatal(err)
		}
		for r := range defs {
			if defined[r] {
				t.Errorf("seq %d defines %s again", e.Seq, r)
			}
			defined[r] = true
		}
		if refs, _ := event.PromptRefs(e.Payload); len(refs) == 0 {
			t.Errorf("seq %d records its request whole", e.Seq)
		}
		req, err := table.Request(e)
		if err != nil {
			t.Fatal(err)
		}
		var r provider.CompletionRequest
		if err := json.Unmarshal(req, &r); err != nil || len(r.Messages) == 0 || r.Messages[0].Role != provider.RoleSystem || r.Messages[0].Content == "" {
			t.Fatalf("seq %d reads back as %s (%v)", e.Seq, req, err)
		}
		if event.FieldString(e.Payload, "role") == "worker" {
			worker = append(worker, e)
		}
	}
	if len(worker) != 2 {
		t.Fatalf("%d worker requests, want 2", len(worker))
	}
	first, _ := table.Request(worker[0])
	second, _ := table.Request(worker[1])
	var r1 provider.CompletionRequest
	_ = json.Unmarshal(first, &r1)
	if sys := r1.Messages[0].Content; len(sys) < 200 || strings.Contains(string(worker[1].Payload), sys[:200]) {
		t.Errorf("the worker's second request repeats its system prompt (%d bytes)", len(sys))
	}
	if len(worker[1].Payload)*2 > len(second) {
		t.Errorf("the worker's second request takes %d bytes, the request %d", len(worker[1].Payload), len(second))
	}

	history, prompt, _, _ := runHistory(evs, evs[1].RunID)
	same := newFixture(t, script(echoCall, finalReport), nil)
	if _, err := Reexecute(ctx, same.eng, prompt, history); err != nil {
		t.Fatalf("same code diverged: %v", err)
	}
	changed := newFixture(t, script(echoCall, finalReport), nil)
	changed.eng.Tools = renamedTools{changed.kernel}
	_, err := Reexecute(ctx, changed.eng, prompt, history)
	var nd *NonDeterminismError
	if !errors.As(err, &nd) || !strings.Contains(nd.Want, "say") || !strings.Contains(nd.Got, "echo") {
		t.Fatalf("renamed tool: got %v, want NonDeterminismError naming the recorded echo", err)
	}
}

// TestPromptBytesFigures measures a longer scripted session (a worker
// that makes 25 tool calls, so 26 worker requests of a growing
// conversation): the log's bytes as written, and as the earlier format
// wrote it (each llm.request with its request whole, as
// event.Prompts.Payload reads it back). docs/measurements.md reports the
// figures (go test ./runtime/run -run PromptBytesFigures -v).
func TestPromptBytesFigures(t *testing.T) {
	const calls = 25
	turns := make([]string, 0, calls+1)
	for i := 0; i < calls; i++ {
		turns = append(turns, `    - tool_calls: [{id: t`+string(rune('a'+i))+`, name: echo, args: {text: "line `+string(rune('a'+i))+` of the greeting, long enough to look like a tool result"}}]`)
	}
	turns = append(turns, finalReport)
	f := newFixture(t, script(turns...), nil)
	if _, err := f.mgr.Start(context.Background(), f.eng, StartRequest{SessionID: "long", Prompt: "greet the world"}); err != nil {
		t.Fatal(err)
	}
	evs := f.events(t, "long")
	verify(t, evs)
	table := event.NewPrompts(evs)
	var now, before, reqNow, reqBefore, requests int
	for i := range evs {
		n := len(evs[i].Line()) + 1
		now += n
		if evs[i].Type != event.LLMRequest {
			before += n
			continue
		}
		requests++
		full, err := table.Payload(&evs[i])
		if err != nil {
			t.Fatal(err)
		}
		old := evs[i]
		old.Payload = full
		m := len(old.Line()) + 1
		before += m
		reqNow += n
		reqBefore += m
	}
	t.Logf("%d events, %d llm.request: log %d bytes, %d with requests recorded whole (%.1f%%); llm.request %d bytes, %d whole (%.1fx)",
		len(evs), requests, now, before, 100*float64(now)/float64(before), reqNow, reqBefore, float64(reqBefore)/float64(reqNow))
	if requests < calls || now*2 > before {
		t.Errorf("%d requests; log %d bytes against %d whole: prompt blocks are not stored once", requests, now, before)
	}
}

package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
)

// promptSession appends a session whose three model calls record their
// requests by prompt block reference, each defining only the blocks the
// earlier ones did not (docs/decisions.md, "Prompts stored once per
// session").
func promptSession(t *testing.T) []event.Event {
	t.Helper()
	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := store.NewMemory(sealer)
	ctx := context.Background()
	var seq int64
	app := func(typ string, payload any, parent string) event.Event {
		t.Helper()
		evs, err := s.Append(ctx, "prompts", seq, event.Draft{RunID: "run-1", Type: typ, Actor: "worker", Payload: payload, ParentID: parent})
		if err != nil {
			t.Fatalf("append %s: %v", typ, err)
		}
		seq = evs[0].Seq
		return evs[0]
	}
	app(event.SessionStart, map[string]any{"prompt": "fix it"}, "")
	app(event.RunStarted, map[string]any{"run_id": "run-1", "prompt": "fix it"}, "")
	w := event.NewPromptWriter()
	msgs := []any{map[string]any{"role": "system", "content": strings.Repeat("system prompt ", 50)}, map[string]any{"role": "user", "content": "fix it"}}
	tools := []any{map[string]any{"name": "repo.read", "input_schema": map[string]any{"type": "object"}}}
	for turn := 0; turn < 3; turn++ {
		full, _ := json.Marshal(map[string]any{"messages": msgs, "tools": tools, "model": "scripted", "schema_version": "v1"})
		compact, defs, err := w.Compact(full)
		if err != nil {
			t.Fatal(err)
		}
		p := map[string]any{"role": "worker", "attempt": 1, "request": compact}
		if len(defs) > 0 {
			p["prompts"] = defs
		}
		req := app(event.LLMRequest, p, "")
		w.Learn(&req)
		app(event.LLMResponse, map[string]any{"role": "worker", "response": map[string]any{"text": "ok", "tool_calls": []any{}, "finish_reason": "stop",
			"usage": map[string]any{"input_tokens": 1, "output_tokens": 1}, "model": "scripted", "schema_version": "v1"}}, req.ID)
		msgs = append(msgs, map[string]any{"role": "assistant", "content": "turn " + string(rune('a'+turn))})
	}
	evs, err := s.Read(ctx, "prompts", 1)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// rechain recomputes every hash after evs[from] was edited, as a forger
// who rewrites the chain would, so that only the prompt checks can tell.
func rechain(evs []event.Event, from int) {
	for i := from; i < len(evs); i++ {
		if i > 0 {
			evs[i].PrevHash = evs[i-1].Hash
		}
		evs[i].Hash = evs[i].ComputeHash()
	}
}

func llmRequests(evs []event.Event) []int {
	var out []int
	for i, e := range evs {
		if e.Type == event.LLMRequest {
			out = append(out, i)
		}
	}
	return out
}

func TestVerifyPromptBlocks(t *testing.T) {
	reg := schemas.MustDefault()
	evs := promptSession(t)
	reqs := llmRequests(evs)
	if rep := VerifyEvents(reg, evs); !rep.Valid {
		t.Fatalf("a log with prompt blocks does not verify: %+v", rep.Problem)
	}
	if defs, _ := event.PromptDefs(evs[reqs[1]].Payload); len(defs) != 2 {
		t.Fatalf("the second request defines %d blocks, want 2 (its new message and its conversation)", len(defs))
	}
	if rep, err := VerifyReader(reg, bytes.NewReader(toJSONL(evs))); err != nil || !rep.Valid {
		t.Fatalf("the JSONL log does not verify: %v %+v", err, rep.Problem)
	}

	// A block's text edited in place: the event's own hash says so.
	first := reqs[0]
	edited := append([]event.Event(nil), evs...)
	edited[first].Payload = json.RawMessage(strings.Replace(string(evs[first].Payload), "system prompt", "system pr0mpt", 1))
	if rep, _ := VerifyReader(reg, bytes.NewReader(toJSONL(edited))); rep.Problem == nil || rep.Problem.Code != ProblemHashMismatch {
		t.Errorf("edited block: %+v", rep.Problem)
	}
	// Edited and the chain rewritten: the block no longer hashes to its
	// reference.
	rechain(edited, first)
	rep, _ := VerifyReader(reg, bytes.NewReader(toJSONL(edited)))
	if rep.Problem == nil || rep.Problem.Code != ProblemPromptBlock || rep.Problem.Seq != evs[first].Seq || !strings.Contains(rep.Problem.Message, "changed after it was written") {
		t.Errorf("edited block, chain rewritten: %+v", rep.Problem)
	}

	// A definition removed (chain rewritten): the later request uses a
	// block nothing defined.
	removed := append([]event.Event(nil), evs...)
	var p map[string]json.RawMessage
	_ = json.Unmarshal(evs[first].Payload, &p)
	var defs map[string]json.RawMessage
	_ = json.Unmarshal(p["prompts"], &defs)
	for r := range defs {
		if strings.Contains(string(defs[r]), "system prompt") {
			delete(defs, r)
		}
	}
	p["prompts"], _ = json.Marshal(defs)
	b, _ := json.Marshal(p)
	removed[first].Payload, _ = event.Canonical(b)
	rechain(removed, first)
	rep = VerifyEvents(reg, removed)
	if rep.Problem == nil || rep.Problem.Code != ProblemPromptBlock || rep.Problem.Seq != evs[first].Seq || !strings.Contains(rep.Problem.Message, "no llm.request at or before it") {
		t.Errorf("definition removed: %+v", rep.Problem)
	}

	// A block under a name that is not its digest.
	swapped := append([]event.Event(nil), evs...)
	last := reqs[2]
	var lp map[string]json.RawMessage
	_ = json.Unmarshal(evs[last].Payload, &lp)
	lp["prompts"] = json.RawMessage(`{"sha256:` + strings.Repeat("0", 64) + `":{"role":"user","content":"x"}}`)
	b, _ = json.Marshal(lp)
	swapped[last].Payload, _ = event.Canonical(b)
	rechain(swapped, last)
	rep = VerifyEvents(reg, swapped)
	if rep.Problem == nil || rep.Problem.Code != ProblemPromptBlock || rep.Problem.Seq != evs[last].Seq {
		t.Errorf("forged block name: %+v", rep.Problem)
	}
}

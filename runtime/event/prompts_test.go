package event

import (
	"encoding/json"
	"strings"
	"testing"
)

// promptDraft is the llm.request draft w makes of req.
func promptDraft(t *testing.T, req string, w *PromptWriter) Draft {
	t.Helper()
	compact, defs, err := w.Compact([]byte(req))
	if err != nil {
		t.Fatal(err)
	}
	p := map[string]any{"role": "worker", "request": compact, "attempt": 1}
	if len(defs) > 0 {
		p[PromptsMember] = defs
	}
	return Draft{RunID: "r", Type: LLMRequest, Actor: "worker", Payload: p}
}

// TestPromptsStoredOnceAndReadBack: the first request defines every
// block, the second (the conversation grown by two messages) defines
// only the new ones and references the rest, and both read back as the
// requests that were sent.
func TestPromptsStoredOnceAndReadBack(t *testing.T) {
	s := newSealer(t)
	sys := `{"role":"system","content":"` + strings.Repeat("You are the worker <b>. ", 100) + `"}`
	tool := `{"name":"repo.read","description":"read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}`
	req1 := `{"messages":[` + sys + `,{"role":"user","content":"fix it"}],"model":"m","tools":[` + tool + `],"max_tokens":100,"temperature":0.2,"schema_version":"v1"}`
	req2 := `{"messages":[` + sys + `,{"role":"user","content":"fix it"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","name":"repo.read","args":{"path":"a.go"}}]},{"role":"tool","content":"package a","tool_call_id":"c1"}],"model":"m","tools":[` + tool + `],"max_tokens":100,"temperature":0.2,"schema_version":"v1"}`

	w := NewPromptWriter()
	p1, err := s.Prepare("sess", promptDraft(t, req1, w))
	if err != nil {
		t.Fatal(err)
	}
	defs1, err := CheckPromptDefs(p1.Payload)
	// sys, user, tool, and the list block of the conversation
	if err != nil || len(defs1) != 4 {
		t.Fatalf("first request defines %d blocks (%v), want 4", len(defs1), err)
	}
	w.Learn(&Event{Type: LLMRequest, Payload: p1.Payload})
	p2, err := s.Prepare("sess", promptDraft(t, req2, w))
	if err != nil {
		t.Fatal(err)
	}
	defs2, err := CheckPromptDefs(p2.Payload)
	if err != nil || len(defs2) != 3 {
		t.Fatalf("second request defines %d blocks (%v), want the 2 new messages and its conversation", len(defs2), err)
	}
	var first struct {
		Request struct{ Messages []string }
	}
	_ = json.Unmarshal(p1.Payload, &first)
	var prefixed bool
	for _, b := range defs2 {
		items, _ := ListItems(b)
		prefixed = prefixed || len(items) == 3 && len(first.Request.Messages) == 1 && items[0] == first.Request.Messages[0]
	}
	if refs, _ := PromptRefs(p2.Payload); len(refs) != 2 || !prefixed {
		t.Errorf("second request: references %v, blocks %v: want its conversation as the first one's and the 2 new messages", refs, defs2)
	}
	if strings.Contains(string(p2.Payload), "You are the worker") {
		t.Errorf("the system prompt is repeated in the second request: %s", p2.Payload)
	}
	if len(p2.Payload) >= len(req2)/2 {
		t.Errorf("second request %d bytes, the request itself %d: not stored by reference", len(p2.Payload), len(req2))
	}
	evs := s.Chain(Tip{}, []Prepared{p1, p2})
	table := NewPrompts(evs)
	for i, want := range []string{req1, req2} {
		got, err := table.Request(&evs[i])
		if err != nil {
			t.Fatal(err)
		}
		wantC, _ := Canonical([]byte(want))
		if string(got) != string(wantC) {
			t.Errorf("request %d reads back as\n%s\nwant\n%s", i+1, got, wantC)
		}
		full, err := table.Payload(&evs[i])
		if err != nil {
			t.Fatal(err)
		}
		if Field(full, PromptsMember) != nil || string(Field(full, "request")) != string(wantC) || FieldString(full, "role") != "worker" {
			t.Errorf("payload %d reads back as %s", i+1, full)
		}
	}
	// Without the first event the second does not read back.
	if _, err := NewPrompts(evs[1:]).Request(&evs[1]); err == nil || !strings.Contains(err.Error(), "is not defined by an llm.request before it") {
		t.Errorf("a reference to an undefined block: %v", err)
	}
}

// TestPromptsRedactedBeforeHashing: a block holding a secret is stored
// redacted, named by the digest of its redacted text, and the request
// references it by that name; the digest of the text with the secret is
// written nowhere.
func TestPromptsRedactedBeforeHashing(t *testing.T) {
	s := newSealer(t)
	tok := "ghp_" + strings.Repeat("Zq9x", 9)
	msg := `{"role":"user","content":"use ` + tok + ` to push"}`
	req := `{"messages":[{"role":"system","content":"sys"},` + msg + `],"model":"m","schema_version":"v1"}`
	raw, _ := BlockRef([]byte(msg))
	for _, decoded := range []bool{false, true} {
		t.Run(map[bool]string{false: "encoded", true: "decoded"}[decoded], func(t *testing.T) {
			redactedBlock(t, s, req, tok, raw, decoded)
		})
	}
}

// redactedBlock prepares the request's llm.request, its payload given as
// Go values that need encoding or (decoded) as plain decoded JSON, which
// the sealer redacts without encoding first.
func redactedBlock(t *testing.T, s *Sealer, req, tok, raw string, decoded bool) {
	d := promptDraft(t, req, NewPromptWriter())
	if decoded {
		b, _ := json.Marshal(d.Payload)
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		v["attempt"] = 1
		d.Payload = v
	}
	if _, val, err := s.redactPayload(d.Payload); err != nil || (val != nil) != decoded {
		t.Fatalf("redactPayload: decoded form %v, want %v (%v)", val != nil, decoded, err)
	}
	p, err := s.Prepare("sess", d)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(p.Payload), tok) || strings.Contains(string(p.Payload), raw) {
		t.Fatalf("the secret or the digest of its text was written: %s", p.Payload)
	}
	defs, err := CheckPromptDefs(p.Payload)
	if err != nil {
		t.Fatalf("stored blocks do not hash to their names: %v", err)
	}
	red, _ := Canonical([]byte(`{"role":"user","content":"use [REDACTED] to push"}`))
	ref := PromptRef(red)
	if string(defs[ref]) != string(red) {
		t.Fatalf("redacted block not stored under its digest %s: %v", ref, defs)
	}
	refs, _ := PromptRefs(p.Payload)
	if len(refs) != 1 || !strings.Contains(string(defs[refs[0]]), ref) {
		t.Errorf("request references %v, want its conversation listing the redacted block's digest (%v)", refs, defs)
	}
	evs := s.Chain(Tip{}, []Prepared{p})
	got, err := NewPrompts(evs).Request(&evs[0])
	if err != nil || !strings.Contains(string(got), "use [REDACTED] to push") {
		t.Errorf("read back: %s, %v", got, err)
	}
}

// TestPromptsEarlierFormat: a request recorded whole reads back as it is.
func TestPromptsEarlierFormat(t *testing.T) {
	s := newSealer(t)
	p, err := s.Prepare("sess", Draft{RunID: "r", Type: LLMRequest, Actor: "lead", Payload: map[string]any{"role": "lead", "attempt": 1,
		"request": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}, "model": "m", "schema_version": "v1"}}})
	if err != nil {
		t.Fatal(err)
	}
	evs := s.Chain(Tip{}, []Prepared{p})
	table := NewPrompts(evs)
	got, err := table.Request(&evs[0])
	if err != nil || string(got) != string(Field(p.Payload, "request")) {
		t.Errorf("read back %s, %v", got, err)
	}
	full, err := table.Payload(&evs[0])
	if err != nil || string(full) != string(p.Payload) {
		t.Errorf("payload %s, %v", full, err)
	}
}

// TestPromptDefsRejectEdits: a definition whose text does not hash to its
// name is reported, and the table leaves it out.
func TestPromptDefsRejectEdits(t *testing.T) {
	block := `{"content":"hello","role":"user"}`
	ref := PromptRef([]byte(block))
	edited := `{"role":"worker","request":{"messages":["` + ref + `"],"model":"m","schema_version":"v1"},"prompts":{"` + ref + `":{"content":"hellO","role":"user"}}}`
	if _, err := CheckPromptDefs([]byte(edited)); err == nil || !strings.Contains(err.Error(), "changed after it was written") {
		t.Errorf("edited block: %v", err)
	}
	e := Event{Type: LLMRequest, Seq: 3, Payload: json.RawMessage(edited)}
	if _, err := NewPrompts([]Event{e}).Request(&e); err == nil {
		t.Error("a request whose block was edited read back")
	}
	if IsPromptRef("sha256:"+strings.Repeat("A", 64)) || !IsPromptRef(ref) {
		t.Error("IsPromptRef")
	}
}

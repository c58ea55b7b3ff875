package viewer

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/event"
)

// TestRequestShownWhole: an llm.request that references prompt blocks
// defined by an earlier request (docs/decisions.md) is shown with the
// request the model was sent, the system prompt included, not the
// references.
func TestRequestShownWhole(t *testing.T) {
	sys := obj{"role": "system", "content": "You are the worker; follow the plan."}
	user := obj{"role": "user", "content": "fix the token check"}
	w := event.NewPromptWriter()
	var list []any
	for _, msgs := range [][]any{{sys, user}, {sys, user, obj{"role": "assistant", "content": "done"}}} {
		full := mustJSON(t, obj{"messages": msgs, "model": "scripted", "schema_version": "v1"})
		compact, defs, err := w.Compact([]byte(full))
		if err != nil {
			t.Fatal(err)
		}
		p := obj{"role": "worker", "attempt": 1, "request": compact}
		if len(defs) > 0 {
			p["prompts"] = defs
		}
		b, _ := json.Marshal(p)
		w.Learn(&event.Event{Type: event.LLMRequest, Payload: b})
		list = append(list, event.LLMRequest, p)
	}
	log := evs(t, list...)
	if strings.Contains(string(log[1].Payload), "follow the plan") {
		t.Fatalf("the second request repeats the system prompt: %s", log[1].Payload)
	}
	s, err := Build("sess", log, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range s.Events {
		if !strings.Contains(r.Body, "follow the plan") || strings.Contains(r.Body, "sha256:") || strings.Contains(r.Body, `"prompts"`) {
			t.Errorf("request %d shown as:\n%s", i+1, r.Body)
		}
	}
	if !strings.Contains(s.Events[1].Body, `"content": "done"`) {
		t.Errorf("the second request's new message is missing:\n%s", s.Events[1].Body)
	}
}

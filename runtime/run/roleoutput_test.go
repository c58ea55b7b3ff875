package run

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/schemas"
)

func TestParseReply(t *testing.T) {
	reg := schemas.MustDefault()
	tests := []struct {
		name, text string
		step       string // "" for as sent
		wantErr    string // "" for a document
	}{
		{"as sent", reviewPass, "", ""},
		{"white space around", "\n  " + reviewPass + "\n", "", ""},
		{"json fence", "```json\n" + reviewPass + "\n```", stepStripFence, ""},
		{"bare fence after a sentence", "Here you go:\n```\n" + reviewPass + "\n```\nThanks.", stepStripFence, ""},
		{"prose around", "Here is the review: " + reviewPass + " Hope this helps!", stepExtractObject, ""},
		{"braces inside strings", `Result: {"verdict":"pass","feedback":"a } and a { inside","schema_version":"v1"} done`, stepExtractObject, ""},
		{"a brace before the object", "I checked {the plan} and: " + reviewPass, stepExtractObject, ""},
		{"valid JSON that breaks the schema", `{"verdict":"maybe","feedback":"x","schema_version":"v1"}`, "", "/verdict"},
		{"fenced JSON that breaks the schema", "```json\n{\"verdict\":\"pass\"}\n```", "", "missing"},
		{"no JSON", "I think the work is fine.", "", "contains no JSON object"},
		{"empty", "  ", "", "empty"},
		{"an array", `[` + reviewPass + `]`, stepExtractObject, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, step, problem, err := parseReply(tt.text, "review_result_v1", reg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if step != tt.step {
				t.Errorf("step %q, want %q", step, tt.step)
			}
			if (step == "") != (problem == "") {
				t.Errorf("problem %q for step %q", problem, step)
			}
			if reg.ValidateJSON("review_result_v1", doc) != nil {
				t.Errorf("doc %s", doc)
			}
		})
	}
}

// recording wraps a provider and keeps every request.
type recording struct {
	provider.Provider
	mu   sync.Mutex
	reqs []provider.CompletionRequest
}

func (r *recording) Complete(ctx context.Context, req provider.CompletionRequest) (provider.CompletionResponse, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return r.Provider.Complete(ctx, req)
}

func yq(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestRoleOutputRepairs: a fenced lead, a planner in prose, a worker whose
// final answer is prose (one repair turn, structured, tools kept) and a
// reviewer whose JSON drifts (one repair turn) still complete the run;
// each repair is a role.output_repaired event whose parent is the
// llm.response it repaired; the log verifies and re-executes.
func TestRoleOutputRepairs(t *testing.T) {
	sc := `
roles:
  lead: [{text: ` + yq("```json\n"+leadOK+"\n```") + `}]
  planner: [{text: ` + yq("Here is the plan:\n"+planOK+"\nTell me if it should change.") + `}]
  worker:
` + echoCall + `
    - text: "I echoed the greeting; all done."
    - text: ` + yq(reportOK) + `
  reviewer: [{text: '{"verdict":"pass","feedback":"fine"}'}, {text: ` + yq("```json\n"+reviewPass+"\n```") + `}]
`
	f := newFixture(t, sc, nil)
	rec := &recording{Provider: f.eng.Provider}
	f.eng.Provider = rec
	out, err := f.mgr.Start(context.Background(), f.eng, StartRequest{SessionID: "rep", Prompt: "greet the world"})
	if err != nil || out.Status != "completed" {
		t.Fatalf("%+v %v", out, err)
	}
	evs := f.events(t, "rep")
	verify(t, evs)
	byID := map[string]event.Event{}
	var got []string
	for _, e := range evs {
		byID[e.ID] = e
		if e.Type != event.RoleOutputRepaired {
			continue
		}
		step := event.FieldString(e.Payload, "step")
		if r := event.FieldString(e.Payload, "reply_step"); r != "" {
			step += "+" + r
		}
		got = append(got, e.Actor+":"+step)
		if parent := byID[e.Parent()]; parent.Type != event.LLMResponse || parent.Actor != e.Actor {
			t.Errorf("%s repair's parent is %s by %s, want its llm.response", e.Actor, parent.Type, parent.Actor)
		}
		if event.FieldString(e.Payload, "problem") == "" {
			t.Errorf("%s repair records no problem", e.Actor)
		}
	}
	want := "lead:strip_fence planner:extract_object worker:repair_turn reviewer:repair_turn+strip_fence"
	if strings.Join(got, " ") != want {
		t.Errorf("repairs %s, want %s", strings.Join(got, " "), want)
	}
	violations := 0
	for _, e := range evs {
		if e.Type == event.SchemaViolation {
			violations++
		}
	}
	if violations != 2 {
		t.Errorf("%d schema.violation events, want 2 (the worker's prose, the reviewer's drift)", violations)
	}
	// Every role call asked for its schema; the worker's tool turns did
	// not, its report turn did, with the same tools as before.
	var shapes []string
	for _, r := range rec.reqs {
		s := r.Role
		if r.ResponseSchema != nil {
			s += "+" + r.ResponseSchema.Name
		}
		if len(r.Tools) > 0 {
			s += "+tools"
		}
		shapes = append(shapes, s)
	}
	wantShapes := "lead+lead_directive_v1 planner+plan_v1 worker+tools worker+tools worker+worker_report_v1+tools reviewer+review_result_v1 reviewer+review_result_v1"
	if strings.Join(shapes, " ") != wantShapes {
		t.Errorf("requests %s\nwant     %s", strings.Join(shapes, " "), wantShapes)
	}
	last := rec.reqs[4].Messages[len(rec.reqs[4].Messages)-1]
	if !strings.Contains(last.Content, "Your final reply is not valid worker_report_v1") || !strings.Contains(last.Content, "contains no JSON object") {
		t.Errorf("the repair turn does not quote the problem: %q", last.Content)
	}
	for _, e := range evs {
		if e.Type == event.LLMRequest && event.FieldString(e.Payload, "role") == "lead" && event.FieldString(e.Payload, "response_schema") != "lead_directive_v1" {
			t.Errorf("the lead's llm.request does not record its response schema: %s", e.Payload)
		}
	}
	// Re-execution takes the same path from the log.
	var history []event.Event
	for _, e := range evs {
		if e.Type == event.RunStarted || len(history) > 0 {
			history = append(history, e)
		}
	}
	if _, err := Reexecute(context.Background(), f.eng, "greet the world", history); err != nil {
		t.Fatalf("re-execution diverges: %v", err)
	}
}

func TestStructuredOutputOff(t *testing.T) {
	f := newFixture(t, script(echoCall, finalReport), nil)
	off := false
	f.eng.Profile.StructuredOutput = &off
	rec := &recording{Provider: f.eng.Provider}
	f.eng.Provider = rec
	if out, err := f.mgr.Start(context.Background(), f.eng, StartRequest{SessionID: "off", Prompt: "greet the world"}); err != nil || out.Status != "completed" {
		t.Fatalf("%+v %v", out, err)
	}
	for _, r := range rec.reqs {
		if r.ResponseSchema != nil {
			t.Errorf("%s asked for %s with structured output off", r.Role, r.ResponseSchema.Name)
		}
	}
}

func TestRepairFailsClosed(t *testing.T) {
	tests := []struct {
		name, script, reason string
	}{
		{"worker prose twice", script(echoCall, `    - text: "done"`, `    - text: "really done"`), "worker output is not valid worker_report_v1 after one repair turn: the reply contains no JSON object"},
		{"reviewer drifts twice", `
roles:
  lead: [{text: '` + leadOK + `'}]
  planner: [{text: '` + planOK + `'}]
  worker:
` + echoCall + `
` + finalReport + `
  reviewer: [{text: '{"verdict":"ok"}'}, {text: '{"verdict":"ok"}'}]
`, "reviewer output is not valid review_result_v1 after one repair turn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.script, nil)
			out, err := f.mgr.Start(context.Background(), f.eng, StartRequest{SessionID: "bad", Prompt: "greet the world"})
			var fe *Failure
			if err != nil && !errors.As(err, &fe) {
				t.Fatal(err)
			}
			if out.Terminal == nil || out.Terminal.ErrorClass != ClassProviderError || !strings.Contains(out.Terminal.Reason, tt.reason) {
				t.Fatalf("terminal %+v, want MALFORMED_AGENT_MESSAGE: %s", out.Terminal, tt.reason)
			}
			evs := f.events(t, "bad")
			verify(t, evs)
			n := 0
			for _, e := range evs {
				if e.Type == event.SchemaViolation {
					n++
				}
				if e.Type == event.RoleOutputRepaired {
					t.Errorf("a repair was recorded for an output that stayed invalid: %s", e.Payload)
				}
			}
			if n != 2 {
				t.Errorf("%d schema.violation events, want 2", n)
			}
		})
	}
}

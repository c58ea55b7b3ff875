package run

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/journal"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/replay"
)

// streamingProvider streams the wrapped provider's answer to OnDelta one
// byte at a time, as a token stream would.
type streamingProvider struct{ p provider.Provider }

func (s streamingProvider) Name() string { return s.p.Name() }
func (s streamingProvider) Complete(ctx context.Context, r provider.CompletionRequest) (provider.CompletionResponse, error) {
	resp, err := s.p.Complete(ctx, r)
	if err == nil && r.OnDelta != nil {
		for i := 0; i < len(resp.Text); i++ {
			r.OnDelta(resp.Text[i : i+1])
		}
	}
	return resp, err
}

// TestStreamedDeltas: with stream on, a model call's text is recorded as
// output.delta events (coalesced: at most 512 bytes each, not one per
// token) between its llm.request and its one llm.response, which still
// holds the whole text; the log verifies, replay ignores the deltas, and
// the run re-executes from its log.
func TestStreamedDeltas(t *testing.T) {
	long := strings.Repeat("hello, world ", 100) // 1,300 bytes
	report := `{"output":"` + long + `","steps_completed":["s1"],"tool_calls_made":["echo:t1"],"schema_version":"v1"}`
	f := newFixture(t, script(echoCall, `    - text: '`+report+`'`), nil)
	f.eng.Profile.Stream = true
	f.eng.Provider = streamingProvider{f.eng.Provider}
	ctx := context.Background()
	out, err := f.mgr.Start(ctx, f.eng, StartRequest{SessionID: "st", Prompt: "greet"})
	if err != nil || out.Status != "completed" || out.Output != long {
		t.Fatalf("%+v %v", out, err)
	}
	evs := f.events(t, "st")
	verify(t, evs)
	// The worker's report: its deltas sit between its request and response.
	var reqID string
	var got strings.Builder
	deltas := 0
	for _, e := range evs {
		switch {
		case e.Type == event.LLMRequest && event.FieldString(e.Payload, "role") == "worker":
			reqID, got, deltas = e.ID, strings.Builder{}, 0
		case e.Type == event.OutputDelta && e.Parent() == reqID:
			text := event.FieldString(e.Payload, "text")
			if len(text) > deltaBytes {
				t.Errorf("a delta of %d bytes", len(text))
			}
			got.WriteString(text)
			deltas++
		case e.Type == event.LLMResponse && e.Parent() == reqID:
			var p struct{ Response provider.CompletionResponse }
			must(t, json.Unmarshal(e.Payload, &p))
			if got.String() != p.Response.Text {
				t.Fatalf("deltas do not make up the response text:\n%q\n%q", got.String(), p.Response.Text)
			}
		}
	}
	if deltas < 3 || deltas > 10 {
		t.Errorf("%d deltas for %d bytes streamed one byte at a time: not coalesced", deltas, len(report))
	}
	// Replay ignores the deltas: the same snapshot as the log without them.
	full, _ := replay.Replay(evs)
	if full.Output != long || full.LLMCalls == 0 {
		t.Errorf("replay: output %q calls %d", full.Output, full.LLMCalls)
	}
	history, prompt, _, _ := runHistory(evs, evs[1].RunID)
	if _, err := Reexecute(ctx, f.eng, prompt, history); err != nil {
		t.Fatalf("re-execution over a log with deltas: %v", err)
	}
}

// TestDeltaWriterFlushesOnTime: text that trickles in slower than the
// interval is written when the interval passes, not held to the end.
func TestDeltaWriterFlushesOnTime(t *testing.T) {
	f := newFixture(t, script(finalReport), nil)
	ctx := context.Background()
	j, err := journal.Open(ctx, f.store, "dw")
	must(t, err)
	w := newDeltaWriter(ctx, j, "worker", "")
	w.every = 10 * time.Millisecond
	w.add("a")
	w.add("b")
	deadline := time.Now().Add(5 * time.Second)
	for len(f.events(t, "dw")) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	w.add("c")
	must(t, w.close())
	evs := f.events(t, "dw")
	if len(evs) != 2 || event.FieldString(evs[0].Payload, "text") != "ab" || event.FieldString(evs[1].Payload, "text") != "c" {
		t.Fatalf("deltas %s", types(evs))
	}
}

package tracing

import (
	"bufio"
	"os"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func recorded(t *testing.T) []event.Event {
	t.Helper()
	f, err := os.Open("../../testdata/sessions/approval.events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []event.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		e, err := event.ParseLine(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	return evs
}

func attr(s sdktrace.ReadOnlySpan, k string) (attribute.Value, bool) {
	for _, a := range s.Attributes() {
		if string(a.Key) == k {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}

// The recorded approval session becomes one trace: the run's root span
// until the pause, another after the resume, phases, model calls with the
// GenAI attributes and tool calls, all at the events' times.
func TestRecordedSessionAsSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(IDGenerator{}))
	defer tp.Shutdown(t.Context())
	o := NewObserver(tp.Tracer("agentos"))
	o.Provider = "scripted"
	evs := recorded(t)
	for i := range evs { // one at a time, as appends arrive
		o.Observe(evs[i : i+1])
	}
	spans := exp.GetSpans().Snapshots()
	if len(spans) == 0 {
		t.Fatal("no spans")
	}
	want := TraceID(evs[0].RunID)
	count := map[string]int{}
	for _, s := range spans {
		if got := s.SpanContext().TraceID().String(); got != want {
			t.Errorf("span %s in trace %s, want the run's %s", s.Name(), got, want)
		}
		if s.EndTime().Before(s.StartTime()) {
			t.Errorf("span %s ends before it starts", s.Name())
		}
		op, _ := attr(s, "gen_ai.operation.name")
		count[op.AsString()]++
		switch op.AsString() {
		case "chat":
			for _, k := range []string{"gen_ai.request.model", "gen_ai.response.model", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.provider.name"} {
				if _, ok := attr(s, k); !ok {
					t.Errorf("model span %s lacks %s", s.Name(), k)
				}
			}
			if in, _ := attr(s, "gen_ai.usage.input_tokens"); in.AsInt64() <= 0 {
				t.Errorf("model span %s: input tokens %d", s.Name(), in.AsInt64())
			}
		case "execute_tool":
			if name, _ := attr(s, "gen_ai.tool.name"); name.AsString() == "" {
				t.Errorf("tool span %s has no tool name", s.Name())
			}
			if !s.Parent().IsValid() {
				t.Errorf("tool span %s has no parent", s.Name())
			}
		}
	}
	if count["invoke_agent"] != 2 {
		t.Errorf("%d run spans, want 2 (before the pause, after the resume)", count["invoke_agent"])
	}
	if count["chat"] < 5 || count["execute_tool"] < 4 {
		t.Errorf("spans by operation: %v", count)
	}
	for _, s := range spans {
		if op, _ := attr(s, "gen_ai.operation.name"); op.AsString() == "invoke_agent" && s.Status().Code == codes.Error {
			t.Errorf("a run span of a completed session is an error: %v", s.Status())
		}
	}
}

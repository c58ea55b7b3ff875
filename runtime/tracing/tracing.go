// Package tracing turns a session's events into OpenTelemetry spans, as a
// projection of the event log like replay and the run viewer: one trace
// per run, a root span for the run (a new one after each resume), a span
// per phase (agent.transition), per model call (llm.request →
// llm.response) and per tool call (tool.invoke → tool.result), each with
// the times the events recorded and attributes from the GenAI semantic
// conventions (model, input and output tokens, tool name and call id), and
// the webhook delivery id of the run's trigger.
//
// The trace id of a run is derived from its run id (TraceID), so the
// runtime can write it into the run's session.start before any span
// exists, and the viewer can link to it; the Observer's tracer provider
// must use IDGenerator for spans to carry it.
package tracing

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// TraceID is the trace id of a run: the first 16 bytes of a SHA-256 of
// the run id, in hex.
func TraceID(runID string) string {
	sum := sha256.Sum256([]byte("agentos-trace\x00" + runID))
	return hex.EncodeToString(sum[:16])
}

type traceKey struct{}

// IDGenerator gives a root span the trace id its run's context carries
// (withTrace) and random span ids; a tracer provider for the Observer
// takes it with sdktrace.WithIDGenerator.
type IDGenerator struct{}

// NewIDs implements sdktrace.IDGenerator.
func (IDGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	tid, _ := ctx.Value(traceKey{}).(trace.TraceID)
	if !tid.IsValid() {
		_, _ = rand.Read(tid[:])
	}
	return tid, newSpanID()
}

// NewSpanID implements sdktrace.IDGenerator.
func (IDGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		_, _ = rand.Read(s[:])
	}
	return s
}

func withTrace(ctx context.Context, runID string) context.Context {
	tid, err := trace.TraceIDFromHex(TraceID(runID))
	if err != nil {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, tid)
}

// Observer makes spans from events as they are appended. It is safe for
// concurrent use; sessions are independent.
type Observer struct {
	tr trace.Tracer
	// Provider names gen_ai.provider.name (the profile's provider).
	Provider string

	mu   sync.Mutex
	runs map[string]*runSpans // run id → its open spans
}

type runSpans struct {
	ctx   context.Context // the root span's
	root  trace.Span
	phase trace.Span
	pctx  context.Context
	open  map[string]trace.Span // request/invoke event id → span
	llm   map[string]string     // actor → its latest open model call's event id
	calls map[string]string     // tool call id → invoke event id
}

// NewObserver returns an Observer making spans with tr.
func NewObserver(tr trace.Tracer) *Observer {
	return &Observer{tr: tr, runs: map[string]*runSpans{}}
}

func at(e *event.Event) time.Time {
	t, err := time.Parse(event.TimeFormat, e.TS)
	if err != nil {
		return time.Now()
	}
	return t
}

// Observe applies appended events, in order.
func (o *Observer) Observe(evs []event.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range evs {
		o.apply(&evs[i])
	}
}

func (o *Observer) apply(e *event.Event) {
	ts := at(e)
	r := o.runs[e.RunID]
	switch e.Type {
	case event.SessionStart, event.RunResumed:
		if r != nil && r.root != nil {
			return
		}
		ctx := withTrace(context.Background(), e.RunID)
		name := "invoke_agent agentos"
		if e.Type == event.RunResumed {
			name += " (resumed)"
		}
		ctx, root := o.tr.Start(ctx, name, trace.WithTimestamp(ts), trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(semconv.GenAIOperationNameInvokeAgent, semconv.GenAIAgentName("agentos"), attribute.String("agentos.session_id", e.SessionID), attribute.String("agentos.run_id", e.RunID)))
		r = &runSpans{ctx: ctx, root: root, open: map[string]trace.Span{}, llm: map[string]string{}, calls: map[string]string{}}
		o.runs[e.RunID] = r
		return
	}
	if r == nil {
		return // a run that started before this process observed it
	}
	switch e.Type {
	case event.RunStarted:
		trig := event.Field(e.Payload, "trigger")
		if id := event.FieldString(trig, "delivery_id"); id != "" {
			r.root.SetAttributes(attribute.String("github.webhook.delivery_id", id))
		}
		if repo := event.FieldString(trig, "repo"); repo != "" {
			r.root.SetAttributes(attribute.String("github.repository", repo))
		}
	case event.AgentTransition:
		if r.phase != nil {
			r.phase.End(trace.WithTimestamp(ts))
		}
		to := strings.ToLower(event.FieldString(e.Payload, "to"))
		r.pctx, r.phase = o.tr.Start(r.ctx, "phase "+to, trace.WithTimestamp(ts), trace.WithAttributes(attribute.String("agentos.phase", to), semconv.GenAIAgentName(e.Actor)))
	case event.LLMRequest:
		model := event.FieldString(event.Field(e.Payload, "request"), "model")
		attrs := []attribute.KeyValue{semconv.GenAIOperationNameChat, semconv.GenAIRequestModel(model), semconv.GenAIAgentName(e.Actor)}
		if o.Provider != "" {
			attrs = append(attrs, semconv.GenAIProviderNameKey.String(o.Provider))
		}
		_, sp := o.tr.Start(r.parent(), "chat "+model, trace.WithTimestamp(ts), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
		r.open[e.ID] = sp
		r.llm[e.Actor] = e.ID
	case event.LLMResponse:
		id := e.Parent()
		if _, ok := r.open[id]; !ok {
			id = r.llm[e.Actor]
		}
		if sp, ok := r.open[id]; ok {
			resp := event.Field(e.Payload, "response")
			u := event.Field(resp, "usage")
			sp.SetAttributes(semconv.GenAIResponseModel(event.FieldString(resp, "model")),
				semconv.GenAIUsageInputTokens(int(event.FieldInt(u, "input_tokens"))),
				semconv.GenAIUsageOutputTokens(int(event.FieldInt(u, "output_tokens"))),
				semconv.GenAIResponseFinishReasons(event.FieldString(resp, "finish_reason")))
			sp.End(trace.WithTimestamp(ts))
			delete(r.open, id)
		}
	case event.ToolInvoke:
		tool, call := event.FieldString(e.Payload, "tool"), event.FieldString(e.Payload, "call_id")
		_, sp := o.tr.Start(r.parent(), "execute_tool "+tool, trace.WithTimestamp(ts), trace.WithAttributes(semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(tool), semconv.GenAIToolCallID(call)))
		r.open[e.ID] = sp
		r.calls[call] = e.ID
	case event.ToolResult:
		id := e.Parent()
		if _, ok := r.open[id]; !ok {
			id = r.calls[event.FieldString(e.Payload, "call_id")]
		}
		if sp, ok := r.open[id]; ok {
			if !event.FieldBool(e.Payload, "ok") {
				code := event.FieldString(event.Field(e.Payload, "error"), "code")
				sp.SetStatus(codes.Error, code)
				sp.SetAttributes(attribute.String("error.type", code))
			}
			sp.End(trace.WithTimestamp(ts))
			delete(r.open, id)
		}
	case event.RunPaused, event.TurnTerminal:
		o.endRun(e.RunID, r, e, ts)
	}
}

func (r *runSpans) parent() context.Context {
	if r.pctx != nil {
		return r.pctx
	}
	return r.ctx
}

// endRun ends the run's open spans: a pause ends the root span (the
// resumed run starts another in the same trace), the terminal report
// sets its status.
func (o *Observer) endRun(runID string, r *runSpans, e *event.Event, ts time.Time) {
	for id, sp := range r.open {
		sp.SetStatus(codes.Error, "unfinished")
		sp.End(trace.WithTimestamp(ts))
		delete(r.open, id)
	}
	if r.phase != nil {
		r.phase.End(trace.WithTimestamp(ts))
	}
	if e.Type == event.TurnTerminal {
		status := event.FieldString(e.Payload, "status")
		r.root.SetAttributes(attribute.String("agentos.status", status))
		if status != "completed" {
			r.root.SetStatus(codes.Error, event.FieldString(e.Payload, "reason"))
		}
	} else {
		r.root.SetAttributes(attribute.String("agentos.status", "paused"))
	}
	r.root.End(trace.WithTimestamp(ts))
	delete(o.runs, runID)
}

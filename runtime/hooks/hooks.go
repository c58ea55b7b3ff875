// Package hooks runs lifecycle hooks: in-process handlers and
// external command hooks configured in Claude Code's settings.json shape.
// Hooks return decisions (allow, deny, transform); they never mutate runtime
// state. Every decision is appended as a hook.fired event. A hook that
// errors, times out, crashes or prints invalid output denies (fail closed;
// docs/customizing.md, "Hooks") — a deliberate difference from Claude
// Code, which proceeds.
package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/agentos/agentos/kernel"
)

// Event names a lifecycle point.
type Event string

// Lifecycle events.
const (
	SessionStart     Event = "SessionStart"
	UserPromptSubmit Event = "UserPromptSubmit"
	PreToolUse       Event = "PreToolUse"
	PostToolUse      Event = "PostToolUse"
	SkillStart       Event = "SkillStart"
	Stop             Event = "Stop"
	PreCompact       Event = "PreCompact"
	// The workflow plane's hooks:
	// WorkflowStart just before a cycle begins (allow / deny / transform
	// the prompt), PhaseAdvance just before a phase transition (allow /
	// deny / transform the next phase), WorkflowComplete just after the
	// verdict is decided (observe and record; it cannot change it).
	WorkflowStart    Event = "WorkflowStart"
	PhaseAdvance     Event = "PhaseAdvance"
	WorkflowComplete Event = "WorkflowComplete"
)

// Events lists the supported events.
var Events = []Event{SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, SkillStart, Stop, PreCompact, WorkflowStart, PhaseAdvance, WorkflowComplete}

func knownEvent(e Event) bool {
	for _, k := range Events {
		if k == e {
			return true
		}
	}
	return false
}

// Decision values.
const (
	Allow     = "allow"
	Deny      = "deny"
	Transform = "transform"
)

// Input is what a hook sees. Fields not relevant to the event are empty.
type Input struct {
	Event     Event
	SessionID string
	Cwd       string
	// Transcript is the path of the session's events.jsonl, when known.
	Transcript string

	ToolName     string          // PreToolUse, PostToolUse
	ToolInput    json.RawMessage // PreToolUse, PostToolUse
	ToolResponse json.RawMessage // PostToolUse
	Prompt       string          // UserPromptSubmit
	Skill        string          // SkillStart
	Source       string          // SessionStart: startup|resume
	Trigger      string          // PreCompact: auto|manual
	StopActive   bool            // Stop: a Stop hook already blocked once

	Cycle     string // WorkflowStart, PhaseAdvance, WorkflowComplete: the cycle id
	Mode      string // WorkflowStart: interactive | autofix | report-only | headless
	FromPhase string // PhaseAdvance: the phase that ended ("" before the entry phase)
	ToPhase   string // PhaseAdvance: the phase about to start
	Verdict   string // WorkflowComplete: done | halted | abort
}

// Decision is a hook's answer. For transform, Output replaces the event's
// subject: {"prompt": "..."} for UserPromptSubmit, the new tool input for
// PreToolUse, the new tool result for PostToolUse.
type Decision struct {
	Decision string          `json:"decision"`
	Reason   string          `json:"reason,omitempty"`
	Output   json.RawMessage `json:"output,omitempty"`
	Handler  string          `json:"handler,omitempty"`
}

// Handler is one hook.
type Handler interface {
	ID() string
	Priority() int // higher runs first
	Matches(in Input) bool
	Handle(ctx context.Context, in Input) (Decision, error)
}

// Func is an in-process handler.
type Func struct {
	Name    string
	Prio    int
	Matcher string // tool matcher for tool events, Claude Code rules; "" = all
	Fn      func(ctx context.Context, in Input) (Decision, error)
}

// ID implements Handler.
func (f Func) ID() string { return f.Name }

// Priority implements Handler.
func (f Func) Priority() int { return f.Prio }

// Matches implements Handler.
func (f Func) Matches(in Input) bool { return matchTool(f.Matcher, in) }

// Handle implements Handler.
func (f Func) Handle(ctx context.Context, in Input) (Decision, error) { return f.Fn(ctx, in) }

// Registry holds handlers per event and fires them.
type Registry struct {
	handlers map[Event][]Handler
	// Timeout bounds each in-process handler; command hooks carry their own.
	Timeout time.Duration
}

// NewRegistry returns an empty registry with a 30 s handler timeout.
func NewRegistry() *Registry {
	return &Registry{handlers: map[Event][]Handler{}, Timeout: 30 * time.Second}
}

// ErrUnknownEvent is returned when registering for an event that does not
// exist.
var ErrUnknownEvent = errors.New("hooks: unknown event")

// Register adds a handler for an event.
func (r *Registry) Register(e Event, h Handler) error {
	if !knownEvent(e) {
		return fmt.Errorf("%w %q", ErrUnknownEvent, e)
	}
	r.handlers[e] = append(r.handlers[e], h)
	sort.SliceStable(r.handlers[e], func(i, j int) bool { return r.handlers[e][i].Priority() > r.handlers[e][j].Priority() })
	return nil
}

// Handlers lists the handler ids for an event in firing order.
func (r *Registry) Handlers(e Event) []string {
	var ids []string
	for _, h := range r.handlers[e] {
		ids = append(ids, h.ID())
	}
	return ids
}

// Fire runs the event's matching handlers in priority order. Each decision
// is recorded as hook.fired (actor "hooks"). The first deny wins and stops
// the chain; a transform replaces the subject for later handlers and the
// caller; otherwise the result is allow. A recording failure is returned as
// an error with a deny decision: an unrecorded decision is not a decision.
func (r *Registry) Fire(ctx context.Context, rec kernel.Recorder, in Input) (Decision, error) {
	final := Decision{Decision: Allow}
	for _, h := range r.handlers[in.Event] {
		if !h.Matches(in) {
			continue
		}
		d := r.run(ctx, h, in)
		if err := record(ctx, rec, in, d); err != nil {
			return Decision{Decision: Deny, Reason: "hook decision could not be recorded", Handler: h.ID()}, err
		}
		switch d.Decision {
		case Deny:
			return d, nil
		case Transform:
			if err := applyTransform(&in, d.Output); err != nil {
				deny := Decision{Decision: Deny, Handler: h.ID(), Reason: "transform output rejected: " + err.Error()}
				if rerr := record(ctx, rec, in, deny); rerr != nil {
					return deny, rerr
				}
				return deny, nil
			}
			final = Decision{Decision: Transform, Output: d.Output, Reason: d.Reason, Handler: h.ID()}
		}
	}
	return final, nil
}

// run calls one handler with the timeout, turning errors, panics, timeouts
// and malformed decisions into deny.
func (r *Registry) run(ctx context.Context, h Handler, in Input) (d Decision) {
	timeout := r.Timeout
	if _, isCmd := h.(*Command); isCmd || timeout <= 0 {
		timeout = 0
	}
	hctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	type result struct {
		d   Decision
		err error
	}
	ch := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- result{err: fmt.Errorf("hook panicked: %v", p)}
			}
		}()
		d, err := h.Handle(hctx, in)
		ch <- result{d, err}
	}()
	var res result
	select {
	case res = <-ch:
	case <-hctx.Done():
		// The handler ignored its context; it is abandoned, and denied.
		res = result{err: fmt.Errorf("hook timed out: %w", hctx.Err())}
	}
	if res.err != nil {
		return Decision{Decision: Deny, Handler: h.ID(), Reason: "hook failed (fail closed): " + res.err.Error()}
	}
	d = res.d
	d.Handler = h.ID()
	switch d.Decision {
	case Allow:
	case Deny:
		if d.Reason == "" {
			d.Reason = "denied by hook " + h.ID()
		}
	case Transform:
		if len(d.Output) == 0 || !json.Valid(d.Output) {
			return Decision{Decision: Deny, Handler: h.ID(), Reason: "transform without valid JSON output"}
		}
	default:
		return Decision{Decision: Deny, Handler: h.ID(), Reason: fmt.Sprintf("invalid decision %q (fail closed)", d.Decision)}
	}
	return d
}

// applyTransform checks a transform's output against the shape the next
// boundary expects and applies it to in. Tool inputs and results are
// validated again by the kernel against the tool's schemas.
func applyTransform(in *Input, out json.RawMessage) error {
	switch in.Event {
	case UserPromptSubmit:
		var p struct {
			Prompt *string `json:"prompt"`
		}
		if err := json.Unmarshal(out, &p); err != nil || p.Prompt == nil {
			return errors.New(`UserPromptSubmit output must be {"prompt": string}`)
		}
		in.Prompt = *p.Prompt
	case PreToolUse:
		if !isObject(out) {
			return errors.New("PreToolUse output must be the tool's input object")
		}
		in.ToolInput = out
	case PostToolUse:
		in.ToolResponse = out
	case WorkflowStart:
		var p struct {
			Prompt *string `json:"prompt"`
		}
		if err := json.Unmarshal(out, &p); err != nil || p.Prompt == nil {
			return errors.New(`WorkflowStart output must be {"prompt": string}`)
		}
		in.Prompt = *p.Prompt
	case PhaseAdvance:
		// The executor checks that the phase belongs to the cycle.
		var p struct {
			ToPhase *string `json:"to_phase"`
		}
		if err := json.Unmarshal(out, &p); err != nil || p.ToPhase == nil || *p.ToPhase == "" {
			return errors.New(`PhaseAdvance output must be {"to_phase": string}`)
		}
		in.ToPhase = *p.ToPhase
	default:
		return fmt.Errorf("%s hooks cannot transform", in.Event)
	}
	return nil
}

func isObject(b json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

func record(ctx context.Context, rec kernel.Recorder, in Input, d Decision) error {
	if rec == nil {
		return nil
	}
	p := map[string]any{"hook": string(in.Event), "handler": d.Handler, "decision": d.Decision}
	if d.Reason != "" {
		p["reason"] = d.Reason
	}
	if in.Event == UserPromptSubmit {
		// A prompt hook sees the prompt as the user wrote it; what it
		// records (a rewritten prompt, a reason quoting it) is redacted
		// like the prompt the log holds (RedactPrompt).
		if d.Reason != "" {
			p["reason"] = RedactPrompt(d.Reason)
		}
		if d.Decision == Transform {
			out := json.RawMessage(RedactPrompt(string(d.Output)))
			if !json.Valid(out) {
				b, err := json.Marshal(RedactPrompt(string(d.Output)))
				if err != nil {
					return err
				}
				out = b
			}
			p["output"] = out
			_, err := rec.Record(ctx, "hook.fired", "hooks", p, "")
			return err
		}
	}
	if in.ToolName != "" {
		p["tool"] = in.ToolName
	}
	if d.Decision == Transform {
		p["output"] = d.Output
	}
	_, err := rec.Record(ctx, "hook.fired", "hooks", p, "")
	return err
}

package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/toolrule"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/hooks"
	"github.com/agentos/agentos/runtime/journal"
	"github.com/agentos/agentos/runtime/provider"
)

// NonDeterminismError says re-executing a run with the current code made a
// different decision than the one recorded in its log (Temporal's
// replayer idea). A resumed run or a recorded regression session that hits
// it must not continue.
type NonDeterminismError struct {
	Seq  int64  // the recorded event that did not match
	Want string // what the code did now
	Got  string // what the log recorded
}

func (e *NonDeterminismError) Error() string {
	return fmt.Sprintf("non-deterministic replay at seq %d: the code now does %s, the log recorded %s", e.Seq, e.Want, e.Got)
}

// managerOwned are event types the RunManager (not the engine) appends;
// the engine's replay cursor steps over them.
var managerOwned = map[string]bool{
	event.SessionStart: true, event.SessionClose: true, event.RunStarted: true, event.RunPaused: true,
	event.RunResumed: true, event.RunCompleted: true, event.RunFailed: true, event.RunCancelled: true, event.ApprovalResolved: true,
	event.CheckpointCreated: true, event.TurnTerminal: true, event.OutputDelta: true, event.RunInterrupted: true,
}

// kernelOwned are the events one tool dispatch may record.
var kernelOwned = map[string]bool{
	event.ToolArgsRepaired: true, event.ToolRejected: true, event.ApprovalRequested: true,
	event.ToolInvoke: true, event.ToolResult: true, event.HookFired: true,
}

// ToolOutcome is what a tool call amounts to for the model: a result, an
// error, or a pending approval. It is always derived from the recorded
// events, live or replayed, so both paths see the same thing.
type ToolOutcome struct {
	CallID  string          `json:"call_id"`
	Tool    string          `json:"tool"`
	OK      bool            `json:"ok"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *OutcomeError   `json:"error,omitempty"`
	Pending *Pending        `json:"-"`
}

// OutcomeError is a tool failure as the model sees it.
type OutcomeError struct {
	Code        string          `json:"code"`
	Message     string          `json:"message"`
	Diagnostics json.RawMessage `json:"diagnostics,omitempty"`
}

// Pending is an approval the call is waiting for.
type Pending struct {
	ApprovalID string          `json:"approval_id"`
	Tool       string          `json:"tool"`
	CallID     string          `json:"call_id"`
	Digest     string          `json:"digest"`
	Args       json.RawMessage `json:"args,omitempty"`
	Preview    json.RawMessage `json:"preview,omitempty"`
	Revision   json.RawMessage `json:"revision,omitempty"`
	Seq        int64           `json:"seq"`
}

// Call is a tool call from the model.
type Call struct {
	ID   string
	Name string
	Args json.RawMessage
	// AllowedTools is the caller's scope (the selected skill's
	// allowed-tools); nil means no restriction beyond policy.
	AllowedTools []string
	Role         string
	// NoRepair: guard repair is off for the run (no local argument
	// repair, no repair round).
	NoRepair bool
	// WritePaths is the caller's write scope (kernel.Call.WritePaths); nil
	// means no restriction beyond policy.
	WritePaths []string
	// Rules are permission rules on the arguments (kernel.Call.Rules);
	// nil means none.
	Rules *toolrule.Set
	// SkillRules are the loaded skills' argument rules
	// (kernel.Call.SkillRules); nil means none.
	SkillRules *toolrule.Set
}

// Tools is what the runtime needs from the kernel. The kernel records its
// own events (tool.rejected, approval.requested, tool.invoke, tool.result,
// hook.fired) through rec; the runtime reads the outcome back from them.
type Tools interface {
	// Specs describes the tools in scope for the model (nil scope = all).
	Specs(scope []string) []provider.ToolSpec
	// Dispatch runs a call through the full kernel pipeline.
	Dispatch(ctx context.Context, rec kernel.Recorder, c Call) error
	// ExecuteApproved executes a call whose approval was granted, after the
	// kernel re-checks the argument digest and the workspace revision.
	ExecuteApproved(ctx context.Context, rec kernel.Recorder, c Call, p Pending, approvedBy string) error
}

// HistorySeeder is implemented by Tools whose tool list is discovered at
// run time (a repository's MCP servers): before the engine runs over a
// recorded history, Seed gets it, so that the tools the log offered the
// model are known without starting anything (replay and re-execution
// never start a server).
type HistorySeeder interface {
	Seed(history []event.Event) error
}

// eventLog is where effects record: the session's journal, or one fan-out
// lane's view of it (lane).
type eventLog interface {
	kernel.Recorder
	Append(ctx context.Context, typ, actor string, payload any, parentID string) (event.Event, error)
	// Seq and Events are the log's as far as this writer sees it: every
	// event of the session for the journal, the lane's own for a lane.
	Seq() int64
	Events(ctx context.Context) ([]event.Event, error)
	SessionID() string
	RunID() string
}

var _ eventLog = (*journal.Journal)(nil)

// effects performs the engine's side effects, or, while the run's recorded
// history lasts, replays them from it.
type effects struct {
	j       eventLog
	history []event.Event // this run's events, from run.started
	pos     int
	// lastResponse is the id of the latest llm.response, live or
	// replayed: the parent of a role.output_repaired.
	lastResponse string
	// stream: the profile streams, so live model calls record their text
	// as output.delta events while it arrives.
	stream bool
	// notices are recorded before the next live event (notices.go).
	notices *Notices
	// prompts knows the prompt blocks the session's log defines (those of
	// history and of its own appends): a request that uses one references
	// it without repeating it (docs/decisions.md, "Prompts stored once
	// per session"). nil until the first model call.
	prompts *event.PromptWriter
	// recorded reads the history's requests back whole, while replaying.
	recorded *event.Prompts
}

func (f *effects) replaying() bool {
	f.skipManaged()
	return f.pos < len(f.history)
}

// next is the next recorded event the engine will meet, while replaying.
func (f *effects) next() (event.Event, bool) {
	if !f.replaying() {
		return event.Event{}, false
	}
	return f.history[f.pos], true
}

func (f *effects) skipManaged() {
	for f.pos < len(f.history) && (managerOwned[f.history[f.pos].Type] || event.IsNotice(f.history[f.pos].Type)) {
		f.pos++
	}
}

// emit appends an engine event, or checks it against the recorded one.
func (f *effects) emit(ctx context.Context, typ, actor string, payload any, parent string) (event.Event, error) {
	if f.replaying() {
		got := f.history[f.pos]
		if got.Type != typ || got.Actor != actor {
			return event.Event{}, &NonDeterminismError{Seq: got.Seq, Want: typ + " by " + actor, Got: got.Type + " by " + got.Actor}
		}
		f.pos++
		return got, nil
	}
	if err := flushNotices(ctx, f.j, f.notices); err != nil {
		return event.Event{}, err
	}
	return f.j.Append(ctx, typ, actor, payload, parent)
}

// complete makes a model call through the provider, recording the request
// and the response (or the error), or replays the recorded pair. The
// response returned is the recorded (redacted) one in both cases.
func (f *effects) complete(ctx context.Context, p provider.Provider, req provider.CompletionRequest) (provider.CompletionResponse, error) {
	if f.replaying() {
		reqEv := f.history[f.pos]
		if reqEv.Type != event.LLMRequest || event.FieldString(reqEv.Payload, "role") != req.Role {
			return provider.CompletionResponse{}, &NonDeterminismError{Seq: reqEv.Seq, Want: "llm.request by " + req.Role, Got: reqEv.Type + " by " + reqEv.Actor}
		}
		if f.recorded == nil {
			f.recorded = event.NewPrompts(f.history)
		}
		// The recorded request read back whole (its prompt blocks
		// resolved), so that the comparison is the same for every format.
		recReq, err := f.recorded.Request(&reqEv)
		if err != nil {
			return provider.CompletionResponse{}, &NonDeterminismError{Seq: reqEv.Seq, Want: "llm.request " + requestShape(req), Got: "a request that does not read back: " + err.Error()}
		}
		if want, got := requestShape(req), recordedShape(event.FieldString(reqEv.Payload, "role"), recReq); want != got {
			return provider.CompletionResponse{}, &NonDeterminismError{Seq: reqEv.Seq, Want: "llm.request " + want, Got: "llm.request " + got}
		}
		f.pos++
		f.skipManaged()
		if f.pos >= len(f.history) {
			// The request was recorded but its response was not: the process
			// died mid-call. Nothing was fed back to the run, so ask again.
			return f.liveComplete(ctx, p, req, reqEv.ID)
		}
		respEv := f.history[f.pos]
		if respEv.Type != event.LLMResponse || respEv.Parent() != reqEv.ID {
			return provider.CompletionResponse{}, &NonDeterminismError{Seq: respEv.Seq, Want: "llm.response to seq " + fmt.Sprint(reqEv.Seq), Got: respEv.Type}
		}
		f.pos++
		f.lastResponse = respEv.ID
		return decodeResponse(respEv)
	}
	if err := flushNotices(ctx, f.j, f.notices); err != nil {
		return provider.CompletionResponse{}, err
	}
	payload, err := f.requestPayload(req)
	if err != nil {
		return provider.CompletionResponse{}, err
	}
	if req.ResponseSchema != nil {
		// Not part of completion_request_v1; the payload schema allows it.
		payload["response_schema"] = req.ResponseSchema.Name
	}
	reqEv, err := f.j.Append(ctx, event.LLMRequest, req.Role, payload, "")
	if err != nil {
		return provider.CompletionResponse{}, err
	}
	// The blocks as stored (the store names them by their redacted text).
	f.prompts.Learn(&reqEv)
	return f.liveComplete(ctx, p, req, reqEv.ID)
}

// requestPayload is the llm.request payload recording req: its messages
// and tool specs as prompt block references, with the blocks the
// session's log does not define yet (as far as this writer knows) in its
// prompts member (docs/decisions.md, "Prompts stored once per session").
func (f *effects) requestPayload(req provider.CompletionRequest) (map[string]any, error) {
	if f.prompts == nil {
		f.prompts = event.NewPromptWriter()
		sid := f.j.SessionID()
		for i := range f.history {
			if f.history[i].SessionID == sid {
				f.prompts.Learn(&f.history[i])
			}
		}
	}
	raw, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("record llm.request: %w", err)
	}
	compact, defs, err := f.prompts.Compact(raw)
	if err != nil {
		return nil, fmt.Errorf("record llm.request: %w", err)
	}
	payload := map[string]any{"role": req.Role, "request": compact, "attempt": 1}
	if len(defs) > 0 {
		payload[event.PromptsMember] = defs
	}
	return payload, nil
}

func (f *effects) liveComplete(ctx context.Context, p provider.Provider, req provider.CompletionRequest, reqID string) (provider.CompletionResponse, error) {
	var deltas *deltaWriter
	if f.stream {
		deltas = newDeltaWriter(ctx, f.j, req.Role, reqID)
		req.OnDelta = deltas.add
	}
	resp, callErr := p.Complete(ctx, req)
	if deltas != nil {
		// Every delta is in the log before the response that completes it.
		if err := deltas.close(); err != nil {
			return provider.CompletionResponse{}, err
		}
	}
	payload := map[string]any{"role": req.Role}
	if callErr != nil {
		errObj := map[string]any{"code": provider.CodeProviderError, "message": callErr.Error()}
		var pe *provider.Error
		if errors.As(callErr, &pe) {
			msg := pe.Message
			if pe.Err != nil {
				msg += ": " + pe.Err.Error()
			}
			errObj = map[string]any{"code": pe.Code, "message": msg, "retryable": pe.Retryable,
				"details": map[string]any{"provider": pe.Provider, "status": pe.Status, "attempts": pe.Attempts}}
		}
		payload["error"] = errObj
	} else {
		payload["response"] = resp
	}
	// The call happened: its outcome is recorded even when the run's
	// deadline ended it, or the log would hold a request with no response.
	respEv, err := f.j.Append(context.WithoutCancel(ctx), event.LLMResponse, req.Role, payload, reqID)
	if err != nil {
		return provider.CompletionResponse{}, err
	}
	f.lastResponse = respEv.ID
	return decodeResponse(respEv)
}

func decodeResponse(e event.Event) (provider.CompletionResponse, error) {
	var p struct {
		Response *provider.CompletionResponse `json:"response"`
		Error    *struct {
			Code, Message string
			Retryable     bool
			Details       struct {
				Provider string
				Status   int
				Attempts int
			}
		} `json:"error"`
	}
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		return provider.CompletionResponse{}, err
	}
	if pe := p.Error; pe != nil {
		return provider.CompletionResponse{}, &provider.Error{Code: pe.Code, Provider: pe.Details.Provider, Status: pe.Details.Status, Attempts: pe.Details.Attempts, Message: pe.Message, Retryable: pe.Retryable}
	}
	if p.Response == nil {
		return provider.CompletionResponse{}, fmt.Errorf("llm.response seq %d has neither response nor error", e.Seq)
	}
	return *p.Response, nil
}

// requestShape summarises the decisions a request embodies: which role
// asked, how long the conversation was, and which tools were offered.
// Message text is not compared: it is redacted in the log and role prompts
// may be edited between a pause and a resume.
func requestShape(req provider.CompletionRequest) string {
	names := make([]string, 0, len(req.Tools))
	for _, t := range req.Tools {
		names = append(names, t.Name)
	}
	return fmt.Sprintf("role=%s messages=%d tools=%v", req.Role, len(req.Messages), names)
}

// recordedShape is requestShape of a recorded request, read back whole
// (event.Prompts.Request).
func recordedShape(role string, request json.RawMessage) string {
	var p struct {
		Messages []json.RawMessage `json:"messages"`
		Tools    []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	_ = json.Unmarshal(request, &p)
	names := make([]string, 0, len(p.Tools))
	for _, t := range p.Tools {
		names = append(names, t.Name)
	}
	return fmt.Sprintf("role=%s messages=%d tools=%v", role, len(p.Messages), names)
}

// tool runs a call through the kernel (or replays it) and derives the
// outcome from the events the dispatch recorded.
func (f *effects) tool(ctx context.Context, tools Tools, c Call) (ToolOutcome, error) {
	if f.replaying() {
		evs := f.takeKernelEvents()
		if len(evs) == 0 {
			got := f.history[f.pos]
			return ToolOutcome{}, &NonDeterminismError{Seq: got.Seq, Want: "tool call " + c.Name, Got: got.Type}
		}
		if rec := recordedCallID(evs); rec != "" && rec != c.ID {
			return ToolOutcome{}, &NonDeterminismError{Seq: evs[0].Seq, Want: "tool call " + c.ID, Got: "tool call " + rec}
		}
		// A call its process was stopped during, which the takeover marked
		// to run again (safe calls only: RerunTools): its outcome is the
		// recorded re-run's, or, where the log ends, the re-run's now.
		for rerunMarked(evs) && f.replaying() {
			next := f.takeKernelEvents()
			if len(next) > 0 && !f.replaying() && !hasType(next, event.ToolInvoke) {
				// The log ends inside the re-run's dispatch, before its
				// tool was invoked (the process that took the run over
				// died after a PreToolUse decision): nothing ran, so the
				// dispatch runs now, below.
				evs = next
				break
			}
			if len(next) == 0 || recordedCallID(next) != c.ID {
				seq, typ := f.recordedHere(next)
				return ToolOutcome{}, &NonDeterminismError{Seq: seq, Want: "tool call " + c.ID + " run again after its interruption", Got: typ}
			}
			evs = next
		}
		if f.replaying() || (endsCall(evs) && !rerunMarked(evs)) || (hasType(evs, event.ToolInvoke) && !rerunMarked(evs)) {
			return deriveOutcome(c, evs), nil
		}
		// The record ends inside this dispatch, before the tool was
		// invoked (its process died after a PreToolUse decision or an
		// argument repair): nothing ran, so the dispatch runs now. A call
		// that was invoked has a result (Takeover closes it INTERRUPTED).
	}
	start := f.j.Seq()
	if err := tools.Dispatch(ctx, f.j, c); err != nil {
		return ToolOutcome{}, err
	}
	evs, err := f.appendedSince(ctx, start)
	if err != nil {
		return ToolOutcome{}, err
	}
	return deriveOutcome(c, evs), nil
}

// recordedHere names what the log holds where a replayed step expected
// something else: the first of the events taken, else the next recorded
// event, else (the log ended) its last one.
func (f *effects) recordedHere(taken []event.Event) (int64, string) {
	switch {
	case len(taken) > 0:
		return taken[0].Seq, taken[0].Type
	case f.pos < len(f.history):
		return f.history[f.pos].Seq, f.history[f.pos].Type
	case len(f.history) > 0:
		last := f.history[len(f.history)-1]
		return last.Seq, "the end of the log after " + last.Type
	}
	return 0, "an empty log"
}

// approved executes an approved pending call live.
func (f *effects) approved(ctx context.Context, tools Tools, c Call, p Pending, by string) (ToolOutcome, error) {
	if f.replaying() {
		evs := f.takeKernelEvents()
		if len(evs) == 0 {
			got := f.history[f.pos]
			return ToolOutcome{}, &NonDeterminismError{Seq: got.Seq, Want: "approved call " + c.Name, Got: got.Type}
		}
		return deriveOutcome(c, evs), nil
	}
	start := f.j.Seq()
	if err := tools.ExecuteApproved(ctx, f.j, c, p, by); err != nil {
		return ToolOutcome{}, err
	}
	evs, err := f.appendedSince(ctx, start)
	if err != nil {
		return ToolOutcome{}, err
	}
	return deriveOutcome(c, evs), nil
}

func (f *effects) appendedSince(ctx context.Context, seq int64) ([]event.Event, error) {
	all, err := f.j.Events(ctx)
	if err != nil {
		return nil, err
	}
	if int64(len(all)) < seq {
		return nil, fmt.Errorf("session shrank below seq %d", seq)
	}
	return all[seq:], nil
}

// takeKernelEvents consumes the recorded events of one dispatch: kernel
// events, ending at its tool.rejected, approval.requested, or tool.result
// plus the PostToolUse decisions that follow it.
func (f *effects) takeKernelEvents() []event.Event {
	var out []event.Event
	for {
		f.skipManaged()
		if f.pos >= len(f.history) || !(kernelOwned[f.history[f.pos].Type] || f.history[f.pos].Type == event.SchemaViolation) {
			return out
		}
		e := f.history[f.pos]
		if e.Type == event.SchemaViolation {
			// The kernel's check of a tool result against its output schema.
			if !endsCall(out) || !strings.HasPrefix(event.FieldString(e.Payload, "boundary"), "tool_result:") {
				return out
			}
			out = append(out, e)
			f.pos++
			return out
		}
		if e.Type == event.HookFired {
			h := event.FieldString(e.Payload, "hook")
			if h != "PreToolUse" && h != "PostToolUse" {
				return out
			}
			// A PreToolUse decision after a finished call belongs to the next call.
			if h == "PreToolUse" && endsCall(out) {
				return out
			}
		} else if endsCall(out) {
			return out
		}
		out = append(out, e)
		f.pos++
		if e.Type == event.ToolRejected || e.Type == event.ApprovalRequested {
			return out
		}
	}
}

func hasType(evs []event.Event, typ string) bool {
	for _, e := range evs {
		if e.Type == typ {
			return true
		}
	}
	return false
}

func endsCall(evs []event.Event) bool {
	for _, e := range evs {
		if e.Type == event.ToolResult || e.Type == event.ToolRejected || e.Type == event.ApprovalRequested {
			return true
		}
	}
	return false
}

func recordedCallID(evs []event.Event) string {
	for _, e := range evs {
		if id := event.FieldString(e.Payload, "call_id"); id != "" {
			return id
		}
	}
	return ""
}

// deriveOutcome reads a dispatch's events.
func deriveOutcome(c Call, evs []event.Event) ToolOutcome {
	out := ToolOutcome{CallID: c.ID, Tool: c.Name}
	for _, e := range evs {
		switch e.Type {
		case event.ToolRejected:
			out.OK = false
			out.Error = &OutcomeError{Code: event.FieldString(e.Payload, "code"), Message: event.FieldString(e.Payload, "message"), Diagnostics: json.RawMessage(event.Field(e.Payload, "diagnostics"))}
		case event.ApprovalRequested:
			out.Pending = &Pending{ApprovalID: event.FieldString(e.Payload, "approval_id"), Tool: event.FieldString(e.Payload, "tool"), CallID: c.ID,
				Digest: event.FieldString(e.Payload, "digest"), Args: json.RawMessage(event.Field(e.Payload, "args")),
				Preview: json.RawMessage(event.Field(e.Payload, "preview")), Revision: json.RawMessage(event.Field(e.Payload, "revision")), Seq: e.Seq}
		case event.ToolResult:
			out.OK = event.FieldBool(e.Payload, "ok")
			if out.OK {
				out.Result = json.RawMessage(event.Field(e.Payload, "result"))
			} else {
				errObj := event.Field(e.Payload, "error")
				out.Error = &OutcomeError{Code: event.FieldString(errObj, "code"), Message: event.FieldString(errObj, "message"), Diagnostics: json.RawMessage(event.Field(errObj, "details"))}
			}
		case event.SchemaViolation:
			out.OK, out.Result = false, nil
			out.Error = &OutcomeError{Code: string(kernel.CodeSchemaViolation), Message: event.FieldString(e.Payload, "message")}
		case event.HookFired:
			if event.FieldString(e.Payload, "hook") == "PostToolUse" && out.OK {
				switch event.FieldString(e.Payload, "decision") {
				case "deny":
					out.OK, out.Result = false, nil
					out.Error = &OutcomeError{Code: string(kernel.CodeGateDenied), Message: event.FieldString(e.Payload, "reason")}
				case "transform":
					out.Result = json.RawMessage(event.Field(e.Payload, "output"))
				}
			}
		}
	}
	if out.Pending == nil && out.Error == nil && !out.OK && out.Result == nil {
		out.Error = &OutcomeError{Code: string(kernel.CodeToolRuntimeError), Message: "the tool call recorded no result"}
	}
	return out
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// hook fires a lifecycle hook, or replays its recorded decisions.
func (f *effects) hook(ctx context.Context, reg *hooks.Registry, in hooks.Input) (hooks.Decision, error) {
	if f.replaying() {
		final := hooks.Decision{Decision: hooks.Allow}
		for f.replaying() {
			e := f.history[f.pos]
			if e.Type != event.HookFired || event.FieldString(e.Payload, "hook") != string(in.Event) {
				break
			}
			f.pos++
			d := hooks.Decision{Decision: event.FieldString(e.Payload, "decision"), Reason: event.FieldString(e.Payload, "reason"), Handler: event.FieldString(e.Payload, "handler")}
			switch d.Decision {
			case hooks.Deny:
				return d, nil
			case hooks.Transform:
				d.Output = json.RawMessage(event.Field(e.Payload, "output"))
				final = d
			}
		}
		return final, nil
	}
	if reg == nil {
		return hooks.Decision{Decision: hooks.Allow}, nil
	}
	return reg.Fire(ctx, f.j, in)
}

package run

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/agentos/agentos/runtime/untrusted"
	"strings"
	"unicode/utf8"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/hooks"
	"github.com/agentos/agentos/runtime/provider"
)

// toolMessageCap bounds one tool result in the worker's context.
const toolMessageCap = 16 << 10

// work is the Worker's multi-turn tool loop. It returns the validated
// worker report, or a paused Result when a call waits for approval.
func (s *state) work(ctx context.Context, directive, plan json.RawMessage, feedback string) (json.RawMessage, Result, error) {
	const schemaID = "worker_report_v1"
	user := "lead_directive_v1:\n" + string(directive) + "\n\nplan_v1:\n" + string(plan)
	if feedback != "" {
		user += "\n\nReview feedback to address in this round:\n" + feedback
	}
	user += s.previousRun()
	msgs := []provider.Message{{Role: provider.RoleSystem, Content: s.system("worker")}, {Role: provider.RoleUser, Content: user}}
	var specs []provider.ToolSpec
	if s.e.Tools != nil {
		specs = s.e.Tools.Specs(s.allowed)
	}
	strikes := 0
	// streak counts, per call (tool, arguments and error code), the turns
	// in a row in which it failed: a model stuck in a loop resends it turn
	// after turn until the turn budget runs out; the third turn ends the
	// run and says so. Copies of a call within one turn are not a loop.
	streak := map[string]int{}
	// repair is the validation error a repair turn was asked for: the
	// report turn that follows keeps the tools in the request (the prompt
	// prefix stays the same) and asks for the schema.
	var repair error
	maxTurns := s.e.Profile.Limits.MaxToolTurns
	for turn := 0; turn < maxTurns; turn++ {
		var err error
		if msgs, err = s.compact(ctx, msgs); err != nil {
			return nil, Result{}, err
		}
		var schema *provider.ResponseSchema
		if repair != nil {
			schema = s.responseSchema(schemaID)
		}
		resp, err := s.call(ctx, "worker", msgs, specs, schema)
		if err != nil {
			return nil, Result{}, err
		}
		if len(resp.ToolCalls) == 0 {
			doc, verr := s.settle(ctx, "worker", schemaID, resp.Text, repair)
			if verr == nil {
				return doc, Result{}, nil
			}
			if resp.FinishReason == provider.FinishSafety {
				return nil, Result{}, refused("worker", resp)
			}
			if err := s.violation(ctx, "worker", schemaID, verr); err != nil {
				return nil, Result{}, err
			}
			if repair != nil {
				return nil, Result{}, malformed("worker", schemaID, verr)
			}
			repair = verr
			msgs = append(msgs,
				provider.Message{Role: provider.RoleAssistant, Content: resp.Text},
				provider.Message{Role: provider.RoleUser, Content: repairRequest(schemaID, true, verr)})
			continue
		}
		msgs = append(msgs, provider.Message{Role: provider.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls})
		failed := map[string]int{}
		var looping *Failure
		for _, tc := range resp.ToolCalls {
			c := Call{ID: tc.ID, Name: tc.Name, Args: tc.Args, AllowedTools: s.allowed, Role: "worker", NoRepair: s.in.NoRepair, WritePaths: s.writePaths, SkillRules: s.skillRules}
			end := s.in.ctl.enterTool(c.Name, c.ID)
			out, err := s.callTool(ctx, c)
			end()
			if err != nil {
				return nil, Result{}, err
			}
			if s.in.ctl.stopped() {
				return nil, Result{}, s.in.ctl.failure()
			}
			if err := s.halt(); err != nil {
				return nil, Result{}, err
			}
			if out.Pending != nil {
				return nil, Result{Paused: true, Pending: []Pending{*out.Pending}}, nil
			}
			if out.Error != nil && (out.Error.Code == string(kernel.CodeInvalidArguments) || out.Error.Code == string(kernel.CodeToolNotFound)) {
				strikes++
				if s.in.NoRepair {
					return nil, Result{}, &Failure{Status: StatusFailed, Class: ClassInvalidInput, Code: out.Error.Code,
						Reason: fmt.Sprintf("the model's call to %s was blocked and guard repair is off: %s", tc.Name, out.Error.Message), NextAction: "retry, turn guard repair on (profile guard_repair, policy guard.repair), or use a model with better tool calling"}
				}
				if strikes > 1 {
					return nil, Result{}, &Failure{Status: StatusFailed, Class: ClassInvalidInput, Code: out.Error.Code,
						Reason: fmt.Sprintf("the model's call to %s was blocked again after one repair round: %s", tc.Name, out.Error.Message), NextAction: "retry, or use a model with better tool calling"}
				}
			} else {
				strikes = 0
			}
			if out.Error != nil {
				sig := tc.Name + "\x00" + string(tc.Args) + "\x00" + out.Error.Code
				if _, seen := failed[sig]; !seen {
					failed[sig] = streak[sig] + 1
					if failed[sig] >= maxRepeatedFailures && looping == nil {
						looping = &Failure{Status: StatusFailed, Class: ClassToolRuntimeError, Code: CodeRepeatedFailure,
							Reason:     fmt.Sprintf("the worker made the same failing call in %d turns in a row: %s %s → %s: %s", failed[sig], tc.Name, clip(string(tc.Args), 200), out.Error.Code, clip(out.Error.Message, 300)),
							NextAction: "retry with a more specific request, or use a model that changes its approach after a failure; the work so far is kept"}
					}
				}
			}
			msgs = append(msgs, provider.Message{Role: provider.RoleTool, ToolCallID: tc.ID, Name: tc.Name, Content: untrusted.Block("tool_result:"+tc.Name, untrusted.Visible(toolMessage(out), true))})
		}
		// Every call of the turn is recorded first; then a loop ends it.
		streak = failed
		if looping != nil {
			return nil, Result{}, looping
		}
	}
	return nil, Result{}, &Failure{Status: StatusFailed, Class: ClassPolicyDenied, Code: "BUDGET_EXCEEDED", Reason: fmt.Sprintf("the worker did not finish within max_tool_turns %d", maxTurns), NextAction: "raise max_tool_turns or split the request; the work so far is kept"}
}

// maxRepeatedFailures is in how many turns in a row the same call may
// fail the same way before the run ends (CodeRepeatedFailure).
const maxRepeatedFailures = 3

// CodeRepeatedFailure ends a run whose worker kept sending a call that
// failed (the same tool, arguments and error code, turn after turn).
const CodeRepeatedFailure = "REPEATED_FAILURE"

// callTool dispatches one call and, when it waits for an approval that the
// log already answers, applies the answer.
func (s *state) callTool(ctx context.Context, c Call) (ToolOutcome, error) {
	out, err := s.f.tool(ctx, s.e.Tools, c)
	for tries := 0; err == nil && out.Pending != nil && tries < 3; tries++ {
		res, answered := s.approvals[out.Pending.ApprovalID]
		if !answered {
			return out, nil // still waiting: the run pauses
		}
		switch res.Decision {
		case "approve":
			ex, exErr := s.f.approved(ctx, s.e.Tools, c, *out.Pending, res.By)
			if exErr != nil || ex.Error == nil || ex.Error.Code != string(kernel.CodeApprovalStale) {
				return ex, exErr
			}
			// The worktree moved after the approval: ask again.
			out, err = s.f.tool(ctx, s.e.Tools, c)
		case "deny", "cancelled":
			reason := res.Reason
			if reason == "" {
				reason = "no reason given"
			}
			return ToolOutcome{CallID: c.ID, Tool: c.Name, Error: &OutcomeError{Code: "APPROVAL_DENIED", Message: fmt.Sprintf("%s denied this action: %s", res.By, reason)}}, nil
		case "stale":
			// The worktree moved since the request: ask again.
			out, err = s.f.tool(ctx, s.e.Tools, c)
		default:
			return out, fmt.Errorf("approval %s: unknown decision %q", out.Pending.ApprovalID, res.Decision)
		}
	}
	return out, err
}

// toolMessage is a call's outcome as the model reads it, within
// toolMessageCap. A result too large for it keeps its shape: its longest
// strings are cut, then its longest lists lose their last items, so the
// model still reads valid JSON with the members that say where to go on
// (truncated, end_line, sha256, exit_code), and a note says what was cut.
// Cutting the encoded bytes instead left the model half a JSON document,
// without those members, for every read of a large file.
func toolMessage(out ToolOutcome) string {
	b, err := json.Marshal(out)
	if err != nil {
		return `{"ok":false,"error":{"code":"TOOL_RUNTIME_ERROR","message":"result not encodable"}}`
	}
	if len(b) <= toolMessageCap {
		return string(b)
	}
	budget := toolMessageCap - len(cutNote)
	var res any
	if len(out.Result) > 0 && json.Unmarshal(out.Result, &res) == nil {
		size := func(v any) int {
			r, err := json.Marshal(v)
			if err != nil {
				return toolMessageCap + 1
			}
			o := out
			o.Result = r
			enc, err := json.Marshal(o)
			if err != nil {
				return toolMessageCap + 1
			}
			b = enc
			return len(enc)
		}
		for n := longest(res, false); size(res) > budget && n > 64; {
			n = n * 3 / 4
			res = capValue(res, n, false)
		}
		for n := longest(res, true); size(res) > budget && n > 1; {
			n = min(n-1, n*3/4)
			res = capValue(res, n, true)
		}
		if size(res) <= budget {
			return string(b) + cutNote
		}
	}
	return string(b[:toolMessageCap]) + "\n[truncated: the result was longer than the context allows; read a narrower range]"
}

// cutNote follows a result toolMessage shortened.
const cutNote = "\n[cut to fit the context: long strings and lists in this result were shortened (a cut string ends in …); read a narrower range]"

// longest is the length of the longest string (lists: the longest list)
// in a decoded JSON value.
func longest(v any, lists bool) int {
	n := 0
	switch x := v.(type) {
	case string:
		if !lists {
			n = len(x)
		}
	case []any:
		if lists {
			n = len(x)
		}
		for _, e := range x {
			n = max(n, longest(e, lists))
		}
	case map[string]any:
		for _, e := range x {
			n = max(n, longest(e, lists))
		}
	}
	return n
}

// capValue cuts every string longer than n bytes (at a UTF-8 boundary,
// ending in …), or with lists every list longer than n items, in a decoded
// JSON value.
func capValue(v any, n int, lists bool) any {
	switch x := v.(type) {
	case string:
		if lists || len(x) <= n {
			return x
		}
		cut := n
		for cut > 0 && !utf8.RuneStart(x[cut]) {
			cut--
		}
		return x[:cut] + "…"
	case []any:
		if lists && len(x) > n {
			x = x[:n]
		}
		for i := range x {
			x[i] = capValue(x[i], n, lists)
		}
		return x
	case map[string]any:
		for k, e := range x {
			x[k] = capValue(e, n, lists)
		}
		return x
	}
	return v
}

// estimateTokens approximates a tokenizer: ~4 bytes per token.
func estimateTokens(msgs []provider.Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Content) / 4
		for _, c := range m.ToolCalls {
			n += len(c.Args) / 4
		}
	}
	return n
}

// compact keeps the worker's context under the profile's token budget:
// older tool exchanges are replaced by a summary, which is stored as an
// artifact and referenced by digest. The PreCompact hook may veto it.
func (s *state) compact(ctx context.Context, msgs []provider.Message) ([]provider.Message, error) {
	budget := s.e.Profile.Limits.ContextTokens
	if budget <= 0 || estimateTokens(msgs) <= budget {
		return msgs, nil
	}
	// Groups start at assistant messages after the system and first user
	// message; keep the last two so tool calls and results stay paired.
	var starts []int
	for i := 2; i < len(msgs); i++ {
		if msgs[i].Role == provider.RoleAssistant {
			starts = append(starts, i)
		}
	}
	if len(starts) <= 2 {
		return msgs, nil
	}
	cut := starts[len(starts)-2]
	d, err := s.f.hook(ctx, s.e.Hooks, hooks.Input{Event: hooks.PreCompact, SessionID: s.f.j.SessionID(), Cwd: s.in.Cwd, Trigger: "auto"})
	if err != nil {
		return nil, err
	}
	if d.Decision == hooks.Deny {
		return msgs, nil
	}
	var sum strings.Builder
	fmt.Fprintf(&sum, "Summary of %d earlier messages (compacted to stay within the context budget):\n", cut-2)
	for _, m := range msgs[2:cut] {
		switch m.Role {
		case provider.RoleAssistant:
			for _, c := range m.ToolCalls {
				fmt.Fprintf(&sum, "- called %s %s\n", c.Name, clip(string(c.Args), 200))
			}
		case provider.RoleTool:
			fmt.Fprintf(&sum, "  → %s\n", clip(m.Content, 300))
		}
	}
	text := sum.String()
	ev, err := s.f.emit(ctx, event.ArtifactEmitted, "runtime", map[string]any{"kind": "compaction", "name": "context-summary.md", "digest": digestOf([]byte(text)), "size": len(text), "media_type": "text/markdown", "content": text}, "")
	if err != nil {
		return nil, err
	}
	ref := fmt.Sprintf("%s\n(full summary: artifact %s, event seq %d)", text, event.FieldString(ev.Payload, "digest"), ev.Seq)
	out := append([]provider.Message{msgs[0], msgs[1], {Role: provider.RoleUser, Content: ref}}, msgs[cut:]...)
	return out, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

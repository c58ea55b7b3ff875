package hooks

import (
	"context"
	"encoding/json"

	"github.com/agentos/agentos/kernel"
)

// ForKernel adapts the registry to the kernel's PreToolUse/PostToolUse
// interface for one session.
type ForKernel struct {
	R          *Registry
	SessionID  string
	Cwd        string
	Transcript string
}

// PreToolUse implements kernel.Hooks.
func (h ForKernel) PreToolUse(ctx context.Context, rec kernel.Recorder, tool string, args json.RawMessage) (kernel.HookDecision, error) {
	d, err := h.R.Fire(ctx, rec, Input{Event: PreToolUse, SessionID: h.SessionID, Cwd: h.Cwd, Transcript: h.Transcript, ToolName: tool, ToolInput: args})
	return kernel.HookDecision{Decision: d.Decision, Reason: d.Reason, Output: d.Output}, err
}

// PostToolUse implements kernel.Hooks.
func (h ForKernel) PostToolUse(ctx context.Context, rec kernel.Recorder, tool string, args, result json.RawMessage) (kernel.HookDecision, error) {
	d, err := h.R.Fire(ctx, rec, Input{Event: PostToolUse, SessionID: h.SessionID, Cwd: h.Cwd, Transcript: h.Transcript, ToolName: tool, ToolInput: args, ToolResponse: result})
	return kernel.HookDecision{Decision: d.Decision, Reason: d.Reason, Output: d.Output}, err
}

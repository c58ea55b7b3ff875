package run

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/runtime/provider"
)

// KernelTools adapts the capability kernel to the engine's Tools. Domain
// errors (blocked, denied, failed calls) are already recorded as events by
// the kernel and reach the model from there, so only infrastructure errors
// (a failed append) are returned.
type KernelTools struct {
	K *kernel.Kernel
}

// Specs implements Tools.
func (t KernelTools) Specs(scope []string) []provider.ToolSpec {
	var out []provider.ToolSpec
	for _, d := range t.K.Tools() {
		if scope != nil && !kernel.InScope(scope, d.Name) {
			continue
		}
		out = append(out, provider.ToolSpec{Name: d.Name, Description: d.Description, InputSchema: d.Input})
	}
	return out
}

func domainOnly(err error) error {
	var ke *kernel.Error
	if err == nil || errors.As(err, &ke) {
		return nil
	}
	return err
}

// Dispatch implements Tools.
func (t KernelTools) Dispatch(ctx context.Context, rec kernel.Recorder, c Call) error {
	_, err := t.K.Dispatch(ctx, rec, kernel.Call{ID: c.ID, Name: c.Name, Args: c.Args, Caller: c.Role, Scope: c.AllowedTools, NoRepair: c.NoRepair, WritePaths: c.WritePaths, Rules: c.Rules, SkillRules: c.SkillRules})
	return domainOnly(err)
}

// ExecuteApproved implements Tools.
func (t KernelTools) ExecuteApproved(ctx context.Context, rec kernel.Recorder, c Call, p Pending, by string) error {
	var rev kernel.Revision
	if len(p.Revision) > 0 {
		if err := json.Unmarshal(p.Revision, &rev); err != nil {
			return err
		}
	}
	args := c.Args
	if len(p.Args) > 0 {
		args = p.Args // the approved arguments, exactly
	}
	_, err := t.K.ExecuteApproved(ctx, rec, kernel.Call{ID: c.ID, Name: c.Name, Args: args, Caller: c.Role, Scope: c.AllowedTools, NoRepair: c.NoRepair, WritePaths: c.WritePaths, Rules: c.Rules, SkillRules: c.SkillRules}, p.ApprovalID, p.Digest, rev)
	return domainOnly(err)
}

package kernel

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentos/agentos/kernel/toolrule"
)

// The repository's permission rules (Kernel.Permissions: Claude Code's
// permissions in .claude/settings.json and .claude/settings.local.json)
// bind every call, whoever the caller: a deny rule refuses the call at
// stage "permissions" (TOOL_NOT_ALLOWED, with the rule in the refusal);
// an ask rule, or a call the rules cannot be checked against, needs a
// maintainer's approval whatever policy.yaml says. They only tighten:
// only the repository's allow rules may lower an approval, and only where
// the operator's policy lets them (Kernel.Preapprove, docs/claude-code.md).

// checkPermissions applies the deny rules to a call's arguments, or (args
// nil) to the paths a write changes.
func (k *Kernel) checkPermissions(ctx context.Context, rec Recorder, c Call, args json.RawMessage, paths []string) error {
	for _, p := range k.Permissions {
		var ref *toolrule.Refusal
		if args != nil {
			ref = p.Denied(c.Name, args)
		} else {
			ref = p.DeniedWrite(c.Name, paths)
		}
		if ref != nil {
			return k.reject(ctx, rec, c, "permissions", &Error{Kind: "gate", Code: CodeToolNotAllowed, Message: ref.Error(), Details: ref})
		}
	}
	return nil
}

// permissionsAssessed applies the rules that need the call assessed: a
// configured command tool's command line (test.run, lint.run) against
// the deny rules, then the ask rules, which raise the control path to
// approval (a deny decision stays).
func (k *Kernel) permissionsAssessed(ctx context.Context, rec Recorder, c Call, args json.RawMessage, risk *Risk) error {
	for _, p := range k.Permissions {
		if ref := p.DeniedCommand(c.Name, risk.Command); ref != nil {
			return k.reject(ctx, rec, c, "permissions", &Error{Kind: "gate", Code: CodeToolNotAllowed, Message: ref.Error(), Details: ref})
		}
	}
	if risk.Control == ControlDeny || risk.Control == ControlApproval {
		return nil
	}
	var paths []string
	if risk.Category == CategoryWrite {
		paths = risk.Paths
		if paths == nil {
			paths = []string{}
		}
	}
	for _, p := range k.Permissions {
		if why := p.Ask(c.Name, args, risk.Command, paths); why != "" {
			risk.Control, risk.Trusted, risk.Reason = ControlApproval, false, why
			return nil
		}
	}
	return nil
}

// Preapproval is the repository allow rule that let a call run without
// the approval the policy's approval level asks for (Kernel.Preapprove),
// recorded as tool.invoke's "preapproved".
type Preapproval struct {
	Rule   string `json:"rule"`   // the allow rule, as written
	Source string `json:"source"` // the settings file's permissions.allow
	Policy string `json:"policy"` // the operator's policy entry that lets it
}

// preapprove lowers a call's approval to preview_auto when Kernel.Preapprove
// names an allow rule for it, and returns that rule. Only an approval
// the policy's approval level asks for is lowered: never a deny (the
// call was refused before), an ask rule of the repository (or a call the
// rules cannot be checked against), a high-risk command, a path that
// looks like a secret, or CI and agent configuration.
func (k *Kernel) preapprove(c Call, args json.RawMessage, risk *Risk) *Preapproval {
	if k.Preapprove == nil || risk.Control != ControlApproval || risk.HighRiskCommand || risk.TouchesSecrets || len(risk.ProtectedPaths) > 0 {
		return nil
	}
	var paths []string
	if risk.Category == CategoryWrite {
		if paths = risk.Paths; paths == nil {
			paths = []string{}
		}
	}
	for _, p := range k.Permissions {
		if p.Ask(c.Name, args, risk.Command, paths) != "" {
			return nil
		}
	}
	pa := k.Preapprove(c.Name, args, *risk)
	if pa == nil {
		return nil
	}
	risk.Control, risk.Reason = ControlPreviewAuto, fmt.Sprintf("pre-approved by %s rule %s (%s)", pa.Source, pa.Rule, pa.Policy)
	return pa
}

package kernel

import (
	"context"
	"encoding/json"

	"github.com/agentos/agentos/kernel/toolrule"
)

// The repository's permission rules (Kernel.Permissions: Claude Code's
// permissions in .claude/settings.json and .claude/settings.local.json)
// bind every call, whoever the caller: a deny rule refuses the call at
// stage "permissions" (TOOL_NOT_ALLOWED, with the rule in the refusal);
// an ask rule, or a call the rules cannot be checked against, needs a
// maintainer's approval whatever policy.yaml says. They only tighten:
// nothing here lowers an approval.

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

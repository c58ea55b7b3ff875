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

// askPermissions raises a call's control path to approval when an ask
// rule applies (a deny decision stays).
func (k *Kernel) askPermissions(c Call, args json.RawMessage, risk *Risk) {
	if risk.Control == ControlDeny || risk.Control == ControlApproval {
		return
	}
	var paths []string
	if risk.Category == CategoryWrite {
		paths = risk.Paths
		if paths == nil {
			paths = []string{}
		}
	}
	for _, p := range k.Permissions {
		if why := p.Ask(c.Name, args, paths); why != "" {
			risk.Control, risk.Trusted, risk.Reason = ControlApproval, false, why
			return
		}
	}
}

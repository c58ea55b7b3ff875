package setup

import (
	"fmt"

	"github.com/agentos/agentos/kernel/policy"
	"github.com/agentos/agentos/kernel/workspace"
	"github.com/agentos/agentos/runtime/claudecode"
)

// claudePermissions reads the repository's Claude Code permissions
// (.claude/settings.json, .claude/settings.local.json) through the jail
// and tightens pol with them: the Read deny rules' paths join the
// workspace deny patterns, so that a denied file is hidden from every
// repository tool and command, not only from repo.read. The deny and ask
// rules themselves go to the kernel (Kernel.Permissions). They are read
// for untrusted code too: they can only tighten. A settings file that
// cannot be read is an error (a deny list must not be skipped).
func claudePermissions(ws *workspace.Root, pol *policy.Policy) (*claudecode.Permissions, *policy.Policy, error) {
	perms, err := claudecode.ReadPermissions(ws.ReadFile)
	if err != nil {
		return nil, nil, fmt.Errorf("claude code permissions: %w", err)
	}
	if len(perms.DenyGlobs) == 0 {
		return perms, pol, nil
	}
	tight := &policy.Policy{}
	tight.Workspace.DenyPatterns = perms.DenyGlobs
	return perms, policy.Merge(pol, tight), nil
}

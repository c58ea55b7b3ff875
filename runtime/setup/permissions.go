package setup

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentos/agentos/kernel/policy"
	"github.com/agentos/agentos/kernel/workspace"
	"github.com/agentos/agentos/runtime/claudecode"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/store"
)

// claudePermissions reads the repository's Claude Code permissions
// (.claude/settings.json, .claude/settings.local.json) through the jail
// and tightens pol with them: the Read deny rules' paths join the
// workspace deny patterns, so that a denied file is hidden from every
// repository tool and command, not only from repo.read. The deny and ask
// rules themselves go to the kernel (Kernel.Permissions). They are read
// for untrusted code too: they can only tighten. The allow rules may
// pre-approve calls only of the capabilities pol's claudeCode.honorAllow
// lists (the operator's, narrowed by the repository's policy), and never
// for untrusted code (Kernel.Preapprove, from Preapprover). A settings
// file that cannot be read is an error (a deny list must not be skipped).
func claudePermissions(ws *workspace.Root, pol *policy.Policy, untrusted bool) (*claudecode.Permissions, *policy.Policy, error) {
	perms, err := claudecode.ReadPermissions(ws.ReadFile)
	if err != nil {
		return nil, nil, fmt.Errorf("claude code permissions: %w", err)
	}
	perms.Under(claudecode.Honour{HonorAllow: pol.ClaudeCode.HonorAllow, HonorsAllow: pol.HonorsAllow, Untrusted: untrusted})
	if len(perms.DenyGlobs) == 0 {
		return perms, pol, nil
	}
	tight := &policy.Policy{}
	tight.Workspace.DenyPatterns = perms.DenyGlobs
	return perms, policy.Merge(pol, tight), nil
}

// queueWarnings queues the warnings as config.warning notices, except
// those the session's log already holds: a paused session that resumes
// (Build again for the same session) records each distinct warning once,
// while a warning that is new or different since (the settings changed)
// is recorded. A log that cannot be read is not a reason to drop a
// warning: then all are queued.
func queueWarnings(ctx context.Context, st store.Store, sessionID string, n *run.Notices, warnings []claudecode.Warning) {
	recorded := map[string]bool{}
	if len(warnings) > 0 && st != nil && sessionID != "" {
		err := st.Scan(ctx, sessionID, 0, func(e *event.Event) error {
			if e.Type != event.ConfigWarning {
				return nil
			}
			var w claudecode.Warning
			if json.Unmarshal(e.Payload, &w) == nil {
				recorded[warningKey(w)] = true
			}
			return nil
		})
		if err != nil {
			recorded = map[string]bool{}
		}
	}
	for _, w := range warnings {
		if k := warningKey(w); !recorded[k] {
			recorded[k] = true
			n.Add(run.Notice{Type: event.ConfigWarning, Payload: w})
		}
	}
}

func warningKey(w claudecode.Warning) string {
	b, _ := json.Marshal(w)
	return string(b)
}

package run

import (
	"context"
	"encoding/json"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
)

// TrustKey names a command for adaptive trust: the tool and its command
// line (empty for tools without one).
type TrustKey struct{ Tool, Command string }

// FoldTrust counts, per tool and command, how approvals were answered and
// how approved executions went, from a session's events: approve and deny
// decisions, approved executions that failed, and reverts (an event.amended
// whose correction says {"reverted": "<approval id>"}).
func FoldTrust(evs []event.Event, into map[TrustKey]kernel.TrustCounts) {
	keys := map[string]TrustKey{} // approval id → key
	for _, e := range evs {
		switch e.Type {
		case event.ApprovalRequested:
			var p struct {
				ApprovalID string          `json:"approval_id"`
				Tool       string          `json:"tool"`
				Args       json.RawMessage `json:"args"`
				Preview    struct {
					Command string `json:"command"`
				} `json:"preview"`
			}
			if json.Unmarshal(e.Payload, &p) == nil {
				keys[p.ApprovalID] = TrustKey{p.Tool, p.Preview.Command}
			}
		case event.ApprovalResolved:
			k, ok := keys[event.FieldString(e.Payload, "approval_id")]
			if !ok {
				continue
			}
			c := into[k]
			switch event.FieldString(e.Payload, "decision") {
			case "approve":
				c.Approved++
			case "deny":
				c.Denied++
			}
			into[k] = c
		case event.ToolResult:
			if !event.FieldBool(e.Payload, "ok") {
				for _, inv := range evs {
					if inv.ID == e.Parent() {
						if k, ok := keys[event.FieldString(inv.Payload, "approval_id")]; ok {
							c := into[k]
							c.Failed++
							into[k] = c
						}
						break
					}
				}
			}
		case event.EventAmended:
			if id := event.FieldString(event.Field(e.Payload, "correction"), "reverted"); id != "" {
				if k, ok := keys[id]; ok {
					c := into[k]
					c.Reverted++
					into[k] = c
				}
			}
		}
	}
}

// TrustFromStore returns a kernel.Trust function that folds every session
// in the store (the repository's history on this server).
func TrustFromStore(ctx context.Context, s store.Store) func(tool, command string) kernel.TrustCounts {
	return func(tool, command string) kernel.TrustCounts {
		all := map[TrustKey]kernel.TrustCounts{}
		sessions, err := s.Sessions(ctx)
		if err != nil {
			return kernel.TrustCounts{Failed: 1} // unknown history is not trusted
		}
		for _, si := range sessions {
			evs, err := s.Read(ctx, si.SessionID, 1)
			if err != nil {
				return kernel.TrustCounts{Failed: 1}
			}
			FoldTrust(evs, all)
		}
		return all[TrustKey{tool, command}]
	}
}

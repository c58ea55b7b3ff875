package run

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
)

// TrustKey names a command for adaptive trust: the tool and its command
// line (empty for tools without one).
type TrustKey struct{ Tool, Command string }

// trustFold counts, per tool and command, how one session's approvals were
// answered and how approved executions went: approve and deny decisions,
// approved executions that failed, and reverts (an event.amended whose
// correction says {"reverted": "<approval id>"}). It folds incrementally,
// keeping what later events refer back to (approval ids, approved
// invocations).
type trustFold struct {
	seq     int64               // the last seq folded
	keys    map[string]TrustKey // approval id → what it approved
	invokes map[string]string   // tool.invoke event id → its approval id
	counts  map[TrustKey]kernel.TrustCounts
}

func newTrustFold() *trustFold {
	return &trustFold{keys: map[string]TrustKey{}, invokes: map[string]string{}, counts: map[TrustKey]kernel.TrustCounts{}}
}

// add folds the session's next events.
func (f *trustFold) add(evs []event.Event) {
	count := func(approvalID string, bump func(*kernel.TrustCounts)) {
		if k, ok := f.keys[approvalID]; ok {
			c := f.counts[k]
			bump(&c)
			f.counts[k] = c
		}
	}
	for _, e := range evs {
		f.seq = e.Seq
		switch e.Type {
		case event.ApprovalRequested:
			var p struct {
				ApprovalID string `json:"approval_id"`
				Tool       string `json:"tool"`
				Preview    struct {
					Command string `json:"command"`
				} `json:"preview"`
			}
			if json.Unmarshal(e.Payload, &p) == nil {
				f.keys[p.ApprovalID] = TrustKey{p.Tool, p.Preview.Command}
			}
		case event.ApprovalResolved:
			switch event.FieldString(e.Payload, "decision") {
			case "approve":
				count(event.FieldString(e.Payload, "approval_id"), func(c *kernel.TrustCounts) { c.Approved++ })
			case "deny":
				count(event.FieldString(e.Payload, "approval_id"), func(c *kernel.TrustCounts) { c.Denied++ })
			}
		case event.ToolInvoke:
			if id := event.FieldString(e.Payload, "approval_id"); id != "" {
				f.invokes[e.ID] = id
			}
		case event.ToolResult:
			if !event.FieldBool(e.Payload, "ok") {
				count(f.invokes[e.Parent()], func(c *kernel.TrustCounts) { c.Failed++ })
			}
		case event.EventAmended:
			if id := event.FieldString(event.Field(e.Payload, "correction"), "reverted"); id != "" {
				count(id, func(c *kernel.TrustCounts) { c.Reverted++ })
			}
		}
	}
}

// TrustFromStore returns a Kernel.Trust function that folds every session
// in the store (the repository's history on this server). It folds each
// session once and afterwards only the events appended since, so a trust
// decision costs a session listing plus the new events, not the whole
// history.
func TrustFromStore(ctx context.Context, s store.Store) func(tool, command string) kernel.TrustCounts {
	var mu sync.Mutex
	folds := map[string]*trustFold{}
	return func(tool, command string) kernel.TrustCounts {
		mu.Lock()
		defer mu.Unlock()
		sessions, err := s.Sessions(ctx)
		if err != nil {
			return kernel.TrustCounts{Failed: 1} // unknown history is not trusted
		}
		key := TrustKey{tool, command}
		var total kernel.TrustCounts
		for _, si := range sessions {
			f := folds[si.SessionID]
			if f == nil || si.LastSeq < f.seq {
				f = newTrustFold()
				folds[si.SessionID] = f
			}
			if si.LastSeq > f.seq {
				evs, err := s.Read(ctx, si.SessionID, f.seq+1)
				if err != nil {
					return kernel.TrustCounts{Failed: 1}
				}
				f.add(evs)
			}
			total = total.Add(f.counts[key])
		}
		return total
	}
}

package run

import (
	"context"
	"sync"
)

// Notice is an event about the run's environment rather than a decision
// of the run (event.IsNotice): a repository setting agentos does not do
// as written (config.warning), an MCP server that did not start
// (mcp.server_failed). The assembler and the tools add them to the
// engine's Notices; a live run records the pending ones before its next
// event, and re-execution steps over recorded ones.
type Notice struct {
	Type    string
	Payload any
}

// Notices is a queue of notices, safe for concurrent use.
type Notices struct {
	mu      sync.Mutex
	pending []Notice
}

// Add queues a notice for the next live event of a run.
func (n *Notices) Add(x Notice) {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.pending = append(n.pending, x)
	n.mu.Unlock()
}

func (n *Notices) take() []Notice {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.pending
	n.pending = nil
	return out
}

// flushNotices records the pending notices in j (live only).
func flushNotices(ctx context.Context, j eventLog, n *Notices) error {
	for _, x := range n.take() {
		if _, err := j.Append(ctx, x.Type, "runtime", x.Payload, ""); err != nil {
			return err
		}
	}
	return nil
}

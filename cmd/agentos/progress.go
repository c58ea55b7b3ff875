package main

import (
	"context"
	"fmt"
	"io"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
)

func followPrint(ctx context.Context, env *runtimeEnv, sessionID string, after int64, w io.Writer) error {
	return store.Follow(ctx, env.store, sessionID, after, func(e event.Event) (bool, error) {
		switch e.Type {
		case event.AgentTransition, event.ToolInvoke, event.ToolResult, event.ToolRejected, event.ApprovalRequested, event.ApprovalResolved, event.RunPaused, event.TurnTerminal, event.SkillInvoke, event.SkillSelected, event.HookFired:
			if e.Type == event.HookFired && event.FieldString(e.Payload, "decision") == "allow" {
				return false, nil
			}
			fmt.Fprintf(w, "  %4d %-18s %s\n", e.Seq, e.Type, traceDetail(&e))
		}
		return e.Type == event.TurnTerminal || e.Type == event.RunPaused, nil
	})
}

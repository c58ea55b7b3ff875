package run

import (
	"context"
	"testing"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
)

func TestFoldTrust(t *testing.T) {
	sealer, _ := event.NewSealer(schemas.MustDefault(), nil, nil)
	s := store.NewMemory(sealer)
	ctx := context.Background()
	var seq int64
	app := func(typ string, p map[string]any, parent string) string {
		evs, err := s.Append(ctx, "t", seq, event.Draft{Type: typ, Actor: "k", Payload: p, ParentID: parent})
		if err != nil {
			t.Fatal(err)
		}
		seq = evs[0].Seq
		return evs[0].ID
	}
	d := "0000000000000000000000000000000000000000000000000000000000000000"
	for i, decision := range []string{"approve", "approve", "deny"} {
		id := []string{"a1", "a2", "a3"}[i]
		app("approval.requested", map[string]any{"approval_id": id, "tool": "process.run", "digest": d, "preview": map[string]any{"command": "make test"}}, "")
		app("approval.resolved", map[string]any{"approval_id": id, "decision": decision, "by": "octocat"}, "")
	}
	inv := app("tool.invoke", map[string]any{"call_id": "c", "tool": "process.run", "args": map[string]any{}, "approval_id": "a2"}, "")
	app("tool.result", map[string]any{"call_id": "c", "tool": "process.run", "ok": false, "error": map[string]any{"code": "TOOL_RUNTIME_ERROR", "message": "x"}}, inv)
	app("event.amended", map[string]any{"amends": inv, "reason": "maintainer reverted the change", "correction": map[string]any{"reverted": "a1"}}, "")
	got := TrustFromStore(ctx, s)("process.run", "make test")
	want := kernel.TrustCounts{Approved: 2, Denied: 1, Failed: 1, Reverted: 1}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if c := TrustFromStore(ctx, s)("process.run", "make lint"); c != (kernel.TrustCounts{}) {
		t.Fatalf("other command: %+v", c)
	}
}

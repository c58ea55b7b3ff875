package run

import (
	"context"
	"testing"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
)

// TestTrustFromStore: approvals, denials, a failed approved execution and
// a revert are counted for their command only.
func TestTrustFromStore(t *testing.T) {
	sealer, _ := event.NewSealer(schemas.MustDefault(), nil, nil)
	s := store.NewMemory(sealer)
	trackStore(s)
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

// readCounter counts the events a store hands out through Read.
type readCounter struct {
	store.Store
	read int
}

func (r *readCounter) Read(ctx context.Context, sid string, from int64) ([]event.Event, error) {
	evs, err := r.Store.Read(ctx, sid, from)
	r.read += len(evs)
	return evs, err
}

// TestTrustFromStoreIncremental: the trust function folds each session
// once and afterwards reads only the events appended since, and its counts
// follow those events (a later deny, a failure of an approved invocation
// folded in an earlier call, a revert).
func TestTrustFromStoreIncremental(t *testing.T) {
	sealer, _ := event.NewSealer(schemas.MustDefault(), nil, nil)
	mem := store.NewMemory(sealer)
	trackStore(mem)
	s := &readCounter{Store: mem}
	ctx := context.Background()
	seqs := map[string]int64{}
	app := func(sid, typ string, p map[string]any, parent string) string {
		evs, err := mem.Append(ctx, sid, seqs[sid], event.Draft{Type: typ, Actor: "k", Payload: p, ParentID: parent})
		if err != nil {
			t.Fatal(err)
		}
		seqs[sid] = evs[0].Seq
		return evs[0].ID
	}
	d := "0000000000000000000000000000000000000000000000000000000000000000"
	approve := func(sid, id, decision string) {
		app(sid, "approval.requested", map[string]any{"approval_id": id, "tool": "process.run", "digest": d, "preview": map[string]any{"command": "make test"}}, "")
		app(sid, "approval.resolved", map[string]any{"approval_id": id, "decision": decision, "by": "octocat"}, "")
	}
	trust := TrustFromStore(ctx, s)
	approve("one", "a1", "approve")
	approve("two", "b1", "approve")
	inv := app("one", "tool.invoke", map[string]any{"call_id": "c", "tool": "process.run", "args": map[string]any{}, "approval_id": "a1"}, "")
	if got := trust("process.run", "make test"); got != (kernel.TrustCounts{Approved: 2}) {
		t.Fatalf("first call: %+v", got)
	}
	if s.read != 5 {
		t.Fatalf("first call read %d events, want all 5", s.read)
	}
	app("one", "tool.result", map[string]any{"call_id": "c", "tool": "process.run", "ok": false, "error": map[string]any{"code": "TOOL_RUNTIME_ERROR", "message": "x"}}, inv)
	approve("two", "b2", "deny")
	app("two", "event.amended", map[string]any{"amends": inv, "reason": "reverted", "correction": map[string]any{"reverted": "b1"}}, "")
	if got, want := trust("process.run", "make test"), (kernel.TrustCounts{Approved: 2, Denied: 1, Failed: 1, Reverted: 1}); got != want {
		t.Fatalf("second call: %+v, want %+v", got, want)
	}
	if s.read != 9 {
		t.Fatalf("second call read %d events in all, want the 4 new ones on top of 5", s.read)
	}
	if got := trust("process.run", "make test"); got.Approved != 2 || s.read != 9 {
		t.Fatalf("third call with nothing new: %+v, read %d", got, s.read)
	}
}

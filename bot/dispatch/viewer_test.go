package dispatch_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
)

// An approval given on the run viewer's page goes the way of a PR review:
// a reader is refused, the bot itself is refused, a maintainer's answer is
// recorded with their login and "via viewer" and the run completes.
func TestScenarioApproveFromViewer(t *testing.T) {
	w := newWorld(t)
	res := w.comment(w.issue, false, "alice", "/agent "+demo.Prompt)
	if res.Status != "paused" {
		t.Fatalf("%+v", res)
	}
	sid := res.SessionID
	ap := w.snapshot(sid).PendingApprovals[0].ID
	ctx := context.Background()
	for _, who := range []string{"rita", botLogin} {
		if _, err := w.d.AnswerFromViewer(ctx, sid, ap, "approve", who, "via viewer"); !errors.Is(err, dispatch.ErrRefused) {
			t.Errorf("%s approving from the viewer: %v, want refused", who, err)
		}
	}
	if snap := w.snapshot(sid); snap.RunStatus != "paused" {
		t.Fatalf("a refused answer moved the run: %s", snap.RunStatus)
	}
	got, err := w.d.AnswerFromViewer(ctx, sid, ap, "approve", "alice", "via viewer")
	if err != nil || got.Status != "completed" {
		t.Fatalf("alice approving from the viewer: %+v, %v", got, err)
	}
	found := false
	for _, e := range w.events(sid) {
		if e.Type == event.ApprovalResolved && event.FieldString(e.Payload, "approval_id") == ap {
			found = event.FieldString(e.Payload, "by") == "alice" && event.FieldString(e.Payload, "reason") == "via viewer" && event.FieldString(e.Payload, "decision") == "approve"
		}
	}
	if !found {
		t.Error("the answer is not recorded with alice and \"via viewer\"")
	}
	if _, err := w.d.AnswerFromViewer(ctx, "no-such-session", ap, "approve", "alice", "via viewer"); !errors.Is(err, dispatch.ErrNotAGitHubSession) {
		t.Errorf("unknown session: %v", err)
	}
}

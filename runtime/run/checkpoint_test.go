package run

import (
	"context"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
)

// TestCheckpointsAtPauseAndInterval: a pause writes checkpoint.created
// right after run.paused, a long run writes one every CheckpointEvery
// events, the resumed run completes from the checkpoint, and the log
// verifies with the same snapshot as the full fold.
func TestCheckpointsAtPauseAndInterval(t *testing.T) {
	worker := []string{`    - tool_calls: [{id: w1, name: write, args: {path: a.txt}}]`, echoCall, finalReport}
	f1 := newFixture(t, script(worker...), nil)
	f1.mgr.CheckpointEvery = 5
	ctx := context.Background()
	if out, err := f1.mgr.Start(ctx, f1.eng, StartRequest{SessionID: "cp", Prompt: "greet"}); err != nil || out.Status != "paused" {
		t.Fatalf("%+v %v", out, err)
	}
	evs := f1.events(t, "cp")
	if n := len(evs); evs[n-2].Type != event.RunPaused || evs[n-1].Type != event.CheckpointCreated {
		t.Fatalf("pause does not end with a checkpoint: %s", types(evs))
	}
	if c := strings.Count(types(evs), event.CheckpointCreated); c < 3 {
		t.Errorf("%d checkpoints in %d events with an interval of 5", c, len(evs))
	}
	must(t, f1.mgr.Resolve(ctx, "cp", "ap-1", "approve", "octocat", ""))
	f2 := newFixture(t, script(worker...), f1.store)
	out, err := f2.mgr.Resume(ctx, f2.eng, "cp", "", "")
	if err != nil || out.Status != "completed" {
		t.Fatalf("resume: %+v %v", out, err)
	}
	evs = f2.events(t, "cp")
	verify(t, evs)
	full, _ := replay.Replay(evs)
	got, from, skipped, err := replay.Resume(evs)
	if err != nil || from == 0 || len(skipped) != 0 || got.RunStatus != full.RunStatus || got.Events != full.Events || got.LastHash != full.LastHash || len(got.ToolsInvoked) != len(full.ToolsInvoked) {
		t.Fatalf("resume from checkpoint: from %d skipped %v err %v\n%+v\n%+v", from, skipped, err, got, full)
	}
}

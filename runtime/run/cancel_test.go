package run

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/event"
)

func cancelledEvent(t *testing.T, evs []event.Event) map[string]any {
	t.Helper()
	for _, e := range evs {
		if e.Type == event.RunCancelled {
			var p map[string]any
			must(t, json.Unmarshal(e.Payload, &p))
			return p
		}
	}
	t.Fatalf("no run.cancelled in %s", types(evs))
	return nil
}

func checkCancelledEnd(t *testing.T, out Outcome, evs []event.Event) {
	t.Helper()
	if out.Status != StatusCancelled || out.Terminal == nil || out.Terminal.Status != StatusCancelled || out.Terminal.ErrorClass != "" || out.Terminal.SchemaVersion != "v2" {
		t.Fatalf("outcome %+v terminal %+v", out, out.Terminal)
	}
	verify(t, evs)
	tail := types(evs[len(evs)-3:])
	if tail != "run.cancelled turn.terminal session.close" {
		t.Fatalf("log ends %s", tail)
	}
	if event.FieldBool(evs[len(evs)-1].Payload, "ok") {
		t.Error("a cancelled session closed ok")
	}
}

// TestCancelPausedRun: a paused run cancelled (a closed PR, /agent cancel,
// the API) ends with status cancelled, not denied: approval.resolved
// (cancelled), run.cancelled, a v2 terminal report, session.close.
func TestCancelPausedRun(t *testing.T) {
	f := newFixture(t, script(`    - tool_calls: [{id: w1, name: write, args: {path: a.txt}}]`, finalReport), nil)
	ctx := context.Background()
	if out, err := f.mgr.Start(ctx, f.eng, StartRequest{SessionID: "cp", Prompt: "greet"}); err != nil || out.Status != "paused" {
		t.Fatalf("%+v %v", out, err)
	}
	out, err := f.mgr.Cancel(ctx, "cp", "octocat", "pull request closed")
	if err != nil {
		t.Fatal(err)
	}
	evs := f.events(t, "cp")
	checkCancelledEnd(t, out, evs)
	p := cancelledEvent(t, evs)
	if p["from"] != "paused" || p["by"] != "octocat" || p["reason"] != "pull request closed" {
		t.Errorf("run.cancelled %v", p)
	}
	if !strings.Contains(types(evs), "approval.resolved run.cancelled") {
		t.Errorf("pending approval not resolved as cancelled: %s", types(evs))
	}
	if _, err := f.mgr.Cancel(ctx, "cp", "octocat", "again"); err != ErrNotPaused {
		t.Errorf("second cancel: %v, want ErrNotPaused", err)
	}
}

// TestCancelDuringToolCall: a cancel that arrives while a tool call runs
// lets the call finish within the grace period (waited), or kills it after
// (killed); run.cancelled says which, and nothing runs after the cancel.
func TestCancelDuringToolCall(t *testing.T) {
	for _, c := range []struct {
		outcome string
		grace   time.Duration
		release bool
	}{
		{"waited", time.Minute, true},
		{"killed", 20 * time.Millisecond, false},
	} {
		t.Run(c.outcome, func(t *testing.T) {
			// After the slow call the worker would echo: a cancelled run must not.
			f := newFixture(t, script(`    - tool_calls: [{id: s1, name: slow, args: {}}]`, echoCall, finalReport), nil)
			f.mgr.CancelGrace = c.grace
			ctx := context.Background()
			type result struct {
				out Outcome
				err error
			}
			started := make(chan result, 1)
			go func() {
				out, err := f.mgr.Start(ctx, f.eng, StartRequest{SessionID: "ct", Prompt: "greet"})
				started <- result{out, err}
			}()
			<-f.kernel.started
			if c.release {
				go func() {
					time.Sleep(30 * time.Millisecond)
					f.kernel.release <- struct{}{}
				}()
			}
			out, err := f.mgr.Cancel(ctx, "ct", "octocat", "stop")
			if err != nil {
				t.Fatal(err)
			}
			r := <-started
			if r.err != nil || r.out.Status != "cancelled" {
				t.Fatalf("Start returned %+v %v", r.out, r.err)
			}
			evs := f.events(t, "ct")
			checkCancelledEnd(t, out, evs)
			p := cancelledEvent(t, evs)
			d, _ := p["during_tool"].(map[string]any)
			if p["from"] != "running" || d == nil || d["tool"] != "slow" || d["call_id"] != "s1" || d["outcome"] != c.outcome {
				t.Fatalf("run.cancelled %v", p)
			}
			if strings.Contains(types(evs), "tool.invoke tool.result llm.request") || f.kernel.executed.Load() > 1 {
				t.Errorf("the run went on after the cancel: %s", types(evs))
			}
			var last map[string]any
			for _, e := range evs {
				if e.Type == event.ToolResult {
					must(t, json.Unmarshal(e.Payload, &last))
				}
			}
			if ok, _ := last["ok"].(bool); ok != c.release {
				t.Errorf("tool.result %v: killed call must fail, finished call succeed", last)
			}
		})
	}
}

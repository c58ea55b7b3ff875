package run

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/journal"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/replay"
)

// slowThenEcho: the worker calls the slow tool, then echoes, then reports.
var slowThenEcho = script(`    - tool_calls: [{id: s1, name: slow, args: {}}]`, echoCall,
	`    - text: '{"output":"hello, world","steps_completed":["s1"],"tool_calls_made":["slow:s1","echo:t1"],"schema_version":"v1"}'`)

type startResult struct {
	out Outcome
	err error
}

func startAsync(f *fixture, ctx context.Context, sid string) chan startResult {
	ch := make(chan startResult, 1)
	go func() {
		out, err := f.mgr.Start(ctx, f.eng, StartRequest{SessionID: sid, Prompt: "greet"})
		ch <- startResult{out, err}
	}()
	return ch
}

func count(evs []event.Event) map[string]int {
	n := map[string]int{}
	for _, e := range evs {
		n[e.Type]++
	}
	return n
}

// noFalseReason fails if the log holds what a shutdown is not: a timeout,
// a provider error, a failed run or an aborted cycle.
func noFalseReason(t *testing.T, evs []event.Event) {
	t.Helper()
	for _, e := range evs {
		s := string(e.Payload)
		switch {
		case e.Type == event.RunFailed, e.Type == event.WorkflowAborted, e.Type == event.TurnTerminal && event.FieldString(e.Payload, "status") != "completed":
			t.Errorf("seq %d: %s %s", e.Seq, e.Type, s)
		case strings.Contains(s, `"TIMEOUT"`), strings.Contains(s, provider.CodeProviderError), strings.Contains(s, "context canceled"):
			t.Errorf("seq %d: %s records a false reason: %s", e.Seq, e.Type, s)
		}
	}
}

func invokesOf(evs []event.Event, tool string) int {
	n := 0
	for _, e := range evs {
		if e.Type == event.ToolInvoke && event.FieldString(e.Payload, "tool") == tool {
			n++
		}
	}
	return n
}

func interruptedEvent(t *testing.T, evs []event.Event) event.Event {
	t.Helper()
	for _, e := range evs {
		if e.Type == event.RunInterrupted {
			return e
		}
	}
	t.Fatalf("no run.interrupted in %s", types(evs))
	return event.Event{}
}

// TestStopLetsTheToolCallFinish: Stop during a tool call lets the call
// finish and record its result, then the run stops before its next step
// with run.interrupted (no terminal report, still running in the log);
// another process's Takeover goes on from there without running the call
// again, to one completed run whose log verifies strictly.
func TestStopLetsTheToolCallFinish(t *testing.T) {
	f := newFixture(t, slowThenEcho, nil)
	ctx := context.Background()
	done := startAsync(f, ctx, "st")
	<-f.kernel.started
	f.mgr.Stop(fmt.Errorf("%w: a test stops the process", ErrStopping))
	f.kernel.release <- struct{}{}
	r := <-done
	if !errors.Is(r.err, ErrInterrupted) || r.out.Status != "" {
		t.Fatalf("Start returned %+v %v, want ErrInterrupted and no status", r.out, r.err)
	}
	evs := f.events(t, "st")
	noFalseReason(t, evs)
	ie := interruptedEvent(t, evs)
	if !strings.Contains(event.FieldString(ie.Payload, "reason"), "a test stops the process") || string(event.Field(ie.Payload, "open")) != "[]" {
		t.Errorf("run.interrupted %s", ie.Payload)
	}
	if snap, err := replay.Replay(evs); err != nil || snap.RunStatus != replay.RunRunning {
		t.Fatalf("after the stop the run is %v (%v), want running", snap.RunStatus, err)
	}
	if c := count(evs); c[event.ToolResult] != 1 || c[event.LLMRequest] != c[event.LLMResponse] || c[event.TurnTerminal] != 0 {
		t.Fatalf("log after the stop: %v", c)
	}
	// A new Start in the stopped process stops at once too.
	if _, err := f.mgr.Start(ctx, f.eng, StartRequest{SessionID: "st2", Prompt: "greet"}); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("a run started after Stop: %v", err)
	}

	// Another process takes it over.
	f2 := newFixture(t, slowThenEcho, f.store)
	out, err := f2.mgr.Takeover(ctx, f2.eng, "st", "", "", "")
	if err != nil || out.Status != StatusCompleted {
		t.Fatalf("takeover: %+v %v", out, err)
	}
	evs = f2.events(t, "st")
	verify(t, evs)
	noFalseReason(t, evs)
	c := count(evs)
	if c[event.RunStarted] != 1 || c[event.TurnTerminal] != 1 || c[event.RunInterrupted] != 1 || invokesOf(evs, "slow") != 1 {
		t.Fatalf("%v; slow invoked %d times, want once", c, invokesOf(evs, "slow"))
	}
	for _, c := range f2.kernel.calls {
		if c.Name == "slow" {
			t.Errorf("the finished slow call was dispatched again by the takeover")
		}
	}
}

// TestCutToolCallIsRunAgain: a host that cuts a run in a tool call (its
// drain time ran out) gets no TIMEOUT from the killed call, nor any
// failure: the call stays open and run.interrupted names it. The takeover
// closes it INTERRUPTED marked to run again (a call that changes nothing,
// like test.run) and runs it again, so the run completes on the call's
// real result; re-executing the final log finds the same decisions.
func TestCutToolCallIsRunAgain(t *testing.T) {
	RerunTools["slow"] = true
	defer delete(RerunTools, "slow")
	f := newFixture(t, slowThenEcho, nil)
	ctx, cut := context.WithCancelCause(context.Background())
	done := startAsync(f, ctx, "cut")
	<-f.kernel.started
	cut(fmt.Errorf("%w: the drain time ran out", ErrStopping))
	r := <-done
	if !errors.Is(r.err, ErrInterrupted) {
		t.Fatalf("Start returned %+v %v", r.out, r.err)
	}
	evs := f.events(t, "cut")
	noFalseReason(t, evs)
	ie := interruptedEvent(t, evs)
	if open := string(event.Field(ie.Payload, "open")); !strings.Contains(open, `"tool":"slow"`) || !strings.Contains(open, `"call_id":"s1"`) {
		t.Errorf("run.interrupted does not name the open call: %s", ie.Payload)
	}
	if c := count(evs); c[event.ToolInvoke] != 1 || c[event.ToolResult] != 0 {
		t.Fatalf("log after the cut: %v (the cut call must stay open)", c)
	}

	f2 := newFixture(t, slowThenEcho, f.store)
	f2.kernel.release <- struct{}{} // the re-run finishes
	out, err := f2.mgr.Takeover(context.Background(), f2.eng, "cut", "", "", "")
	if err != nil || out.Status != StatusCompleted {
		t.Fatalf("takeover: %+v %v\n%s", out, err, types(f2.events(t, "cut")))
	}
	evs = f2.events(t, "cut")
	verify(t, evs)
	noFalseReason(t, evs)
	var results []string
	for _, e := range evs {
		if e.Type == event.ToolResult && event.FieldString(e.Payload, "tool") == "slow" {
			results = append(results, fmt.Sprintf("ok=%v code=%s rerun=%v", event.FieldBool(e.Payload, "ok"), event.FieldString(event.Field(e.Payload, "error"), "code"),
				event.FieldBool(event.Field(event.Field(e.Payload, "error"), "details"), "rerun")))
		}
	}
	if want := []string{"ok=false code=INTERRUPTED rerun=true", "ok=true code= rerun=false"}; fmt.Sprint(results) != fmt.Sprint(want) {
		t.Fatalf("slow's results %v, want %v", results, want)
	}
	if n := invokesOf(evs, "slow"); n != 2 {
		t.Fatalf("slow invoked %d times, want 2 (cut, run again)", n)
	}
	// The log re-executes: the re-run is read back as the call's outcome.
	history, prompt, _, _ := runHistory(evs, out.RunID)
	f3 := newFixture(t, slowThenEcho, nil)
	if _, err := Reexecute(context.Background(), f3.eng, prompt, history); err != nil {
		t.Fatalf("re-execution of the taken-over log: %v", err)
	}
}

// TestCutWriteIsNotRunAgain: a call that is not safe to repeat (here the
// slow tool, which RerunTools does not list) is closed INTERRUPTED by the
// takeover and the model is told; it is not run again.
func TestCutWriteIsNotRunAgain(t *testing.T) {
	f := newFixture(t, slowThenEcho, nil)
	ctx, cut := context.WithCancelCause(context.Background())
	done := startAsync(f, ctx, "w")
	<-f.kernel.started
	cut(fmt.Errorf("%w: the drain time ran out", ErrStopping))
	if r := <-done; !errors.Is(r.err, ErrInterrupted) {
		t.Fatalf("%+v %v", r.out, r.err)
	}
	f2 := newFixture(t, script(`    - tool_calls: [{id: s1, name: slow, args: {}}]`, echoCall, finalReport), f.store)
	out, err := f2.mgr.Takeover(context.Background(), f2.eng, "w", "", "", "")
	if err != nil || out.Status != StatusCompleted {
		t.Fatalf("takeover: %+v %v", out, err)
	}
	evs := f2.events(t, "w")
	verify(t, evs)
	for _, c := range f2.kernel.calls {
		if c.Name == "slow" {
			t.Fatal("a call not safe to repeat was run again")
		}
	}
	for _, e := range evs {
		if e.Type == event.ToolResult && event.FieldString(e.Payload, "tool") == "slow" && event.FieldBool(event.Field(event.Field(e.Payload, "error"), "details"), "rerun") {
			t.Fatalf("marked to run again: %s", e.Payload)
		}
	}
}

// blockingProvider blocks its call number block (1-based) until ctx ends,
// as a model call in progress does when the host cuts it.
type blockingProvider struct {
	provider.Provider
	n, block int
	started  chan struct{}
}

func (b *blockingProvider) Complete(ctx context.Context, r provider.CompletionRequest) (provider.CompletionResponse, error) {
	b.n++
	if b.n == b.block {
		b.started <- struct{}{}
		<-ctx.Done()
		return provider.CompletionResponse{}, &provider.Error{Code: provider.CodeProviderError, Message: "request failed", Err: ctx.Err()}
	}
	return b.Provider.Complete(ctx, r)
}

// TestCutModelCallIsAskedAgain: a model call cut by the host records no
// PROVIDER_ERROR: the request stays open, run.interrupted names it, and
// the takeover asks again, to one completed run whose log verifies.
func TestCutModelCallIsAskedAgain(t *testing.T) {
	f := newFixture(t, script(echoCall, finalReport), nil)
	bp := &blockingProvider{Provider: f.eng.Provider, block: 3, started: make(chan struct{}, 1)} // lead, planner, then the worker
	f.eng.Provider = bp
	ctx, cut := context.WithCancelCause(context.Background())
	done := startAsync(f, ctx, "m")
	<-bp.started
	cut(fmt.Errorf("%w: the drain time ran out", ErrStopping))
	if r := <-done; !errors.Is(r.err, ErrInterrupted) {
		t.Fatalf("%+v %v", r.out, r.err)
	}
	evs := f.events(t, "m")
	noFalseReason(t, evs)
	ie := interruptedEvent(t, evs)
	if open := string(event.Field(ie.Payload, "open")); !strings.Contains(open, `"kind":"model"`) || !strings.Contains(open, `"role":"worker"`) {
		t.Errorf("run.interrupted does not name the open model call: %s", ie.Payload)
	}
	f2 := newFixture(t, script(echoCall, finalReport), f.store)
	out, err := f2.mgr.Takeover(context.Background(), f2.eng, "m", "", "", "")
	if err != nil || out.Status != StatusCompleted {
		t.Fatalf("takeover: %+v %v\n%s", out, err, types(f2.events(t, "m")))
	}
	evs = f2.events(t, "m")
	verify(t, evs)
	noFalseReason(t, evs)
}

// TestReportMissingAfterInterruptVerifies: a run interrupted by a stop
// and then closed without a takeover (its worktree could not be rebuilt)
// gets its report_missing report, its open calls closed, and a log that
// verifies strictly.
func TestReportMissingAfterInterruptVerifies(t *testing.T) {
	f := newFixture(t, slowThenEcho, nil)
	ctx, cut := context.WithCancelCause(context.Background())
	done := startAsync(f, ctx, "rm")
	<-f.kernel.started
	cut(fmt.Errorf("%w: the drain time ran out", ErrStopping))
	<-done
	out, err := f.mgr.CloseOrphanReason(context.Background(), "rm", "a test")
	if err != nil || out.Status != StatusFailed {
		t.Fatalf("%+v %v", out, err)
	}
	evs := f.events(t, "rm")
	verify(t, evs)
	if c := count(evs); c[event.TurnTerminal] != 1 || c[event.ToolResult] != 1 {
		t.Fatalf("closed log: %v", c)
	}
}

// TestPlainCancelAfterStopIsAnInterruption: after Stop, a run whose
// context is then cancelled without a stopping cause (an HTTP server's
// runs when its grace ends) is interrupted too: the killed call records
// no TIMEOUT and the run no failure.
func TestPlainCancelAfterStopIsAnInterruption(t *testing.T) {
	f := newFixture(t, slowThenEcho, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := startAsync(f, ctx, "pc")
	<-f.kernel.started
	f.mgr.Stop(errors.New("the server stops"))
	cancel()
	r := <-done
	if !errors.Is(r.err, ErrInterrupted) || !strings.Contains(r.err.Error(), "the server stops") {
		t.Fatalf("Start returned %+v %v", r.out, r.err)
	}
	evs := f.events(t, "pc")
	noFalseReason(t, evs)
	if c := count(evs); c[event.RunInterrupted] != 1 || c[event.ToolResult] != 0 {
		t.Fatalf("log: %v", c)
	}
}

// TestRerunCutBeforeItsInvoke: the process that took a run over and was
// running an interrupted call again died after the re-run's PreToolUse
// decision was recorded and before the tool was invoked. The next
// takeover finds the log ending inside the re-run's dispatch: nothing ran,
// so the call is run now (it panicked with an index out of range here,
// found by the crash chaos trials), and the run completes with a log that
// verifies and re-executes.
func TestRerunCutBeforeItsInvoke(t *testing.T) {
	RerunTools["slow"] = true
	defer delete(RerunTools, "slow")
	f := newFixture(t, slowThenEcho, nil)
	ctx, cut := context.WithCancelCause(context.Background())
	done := startAsync(f, ctx, "rc")
	<-f.kernel.started
	cut(fmt.Errorf("%w: the drain time ran out", ErrStopping))
	if r := <-done; !errors.Is(r.err, ErrInterrupted) {
		t.Fatalf("Start returned %+v %v", r.out, r.err)
	}
	// A first takeover closes the call to run again, goes on, and dies
	// right after the re-run's PreToolUse hook recorded its decision.
	bg := context.Background()
	j, err := journal.Open(bg, f.store, "rc")
	if err != nil {
		t.Fatal(err)
	}
	evs := f.events(t, "rc")
	snap, err := replay.Replay(evs)
	if err != nil {
		t.Fatal(err)
	}
	j.SetRun(snap.RunID)
	if err := closeOpenTools(bg, j, evs, snap.RunID, interruptedMessage, true); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(bg, event.RunResumed, "runtime", map[string]any{"reason": "taken over: a first takeover"}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Record(bg, event.HookFired, "hooks", map[string]any{"hook": "PreToolUse", "handler": "audit", "decision": "allow", "tool": "slow"}, ""); err != nil {
		t.Fatal(err)
	}

	f2 := newFixture(t, slowThenEcho, f.store)
	f2.kernel.release <- struct{}{} // the re-run finishes
	out, err := f2.mgr.Takeover(bg, f2.eng, "rc", "", "", "")
	if err != nil || out.Status != StatusCompleted {
		t.Fatalf("second takeover: %+v %v\n%s", out, err, types(f2.events(t, "rc")))
	}
	evs = f2.events(t, "rc")
	verify(t, evs)
	noFalseReason(t, evs)
	if n := invokesOf(evs, "slow"); n != 2 {
		t.Fatalf("slow invoked %d times, want 2 (cut, then run again by the second takeover)", n)
	}
	history, prompt, _, _ := runHistory(evs, out.RunID)
	f3 := newFixture(t, slowThenEcho, nil)
	if _, err := Reexecute(bg, f3.eng, prompt, history); err != nil {
		t.Fatalf("re-execution of the final log: %v", err)
	}
}

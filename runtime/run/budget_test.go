package run

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/replay"
)

// stallingProvider answers like the wrapped provider except for one role,
// whose calls wait until their context ends (a model that hangs).
type stallingProvider struct {
	provider.Provider
	role string
}

func (s stallingProvider) Complete(ctx context.Context, r provider.CompletionRequest) (provider.CompletionResponse, error) {
	if r.Role == s.role {
		<-ctx.Done()
		return provider.CompletionResponse{}, ctx.Err()
	}
	return s.Provider.Complete(ctx, r)
}

// TestBudgetsEndRunWithTerminalReport: each budget ends the run with
// exactly one terminal report naming the limit, the log still verifies
// (every request has its response, every invoke its result), and the work
// done before the limit (the plan, earlier tool results) stays in the log.
func TestBudgetsEndRunWithTerminalReport(t *testing.T) {
	usage := func(in, out int, cost float64) string {
		return fmt.Sprintf(", usage: {input_tokens: %d, output_tokens: %d, cost_usd: %g}", in, out, cost)
	}
	leadPlan := func(u string) string {
		return `
roles:
  lead: [{text: '` + leadOK + `'` + u + `}]
  planner: [{text: '` + planOK + `'` + u + `}]
  worker:
`
	}
	echoN := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "    - tool_calls: [{id: t%d, name: echo, args: {text: \"hi %d\"}}]\n", i, i)
		}
		return b.String()
	}
	reviewer := "  reviewer: [{text: '" + reviewPass + "'}]\n"
	cases := []struct {
		name, script string
		mutate       func(*Engine)
		class        ErrorClass
		reason       string
		keptTools    int // tool.result events that must survive
	}{
		{"max_turns", leadPlan("") + echoN(3) + finalReport + "\n" + reviewer,
			func(e *Engine) { e.Profile.Limits.MaxTurns = 4 }, ClassPolicyDenied, "BUDGET_EXCEEDED: max_turns 4 reached", 2},
		{"max_tokens", leadPlan(usage(500, 100, 0)) + echoN(1) + finalReport + "\n" + reviewer,
			func(e *Engine) { e.Profile.Limits.MaxTokens = 1000 }, ClassPolicyDenied, "BUDGET_EXCEEDED: max_tokens 1000 reached", 0},
		{"max_cost_usd", leadPlan(usage(10, 10, 0.6)) + echoN(1) + finalReport + "\n" + reviewer,
			func(e *Engine) { e.Profile.Limits.MaxCostUSD = 1 }, ClassPolicyDenied, "BUDGET_EXCEEDED: max_cost_usd 1.00 reached", 0},
		{"max_tool_turns", leadPlan("") + echoN(3) + finalReport + "\n" + reviewer,
			func(e *Engine) { e.Profile.Limits.MaxToolTurns = 2 }, ClassPolicyDenied, "BUDGET_EXCEEDED: the worker did not finish within max_tool_turns 2", 2},
		{"wall_clock", leadPlan("") + echoN(1) + finalReport + "\n" + reviewer,
			func(e *Engine) {
				e.Profile.Limits.WallClock = provider.Duration(200 * time.Millisecond)
				e.Profile.Limits.IdleTimeout = 0
				e.Provider = stallingProvider{e.Provider, "worker"}
			}, ClassTimeout, "TIMEOUT: the run's wall-clock limit was reached", 0},
		{"idle_timeout", leadPlan("") + echoN(1) + finalReport + "\n" + reviewer,
			func(e *Engine) {
				e.Profile.Limits.IdleTimeout = provider.Duration(100 * time.Millisecond)
				e.Provider = stallingProvider{e.Provider, "worker"}
			}, ClassTimeout, "TIMEOUT: worker model call timed out", 0},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.script, nil)
			c.mutate(f.eng)
			sid := fmt.Sprintf("budget-%d", i)
			out, err := f.mgr.Start(context.Background(), f.eng, StartRequest{SessionID: sid, Prompt: "greet the world"})
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != StatusFailed || out.Terminal == nil || out.Terminal.ErrorClass != c.class || !strings.HasPrefix(out.Terminal.Reason, c.reason) || out.Terminal.NextAction == "" {
				t.Fatalf("terminal %+v, want failed/%s %q", out.Terminal, c.class, c.reason)
			}
			evs := f.events(t, sid)
			verify(t, evs)
			terminals, plans, results := 0, 0, 0
			for _, e := range evs {
				switch {
				case e.Type == event.TurnTerminal:
					terminals++
				case e.Type == event.ArtifactEmitted && event.FieldString(e.Payload, "kind") == "plan":
					plans++
				case e.Type == event.ToolResult:
					results++
				}
			}
			if terminals != 1 || plans != 1 || results < c.keptTools {
				t.Errorf("terminal reports %d, plans %d, tool results %d (want 1, 1, ≥%d)", terminals, plans, results, c.keptTools)
			}
			if last := evs[len(evs)-1]; last.Type != event.SessionClose {
				t.Errorf("last event %s, want session.close", last.Type)
			}
		})
	}
}

// TestRunRecordsItsBudget: run.started records the limits checkBudget
// enforces, a resume in a process with other limits records those, and
// the snapshot carries the latest (the viewer's budget line).
func TestRunRecordsItsBudget(t *testing.T) {
	worker := []string{`    - tool_calls: [{id: w1, name: write, args: {path: a.txt}}]`, echoCall, finalReport}
	f1 := newFixture(t, script(worker...), nil)
	f1.eng.Profile.Limits.MaxCostUSD, f1.eng.Profile.Limits.MaxTokens = 2.5, 90000
	ctx := context.Background()
	if out, err := f1.mgr.Start(ctx, f1.eng, StartRequest{SessionID: "b", Prompt: "greet"}); err != nil || out.Status != "paused" {
		t.Fatalf("%+v %v", out, err)
	}
	snap, err := replay.Replay(f1.events(t, "b"))
	if err != nil || snap.Budget == nil || *snap.Budget != (replay.Budget{MaxCostUSD: 2.5, MaxTokens: 90000, MaxTurns: int64(f1.eng.Profile.Limits.MaxTurns)}) {
		t.Fatalf("budget after start: %+v %v", snap.Budget, err)
	}
	must(t, f1.mgr.Resolve(ctx, "b", "ap-1", "approve", "octocat", ""))
	f2 := newFixture(t, script(worker...), f1.store)
	f2.eng.Profile.Limits.MaxCostUSD = 4
	if f2.eng.Profile.Limits.MaxTokens == 90000 {
		t.Fatal("the second process must enforce other limits than the first")
	}
	if out, err := f2.mgr.Resume(ctx, f2.eng, "b", "", ""); err != nil || out.Status != "completed" {
		t.Fatalf("resume: %+v %v", out, err)
	}
	evs := f2.events(t, "b")
	verify(t, evs)
	snap, _ = replay.Replay(evs)
	if snap.Budget == nil || *snap.Budget != (replay.Budget{MaxCostUSD: 4, MaxTokens: f2.eng.Profile.Limits.MaxTokens, MaxTurns: int64(f2.eng.Profile.Limits.MaxTurns)}) {
		t.Fatalf("budget after resume: %+v", snap.Budget)
	}
	// Without limits nothing is recorded.
	f3 := newFixture(t, script(echoCall, finalReport), nil)
	f3.eng.Profile.Limits = provider.Limits{}
	if _, err := f3.mgr.Start(ctx, f3.eng, StartRequest{SessionID: "n", Prompt: "greet"}); err != nil {
		t.Fatal(err)
	}
	for _, e := range f3.events(t, "n") {
		if e.Type == event.RunStarted && len(event.Field(e.Payload, "budget")) != 0 {
			t.Fatalf("run.started without limits records a budget: %s", e.Payload)
		}
	}
}

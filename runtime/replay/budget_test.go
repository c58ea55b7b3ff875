package replay

import (
	"math"
	"testing"

	"github.com/agentos/agentos/runtime/event"
)

// TestReplayBudget folds the run's budget from run.started and a later
// run.resumed; hostile members are no limit, never a failed replay.
func TestReplayBudget(t *testing.T) {
	fold := func(evs ...event.Event) *Budget {
		t.Helper()
		f := NewFolder()
		for i := range evs {
			evs[i].Seq = int64(i + 1)
			if err := f.Apply(&evs[i]); err != nil {
				t.Fatalf("apply %s: %v", evs[i].Type, err)
			}
		}
		return f.Snapshot().Budget
	}
	ev := func(typ, run, payload string) event.Event {
		return event.Event{Type: typ, RunID: run, Actor: "runtime", Payload: []byte(payload)}
	}
	if b := fold(ev(event.RunStarted, "r1", `{"run_id":"r1"}`)); b != nil {
		t.Fatalf("no budget member: got %+v", b)
	}
	b := fold(ev(event.RunStarted, "r1", `{"run_id":"r1","budget":{"max_cost_usd":0.25,"max_tokens":5000,"max_turns":12}}`))
	if b == nil || *b != (Budget{MaxCostUSD: 0.25, MaxTokens: 5000, MaxTurns: 12}) {
		t.Fatalf("budget: got %+v", b)
	}
	// A resume that records the limits its process enforces replaces
	// them; one that records none keeps the run's.
	b = fold(ev(event.RunStarted, "r1", `{"run_id":"r1","budget":{"max_cost_usd":0.25}}`),
		ev(event.RunResumed, "r1", `{"reason":"approval answered","budget":{"max_cost_usd":0.5}}`))
	if b == nil || b.MaxCostUSD != 0.5 {
		t.Fatalf("resumed budget: got %+v", b)
	}
	b = fold(ev(event.RunStarted, "r1", `{"run_id":"r1","budget":{"max_cost_usd":0.25}}`),
		ev(event.RunResumed, "r1", `{"reason":"approval answered"}`))
	if b == nil || b.MaxCostUSD != 0.25 {
		t.Fatalf("resume without a budget: got %+v", b)
	}
	// A new run without a budget has none, whatever the previous had.
	if b := fold(ev(event.RunStarted, "r1", `{"run_id":"r1","budget":{"max_cost_usd":0.25}}`), ev(event.RunStarted, "r2", `{"run_id":"r2"}`)); b != nil {
		t.Fatalf("second run without budget: got %+v", b)
	}
	for _, hostile := range []string{
		`"lots"`, `[1,2]`, `null`, `{"max_cost_usd":-1,"max_tokens":-5,"max_turns":0}`,
		`{"max_cost_usd":"1","max_tokens":"5000"}`, `{"max_cost_usd":1e999}`, `{"max_tokens":1.5}`, `{}`,
	} {
		if b := fold(ev(event.RunStarted, "r1", `{"run_id":"r1","budget":`+hostile+`}`)); b != nil {
			t.Errorf("budget %s: got %+v, want none", hostile, b)
		}
	}
}

// FuzzBudgetOf: any run.started payload folds without a panic into no
// budget or one whose limits are all finite and not negative, one of them
// positive.
func FuzzBudgetOf(f *testing.F) {
	for _, s := range []string{`{"run_id":"r","budget":{"max_cost_usd":0.5,"max_tokens":100,"max_turns":3}}`, `{"budget":{"max_cost_usd":1e999}}`,
		`{"budget":"x"}`, `{"budget":{"max_tokens":99999999999999999999}}`, `{"budget":{`, `{"budget":{"max_cost_usd":-0}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		b := budgetOf(payload)
		if b == nil {
			return
		}
		if math.IsNaN(b.MaxCostUSD) || math.IsInf(b.MaxCostUSD, 0) || b.MaxCostUSD < 0 || b.MaxTokens < 0 || b.MaxTurns < 0 || *b == (Budget{}) {
			t.Fatalf("budgetOf(%q) = %+v", payload, *b)
		}
	})
}

package viewer

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
)

// budgetSession is a run with two priced model calls (lead $0.10, worker
// $0.20) whose run.started records budget (nil: no member).
func budgetSession(t *testing.T, budget any, priced bool) []event.Event {
	t.Helper()
	s := store.NewMemory(newSealer(t))
	run := "run-b"
	started := map[string]any{"run_id": run, "prompt": "p"}
	if budget != nil {
		started["budget"] = budget
	}
	call := func(role string, usd float64) []event.Draft {
		u := map[string]any{"input_tokens": 100, "output_tokens": 50}
		if priced {
			u["cost_usd"] = usd
		}
		return []event.Draft{
			{RunID: run, Type: event.LLMRequest, Actor: role, Payload: map[string]any{"attempt": 1, "role": role, "request": map[string]any{"model": "m", "schema_version": "v1", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}}},
			{RunID: run, Type: event.LLMResponse, Actor: role, Payload: map[string]any{"role": role, "response": map[string]any{"model": "m", "finish_reason": "stop", "schema_version": "v1", "text": "ok", "tool_calls": []any{}, "usage": u}}},
		}
	}
	drafts := []event.Draft{
		{RunID: run, Type: event.SessionStart, Actor: "user", Payload: map[string]any{"prompt": "p"}},
		{RunID: run, Type: event.RunStarted, Actor: "runtime", Payload: started},
	}
	drafts = append(drafts, call("lead", 0.10)...)
	drafts = append(drafts, call("worker", 0.20)...)
	appendTo(t, s, "b", drafts...)
	evs, err := s.Read(context.Background(), "b", 1)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func renderRun(t *testing.T, s Session) string {
	t.Helper()
	return string(runPage(page{Title: "x", S: s}))
}

// TestBudgetLine: the run's budget is a line on the cost chart on the
// bars' scale, with a total bar; over budget is said in words as well as
// drawn; no budget (or one the replay refuses) draws no line.
func TestBudgetLine(t *testing.T) {
	build := func(budget any, priced bool) (Session, string) {
		t.Helper()
		s, err := Build("b", budgetSession(t, budget, priced), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return s, renderRun(t, s)
	}

	// Within budget: $0.30 of $0.60, the line at the budget's place on
	// the scale (the budget is the longest value: the whole bar width).
	s, html := build(map[string]any{"max_cost_usd": 0.6}, true)
	bl := s.Costs.Chart.Budget
	if bl == nil || bl.Over || bl.X != chartLabelW+chartBarW {
		t.Fatalf("budget line %+v, want at %v, not over", bl, chartLabelW+chartBarW)
	}
	total := s.Costs.Chart.Bars[len(s.Costs.Chart.Bars)-1]
	if total.Label != "total" || math.Abs(total.W-chartBarW/2) > 1e-9 {
		t.Errorf("total bar %+v, want half the width (0.30 of 0.60)", total)
	}
	if !strings.Contains(html, `class="budget-line"`) || !strings.Contains(html, "budget $0.6000") || !strings.Contains(html, "$0.3000 of a $0.6000 budget (50%)") || strings.Contains(html, "over budget") {
		t.Errorf("within budget: page lacks the line or says over budget:\n%s", costPart(html))
	}

	// Over budget: the total passes the line, the page says so in words.
	s, html = build(map[string]any{"max_cost_usd": 0.25}, true)
	bl = s.Costs.Chart.Budget
	if bl == nil || !bl.Over || bl.X >= chartLabelW+chartBarW {
		t.Fatalf("over budget: line %+v", bl)
	}
	if !strings.Contains(html, `class="budget-line budget-over"`) || !strings.Contains(html, "$0.3000 of a $0.2500 budget (120%): over budget") || !strings.Contains(html, "— over budget") {
		t.Errorf("over budget not shown:\n%s", costPart(html))
	}

	// Unpriced calls: the token budget is the line (300 tokens of 1000).
	s, html = build(map[string]any{"max_tokens": 1000, "max_cost_usd": 1}, false)
	if bl := s.Costs.Chart.Budget; bl == nil || s.Costs.Chart.Unit != "tokens" || bl.Over || !strings.Contains(html, "300 tokens of a 1000 tokens budget (30%)") {
		t.Errorf("token budget: %+v\n%s", bl, costPart(html))
	}

	// No budget, a budget in the other unit, or hostile values: no line.
	for i, b := range []any{nil, map[string]any{"max_turns": 10}, map[string]any{"max_tokens": 1000}, "1e9",
		map[string]any{"max_cost_usd": -1}, map[string]any{"max_cost_usd": 0}, map[string]any{"max_cost_usd": "0.5"},
		map[string]any{"max_cost_usd": "<script>alert(1)</script>"}, []any{0.5}} {
		s, html := build(b, true)
		if s.Costs.Chart.Budget != nil || strings.Contains(html, "budget-line") || strings.Contains(html, "Budget:") {
			t.Errorf("case %d (%v): a budget line is drawn: %+v", i, b, s.Costs.Chart.Budget)
		}
		if strings.Contains(html, "<script>alert") {
			t.Errorf("case %d: hostile budget text unescaped", i)
		}
	}

	// Extreme but valid budgets stay inside the drawing and bounded in
	// text: a huge one squeezes the bars to their minimum width, a tiny
	// one puts every bar past it.
	for _, b := range []float64{1e300, 1e-300} {
		s, html := build(map[string]any{"max_cost_usd": b}, true)
		bl := s.Costs.Chart.Budget
		if bl == nil || bl.X < chartLabelW || bl.X > chartLabelW+chartBarW {
			t.Errorf("budget %g: line %+v outside the chart", b, bl)
			continue
		}
		for _, bar := range s.Costs.Chart.Bars {
			if bar.W < 1 || bar.W > chartBarW {
				t.Errorf("budget %g: bar %+v outside the chart", b, bar)
			}
		}
		if len(bl.Text) > 120 || strings.Contains(html, "NaN") || strings.Contains(html, "Inf") {
			t.Errorf("budget %g: text %q", b, bl.Text)
		}
		if (b < 1) != bl.Over {
			t.Errorf("budget %g: over = %v", b, bl.Over)
		}
	}
}

func costPart(html string) string {
	i := strings.Index(html, `id="h-cost"`)
	j := strings.Index(html, `<table class="costs">`)
	if i < 0 || j < i {
		return html
	}
	return html[i:j]
}

package workflow

import (
	"strings"
	"testing"

	"cel.dev/cel-go/cel"
)

func mustEnv(t *testing.T) *cel.Env {
	t.Helper()
	env, err := newEnv()
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func mustExpr(t *testing.T, src string) *Expr {
	t.Helper()
	e, err := compileBool(mustEnv(t), src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return e
}

func TestSignalsEvaluateOverTheTypedActivation(t *testing.T) {
	a := Activation{
		Outputs:         map[string]map[string]any{"plan": {"steps": 3, "ok": true}},
		ReviewAggregate: ReviewAggregate{Verdict: "fail", P0Unresolved: 1, Findings: []Finding{{ID: "f1", Severity: "P0", Confidence: 75}}},
		Loop:            Loop{Cycle: "review", Generation: 2, MaxGenerations: 3},
		Mode:            "headless",
		Phase:           "review-gate",
	}
	cases := map[string]bool{
		`review_aggregate.p0_unresolved == 0`:                                           false,
		`review_aggregate.verdict in ["pass", "fail"]`:                                  true,
		`review_aggregate.findings.exists(f, f.severity == "P0" && f.confidence >= 75)`: true,
		`cycle.generation < cycle.max_generations && cycle.id == "review"`:              true,
		`mode == "headless" && phase == "review-gate"`:                                  true,
		`outputs["plan"]["ok"] == true && outputs["plan"]["steps"] == 3`:                true,
	}
	for src, want := range cases {
		got, err := mustExpr(t, src).Eval(a)
		if err != nil || got != want {
			t.Errorf("%s = %v, %v; want %v", src, got, err, want)
		}
	}
	// A missing phase output is an evaluation error, never false or true.
	if _, err := mustExpr(t, `outputs["nope"]["ok"] == true`).Eval(a); err == nil {
		t.Fatal("missing output evaluated without error")
	}
}

func policy(t *testing.T, kind string, def Decision, rules ...Rule) *Policy {
	return &Policy{ID: "p", Kind: kind, Rules: rules, Default: def, Routing: kind == KindSeverityRouting}
}

func TestPolicyDecide(t *testing.T) {
	r := loadBuiltin(t)
	gate, _ := r.Policy("confidence-gating")
	route, _ := r.Policy("severity-routing")
	perms, _ := r.Policy("role-permissions")
	cases := []struct {
		p    *Policy
		a    Activation
		want Decision
	}{
		{gate, Activation{Finding: Finding{Severity: "P0", Confidence: 25}}, Allow},
		{gate, Activation{Finding: Finding{Severity: "P2", Confidence: 50}}, Advisory},
		{gate, Activation{Finding: Finding{Severity: "P3", Confidence: 25}}, Deny},
		{route, Activation{Finding: Finding{Severity: "P3", AutofixClass: "safe_auto"}}, SafeAuto},
		{route, Activation{Finding: Finding{Severity: "P0", AutofixClass: "safe_auto"}}, Manual},
		{route, Activation{Finding: Finding{Severity: "P1", AutofixClass: "advisory"}}, Advisory},
		{perms, Activation{Request: Request{Persona: "security", Action: "read", Path: "db.go"}}, Allow},
		{perms, Activation{Request: Request{Persona: "security", Action: "write", Path: "db.go"}}, Deny},
		{perms, Activation{Request: Request{Persona: "intruder", Action: "read"}}, Deny},
	}
	for i, c := range cases {
		if got := c.p.Decide(c.a); got.Decision != c.want || got.PolicyID != c.p.ID || got.Reason == "" {
			t.Errorf("case %d (%s): %+v, want %s", i, c.p.ID, got, c.want)
		}
	}
	// No rule matches and no default: deny (the default-of-default).
	p := policy(t, KindLoopHalt, "", Rule{When: mustExpr(t, "cycle.generation > 5"), Then: Deny, Reason: "r"})
	if got := p.Decide(Activation{}); got.Decision != Deny || got.Rule != -1 || !strings.Contains(got.Reason, "default deny") {
		t.Fatalf("no default: %+v", got)
	}
	// An evaluation error fails closed on the policy's scale.
	bad := policy(t, KindConfidenceGating, Allow, Rule{When: mustExpr(t, `outputs["x"]["y"] == 1`), Then: Allow, Reason: "r"})
	if got := bad.Decide(Activation{}); got.Decision != Deny {
		t.Fatalf("eval error: %+v", got)
	}
	badRoute := policy(t, KindSeverityRouting, SafeAuto, Rule{When: mustExpr(t, `outputs["x"]["y"] == 1`), Then: SafeAuto, Reason: "r"})
	if got := badRoute.Decide(Activation{}); got.Decision != Advisory {
		t.Fatalf("routing eval error: %+v", got)
	}
}

func TestMergeIsConservative(t *testing.T) {
	o := func(d Decision) Outcome { return Outcome{PolicyID: string(d), Decision: d} }
	cases := []struct {
		in   []Decision
		want Decision
	}{
		{[]Decision{Allow, Deny}, Deny},
		{[]Decision{Deny, Allow}, Deny},
		{[]Decision{Allow, Advisory}, Advisory},
		{[]Decision{Allow, Allow}, Allow},
		{[]Decision{SafeAuto, GatedAuto}, GatedAuto},
		{[]Decision{GatedAuto, Manual, SafeAuto}, Manual},
		{[]Decision{Manual, Advisory}, Advisory},
		{[]Decision{SafeAuto}, SafeAuto},
	}
	for _, c := range cases {
		var in []Outcome
		for _, d := range c.in {
			in = append(in, o(d))
		}
		got, err := Merge(in...)
		if err != nil || got.Decision != c.want {
			t.Errorf("Merge(%v) = %v, %v; want %s", c.in, got.Decision, err, c.want)
		}
	}
	if got, err := Merge(); err != nil || got.Decision != Deny {
		t.Errorf("empty merge: %v %v", got, err)
	}
	if got, err := Merge(o(Allow), o(SafeAuto)); err == nil || got.Decision != Deny {
		t.Errorf("mixed scales: %v %v", got, err)
	}
	if got, err := Merge(o("maybe")); err == nil || got.Decision != Deny {
		t.Errorf("unknown decision: %v %v", got, err)
	}
}

func TestPoliciesForPhaseThenCycle(t *testing.T) {
	r := loadBuiltin(t)
	c, _ := r.Cycle("review")
	ps, err := r.PoliciesFor(c, "review-gate")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.ID)
	}
	if got := strings.Join(ids, ","); got != "confidence-gating,severity-routing,loop-halt,mode-dispatch" {
		t.Fatalf("policies %s", got)
	}
	if _, err := r.PoliciesFor(c, "nope"); err == nil {
		t.Fatal("unknown phase accepted")
	}
}

// Expressions come from repository files: one evaluation is bounded, and
// exceeding the bound is an error, not a verdict.
func TestExpressionCostIsBounded(t *testing.T) {
	e := mustExpr(t, `review_aggregate.findings.all(f, f.confidence >= 0 && f.title.size() >= 0)`)
	many := make([]Finding, 50000)
	if _, err := e.Eval(Activation{ReviewAggregate: ReviewAggregate{Findings: many}}); err == nil || !strings.Contains(err.Error(), "cost") {
		t.Fatalf("unbounded evaluation: %v", err)
	}
	if ok, err := e.Eval(Activation{ReviewAggregate: ReviewAggregate{Findings: many[:10]}}); err != nil || !ok {
		t.Fatalf("small list: %v %v", ok, err)
	}
}

package workflow

import (
	"fmt"
)

// Decision is a policy outcome. Two scales exist: the gate (allow <
// advisory < deny) and severity routing (safe_auto < gated_auto < manual <
// advisory). Merging keeps the most conservative value on each scale.
type Decision string

const (
	Allow     Decision = "allow"
	Advisory  Decision = "advisory"
	Deny      Decision = "deny"
	SafeAuto  Decision = "safe_auto"
	GatedAuto Decision = "gated_auto"
	Manual    Decision = "manual"
)

// Policy kinds ("The Five Policy Kinds").
const (
	KindConfidenceGating = "confidence-gating"
	KindSeverityRouting  = "severity-routing"
	KindRolePermissions  = "role-permissions"
	KindModeDispatch     = "mode-dispatch"
	KindLoopHalt         = "loop-halt"
)

// routing reports whether d belongs to the severity-routing scale.
func (d Decision) routing() bool { return d == SafeAuto || d == GatedAuto || d == Manual }

// rank orders a decision on its scale; higher is more conservative.
func rank(d Decision, routing bool) (int, bool) {
	if routing {
		switch d {
		case SafeAuto:
			return 0, true
		case GatedAuto:
			return 1, true
		case Manual:
			return 2, true
		case Advisory:
			return 3, true
		}
		return 0, false
	}
	switch d {
	case Allow:
		return 0, true
	case Advisory:
		return 1, true
	case Deny:
		return 2, true
	}
	return 0, false
}

// Rule is one compiled when → then → reason triple.
type Rule struct {
	When   *Expr
	Then   Decision
	Reason string
}

// Outcome is a policy's decision on one activation, with where it came from.
type Outcome struct {
	PolicyID string   `json:"policy_id"`
	Decision Decision `json:"decision"`
	Reason   string   `json:"reason"`
	Rule     int      `json:"rule"` // index of the matching rule; -1 for the default
}

// Decide evaluates the rules in order; the first whose condition holds
// decides. If none holds, the policy's default applies, and a policy with
// no default denies (fail closed). An evaluation error
// denies, naming the rule.
func (p *Policy) Decide(a Activation) Outcome {
	for i, r := range p.Rules {
		ok, err := r.When.Eval(a)
		if err != nil {
			return Outcome{PolicyID: p.ID, Decision: p.failClosed(), Reason: fmt.Sprintf("rule %d: %v", i, err), Rule: i}
		}
		if ok {
			return Outcome{PolicyID: p.ID, Decision: r.Then, Reason: r.Reason, Rule: i}
		}
	}
	if p.Default == "" {
		return Outcome{PolicyID: p.ID, Decision: p.failClosed(), Reason: "no rule matched and the policy has no default (default deny)", Rule: -1}
	}
	return Outcome{PolicyID: p.ID, Decision: p.Default, Reason: "no rule matched: policy default", Rule: -1}
}

// failClosed is the most conservative decision on the policy's scale.
func (p *Policy) failClosed() Decision {
	if p.Routing {
		return Advisory
	}
	return Deny
}

// Merge combines decisions on the same subject (several reviewers on one
// fingerprint, several policies on one request) and keeps the most
// conservative: allow < advisory < deny, safe_auto < gated_auto < manual <
// advisory. No decisions, or decisions mixing the gate's allow/deny with
// routing classes, merge to deny with an error: that is a definition bug,
// and it fails closed.
func Merge(outcomes ...Outcome) (Outcome, error) {
	if len(outcomes) == 0 {
		return Outcome{Decision: Deny, Reason: "no decision (default deny)", Rule: -1}, nil
	}
	routing, gate := false, false
	for _, o := range outcomes {
		switch {
		case o.Decision.routing():
			routing = true
		case o.Decision == Allow || o.Decision == Deny:
			gate = true
		case o.Decision == Advisory:
		default:
			return Outcome{Decision: Deny, Reason: "unknown decision " + string(o.Decision), Rule: -1}, fmt.Errorf("workflow: policy %s: unknown decision %q", o.PolicyID, o.Decision)
		}
	}
	if routing && gate {
		return Outcome{Decision: Deny, Reason: "gate and routing decisions mixed", Rule: -1}, fmt.Errorf("workflow: cannot merge gate decisions (allow/deny) with routing decisions (safe_auto/gated_auto/manual)")
	}
	best := outcomes[0]
	br, _ := rank(best.Decision, routing)
	for _, o := range outcomes[1:] {
		if r, _ := rank(o.Decision, routing); r > br {
			best, br = o, r
		}
	}
	return best, nil
}

// PoliciesFor returns, in evaluation order, the policies that gate phase
// of cycle c: the phase's own, then the cycle's (each once).
func (r *Registry) PoliciesFor(c *Cycle, phase string) ([]*Policy, error) {
	p, err := r.Phase(phase)
	if err != nil {
		return nil, err
	}
	var out []*Policy
	seen := map[string]bool{}
	for _, id := range append(append([]string{}, p.Policies...), c.Policies...) {
		if seen[id] {
			continue
		}
		seen[id] = true
		pol, err := r.Policy(id)
		if err != nil {
			return nil, err
		}
		out = append(out, pol)
	}
	return out, nil
}

package review

// The review and triage cycles' results (runtime/workflow/cycle), read as
// what the bot posts.

import (
	"fmt"
	"strings"

	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/workflow"
	"github.com/agentos/agentos/runtime/workflow/cycle"
)

// FromCycle turns the cycle's per-finding gates into the review's
// decisions. The cycle's mode-dispatch decision (Delivery) bounds them:
// allow posts as the gates say, advisory puts every surviving finding in
// the body, anything else (deny, none) holds every finding back.
func FromCycle(res cycle.Result, usage replay.Usage) Output {
	out := Output{Verdict: string(res.Verdict), Usage: usage}
	// A cycle that loops reports a persona once per pass: the last
	// report is the one its findings (or their absence) come from.
	at := map[string]int{}
	for _, p := range res.Personas {
		c := PersonaCoverage{Persona: p.Persona, Status: p.Status, Reason: p.Reason}
		if i, ok := at[p.Persona]; ok {
			out.Personas[i] = c
			continue
		}
		at[p.Persona] = len(out.Personas)
		out.Personas = append(out.Personas, c)
	}
	if a := res.Aggregate; a != nil {
		out.Aggregate, out.Coverage = a.Verdict, a.Coverage
	}
	for _, dc := range res.Decisions {
		f := dc.Finding
		// Fan-in merged findings by fingerprint: the fingerprint, not a
		// persona's own id, names the merged one.
		f.ID = dc.Fingerprint
		if f.Body == "" {
			f.Body = dc.Body // a result recorded before findings carried their body
		}
		out.Findings = append(out.Findings, f)
		gate := workflow.Outcome{PolicyID: dc.Policy, Reason: strings.TrimPrefix(dc.Reason, dc.Policy+": ")}
		switch dc.Gate {
		case cycle.GatePosted:
			gate.Decision = workflow.Allow
		case cycle.GateBodyOnly:
			gate.Decision = workflow.Advisory
		default:
			gate.Decision = workflow.Deny
		}
		switch res.Delivery {
		case workflow.Allow:
		case workflow.Advisory:
			if gate.Decision == workflow.Allow {
				gate = workflow.Outcome{PolicyID: "mode-dispatch", Decision: workflow.Advisory, Reason: "report only: " + res.Mode}
			}
		default:
			if gate.Decision != workflow.Deny {
				gate = workflow.Outcome{PolicyID: "mode-dispatch", Decision: workflow.Deny, Reason: "the cycle's mode delivers nothing"}
			}
		}
		out.Decisions = append(out.Decisions, FindingDecision{FindingID: f.ID, Gate: gate, Route: workflow.Outcome{Decision: dc.Route}})
	}
	return out
}

// TriageFromCycle reads the triager's proposal (triage_proposal_v1, checked
// by the cycle) and gates both halves with the cycle's delivery decision.
func TriageFromCycle(res cycle.Result, usage replay.Usage) TriageOutput {
	out := TriageOutput{Verdict: string(res.Verdict), Usage: usage}
	gate := workflow.Outcome{PolicyID: "mode-dispatch", Decision: res.Delivery, Reason: "the cycle's delivery decision"}
	if res.Verdict != workflow.VerdictDone || gate.Decision == "" {
		gate = workflow.Outcome{PolicyID: "triage", Decision: workflow.Deny, Reason: fmt.Sprintf("the cycle ended %q without a delivery decision", res.Verdict)}
	}
	out.LabelDecision, out.SummaryDecision = gate, gate
	prop, _ := res.Outputs["triage-propose"]["triager"].(map[string]any)
	if s, ok := prop["summary"].(string); ok {
		out.Summary = s
	}
	if ls, ok := prop["labels"].([]any); ok {
		for _, l := range ls {
			if s, ok := l.(string); ok {
				out.Labels = append(out.Labels, s)
			}
		}
	}
	if out.Summary == "" {
		out.LabelDecision = workflow.Outcome{PolicyID: "triage", Decision: workflow.Deny, Reason: "no proposal"}
		out.SummaryDecision = out.LabelDecision
	}
	return out
}

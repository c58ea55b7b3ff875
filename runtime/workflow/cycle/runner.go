package cycle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/hooks"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/untrusted"
	"github.com/agentos/agentos/runtime/workflow"
)

// Artifact kinds the executor emits (artifact.emitted, actor "workflow").
const (
	artifactResult    = "workflow_result"       // the Result, when the cycle ends
	artifactAggregate = "review_aggregate"      // review_aggregate_v1 after fan-in and after gating
	artifactOutput    = "workflow_phase_output" // each phase's output document
)

// Replies of a reviewer persona in a fan-out: persona_findings_v2
// (finding_v2: body and an optional suggestion) for a persona whose
// output_schema is finding_v2 or unset, persona_findings_v1 for one that
// still declares finding_v1 (a repository's own persona). Fan-in reads
// both; a v1 finding never carries a suggestion.
const (
	findingSchemaV1 = "persona_findings_v1"
	findingSchemaV2 = "persona_findings_v2"
)

// findingsReply returns the reply schema of a persona whose output_schema
// is schema, and whether it is a findings reply at all.
func findingsReply(schema string) (string, bool) {
	switch schema {
	case "finding_v1", findingSchemaV1:
		return findingSchemaV1, true
	case "finding_v2", findingSchemaV2, "":
		return findingSchemaV2, true
	}
	return schema, false
}

// maxStays bounds how often a phase whose advance_signal does not hold is
// run again when the cycle sets no max_generations.
const maxStays = 3

// runner executes one cycle inside a run. Execute runs from the start on
// every (re-)execution; the Steps replay what the log already holds.
type runner struct {
	x  *Executor
	c  *workflow.Cycle
	sp spec

	st     *run.Steps
	prompt string
	act    workflow.Activation
	res    Result
	last   string            // the output of the last Plan-Work-Review pass
	prev   map[string]string // phase → digest of its last output (oscillation)
	grade  int               // the last generation's aggregate grade; -1 before

	started, ended bool // workflow.started / workflow.completed|aborted emitted
}

// stop ends the cycle from inside a phase (a policy said so).
type stop struct {
	verdict workflow.Verdict
	reason  string
}

// Execute implements run.Cycle. A cycle that started and then fails (a
// provider error, a malformed reply, the budget) ends with
// workflow.aborted naming the failure, so its audit trail is whole.
func (r *runner) Execute(ctx context.Context, st *run.Steps) (run.Result, error) {
	res, err := r.execute(ctx, st)
	if err == nil || !r.started || r.ended {
		return res, err
	}
	var nd *run.NonDeterminismError
	if errors.As(err, &nd) {
		return res, err
	}
	r.ended = true
	if aerr := st.Emit(context.WithoutCancel(ctx), event.WorkflowAborted, map[string]any{"cycle_id": r.c.ID, "reason": "the cycle failed: " + oneLine(err.Error()), "verdict": "abort"}); aerr != nil {
		return res, errors.Join(err, aerr)
	}
	return res, err
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}

func (r *runner) execute(ctx context.Context, st *run.Steps) (run.Result, error) {
	r.st, r.prompt, r.prev, r.grade = st, st.Prompt(), map[string]string{}, -1
	r.res = Result{Cycle: r.c.ID, Mode: r.sp.Mode, Outputs: map[string]map[string]any{}}
	d, err := st.Hook(ctx, hooks.Input{Event: hooks.WorkflowStart, Cycle: r.c.ID, Mode: r.sp.Mode, Prompt: r.prompt})
	if err != nil {
		return run.Result{}, err
	}
	switch d.Decision {
	case hooks.Deny:
		return run.Result{}, &run.Failure{Status: run.StatusDenied, Class: run.ClassPolicyDenied, Code: "GATE_DENIED", Reason: "WorkflowStart hook denied cycle " + r.c.ID + ": " + d.Reason, NextAction: "change the hook configuration or ask a maintainer"}
	case hooks.Transform:
		var p struct{ Prompt string }
		if err := json.Unmarshal(d.Output, &p); err == nil {
			r.prompt = p.Prompt
		}
	}
	started := map[string]any{"cycle_id": r.c.ID, "session_id": st.SessionID(), "mode": r.sp.Mode}
	// A repository's definitions that replace built-in ones are part of
	// the record: the log says which cycle text actually ran.
	var overrides []string
	for _, o := range r.x.Registry.Overrides() {
		overrides = append(overrides, o.Kind+" "+o.ID+": "+o.Overridden+" overridden by "+o.By)
	}
	if len(overrides) > 0 {
		started["overrides"] = overrides
	}
	if err := st.Emit(ctx, event.WorkflowStarted, started); err != nil {
		return run.Result{}, err
	}
	r.started = true
	r.act = workflow.Activation{Mode: r.sp.Mode, Outputs: r.res.Outputs,
		Loop: workflow.Loop{Cycle: r.c.ID, Generation: 1, MaxGenerations: r.c.Bounds.MaxGenerations}}
	reg := r.x.Registry
	from, phase := "", r.c.EntryPhase
	stays := 0
	for {
		d, err := st.Hook(ctx, hooks.Input{Event: hooks.PhaseAdvance, Cycle: r.c.ID, FromPhase: from, ToPhase: phase})
		if err != nil {
			return run.Result{}, err
		}
		switch d.Decision {
		case hooks.Deny:
			return r.end(ctx, workflow.VerdictAbort, fmt.Sprintf("PhaseAdvance hook denied entering phase %s: %s", phase, d.Reason))
		case hooks.Transform:
			var p struct {
				ToPhase string `json:"to_phase"`
			}
			if err := json.Unmarshal(d.Output, &p); err != nil || !slices.Contains(r.c.Phases, p.ToPhase) {
				return r.end(ctx, workflow.VerdictAbort, fmt.Sprintf("PhaseAdvance hook sent the cycle to %q, which is not a phase of cycle %s", p.ToPhase, r.c.ID))
			}
			phase = p.ToPhase
		}
		if err := st.Emit(ctx, event.WorkflowPhaseAdvanced, map[string]any{"cycle_id": r.c.ID, "from_phase": from, "to_phase": phase, "generation": r.act.Loop.Generation}); err != nil {
			return run.Result{}, err
		}
		r.res.Visited = append(r.res.Visited, phase)
		p, err := reg.Phase(phase)
		if err != nil {
			return r.end(ctx, workflow.VerdictAbort, err.Error())
		}
		res, halt, err := r.phase(ctx, p)
		if err != nil || res.Paused {
			return res, err
		}
		if halt != nil {
			return r.end(ctx, halt.verdict, halt.reason)
		}
		step, err := reg.Next(r.c, phase, r.act)
		if err != nil {
			return r.end(ctx, workflow.VerdictAbort, "signal evaluation failed (fail closed): "+err.Error())
		}
		if step.Verdict != "" {
			return r.end(ctx, step.Verdict, step.Reason)
		}
		if step.To == phase {
			stays++
			limit := max(r.c.Bounds.MaxGenerations, maxStays)
			if stays >= limit {
				return r.end(ctx, workflow.VerdictHalted, fmt.Sprintf("phase %s ran %d times and its advance_signal still does not hold: %s", phase, stays, p.Advance.Source))
			}
		} else {
			stays = 0
		}
		if step.Generation > r.act.Loop.Generation {
			r.act.Loop.Generation = step.Generation
		}
		from, phase = phase, step.To
	}
}

// grade weighs an aggregate's findings; higher is worse.
func grade(a workflow.ReviewAggregate) int {
	g := 0
	for _, f := range a.Findings {
		switch f.Severity {
		case "P0":
			g += 1000
		case "P1":
			g += 100
		case "P2":
			g += 10
		default:
			g++
		}
	}
	return g
}

// phase does one phase's work and applies its policies.
func (r *runner) phase(ctx context.Context, p *workflow.Phase) (run.Result, *stop, error) {
	reg := r.x.Registry
	r.act.Phase = p.ID
	pols, err := reg.PoliciesFor(r.c, p.ID)
	if err != nil {
		return run.Result{}, &stop{workflow.VerdictAbort, err.Error()}, nil
	}
	byKind := map[string][]*workflow.Policy{}
	for _, pol := range pols {
		byKind[pol.Kind] = append(byKind[pol.Kind], pol)
	}
	var output map[string]any
	var reviewers, writers []*workflow.Persona
	for _, id := range p.Personas {
		per, err := reg.Persona(id)
		if err != nil {
			return run.Result{}, &stop{workflow.VerdictAbort, err.Error()}, nil
		}
		if len(per.WritePaths) > 0 {
			writers = append(writers, per)
		} else {
			reviewers = append(reviewers, per)
		}
	}
	switch {
	case len(p.Personas) > 0:
		if len(reviewers) > 0 {
			if output, err = r.fanOut(ctx, p, reviewers, byKind[workflow.KindRolePermissions]); err != nil {
				return run.Result{}, nil, err
			}
		}
		for _, per := range writers {
			res, err := r.personaPass(ctx, p, per, byKind[workflow.KindRolePermissions])
			if err != nil || res.Paused {
				return res, nil, err
			}
			if output == nil {
				output = map[string]any{}
			}
			output[per.ID] = docMap(res.Report)
		}
	case p.InputSchema == "review_aggregate_v1" || (byKind[workflow.KindConfidenceGating] != nil || byKind[workflow.KindSeverityRouting] != nil):
		// A gate: no model work, the policies decide on the fanned-in
		// findings.
	default:
		res, err := r.st.Pass(ctx, run.Pass{Prompt: r.passPrompt(p, nil)})
		if err != nil || res.Paused {
			return res, nil, err
		}
		r.last = res.Output
		output = docMap(res.Report)
	}
	if byKind[workflow.KindConfidenceGating] != nil || byKind[workflow.KindSeverityRouting] != nil {
		agg, err := r.gate(ctx, p, byKind[workflow.KindConfidenceGating], byKind[workflow.KindSeverityRouting])
		if err != nil {
			return run.Result{}, nil, err
		}
		output = agg
	}
	if output == nil {
		output = map[string]any{}
	}
	r.act.Outputs[p.ID] = output
	if len(r.c.Phases) > 0 && p.ID == r.c.Phases[len(r.c.Phases)-1] {
		// The generation ends here: did its findings grade worse than the
		// last generation's?
		g := grade(r.act.ReviewAggregate)
		if r.grade >= 0 && g > r.grade {
			r.act.Loop.GradeRegressions++
		}
		r.grade = g
	}
	if err := r.emitArtifact(ctx, artifactOutput, p.ID, output); err != nil {
		return run.Result{}, nil, err
	}
	// Oscillation: the phase produced exactly what it produced last time.
	if dg := digest(output); r.prev[p.ID] == dg {
		r.act.Loop.Oscillations++
	} else {
		r.prev[p.ID] = dg
	}
	if pols := byKind[workflow.KindModeDispatch]; len(pols) > 0 {
		o, err := r.decide(ctx, p.ID, "mode:"+r.sp.Mode, pols, r.act)
		if err != nil {
			return run.Result{}, nil, err
		}
		r.res.Delivery = o.Decision
		if o.Decision == workflow.Deny {
			return run.Result{}, &stop{workflow.VerdictAbort, fmt.Sprintf("mode-dispatch policy %s: %s", o.PolicyID, o.Reason)}, nil
		}
	}
	if pols := byKind[workflow.KindLoopHalt]; len(pols) > 0 {
		o, err := r.decide(ctx, p.ID, fmt.Sprintf("generation:%d", r.act.Loop.Generation), pols, r.act)
		if err != nil {
			return run.Result{}, nil, err
		}
		if o.Decision != workflow.Allow {
			return run.Result{}, &stop{workflow.VerdictHalted, fmt.Sprintf("loop-halt policy %s: %s", o.PolicyID, o.Reason)}, nil
		}
	}
	return run.Result{}, nil, nil
}

// decide evaluates policies in order on one subject, records each
// decision as workflow.policy_gated, and merges them conservatively. A
// merge error (gate and routing decisions mixed) denies.
func (r *runner) decide(ctx context.Context, phase, subject string, pols []*workflow.Policy, a workflow.Activation) (workflow.Outcome, error) {
	outs := make([]workflow.Outcome, 0, len(pols))
	for _, pol := range pols {
		o := pol.Decide(a)
		if err := r.st.Emit(ctx, event.WorkflowPolicyGated, map[string]any{"policy_id": o.PolicyID, "decision": string(o.Decision), "reason": o.Reason,
			"phase": phase, "kind": pol.Kind, "subject": subject, "rule": o.Rule}); err != nil {
			return workflow.Outcome{}, err
		}
		outs = append(outs, o)
	}
	m, err := workflow.Merge(outs...)
	if err != nil {
		m.Reason = err.Error()
	}
	return m, nil
}

// permitted asks the role-permissions policies whether persona may do
// action (on path). With no role-permissions policy a read is allowed (the
// kernel keeps a reviewer read-only anyway) and a write is not.
func (r *runner) permitted(ctx context.Context, phase string, per *workflow.Persona, action, p string, pols []*workflow.Policy) (bool, string, error) {
	if len(pols) == 0 {
		if action == "read" {
			return true, "", nil
		}
		return false, "no role-permissions policy allows it (default deny)", nil
	}
	a := r.act
	a.Request = workflow.Request{Persona: per.ID, Action: action, Path: p}
	subject := "persona:" + per.ID + ":" + action
	if p != "" {
		subject += ":" + p
	}
	o, err := r.decide(ctx, phase, subject, pols, a)
	if err != nil {
		return false, "", err
	}
	return o.Decision == workflow.Allow, o.PolicyID + ": " + o.Reason, nil
}

// fanOut runs the reviewer personas the role-permissions allow, in
// parallel, and fans their replies in. Findings personas produce a
// review_aggregate_v1; other personas' documents are the output by
// persona id.
func (r *runner) fanOut(ctx context.Context, p *workflow.Phase, personas []*workflow.Persona, rolePols []*workflow.Policy) (map[string]any, error) {
	var calls []run.PersonaCall
	var ran []*workflow.Persona
	for _, per := range personas {
		ok, why, err := r.permitted(ctx, p.ID, per, "read", "", rolePols)
		if err != nil {
			return nil, err
		}
		if !ok {
			r.res.Personas = append(r.res.Personas, PersonaReport{Persona: per.ID, Phase: p.ID, Status: "forbidden", Reason: why})
			continue
		}
		schema, _ := findingsReply(per.OutputSchema)
		calls = append(calls, run.PersonaCall{Role: per.ID, System: r.personaSystem(per, schema), User: r.passPrompt(p, nil),
			AllowedTools: per.AllowedTools, Schema: schema})
		ran = append(ran, per)
	}
	limit := p.MaxConcurrency
	if limit <= 0 {
		limit = len(calls)
	}
	results, err := r.st.FanOut(ctx, limit, calls)
	if err != nil {
		return nil, err
	}
	var found []personaFindings
	var okCount, findingPersonas int
	docs := map[string]any{}
	for i, res := range results {
		per := ran[i]
		rep := PersonaReport{Persona: per.ID, Phase: p.ID, Status: "ran"}
		if res.Failure != "" {
			rep.Status, rep.Reason = "failed", res.Failure
		}
		if _, ok := findingsReply(calls[i].Schema); ok {
			findingPersonas++
			if res.Failure == "" {
				okCount++
				var d struct {
					Findings []json.RawMessage `json:"findings"`
				}
				if err := json.Unmarshal(res.Doc, &d); err == nil {
					found = append(found, personaFindings{per.ID, calls[i].Schema == findingSchemaV2, d.Findings})
					rep.Findings = len(d.Findings)
				}
			}
		} else if res.Failure == "" {
			docs[per.ID] = docMap(res.Doc)
		}
		r.res.Personas = append(r.res.Personas, rep)
	}
	if findingPersonas == 0 && len(docs) > 0 {
		return docs, nil
	}
	agg := r.fanIn(found)
	if findingPersonas > 0 {
		agg.Coverage = float64(okCount) / float64(findingPersonas)
	} else if len(personas) > 0 {
		agg.Coverage = 0 // every persona was forbidden
	}
	verdict(&agg)
	r.act.ReviewAggregate = agg
	doc := r.aggregateDoc(agg)
	if err := r.emitArtifact(ctx, artifactAggregate, p.ID, doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// verdict sets an aggregate's verdict: fail when a P0 or P1 finding
// stands or a persona did not report (an incomplete review does not pass).
func verdict(a *workflow.ReviewAggregate) {
	a.P0Unresolved = 0
	a.Verdict = "pass"
	for _, f := range a.Findings {
		if f.Severity == "P0" {
			a.P0Unresolved++
		}
		if f.Severity == "P0" || f.Severity == "P1" {
			a.Verdict = "fail"
		}
	}
	if a.Coverage < 1 {
		a.Verdict = "fail"
	}
}

// severityRank: P0 is the most severe.
func severityRank(s string) int {
	switch s {
	case "P0":
		return 3
	case "P1":
		return 2
	case "P2":
		return 1
	}
	return 0
}

var classRank = map[string]int{"safe_auto": 0, "gated_auto": 1, "manual": 2, "advisory": 3}

// Fingerprint is a finding's identity for deduplication: its path, line
// range and rule (the title when it names no rule).
func Fingerprint(f workflow.Finding) string {
	rule := f.Rule
	if rule == "" {
		rule = "title:" + strings.ToLower(strings.Join(strings.Fields(f.Title), " "))
	}
	end := f.EndLine
	if end == 0 {
		end = f.Line
	}
	return fmt.Sprintf("%s:%d-%d:%s", f.Path, f.Line, end, rule)
}

// fanIn validates nothing more (the replies were validated against
// persona_findings_v1 or _v2) but trusts nothing either: the reviewer is
// the persona that replied, a path that is not a clean relative path is
// dropped (the finding goes to the body, without its suggestion), a
// suggestion is kept only from a v2 reply that placed it on a line, and
// findings with the same fingerprint merge, keeping every reviewer, the
// most conservative autofix class, and otherwise the finding (title, body,
// suggestion) of the highest severity, then confidence, then the first
// persona in the phase's order: the same replies always merge the same
// way.
func (r *runner) fanIn(found []personaFindings) workflow.ReviewAggregate {
	type merged struct {
		f         workflow.Finding
		reviewers []string
	}
	by := map[string]*merged{}
	var order []string
	for _, pf := range found {
		persona, list := pf.persona, pf.findings
		for _, raw := range list {
			var f workflow.Finding
			var extra struct {
				Suggestion *string `json:"suggestion"`
			}
			if json.Unmarshal(raw, &f) != nil || json.Unmarshal(raw, &extra) != nil {
				continue
			}
			f.Reviewer = persona
			f.Suggestion, f.HasSuggestion = "", false
			if pf.v2 && extra.Suggestion != nil {
				f.Suggestion, f.HasSuggestion = *extra.Suggestion, true
			}
			if f.Path != "" && !cleanPath(f.Path) {
				f.Path, f.Line, f.EndLine = "", 0, 0
			}
			if f.EndLine != 0 && f.EndLine < f.Line {
				f.EndLine = f.Line
			}
			if f.Path == "" || f.Line == 0 {
				// A suggestion replaces lines: with none to replace it
				// means nothing.
				f.Suggestion, f.HasSuggestion = "", false
			}
			fp := Fingerprint(f)
			f.ID = "F" + digest(fp)[:10]
			m, ok := by[fp]
			if !ok {
				by[fp] = &merged{f: f, reviewers: []string{persona}}
				order = append(order, fp)
				continue
			}
			if !slices.Contains(m.reviewers, persona) {
				m.reviewers = append(m.reviewers, persona)
			}
			cls := m.f.AutofixClass
			if classRank[f.AutofixClass] > classRank[cls] {
				cls = f.AutofixClass
			}
			if severityRank(f.Severity) > severityRank(m.f.Severity) || (f.Severity == m.f.Severity && f.Confidence > m.f.Confidence) {
				m.f = f
			}
			m.f.AutofixClass = cls
		}
	}
	agg := workflow.ReviewAggregate{Findings: []workflow.Finding{}, Suppressed: []workflow.Finding{}, PreExisting: []workflow.Finding{}}
	for _, fp := range order {
		m := by[fp]
		sort.Strings(m.reviewers)
		m.f.Reviewer = strings.Join(m.reviewers, ",")
		agg.Findings = append(agg.Findings, m.f)
	}
	sortFindings(agg.Findings)
	return agg
}

// personaFindings are one persona's validated findings.
type personaFindings struct {
	persona  string
	v2       bool // persona_findings_v2: suggestions are read
	findings []json.RawMessage
}

func sortFindings(fs []workflow.Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if severityRank(a.Severity) != severityRank(b.Severity) {
			return severityRank(a.Severity) > severityRank(b.Severity)
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.Line < b.Line
	})
}

func cleanPath(p string) bool {
	return !path.IsAbs(p) && path.Clean(p) == p && p != "." && !strings.HasPrefix(p, "../") && p != ".." && !strings.ContainsAny(p, "\x00\\")
}

// gate applies confidence-gating and severity-routing to every finding of
// the aggregate: allow posts it as a line comment, advisory puts it in the
// body, deny drops it into suppressed; routing classes merge
// conservatively.
func (r *runner) gate(ctx context.Context, p *workflow.Phase, conf, routing []*workflow.Policy) (map[string]any, error) {
	agg := r.act.ReviewAggregate
	kept := []workflow.Finding{}
	r.res.Decisions = nil
	for _, f := range agg.Findings {
		fp := Fingerprint(f)
		a := r.act
		a.Finding = f
		d := FindingDecision{Fingerprint: fp, Finding: f, Body: f.Body, Reviewers: strings.Split(f.Reviewer, ","), Gate: GatePosted, Reason: "no confidence-gating policy"}
		if len(conf) > 0 {
			o, err := r.decide(ctx, p.ID, "finding:"+fp, conf, a)
			if err != nil {
				return nil, err
			}
			d.Policy, d.Reason = o.PolicyID, o.PolicyID+": "+o.Reason
			switch o.Decision {
			case workflow.Allow:
				d.Gate = GatePosted
			case workflow.Advisory:
				d.Gate = GateBodyOnly
			default:
				d.Gate = GateDropped
			}
		}
		if len(routing) > 0 {
			o, err := r.decide(ctx, p.ID, "finding:"+fp, routing, a)
			if err != nil {
				return nil, err
			}
			d.Route = o.Decision
		}
		r.res.Decisions = append(r.res.Decisions, d)
		if d.Gate == GateDropped {
			agg.Suppressed = append(agg.Suppressed, f)
		} else {
			kept = append(kept, f)
		}
	}
	agg.Findings = kept
	verdict(&agg)
	r.act.ReviewAggregate = agg
	doc := r.aggregateDoc(agg)
	if err := r.emitArtifact(ctx, artifactAggregate, p.ID, doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// personaPass runs a persona that writes (its frontmatter lists
// write_paths) as one Plan-Work-Review pass. Its write scope is the write_paths the
// role-permissions policies allow, and the kernel enforces it: a write
// anywhere else is refused at dispatch whatever the model was told.
func (r *runner) personaPass(ctx context.Context, p *workflow.Phase, per *workflow.Persona, rolePols []*workflow.Policy) (run.Result, error) {
	scope := []string{}
	for _, wp := range per.WritePaths {
		ok, _, err := r.permitted(ctx, p.ID, per, "write", wp, rolePols)
		if err != nil {
			return run.Result{}, err
		}
		if ok {
			scope = append(scope, wp)
		}
	}
	rep := PersonaReport{Persona: per.ID, Phase: p.ID, Status: "ran"}
	if len(scope) == 0 {
		rep.Reason = "no write path allowed by role-permissions: the persona may not write"
	}
	r.res.Personas = append(r.res.Personas, rep)
	res, err := r.st.Pass(ctx, run.Pass{Prompt: r.passPrompt(p, per), AllowedTools: per.AllowedTools, WritePaths: scope})
	if err == nil && !res.Paused {
		r.last = res.Output
	}
	return res, err
}

func (r *runner) personaSystem(per *workflow.Persona, schema string) string {
	return strings.TrimSpace(per.Body) + fmt.Sprintf("\n\nYou are the %s persona (%s). Reply with one JSON object of schema %s and nothing else.", per.ID, per.Role, schema)
}

// passPrompt is what a phase's pass is asked: the request, the phase's
// instructions, a writing persona's instructions, and the inputs as
// untrusted data.
func (r *runner) passPrompt(p *workflow.Phase, per *workflow.Persona) string {
	var b strings.Builder
	b.WriteString(r.prompt)
	fmt.Fprintf(&b, "\n\n## Workflow: cycle %s, phase %s\n\n%s", r.c.ID, p.ID, strings.TrimSpace(p.Body))
	if per != nil {
		fmt.Fprintf(&b, "\n\n## Persona %s\n\n%s\nYou may write only: %s", per.ID, strings.TrimSpace(per.Body), strings.Join(per.WritePaths, ", "))
	}
	names := make([]string, 0, len(r.sp.Inputs))
	for k := range r.sp.Inputs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		b.WriteString("\n\n")
		b.WriteString(untrusted.Block("input:"+k, untrusted.Visible(r.sp.Inputs[k], false)))
	}
	return b.String()
}

// findingDoc is a finding as finding_v1 (review_aggregate_v1's items):
// its body, not its suggestion, which only the decisions carry.
func (r *runner) findingDoc(f workflow.Finding) map[string]any {
	d := map[string]any{"id": f.ID, "reviewer": f.Reviewer, "severity": f.Severity, "autofix_class": f.AutofixClass,
		"confidence": f.Confidence, "title": f.Title, "schema_version": "v1"}
	if f.Path != "" {
		d["path"] = f.Path
	}
	if f.Line > 0 {
		d["line"] = f.Line
	}
	if f.EndLine > 0 {
		d["end_line"] = f.EndLine
	}
	if f.Rule != "" {
		d["rule"] = f.Rule
	}
	if f.Body != "" {
		d["body"] = f.Body
	}
	return d
}

func (r *runner) aggregateDoc(a workflow.ReviewAggregate) map[string]any {
	list := func(fs []workflow.Finding) []any {
		out := make([]any, 0, len(fs))
		for _, f := range fs {
			out = append(out, r.findingDoc(f))
		}
		return out
	}
	return map[string]any{"findings": list(a.Findings), "suppressed": list(a.Suppressed), "pre_existing": list(a.PreExisting),
		"verdict": a.Verdict, "coverage": a.Coverage, "p0_unresolved": a.P0Unresolved, "schema_version": "v1"}
}

// emitArtifact records a JSON document as artifact.emitted; a
// review_aggregate is validated against review_aggregate_v1 first (a
// document that does not validate is a bug here, and fails the run).
func (r *runner) emitArtifact(ctx context.Context, kind, name string, doc any) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	if kind == artifactAggregate {
		if err := r.x.Schemas.ValidateJSON("review_aggregate_v1", b); err != nil {
			return fmt.Errorf("workflow: fan-in produced an invalid review_aggregate_v1: %w", err)
		}
	}
	sum := sha256.Sum256(b)
	return r.st.Emit(ctx, event.ArtifactEmitted, map[string]any{"kind": kind, "name": name, "digest": hex.EncodeToString(sum[:]), "size": len(b), "media_type": "application/json", "content": string(b)})
}

// end decides the cycle: WorkflowComplete (observe), the result artifact,
// then workflow.completed (done, halted) or workflow.aborted (abort). An
// aborted cycle ends the run denied.
func (r *runner) end(ctx context.Context, v workflow.Verdict, reason string) (run.Result, error) {
	if _, err := r.st.Hook(ctx, hooks.Input{Event: hooks.WorkflowComplete, Cycle: r.c.ID, Verdict: string(v)}); err != nil {
		return run.Result{}, err
	}
	r.res.Verdict, r.res.Reason = v, reason
	if r.act.ReviewAggregate.Verdict != "" {
		a := r.act.ReviewAggregate
		r.res.Aggregate = &a
	}
	r.res.Output = r.summary()
	r.ended = true
	if err := r.emitArtifact(ctx, artifactResult, r.c.ID, r.res); err != nil {
		return run.Result{}, err
	}
	if v == workflow.VerdictAbort {
		if err := r.st.Emit(ctx, event.WorkflowAborted, map[string]any{"cycle_id": r.c.ID, "reason": reason, "verdict": "abort"}); err != nil {
			return run.Result{}, err
		}
		return run.Result{}, &run.Failure{Status: run.StatusDenied, Class: run.ClassPolicyDenied, Code: "WORKFLOW_ABORTED", Reason: "cycle " + r.c.ID + " aborted: " + reason, NextAction: "a maintainer decides how to proceed"}
	}
	if err := r.st.Emit(ctx, event.WorkflowCompleted, map[string]any{"cycle_id": r.c.ID, "verdict": string(v), "reason": reason}); err != nil {
		return run.Result{}, err
	}
	return run.Result{Output: r.res.Output}, nil
}

// summary is the run's output: the last Plan-Work-Review pass's output (the fix cycle
// reads like /agent fix), else what the review decided.
func (r *runner) summary() string {
	if r.last != "" {
		return r.last
	}
	n := map[Gate]int{}
	for _, d := range r.res.Decisions {
		n[d.Gate]++
	}
	s := fmt.Sprintf("cycle %s: %s", r.c.ID, r.res.Verdict)
	if len(r.res.Decisions) > 0 {
		s += fmt.Sprintf("; %d finding(s) posted, %d in the body, %d dropped", n[GatePosted], n[GateBodyOnly], n[GateDropped])
	}
	return s
}

func docMap(raw json.RawMessage) map[string]any {
	m := map[string]any{}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &m)
	}
	return m
}

func digest(v any) string {
	var b []byte
	if s, ok := v.(string); ok {
		b = []byte(s)
	} else {
		b, _ = json.Marshal(v)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

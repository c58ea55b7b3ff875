package workflow

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"cel.dev/cel-go/cel"
)

// build decodes the validated documents, compiles their expressions and
// checks every reference. Problems are collected on l; the registry
// returned is only used when there are none.
func (l *loader) build(env *cel.Env) *Registry {
	r := &Registry{
		cycles: map[string]*Cycle{}, phases: map[string]*Phase{}, policies: map[string]*Policy{},
		personas: map[string]*Persona{}, artifacts: map[string]*Artifact{},
	}
	// Leaves first, so references can be checked against what loaded.
	for _, d := range docsOf(l.docs[KindPersona]) {
		var f struct {
			Name         string          `json:"name"`
			Description  string          `json:"description"`
			Role         string          `json:"role"`
			AllowedTools json.RawMessage `json:"allowed-tools"`
			OutputSchema string          `json:"output_schema"`
			WritePaths   []string        `json:"write_paths"`
		}
		if !l.decode(d, &f) {
			continue
		}
		if f.OutputSchema != "" && !l.reg.Has(f.OutputSchema) {
			l.problem(d.origin, "/output_schema", "schema %q is not registered", f.OutputSchema)
			continue
		}
		r.personas[d.id] = &Persona{ID: d.id, Role: f.Role, Description: f.Description, AllowedTools: parseTools(f.AllowedTools),
			OutputSchema: f.OutputSchema, WritePaths: f.WritePaths, Body: d.body, Origin: d.origin}
	}
	for _, d := range docsOf(l.docs[KindArtifact]) {
		var f struct {
			Description string `json:"description"`
			Naming      string `json:"naming"`
			Schema      string `json:"schema"`
		}
		if !l.decode(d, &f) {
			continue
		}
		if !l.reg.Has(f.Schema) {
			l.problem(d.origin, "/schema", "schema %q is not registered", f.Schema)
			continue
		}
		if err := checkNaming(f.Naming); err != nil {
			l.problem(d.origin, "/naming", "%v", err)
			continue
		}
		r.artifacts[d.id] = &Artifact{ID: d.id, Description: f.Description, Naming: f.Naming, Schema: f.Schema, Body: d.body, Origin: d.origin}
	}
	for _, d := range docsOf(l.docs[KindPolicy]) {
		if p := l.buildPolicy(env, d); p != nil {
			r.policies[d.id] = p
		}
	}
	for _, d := range docsOf(l.docs[KindPhase]) {
		if p := l.buildPhase(env, d, r); p != nil {
			r.phases[d.id] = p
		}
	}
	for _, d := range docsOf(l.docs[KindCycle]) {
		if c := l.buildCycle(env, d, r); c != nil {
			r.cycles[d.id] = c
		}
	}
	// A trigger word resolves to exactly one cycle: two claimants would
	// make the choice depend on file order.
	owner := map[string]string{}
	for _, c := range sorted(r.cycles) {
		owner[c.ID] = c.ID
	}
	for _, c := range sorted(r.cycles) {
		for i, t := range c.Triggers {
			w := strings.ToLower(strings.TrimSpace(t))
			if o, taken := owner[w]; taken && o != c.ID {
				l.problem(c.Origin, fmt.Sprintf("/triggers/%d", i), "trigger %q already resolves to cycle %s", t, o)
				continue
			}
			owner[w] = c.ID
		}
	}
	return r
}

func docsOf(m map[string]*doc) []*doc {
	out := make([]*doc, 0, len(m))
	for _, d := range m {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (l *loader) decode(d *doc, v any) bool {
	if err := json.Unmarshal(d.raw, v); err != nil {
		l.problem(d.origin, "", "%v", err)
		return false
	}
	return true
}

func (l *loader) expr(env *cel.Env, d *doc, field, src string) (*Expr, bool) {
	e, err := compileBool(env, src)
	if err != nil {
		l.problem(d.origin, field, "expression %q %v", src, err)
		return nil, false
	}
	return e, true
}

func (l *loader) buildPolicy(env *cel.Env, d *doc) *Policy {
	var f struct {
		Description string `json:"description"`
		Kind        string `json:"kind"`
		Rules       []struct {
			When   string   `json:"when"`
			Then   Decision `json:"then"`
			Reason string   `json:"reason"`
		} `json:"rules"`
		Default Decision `json:"default"`
	}
	if !l.decode(d, &f) {
		return nil
	}
	p := &Policy{ID: d.id, Description: f.Description, Kind: f.Kind, Default: f.Default, Routing: f.Kind == KindSeverityRouting, Body: d.body, Origin: d.origin}
	ok := true
	scale := func(field string, dec Decision) {
		if _, on := rank(dec, p.Routing); !on {
			ok = false
			if p.Routing {
				l.problem(d.origin, field, "%q is not a severity-routing decision (safe_auto, gated_auto, manual, advisory)", dec)
			} else {
				l.problem(d.origin, field, "%q is not a %s decision (allow, deny, advisory)", dec, f.Kind)
			}
		}
	}
	for i, rule := range f.Rules {
		e, good := l.expr(env, d, fmt.Sprintf("/rules/%d/when", i), rule.When)
		ok = ok && good
		scale(fmt.Sprintf("/rules/%d/then", i), rule.Then)
		p.Rules = append(p.Rules, Rule{When: e, Then: rule.Then, Reason: rule.Reason})
	}
	if f.Default != "" {
		scale("/default", f.Default)
	}
	if !ok {
		return nil
	}
	return p
}

func (l *loader) buildPhase(env *cel.Env, d *doc, r *Registry) *Phase {
	var f struct {
		Description    string   `json:"description"`
		Advance        string   `json:"advance_signal"`
		Halt           string   `json:"halt_signal"`
		Personas       []string `json:"agents_invoked"`
		MaxConcurrency int      `json:"max_concurrency"`
		InputSchema    string   `json:"input_schema"`
		OutputSchema   string   `json:"output_schema"`
		Policies       []string `json:"policies"`
	}
	if !l.decode(d, &f) {
		return nil
	}
	ok := true
	p := &Phase{ID: d.id, Description: f.Description, Personas: f.Personas, MaxConcurrency: f.MaxConcurrency,
		InputSchema: f.InputSchema, OutputSchema: f.OutputSchema, Policies: f.Policies, Body: d.body, Origin: d.origin}
	var good bool
	p.Advance, good = l.expr(env, d, "/advance_signal", f.Advance)
	ok = ok && good
	if f.Halt != "" {
		p.Halt, good = l.expr(env, d, "/halt_signal", f.Halt)
		ok = ok && good
	}
	for i, id := range f.Personas {
		if _, found := r.personas[id]; !found {
			ok = false
			l.problem(d.origin, fmt.Sprintf("/agents_invoked/%d", i), "persona %q %s", id, l.missing(KindPersona, id, "personas/<role>/"+id+".md"))
		}
	}
	ok = l.checkPolicies(d, f.Policies, r) && ok
	for field, s := range map[string]string{"/input_schema": f.InputSchema, "/output_schema": f.OutputSchema} {
		if s != "" && !l.reg.Has(s) {
			ok = false
			l.problem(d.origin, field, "schema %q is not registered", s)
		}
	}
	if !ok {
		return nil
	}
	return p
}

func (l *loader) checkPolicies(d *doc, ids []string, r *Registry) bool {
	ok := true
	for i, id := range ids {
		if _, found := r.policies[id]; !found {
			ok = false
			l.problem(d.origin, fmt.Sprintf("/policies/%d", i), "policy %q %s", id, l.missing(KindPolicy, id, "policies/"+id+".md"))
		}
	}
	return ok
}

func (l *loader) buildCycle(env *cel.Env, d *doc, r *Registry) *Cycle {
	var f struct {
		Description    string   `json:"description"`
		Triggers       []string `json:"triggers"`
		Phases         []string `json:"phases"`
		EntryPhase     string   `json:"entry_phase"`
		LoopTo         string   `json:"loop_to"`
		ExitConditions struct {
			Done  string `json:"done"`
			Abort string `json:"abort"`
		} `json:"exit_conditions"`
		LoopBounds LoopBounds `json:"loop_bounds"`
		Policies   []string   `json:"policies"`
		Modes      []string   `json:"modes"`
	}
	if !l.decode(d, &f) {
		return nil
	}
	ok := true
	c := &Cycle{ID: d.id, Description: f.Description, Triggers: f.Triggers, Phases: f.Phases, EntryPhase: f.EntryPhase,
		LoopTo: f.LoopTo, Bounds: f.LoopBounds, Policies: f.Policies, Modes: f.Modes, Body: d.body, Origin: d.origin}
	index := map[string]int{}
	for i, id := range f.Phases {
		index[id] = i
		if _, found := r.phases[id]; !found {
			ok = false
			l.problem(d.origin, fmt.Sprintf("/phases/%d", i), "phase %q %s", id, l.missing(KindPhase, id, "phases/"+id+".md"))
		}
	}
	entry, inCycle := index[f.EntryPhase]
	if !inCycle {
		ok = false
		l.problem(d.origin, "/entry_phase", "entry phase %q is not one of the cycle's phases", f.EntryPhase)
	}
	start := entry
	if f.LoopTo != "" {
		lt, in := index[f.LoopTo]
		if !in {
			ok = false
			l.problem(d.origin, "/loop_to", "loop_to phase %q is not one of the cycle's phases", f.LoopTo)
		} else if lt < start {
			start = lt
		}
		if f.LoopBounds.MaxGenerations == 0 {
			ok = false
			l.problem(d.origin, "/loop_bounds/max_generations", "a looping cycle needs loop_bounds.max_generations: without it the loop has no exit")
		}
	}
	if inCycle {
		for i := 0; i < start; i++ {
			ok = false
			l.problem(d.origin, fmt.Sprintf("/phases/%d", i), "phase %q comes before the entry phase and no loop_to reaches it", f.Phases[i])
		}
	}
	if f.ExitConditions.Done == "" {
		ok = false
		l.problem(d.origin, "/exit_conditions/done", "the cycle has no exit: exit_conditions.done is required")
	} else {
		var good bool
		c.Done, good = l.expr(env, d, "/exit_conditions/done", f.ExitConditions.Done)
		ok = ok && good
	}
	if f.ExitConditions.Abort != "" {
		var good bool
		c.Abort, good = l.expr(env, d, "/exit_conditions/abort", f.ExitConditions.Abort)
		ok = ok && good
	}
	ok = l.checkPolicies(d, f.Policies, r) && ok
	if !ok {
		return nil
	}
	return c
}

// parseTools accepts a YAML list or the agentskills.io space/comma string.
func parseTools(raw json.RawMessage) []string {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return list
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	var out []string
	field := ""
	for _, r := range s + " " {
		if r == ' ' || r == ',' || r == '\t' || r == '\n' {
			if field != "" {
				out = append(out, field)
			}
			field = ""
			continue
		}
		field += string(r)
	}
	return out
}

// missing explains a dangling reference: never defined, or defined in a
// file that has problems of its own.
func (l *loader) missing(kind, id, want string) string {
	if d, ok := l.docs[kind][id]; ok {
		return "did not load: see the problems of " + d.origin.String()
	}
	if o, ok := l.failed[kind+"/"+id]; ok {
		return "did not load: see the problems of " + o.String()
	}
	return "is not defined (want " + want + ")"
}

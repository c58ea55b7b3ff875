package schemas

import (
	"errors"
	"testing"
)

// The workflow plane's schemas (cycles, phases, policies, personas,
// artifact templates, findings and their aggregate, fix proposals) are
// registered and reject what they rule out.
func TestWorkflowSchemasRegistered(t *testing.T) {
	r := MustDefault()
	valid := map[string]string{
		"cycle_v1":             `{"id":"review","phases":["fan-out","gate"],"entry_phase":"fan-out","exit_conditions":{"done":"true"},"loop_bounds":{"max_generations":1},"policies":["loop-halt"],"schema_version":"v1"}`,
		"phase_v1":             `{"id":"gate","advance_signal":"review_aggregate.p0_unresolved == 0","agents_invoked":["security"],"schema_version":"v1"}`,
		"policy_v1":            `{"id":"loop-halt","kind":"loop-halt","rules":[{"when":"cycle.generation >= 3","then":"deny","reason":"bound"}],"default":"allow","schema_version":"v1"}`,
		"persona_v1":           `{"name":"security","description":"d","role":"reviewer","allowed-tools":["repo.read"],"schema_version":"v1"}`,
		"artifact_template_v1": `{"id":"review","naming":"reviews/{pr}.json","schema":"review_aggregate_v1","schema_version":"v1"}`,
		"finding_v1":           `{"id":"f1","reviewer":"security","severity":"P0","autofix_class":"manual","confidence":75,"title":"SQL injection","schema_version":"v1"}`,
		"review_aggregate_v1":  `{"findings":[],"suppressed":[],"pre_existing":[],"verdict":"pass","schema_version":"v1"}`,
		"finding_v2":           `{"id":"f1","reviewer":"security","severity":"P3","autofix_class":"safe_auto","confidence":75,"title":"typo","body":"**nmae** is misspelt","suggestion":"// name","path":"a.go","line":3,"schema_version":"v2"}`,
		"persona_findings_v2":  `{"findings":[{"id":"f1","reviewer":"tests","severity":"P2","autofix_class":"manual","confidence":50,"title":"untested","body":"no test covers it","schema_version":"v2"}],"schema_version":"v2"}`,
		"fix_proposal_v1":      `{"review_session":"7-aaaaaaaa","proposal_session":"7-bbbbbbbb","delivery_id":"fix-proposal:7-aaaaaaaa","pr":7,"findings":[{"id":"a.go:3-3:typo","severity":"P3","title":"typo","has_suggestion":true}],"schema_version":"v1"}`,
	}
	for id, doc := range valid {
		if err := r.ValidateJSON(id, []byte(doc)); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
	invalid := []struct{ id, doc, ptr string }{
		{"cycle_v1", `{"id":"review","phases":[],"entry_phase":"a","schema_version":"v1"}`, "/phases"},
		{"cycle_v1", `{"id":"review","phases":["a"],"entry_phase":"a","exit":"x","schema_version":"v1"}`, ""},
		{"phase_v1", `{"id":"a","schema_version":"v1"}`, ""},
		{"policy_v1", `{"id":"p","kind":"vibes","rules":[{"when":"true","then":"allow","reason":"r"}],"schema_version":"v1"}`, "/kind"},
		{"policy_v1", `{"id":"p","kind":"loop-halt","rules":[{"when":"true","then":"maybe","reason":"r"}],"schema_version":"v1"}`, "/rules/0/then"},
		{"persona_v1", `{"name":"Security!","description":"d","role":"reviewer","schema_version":"v1"}`, "/name"},
		{"persona_v1", `{"name":"security","description":"d","role":"reviewer","inline_prompt":"x","schema_version":"v1"}`, ""},
		{"finding_v1", `{"id":"f","reviewer":"r","severity":"P0","autofix_class":"manual","confidence":60,"title":"t","schema_version":"v1"}`, "/confidence"},
		{"finding_v2", `{"id":"f","reviewer":"r","severity":"P2","autofix_class":"manual","confidence":50,"title":"t","schema_version":"v2"}`, ""},
		{"finding_v2", `{"id":"f","reviewer":"r","severity":"P2","autofix_class":"safe_auto","confidence":50,"title":"t","body":"b","suggestion":"x","path":"a.go","schema_version":"v2"}`, ""},
		{"persona_findings_v2", `{"findings":[{"id":"f","reviewer":"r","severity":"P2","autofix_class":"manual","confidence":50,"title":"t","body":"b","schema_version":"v1"}],"schema_version":"v2"}`, "/findings/0/schema_version"},
		{"fix_proposal_v1", `{"review_session":"a","proposal_session":"b","delivery_id":"review-1","pr":7,"findings":[{"id":"x","severity":"P3","title":"t"}],"schema_version":"v1"}`, "/delivery_id"},
		{"fix_proposal_v1", `{"review_session":"a","proposal_session":"b","delivery_id":"fix-proposal:a","pr":7,"findings":[],"schema_version":"v1"}`, "/findings"},
	}
	for _, c := range invalid {
		err := r.ValidateJSON(c.id, []byte(c.doc))
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s %s: got %v, want a ValidationError", c.id, c.doc, err)
			continue
		}
		if ve.Pointer != c.ptr {
			t.Errorf("%s: pointer %q, want %q (%v)", c.id, ve.Pointer, c.ptr, ve)
		}
	}
}

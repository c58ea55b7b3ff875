package cycle_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentos/agentos/runtime/workflow"
	"github.com/agentos/agentos/runtime/workflow/cycle"
)

// suggestionScript: security (finding_v2) and correctness (finding_v2)
// report the injection on line 7, each with its own body and suggestion;
// correctness and tests report the same untested branch with the same
// severity and confidence; tests is a repository persona still declaring
// finding_v1, so its suggestion is not read; correctness also reports a
// safe_auto typo with a suggestion that deletes the line (an empty
// suggestion), and a finding whose path escapes the repository.
const suggestionScript = `
model: scripted
roles:
  security:
  - text: '{"findings":[{"id":"s1","reviewer":"security","severity":"P0","autofix_class":"gated_auto","confidence":100,"title":"SQL injection","body":"SEC-BODY: name reaches the query unescaped.","suggestion":"\treturn db.Query(\"SELECT * FROM users WHERE name = ?\", name)","path":"db.go","line":7,"rule":"sql-injection","schema_version":"v2"}],"schema_version":"v2"}'
  correctness:
  - text: '{"findings":[{"id":"c1","reviewer":"correctness","severity":"P1","autofix_class":"manual","confidence":100,"title":"concatenated query","body":"CORR-BODY","suggestion":"CORR-SUGGESTION","path":"db.go","line":7,"rule":"sql-injection","schema_version":"v2"},{"id":"c2","reviewer":"correctness","severity":"P2","autofix_class":"safe_auto","confidence":75,"title":"untested error branch","body":"CORR-UNTESTED","suggestion":"CORR-UNTESTED-SUGGESTION","path":"db.go","line":6,"end_line":7,"rule":"untested-branch","schema_version":"v2"},{"id":"c3","reviewer":"correctness","severity":"P3","autofix_class":"safe_auto","confidence":100,"title":"stray line","body":"the line is dead","suggestion":"","path":"db.go","line":3,"rule":"dead-line","schema_version":"v2"},{"id":"c4","reviewer":"correctness","severity":"P3","autofix_class":"safe_auto","confidence":100,"title":"outside","body":"OUTSIDE-BODY","suggestion":"x","path":"../etc/passwd","line":1,"rule":"escape","schema_version":"v2"}],"schema_version":"v2"}'
  tests:
  - text: '{"findings":[{"id":"t1","reviewer":"tests","severity":"P2","autofix_class":"safe_auto","confidence":75,"title":"untested error branch","body":"TESTS-UNTESTED","suggestion":"V1-SUGGESTION","path":"db.go","line":6,"end_line":7,"rule":"untested-branch","schema_version":"v1"},{"id":"t2","reviewer":"tests","severity":"P3","autofix_class":"safe_auto","confidence":100,"title":"v1 finding","body":"V1-BODY","suggestion":"V1-ONLY-SUGGESTION","has_suggestion":true,"path":"db.go","line":5,"rule":"v1-rule","schema_version":"v1"}],"schema_version":"v1"}'
`

// TestFanInKeepsBodiesAndSuggestions: fan-in keeps each merged finding's
// body and suggestion from its highest-severity report (then confidence,
// then the first persona in the phase's order), reads a v1 persona's body
// but never a suggestion from it (nor its claim to have one), keeps an
// empty suggestion (it deletes the lines), drops the suggestion of a
// finding whose path was not clean, and merges the same replies the same
// way every time.
func TestFanInKeepsBodiesAndSuggestions(t *testing.T) {
	run := func(session string) []cycle.FindingDecision {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{
			"db.go": dbGo,
			".agent/workflows/personas/reviewer/tests.md": "---\nname: tests\ndescription: \"v1 tests persona\"\nrole: reviewer\nallowed-tools: [repo.read]\noutput_schema: finding_v1\nschema_version: v1\n---\nReport untested code.\n",
		})
		w := openWorld(t, dir, t.TempDir(), suggestionScript, "")
		res, err := w.x.Run(context.Background(), cycle.Request{SessionID: session, Cycle: "review", Prompt: "review", Mode: cycle.ModeInteractive, Inputs: map[string]string{"diff": prDiff}, Cwd: dir})
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict != workflow.VerdictDone {
			t.Fatalf("verdict %q: %s", res.Verdict, res.Reason)
		}
		// The log's projection carries the same bodies and suggestions.
		again := cycle.ResultFromLog(w.events(t, session), res.Outcome.RunID)
		a, _ := json.Marshal(again.Decisions)
		b, _ := json.Marshal(res.Decisions)
		if string(a) != string(b) {
			t.Errorf("decisions from the log differ:\n%s\n%s", a, b)
		}
		return res.Decisions
	}
	first := run("fanin-1")
	got := map[string]workflow.Finding{}
	for _, d := range first {
		got[d.Finding.Rule] = d.Finding
		if d.Body != d.Finding.Body {
			t.Errorf("%s: decision body %q, finding body %q", d.Finding.Rule, d.Body, d.Finding.Body)
		}
	}
	if f := got["sql-injection"]; f.Severity != "P0" || f.Body != "SEC-BODY: name reaches the query unescaped." || !f.HasSuggestion ||
		f.Suggestion != "\treturn db.Query(\"SELECT * FROM users WHERE name = ?\", name)" || f.Reviewer != "correctness,security" {
		t.Errorf("sql-injection keeps the P0's body and suggestion: %+v", f)
	}
	if f := got["untested-branch"]; f.Body != "CORR-UNTESTED" || f.Suggestion != "CORR-UNTESTED-SUGGESTION" || !f.HasSuggestion || f.Reviewer != "correctness,tests" {
		t.Errorf("untested-branch (a tie) keeps the first persona's body and suggestion: %+v", f)
	}
	if f := got["dead-line"]; !f.HasSuggestion || f.Suggestion != "" || f.Body != "the line is dead" {
		t.Errorf("an empty suggestion is kept (it deletes the line): %+v", f)
	}
	if f := got["v1-rule"]; f.Body != "V1-BODY" || f.HasSuggestion || f.Suggestion != "" {
		t.Errorf("a v1 finding keeps its body and never a suggestion: %+v", f)
	}
	if f := got["escape"]; f.Path != "" || f.HasSuggestion || f.Suggestion != "" || f.Body != "OUTSIDE-BODY" {
		t.Errorf("a finding whose path is not clean loses its place and its suggestion: %+v", f)
	}
	second := run("fanin-2")
	a, _ := json.Marshal(first)
	b, _ := json.Marshal(second)
	if string(a) != string(b) {
		t.Errorf("the same replies merged differently:\n%s\n%s", a, b)
	}
}

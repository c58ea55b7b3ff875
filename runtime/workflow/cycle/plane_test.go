package cycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/hooks"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/workflow"
	"github.com/agentos/agentos/runtime/workflow/cycle"
	"github.com/agentos/agentos/schemas"
)

const triageScript = `
model: scripted
roles:
  triager:
  - tool_calls: [{id: r1, name: repo.read, args: {path: db.go}}]
  - text: '{"labels":["bug","security"],"summary":"FindUser builds its query by concatenation.","schema_version":"v1"}'
`

// TestTriageCycleModeDispatch: the triage cycle proposes labels and a
// summary; mode-dispatch decides whether they are applied (allow) or only
// reported (advisory).
func TestTriageCycleModeDispatch(t *testing.T) {
	for _, c := range []struct {
		mode string
		want workflow.Decision
	}{
		{cycle.ModeInteractive, workflow.Allow},
		{cycle.ModeHeadless, workflow.Allow},
		{cycle.ModeReportOnly, workflow.Advisory},
	} {
		t.Run(c.mode, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"db.go": dbGo})
			w := openWorld(t, dir, t.TempDir(), triageScript, "")
			res, err := w.x.Run(context.Background(), cycle.Request{SessionID: "triage-1", Cycle: "triage", Prompt: "triage this issue", Mode: c.mode,
				Inputs: map[string]string{"issue": "FindUser is vulnerable\n\nname goes into the SQL text"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != workflow.VerdictDone || res.Delivery != c.want {
				t.Fatalf("verdict %q delivery %q, want done/%s (%s)", res.Verdict, res.Delivery, c.want, res.Reason)
			}
			prop := res.Outputs["triage-propose"]["triager"].(map[string]any)
			if b, _ := json.Marshal(prop["labels"]); string(b) != `["bug","security"]` {
				t.Errorf("labels %s", b)
			}
			verify(t, w.events(t, "triage-1"))
		})
	}
}

// TestWorkflowHooks: WorkflowStart can deny or transform, PhaseAdvance can
// deny or redirect (only to a phase of the cycle), a failing hook denies
// (fail closed), WorkflowComplete observes the verdict.
func TestWorkflowHooks(t *testing.T) {
	transform := func(out string) func(context.Context, hooks.Input) (hooks.Decision, error) {
		return func(context.Context, hooks.Input) (hooks.Decision, error) {
			return hooks.Decision{Decision: hooks.Transform, Output: json.RawMessage(out)}, nil
		}
	}
	cases := []struct {
		name    string
		event   hooks.Event
		fn      func(context.Context, hooks.Input) (hooks.Decision, error)
		status  replay.RunStatus
		verdict workflow.Verdict
		check   func(t *testing.T, evs []event.Event)
	}{
		{"WorkflowStart deny", hooks.WorkflowStart, func(context.Context, hooks.Input) (hooks.Decision, error) {
			return hooks.Decision{Decision: hooks.Deny, Reason: "not today"}, nil
		}, "denied", "", func(t *testing.T, evs []event.Event) {
			if count(evs, event.WorkflowStarted) != 0 || count(evs, event.LLMRequest) != 0 {
				t.Errorf("a denied cycle started:\n%s", types(evs))
			}
		}},
		{"WorkflowStart transform", hooks.WorkflowStart, transform(`{"prompt":"TRIAGE-REWRITTEN"}`), "completed", workflow.VerdictDone, func(t *testing.T, evs []event.Event) {
			req := byType(evs, event.LLMRequest)
			if len(req) == 0 || !strings.Contains(string(req[0].Payload), "TRIAGE-REWRITTEN") {
				t.Error("the transformed prompt did not reach the persona")
			}
		}},
		{"PhaseAdvance to a phase the cycle lacks", hooks.PhaseAdvance, transform(`{"to_phase":"review-gate"}`), "denied", workflow.VerdictAbort, func(t *testing.T, evs []event.Event) {
			if count(evs, event.WorkflowAborted) != 1 || count(evs, event.WorkflowPhaseAdvanced) != 0 {
				t.Errorf("want aborted before any phase:\n%s", types(evs))
			}
		}},
		{"PhaseAdvance hook fails", hooks.PhaseAdvance, func(context.Context, hooks.Input) (hooks.Decision, error) {
			return hooks.Decision{}, errors.New("hook crashed")
		}, "denied", workflow.VerdictAbort, nil},
		{"WorkflowComplete observes", hooks.WorkflowComplete, func(_ context.Context, in hooks.Input) (hooks.Decision, error) {
			if in.Verdict != "done" || in.Cycle != "triage" {
				return hooks.Decision{}, errors.New("wrong input")
			}
			return hooks.Decision{Decision: hooks.Allow, Reason: "seen " + in.Verdict}, nil
		}, "completed", workflow.VerdictDone, func(t *testing.T, evs []event.Event) {
			found := false
			for _, e := range byType(evs, event.HookFired) {
				found = found || (event.FieldString(e.Payload, "hook") == "WorkflowComplete" && event.FieldString(e.Payload, "reason") == "seen done")
			}
			if !found {
				t.Error("no WorkflowComplete decision recorded")
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"db.go": dbGo})
			w := openWorld(t, dir, t.TempDir(), triageScript, "")
			if err := w.hooks.Register(c.event, hooks.Func{Name: "test-hook", Prio: 50, Fn: c.fn}); err != nil {
				t.Fatal(err)
			}
			res, err := w.x.Run(context.Background(), cycle.Request{SessionID: "hooks-1", Cycle: "triage", Prompt: "triage", Inputs: map[string]string{"issue": "x"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome.Status != c.status || res.Verdict != c.verdict {
				t.Fatalf("status %q verdict %q, want %q/%q (%s)", res.Outcome.Status, res.Verdict, c.status, c.verdict, res.Reason)
			}
			evs := w.events(t, "hooks-1")
			verify(t, evs)
			if c.check != nil {
				c.check(t, evs)
			}
		})
	}
}

func spinRepo(bounds, policies string, extra map[string]string) map[string]string {
	files := map[string]string{
		".agent/workflows/cycles/spin.md": `---
id: spin
phases: [check]
entry_phase: check
loop_to: check
exit_conditions:
  done: "cycle.generation > 9"
loop_bounds: ` + bounds + `
policies: ` + policies + `
schema_version: v1
---
`,
		".agent/workflows/phases/check.md": `---
id: check
input_schema: review_aggregate_v1
advance_signal: "true"
schema_version: v1
---
`,
		".agent/workflows/policies/spin-halt.md": `---
id: spin-halt
kind: loop-halt
description: stop at the third generation
rules:
  - when: cycle.generation >= 3
    then: deny
    reason: three is enough
default: allow
schema_version: v1
---
`,
	}
	for k, v := range extra {
		files[k] = v
	}
	return files
}

// TestLoopBoundsHalt: max_generations, oscillation, grade regression and
// a loop-halt policy each halt a looping cycle.
func TestLoopBoundsHalt(t *testing.T) {
	grader := map[string]string{
		".agent/workflows/phases/check.md": `---
id: check
agents_invoked: [grader]
output_schema: review_aggregate_v1
advance_signal: "true"
schema_version: v1
---
`,
		".agent/workflows/personas/reviewer/grader.md": `---
name: grader
description: "grades"
role: reviewer
output_schema: finding_v1
schema_version: v1
---
`,
	}
	graderScript := `
model: scripted
roles:
  grader:
  - text: '{"findings":[],"schema_version":"v1"}'
  - text: '{"findings":[{"id":"g","reviewer":"grader","severity":"P1","autofix_class":"manual","confidence":100,"title":"worse","schema_version":"v1"}],"schema_version":"v1"}'
`
	cases := []struct {
		name, bounds, policies string
		extra                  map[string]string
		script                 string
		phases                 int
		reason                 string
	}{
		{"max_generations", "{max_generations: 2}", "[]", nil, "", 2, "max_generations 2"},
		{"oscillation", "{max_generations: 5, max_oscillations: 1}", "[]", nil, "", 2, "oscillations"},
		{"loop-halt policy", "{max_generations: 5}", "[spin-halt]", nil, "", 3, "loop-halt policy spin-halt"},
		{"grade regression", "{max_generations: 5, halt_on_grade_regression: true}", "[]", grader, graderScript, 2, "grade regressed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, spinRepo(c.bounds, c.policies, c.extra))
			script := c.script
			if script == "" {
				script = "model: scripted\nroles:\n  unused:\n  - text: unused\n"
			}
			w := openWorld(t, dir, t.TempDir(), script, "")
			res, err := w.x.Run(context.Background(), cycle.Request{SessionID: "spin-1", Cycle: "spin", Prompt: "spin"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != workflow.VerdictHalted || !strings.Contains(res.Reason, c.reason) {
				t.Fatalf("verdict %q reason %q, want halted: %s", res.Verdict, res.Reason, c.reason)
			}
			evs := w.events(t, "spin-1")
			if n := count(evs, event.WorkflowPhaseAdvanced); n != c.phases {
				t.Errorf("%d phase_advanced, want %d", n, c.phases)
			}
			// No model or tool work in most cases: check integrity and the
			// workflow audit, not the list of a working session.
			if rep := replay.VerifyEventsOptions(schemas.MustDefault(), evs, replay.Options{Lenient: true}); !rep.Valid {
				t.Fatalf("verify: %v", rep.Problem)
			}
		})
	}
}

// TestUnknownIDsFailClosed: an unknown cycle, a mode the cycle does not
// allow, and an oversized input are refused before anything is recorded;
// a recorded request naming an unknown cycle does not open; a phase that
// names an unknown persona (or policy, or a cycle an unknown phase) does
// not load.
func TestUnknownIDsFailClosed(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"db.go": dbGo})
	w := openWorld(t, dir, t.TempDir(), triageScript, "")
	ctx := context.Background()
	for _, c := range []struct {
		name string
		req  cycle.Request
		want error
	}{
		{"unknown cycle", cycle.Request{SessionID: "u-1", Cycle: "deploy"}, workflow.ErrUnknownID},
		{"mode the cycle does not allow", cycle.Request{SessionID: "u-2", Cycle: "review", Mode: cycle.ModeAutofix}, cycle.ErrMode},
		{"unknown mode", cycle.Request{SessionID: "u-3", Cycle: "triage", Mode: "yolo"}, cycle.ErrMode},
		{"input too large", cycle.Request{SessionID: "u-4", Cycle: "triage", Inputs: map[string]string{"issue": strings.Repeat("x", 300<<10)}}, cycle.ErrInput},
		{"input name", cycle.Request{SessionID: "u-5", Cycle: "triage", Inputs: map[string]string{"../x": "y"}}, cycle.ErrInput},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := w.x.Run(ctx, c.req)
			if !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			if evs := w.events(t, c.req.SessionID); len(evs) != 0 {
				t.Fatalf("%d events recorded for a refused request", len(evs))
			}
		})
	}
	if _, err := w.x.Open(json.RawMessage(`{"cycle_id":"deploy","mode":"interactive"}`)); !errors.Is(err, workflow.ErrUnknownID) {
		t.Errorf("Open of an unknown cycle: %v", err)
	}
	for name, files := range map[string]map[string]string{
		"unknown persona": {".agent/workflows/phases/review-fan-out.md": "---\nid: review-fan-out\nagents_invoked: [ghost]\nadvance_signal: \"true\"\nschema_version: v1\n---\n"},
		"unknown policy":  {".agent/workflows/phases/review-gate.md": "---\nid: review-gate\npolicies: [ghost]\nadvance_signal: \"true\"\nschema_version: v1\n---\n"},
		"unknown phase":   {".agent/workflows/cycles/fix.md": "---\nid: fix\nphases: [ghost]\nentry_phase: ghost\nexit_conditions: {done: \"true\"}\nschema_version: v1\n---\n"},
	} {
		d := t.TempDir()
		writeFiles(t, d, files)
		if _, err := workflow.LoadRepo(schemas.MustDefault(), d); err == nil || !strings.Contains(err.Error(), "ghost") {
			t.Errorf("%s: load error %v, want one naming ghost", name, err)
		}
	}
}

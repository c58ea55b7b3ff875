package run

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/hooks"
	"github.com/agentos/agentos/runtime/journal"
)

// requests returns the llm.request payloads of a role, in order.
func requests(evs []event.Event, role string) []json.RawMessage {
	prompts := event.NewPrompts(evs)
	var out []json.RawMessage
	for i := range evs {
		e := &evs[i]
		if e.Type == event.LLMRequest && event.FieldString(e.Payload, "role") == role {
			// Read back whole: its prompt blocks may be defined by an
			// earlier request (docs/decisions.md).
			full, err := prompts.Payload(e)
			if err != nil {
				full = e.Payload
			}
			out = append(out, full)
		}
	}
	return out
}

// TestAdvisorWhenLeadAsks: needs_advisor routes LEAD → ADVISOR → PLAN, the
// advisor sees the lead's directive, and its directive is what the
// planner gets.
func TestAdvisorWhenLeadAsks(t *testing.T) {
	lead := `{"intent":"greet the world","constraints":[],"needs_advisor":true,"schema_version":"v1"}`
	advisor := `{"intent":"greet the world politely","constraints":["one line"],"needs_advisor":false,"schema_version":"v1"}`
	s := `
roles:
  lead: [{text: '` + lead + `'}]
  advisor: [{text: '` + advisor + `'}]
  planner: [{text: '` + planOK + `'}]
  worker: [` + echoTurn + `, {text: '` + reportOK + `'}]
  reviewer: [{text: '` + reviewPass + `'}]
`
	f := newFixture(t, s, nil)
	out, err := f.mgr.Start(context.Background(), f.eng, StartRequest{SessionID: "adv", Prompt: "greet the world"})
	if err != nil || out.Status != "completed" {
		t.Fatalf("%+v %v", out, err)
	}
	evs := f.events(t, "adv")
	verify(t, evs)
	var path []string
	for _, e := range evs {
		if e.Type == event.AgentTransition {
			path = append(path, event.FieldString(e.Payload, "to"))
		}
	}
	if got := strings.Join(path, ">"); got != "LEAD>ADVISOR>PLAN>WORK>REVIEW>DONE" {
		t.Fatalf("transitions %s", got)
	}
	if a := requests(evs, "advisor"); len(a) != 1 || !bytes.Contains(a[0], []byte(`needs_advisor\":true`)) {
		t.Errorf("advisor did not see the lead's directive: %s", a)
	}
	if p := requests(evs, "planner"); len(p) != 1 || !bytes.Contains(p[0], []byte("greet the world politely")) {
		t.Errorf("planner did not get the advisor's directive: %s", p)
	}
}

// TestContextAssembly: role prompts come from the repository's
// .agent/roles/ when present, the memory file and the previous run's
// summary reach the model, and the repository as such does not.
func TestContextAssembly(t *testing.T) {
	f := newFixture(t, script(echoCall, finalReport)+"\n", nil)
	f.eng.Repo = fstest.MapFS{
		".agent/roles/lead.md": {Data: []byte("# Lead (repository override)\nALWAYS-ANSWER-IN-JSON-OVERRIDE")},
		".agent/memory.md":     {Data: []byte("MEMORY: this repository pins Go 1.26")},
		"secret-source.go":     {Data: []byte("package x // UNREAD-FILE-CONTENT")},
	}
	ctx := context.Background()
	if out, err := f.mgr.Start(ctx, f.eng, StartRequest{SessionID: "ctx", Prompt: "greet the world"}); err != nil || out.Status != "completed" {
		t.Fatalf("%+v %v", out, err)
	}
	evs := f.events(t, "ctx")
	lead := requests(evs, "lead")
	if len(lead) != 1 || !bytes.Contains(lead[0], []byte("ALWAYS-ANSWER-IN-JSON-OVERRIDE")) || !bytes.Contains(lead[0], []byte("MEMORY: this repository pins Go 1.26")) {
		t.Fatalf("lead request lacks the override or the memory: %s", lead)
	}
	if w := requests(evs, "worker"); len(w) == 0 || !bytes.Contains(w[0], []byte("MEMORY: this repository pins Go 1.26")) || !bytes.Contains(w[0], []byte("Skill: greet")) {
		t.Errorf("worker context lacks memory or the selected skill's body")
	}
	if p := requests(evs, "planner"); len(p) == 0 || bytes.Contains(p[0], []byte("ALWAYS-ANSWER-IN-JSON-OVERRIDE")) {
		t.Errorf("the lead override leaked into the planner's prompt")
	}
	for _, e := range evs {
		if bytes.Contains(e.Payload, []byte("UNREAD-FILE-CONTENT")) {
			t.Fatal("repository content reached the context without a tool call")
		}
	}
	// A second run of the session gets the first run's outcome. The
	// scripted provider numbers turns across the session's runs, so the
	// script holds a second response per role.
	twice := `
roles:
  lead: [{text: '` + leadOK + `'}, {text: '` + leadOK + `'}]
  planner: [{text: '` + planOK + `'}, {text: '` + planOK + `'}]
  worker: [` + echoTurn + `, {text: '` + reportOK + `'}, {text: '` + reportNone + `'}]
  reviewer: [{text: '` + reviewPass + `'}, {text: '` + reviewPass + `'}]
`
	f2 := newFixture(t, twice, f.store)
	if out, err := f2.mgr.Start(ctx, f2.eng, StartRequest{SessionID: "ctx", Prompt: "greet again"}); err != nil || out.Status != "completed" {
		t.Fatalf("second run: %+v %v", out, err)
	}
	evs = f2.events(t, "ctx")
	lead = requests(evs, "lead")
	if len(lead) != 2 || !bytes.Contains(lead[1], []byte("Previous run")) || !bytes.Contains(lead[1], []byte("status: completed")) || !bytes.Contains(lead[1], []byte("hello, world")) {
		t.Errorf("second run's lead request lacks the previous run's summary: %s", lead[len(lead)-1])
	}
}

// TestCompactionUnderBudget: when the worker's context exceeds the token
// budget, PreCompact fires, the summary is stored as an artifact and the
// next request references it by digest instead of carrying the old tool
// exchanges. A PreCompact deny keeps the context whole. Both runs
// re-execute deterministically.
func TestCompactionUnderBudget(t *testing.T) {
	var worker []string
	for i := 0; i < 4; i++ {
		worker = append(worker, fmt.Sprintf("    - tool_calls: [{id: t%d, name: echo, args: {text: \"OLD-RESULT-%d\"}}]", i, i))
	}
	worker = append(worker, finalReport)
	for _, deny := range []bool{false, true} {
		t.Run(fmt.Sprintf("deny=%v", deny), func(t *testing.T) {
			f := newFixture(t, script(worker...), nil)
			f.eng.Profile.Limits.ContextTokens = 200
			decision := hooks.Allow
			if deny {
				decision = hooks.Deny
			}
			must(t, f.eng.Hooks.Register(hooks.PreCompact, hooks.Func{Name: "pre-compact", Fn: func(_ context.Context, in hooks.Input) (hooks.Decision, error) {
				if in.Trigger != "auto" {
					return hooks.Decision{Decision: hooks.Deny, Reason: "unexpected trigger " + in.Trigger}, nil
				}
				return hooks.Decision{Decision: decision, Reason: "test"}, nil
			}}))
			ctx := context.Background()
			out, err := f.mgr.Start(ctx, f.eng, StartRequest{SessionID: "cmp", Prompt: "greet the world"})
			if err != nil || out.Status != "completed" {
				t.Fatalf("%+v %v", out, err)
			}
			evs := f.events(t, "cmp")
			verify(t, evs)
			var digests []string
			preCompact := 0
			for _, e := range evs {
				if e.Type == event.HookFired && event.FieldString(e.Payload, "hook") == "PreCompact" {
					preCompact++
				}
				if e.Type == event.ArtifactEmitted && event.FieldString(e.Payload, "kind") == "compaction" {
					digests = append(digests, event.FieldString(e.Payload, "digest"))
					if !strings.Contains(event.FieldString(e.Payload, "content"), "called echo") {
						t.Errorf("summary does not summarise the tool calls: %s", e.Payload)
					}
				}
			}
			reqs := requests(evs, "worker")
			last := reqs[len(reqs)-1]
			if deny {
				if preCompact == 0 || len(digests) != 0 || !bytes.Contains(last, []byte("OLD-RESULT-0")) {
					t.Fatalf("PreCompact deny: hooks %d, compactions %d", preCompact, len(digests))
				}
			} else {
				if preCompact == 0 || len(digests) == 0 {
					t.Fatalf("no compaction: PreCompact %d, artifacts %d", preCompact, len(digests))
				}
				if !bytes.Contains(last, []byte(digests[len(digests)-1])) || bytes.Contains(last, []byte(`OLD-RESULT-0\"}`)) {
					t.Errorf("the last worker request does not reference the summary instead of the old exchange: %s", last)
				}
			}
			history, prompt, _, _ := runHistory(evs, out.RunID)
			same := newFixture(t, script(worker...), nil)
			same.eng.Profile.Limits.ContextTokens = 200
			same.eng.Hooks = f.eng.Hooks
			if _, err := Reexecute(ctx, same.eng, prompt, history); err != nil {
				t.Fatalf("re-execution diverged: %v", err)
			}
		})
	}
}

// TestOneActiveRunPerSession: concurrent requests for one session queue
// behind each other (their events never interleave) and each run gets
// exactly one terminal report; another session runs independently.
func TestOneActiveRunPerSession(t *testing.T) {
	const n = 4
	var b strings.Builder
	b.WriteString("roles:\n")
	for _, role := range []struct{ name, text string }{{"lead", leadOK}, {"planner", planOK}, {"worker", reportOK}, {"reviewer", reviewPass}} {
		b.WriteString("  " + role.name + ":\n")
		if role.name == "worker" {
			// The first run calls a tool and reports it; the others
			// report honestly that they called none.
			b.WriteString(echoCall + "\n")
			b.WriteString("    - text: '" + reportOK + "'\n")
			for i := 1; i < n; i++ {
				b.WriteString("    - text: '" + reportNone + "'\n")
			}
			continue
		}
		for i := 0; i < n; i++ {
			b.WriteString("    - text: '" + role.text + "'\n")
		}
	}
	f := newFixture(t, b.String(), nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, n+1)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			out, err := f.mgr.Start(ctx, f.eng, StartRequest{SessionID: "queue", Prompt: fmt.Sprintf("greet %d", i)})
			if err == nil && out.Status != "completed" {
				err = fmt.Errorf("run %d ended %s: %+v", i, out.Status, out.Terminal)
			}
			errs <- err
		}(i)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		other := newFixture(t, script(echoCall, finalReport), f.store)
		_, err := other.mgr.Start(ctx, other.eng, StartRequest{SessionID: "other", Prompt: "greet"})
		errs <- err
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	evs := f.events(t, "queue")
	verify(t, evs)
	// Runs appear as contiguous blocks: once a run's events stop, its id
	// never appears again.
	var order []string
	for _, e := range evs {
		if e.RunID != "" && (len(order) == 0 || order[len(order)-1] != e.RunID) {
			order = append(order, e.RunID)
		}
	}
	if len(order) != n {
		t.Fatalf("runs interleaved or missing: %d blocks for %d runs", len(order), n)
	}
	terminals := 0
	for _, e := range evs {
		if e.Type == event.TurnTerminal {
			terminals++
		}
	}
	if terminals != n {
		t.Fatalf("%d terminal reports for %d runs", terminals, n)
	}
}

// TestReportMissingOnNextLoad: a run that stopped without a terminal
// report (the process died mid-run) gets a report_missing terminal report
// when the session is next used, and the log verifies afterwards.
func TestReportMissingOnNextLoad(t *testing.T) {
	f := newFixture(t, script(echoCall, finalReport), nil)
	ctx := context.Background()
	j, err := journal.Open(ctx, f.store, "crashed")
	must(t, err)
	j.SetRun("run-dead")
	for _, d := range []struct {
		typ     string
		payload map[string]any
	}{
		{event.SessionStart, map[string]any{"prompt": "greet"}},
		{event.RunStarted, map[string]any{"run_id": "run-dead", "prompt": "greet", "trigger": map[string]any{"correlation_id": "crashed"}}},
		{event.AgentTransition, map[string]any{"from": "INTAKE", "to": "LEAD", "role": "lead"}},
	} {
		if _, err := j.Append(ctx, d.typ, "runtime", d.payload, ""); err != nil {
			t.Fatal(err)
		}
	}
	out, err := f.mgr.Start(ctx, f.eng, StartRequest{SessionID: "crashed", Prompt: "greet the world"})
	if err != nil || out.Status != "completed" {
		t.Fatalf("%+v %v", out, err)
	}
	evs := f.events(t, "crashed")
	verify(t, evs)
	var dead *Report
	for _, e := range evs {
		if e.Type == event.TurnTerminal && e.RunID == "run-dead" {
			var r Report
			must(t, json.Unmarshal(e.Payload, &r))
			dead = &r
		}
	}
	if dead == nil || dead.ErrorClass != ClassReportMissing || dead.Status != StatusFailed || dead.NextAction == "" {
		t.Fatalf("orphaned run's terminal report: %+v", dead)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

package run

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/hooks"
	"github.com/agentos/agentos/runtime/provider"
)

// evKernel adds to fakeKernel the tools the evidence contract reads:
// repo.write (a change; path is required), test.run (its outcomes come
// from a queue) and rm (which the built-in PreToolUse hook denies, as the
// kernel fires it).
type evKernel struct {
	*fakeKernel
	hooks *hooks.Registry
	mu    sync.Mutex
	tests []testOutcome
}

// testOutcome is one test.run's result: an exit code, or a kernel error.
type testOutcome struct {
	exit   int
	stderr string
	code   string // a kernel error code instead of a result
	msg    string
	reject bool // refused before tool.invoke (tool.rejected)
}

func (k *evKernel) Specs(scope []string) []provider.ToolSpec {
	return append(k.fakeKernel.Specs(scope),
		provider.ToolSpec{Name: "repo.write", Description: "write a file", InputSchema: json.RawMessage(`{"type":"object","required":["path"]}`)},
		provider.ToolSpec{Name: "test.run", Description: "run the tests", InputSchema: json.RawMessage(`{"type":"object"}`)},
		provider.ToolSpec{Name: "rm", Description: "remove", InputSchema: json.RawMessage(`{"type":"object"}`)})
}

func (k *evKernel) Dispatch(ctx context.Context, rec kernel.Recorder, c Call) error {
	reject := func(code, msg string) error {
		_, err := rec.Record(ctx, event.ToolRejected, "kernel", map[string]any{"call_id": c.ID, "tool": c.Name, "code": code, "message": msg}, "")
		return err
	}
	d, err := k.hooks.Fire(ctx, rec, hooks.Input{Event: hooks.PreToolUse, ToolName: c.Name, ToolInput: c.Args})
	if err != nil {
		return err
	}
	if d.Decision == hooks.Deny {
		return reject(string(kernel.CodeGateDenied), "PreToolUse hook: "+d.Reason)
	}
	invoke := func(result map[string]any, errObj map[string]any) error {
		inv, err := rec.Record(ctx, event.ToolInvoke, "worker", map[string]any{"call_id": c.ID, "tool": c.Name, "args": json.RawMessage(c.Args)}, "")
		if err != nil {
			return err
		}
		p := map[string]any{"call_id": c.ID, "tool": c.Name, "ok": errObj == nil}
		if errObj != nil {
			p["error"] = errObj
		} else {
			p["result"] = result
		}
		_, err = rec.Record(ctx, event.ToolResult, "kernel", p, inv)
		return err
	}
	switch c.Name {
	case "repo.write":
		var a struct{ Path string }
		if json.Unmarshal(c.Args, &a) != nil || a.Path == "" {
			return reject(string(kernel.CodeInvalidArguments), "missing_required: path")
		}
		return invoke(map[string]any{"path": a.Path, "hash": strings.Repeat("a", 64)}, nil)
	case "test.run":
		k.mu.Lock()
		if len(k.tests) == 0 {
			k.mu.Unlock()
			return fmt.Errorf("test.run called more often than the test scripted")
		}
		o := k.tests[0]
		k.tests = k.tests[1:]
		k.mu.Unlock()
		switch {
		case o.reject:
			return reject(o.code, o.msg)
		case o.code != "":
			return invoke(nil, map[string]any{"code": o.code, "message": o.msg})
		}
		return invoke(map[string]any{"command": "go test ./...", "exit_code": o.exit, "stdout": "", "stderr": o.stderr, "duration_ms": 5, "truncated": false, "passed": o.exit == 0}, nil)
	}
	return k.fakeKernel.Dispatch(ctx, rec, c)
}

func evFixture(t *testing.T, script string, tests ...testOutcome) *fixture {
	t.Helper()
	f := newFixture(t, script, nil)
	f.eng.Tools = &evKernel{fakeKernel: f.kernel, hooks: f.eng.Hooks, tests: tests}
	return f
}

// workerScript is a session script whose worker turns are given (YAML
// flow items) and whose reviewer passes every round.
func workerScript(worker ...string) string {
	return `
roles:
  lead: [{text: '` + leadOK + `'}]
  planner: [{text: '` + planOK + `'}]
  worker: [` + strings.Join(worker, ", ") + `]
  reviewer: [{text: '` + reviewPass + `'}, {text: '` + reviewPass + `'}]
`
}

func calls(id, name, args string) string {
	return `{tool_calls: [{id: ` + id + `, name: ` + name + `, args: ` + args + `}]}`
}

func report(output string, claimed ...string) string {
	b, _ := json.Marshal(map[string]any{"output": output, "steps_completed": []string{"s1"}, "tool_calls_made": append([]string{}, claimed...), "schema_version": "v1"})
	return `{text: '` + string(b) + `'}`
}

// transitions is the run's path through the states.
func transitions(evs []event.Event) string {
	var p []string
	for _, e := range evs {
		if e.Type == event.AgentTransition {
			p = append(p, event.FieldString(e.Payload, "to"))
		}
	}
	return strings.Join(p, ">")
}

func start(t *testing.T, f *fixture, sid, prompt string) Outcome {
	t.Helper()
	out, err := f.mgr.Start(context.Background(), f.eng, StartRequest{SessionID: sid, Prompt: prompt})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUnsupportedClaimIsReworkedOnceThenFails: a Worker whose only tool
// call was rejected (bad arguments, or a PreToolUse hook's deny) and that
// claims it anyway gets the discrepancy back once, then the run fails with
// EVIDENCE_MISMATCH quoting the claim; the Reviewer never sees the report.
func TestUnsupportedClaimIsReworkedOnceThenFails(t *testing.T) {
	for _, c := range []struct{ name, call, claim, why string }{
		{"bad arguments", calls("w1", "repo.write", `{content: x}`), "repo.write:w1", "INVALID_ARGUMENTS"},
		{"hook denial", calls("r1", "rm", `{path: a.txt}`), "rm:r1", "GATE_DENIED"},
		{"call id only", calls("w1", "repo.write", `{content: x}`), "w1", "INVALID_ARGUMENTS"},
		{"never called", "", "repo.write:w9", "no call w9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var worker []string
			if c.call != "" {
				worker = append(worker, c.call)
			}
			worker = append(worker, report("wrote a.txt", c.claim), report("wrote a.txt, really", c.claim))
			f := evFixture(t, workerScript(worker...))
			sid := "claim-" + strings.ReplaceAll(c.name, " ", "-")
			out := start(t, f, sid, "write a.txt")
			if out.Status != "failed" || out.Terminal.ErrorClass != ClassProviderError || !strings.HasPrefix(out.Terminal.Reason, CodeEvidenceMismatch) ||
				!strings.Contains(out.Terminal.Reason, fmt.Sprintf("%q", c.claim)) || !strings.Contains(out.Terminal.Reason, c.why) || out.Terminal.NextAction == "" {
				t.Fatalf("outcome %s %+v", out.Status, out.Terminal)
			}
			evs := f.events(t, sid)
			verify(t, evs)
			if got := transitions(evs); got != "LEAD>PLAN>WORK>REWORK>WORK" {
				t.Errorf("transitions %s, want one evidence rework and no review", got)
			}
			if n := len(requests(evs, "reviewer")); n != 0 {
				t.Errorf("the reviewer was asked %d times about an unsupported report", n)
			}
			w := requests(evs, "worker")
			if last := w[len(w)-1]; !bytes.Contains(last, []byte("agentos checked your worker_report_v1")) || !bytes.Contains(last, []byte(c.claim)) {
				t.Errorf("the rework round does not quote the discrepancy: %s", last)
			}
			checks := 0
			for _, e := range evs {
				if e.Type == event.ArtifactEmitted && event.FieldString(e.Payload, "kind") == evidenceKind {
					checks++
				}
			}
			if checks != 2 {
				t.Errorf("%d evidence checks recorded, want 2", checks)
			}
		})
	}
}

// TestTestsFailThenClaimPass: test.run exits 1 and the Worker says the
// tests pass: reworked once with the exit code quoted; a Worker that runs
// the tests again and makes them pass completes, and the Reviewer's input
// carries agentos's evidence; one that repeats the claim fails.
func TestTestsFailThenClaimPass(t *testing.T) {
	write := calls("w1", "repo.write", `{path: a.go}`)
	t.Run("repeats the claim", func(t *testing.T) {
		f := evFixture(t, workerScript(write, calls("t1", "test.run", `{}`),
			report("fixed the bug; all tests pass", "repo.write:w1", "test.run:t1"),
			report("fixed the bug; all tests pass", "repo.write:w1", "test.run:t1")),
			testOutcome{exit: 1, stderr: "--- FAIL: TestX"})
		out := start(t, f, "tests-fail", "fix the bug")
		if out.Status != "failed" || !strings.HasPrefix(out.Terminal.Reason, CodeEvidenceMismatch) || !strings.Contains(out.Terminal.Reason, "all tests pass") || !strings.Contains(out.Terminal.Reason, "exited 1") {
			t.Fatalf("outcome %s %+v", out.Status, out.Terminal)
		}
		evs := f.events(t, "tests-fail")
		verify(t, evs)
		if got := transitions(evs); got != "LEAD>PLAN>WORK>REWORK>WORK" {
			t.Errorf("transitions %s", got)
		}
	})
	t.Run("runs them again", func(t *testing.T) {
		f := evFixture(t, workerScript(write, calls("t1", "test.run", `{}`),
			report("fixed the bug; all tests pass", "repo.write:w1", "test.run:t1"),
			calls("t2", "test.run", `{}`),
			report("fixed the bug; the tests pass now", "repo.write:w1", "test.run:t2")),
			testOutcome{exit: 1}, testOutcome{exit: 0})
		out := start(t, f, "tests-fixed", "fix the bug")
		if out.Status != "completed" {
			t.Fatalf("outcome %s %+v", out.Status, out.Terminal)
		}
		evs := f.events(t, "tests-fixed")
		verify(t, evs)
		rv := requests(evs, "reviewer")
		if len(rv) != 1 || !bytes.Contains(rv[0], []byte("produced by agentos")) || !bytes.Contains(rv[0], []byte(`\"exit_code\":1`)) || !bytes.Contains(rv[0], []byte(`\"changed_files\":[\"a.go\"]`)) {
			t.Fatalf("the reviewer's input lacks agentos's evidence: %s", rv)
		}
	})
	t.Run("changed files, failing tests, no claim", func(t *testing.T) {
		f := evFixture(t, workerScript(write, calls("t1", "test.run", `{}`),
			report("changed a.go", "repo.write:w1", "test.run:t1"),
			report("changed a.go", "repo.write:w1", "test.run:t1")),
			testOutcome{exit: 1})
		out := start(t, f, "tests-red", "fix the bug")
		if out.Status != "failed" || !strings.Contains(out.Terminal.Reason, "the run changed a.go, but no test.run passed after the last change") {
			t.Fatalf("outcome %s %+v", out.Status, out.Terminal)
		}
		verify(t, f.events(t, "tests-red"))
	})
	t.Run("a completed plan step about tests", func(t *testing.T) {
		s := strings.Replace(workerScript(write, report("changed a.go", "repo.write:w1"), report("changed a.go", "repo.write:w1")),
			planOK, `{"steps":[{"id":"s1","description":"change a.go and run the tests"}],"risks":[],"needs_advisor":false,"schema_version":"v1"}`, 1)
		f := evFixture(t, s)
		out := start(t, f, "tests-step", "fix the bug")
		if out.Status != "failed" || !strings.Contains(out.Terminal.Reason, "steps_completed includes plan step s1") || !strings.Contains(out.Terminal.Reason, "test.run was never called") {
			t.Fatalf("outcome %s %+v", out.Status, out.Terminal)
		}
		verify(t, f.events(t, "tests-step"))
	})
	t.Run("a change after the passing run", func(t *testing.T) {
		f := evFixture(t, workerScript(calls("t1", "test.run", `{}`), write,
			report("tests pass", "test.run:t1", "repo.write:w1"),
			report("tests pass", "test.run:t1", "repo.write:w1")),
			testOutcome{exit: 0})
		out := start(t, f, "tests-stale", "fix the bug")
		if out.Status != "failed" || !strings.Contains(out.Terminal.Reason, "passed before the last change") {
			t.Fatalf("outcome %s %+v", out.Status, out.Terminal)
		}
		verify(t, f.events(t, "tests-stale"))
	})
}

// TestEnvironmentalFailureNeverCompletes: a test.run the environment
// could not run (command not found, not executable, no sandbox, a path the
// sandbox must hide) ends the run failed whatever the Worker and the
// Reviewer say, with the cause and its fix.
func TestEnvironmentalFailureNeverCompletes(t *testing.T) {
	for _, c := range []struct {
		name    string
		outcome testOutcome
		cause   string
		fix     string
	}{
		{"exit 127", testOutcome{exit: 127, stderr: "sh: 1: go: not found"}, "command not found (exit 127)", "AGENTOS_SANDBOX_READONLY"},
		{"command not found", testOutcome{exit: 1, stderr: "make: golangci-lint: command not found"}, "command not found", "install the toolchain"},
		{"exit 126", testOutcome{exit: 126}, "not executable (exit 126)", "chmod +x"},
		{"no sandbox", testOutcome{reject: true, code: string(kernel.CodeSandboxUnavailable), msg: "no sandbox: bwrap is not installed"}, "the sandbox is unavailable", "install bubblewrap"},
		{"sandbox cannot start", testOutcome{code: string(kernel.CodeSandboxUnavailable), msg: "the sandbox could not start the command: setup failed"}, "the sandbox is unavailable", "install bubblewrap"},
		{"must be hidden", testOutcome{code: string(kernel.CodeToolRuntimeError), msg: "cannot prepare the sandbox: sandbox: /repo/.agentos must be hidden from commands"}, "must hide a path", "AGENTOS_DATA"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := evFixture(t, workerScript(calls("w1", "repo.write", `{path: a.go}`), calls("t1", "test.run", `{}`),
				report("changed a.go; could not run the tests", "repo.write:w1", "test.run:t1")), c.outcome)
			sid := "env-" + strings.ReplaceAll(c.name, " ", "-")
			out := start(t, f, sid, "fix the bug")
			if out.Status != "failed" || out.Terminal.ErrorClass != ClassToolRuntimeError || !strings.HasPrefix(out.Terminal.Reason, CodeEnvironment+":") ||
				!strings.Contains(out.Terminal.Reason, c.cause) || !strings.Contains(out.Terminal.NextAction, c.fix) {
				t.Fatalf("outcome %s %+v", out.Status, out.Terminal)
			}
			evs := f.events(t, sid)
			verify(t, evs)
			if n := len(requests(evs, "reviewer")); n != 0 {
				t.Errorf("reviewer asked %d times", n)
			}
		})
	}
	// A passing test run whose output mentions a missing command ran.
	t.Run("output only", func(t *testing.T) {
		f := evFixture(t, workerScript(calls("t1", "test.run", `{}`), report("tests pass", "test.run:t1")),
			testOutcome{exit: 0, stderr: "ok: TestMissingTool prints sh: foo: command not found"})
		if out := start(t, f, "env-output", "run the tests"); out.Status != "completed" {
			t.Fatalf("outcome %s %+v", out.Status, out.Terminal)
		}
	})
	// A Worker that retries within its turns and gets the tests to run is
	// not held to the earlier failure.
	t.Run("retried", func(t *testing.T) {
		f := evFixture(t, workerScript(calls("t1", "test.run", `{}`), calls("t2", "test.run", `{}`), report("tests pass", "test.run:t2")),
			testOutcome{exit: 127}, testOutcome{exit: 0})
		if out := start(t, f, "env-retried", "run the tests"); out.Status != "completed" {
			t.Fatalf("outcome %s %+v", out.Status, out.Terminal)
		}
		verify(t, f.events(t, "env-retried"))
	})
}

// TestCardNumberNeverReachesTheLog: a card number in the prompt, written
// in groups or in one piece, appears in no event; the log holds the
// redacted prompt from session.start on.
func TestCardNumberNeverReachesTheLog(t *testing.T) {
	for _, rewrite := range []bool{false, true} {
		t.Run(fmt.Sprintf("rewriting hook %v", rewrite), func(t *testing.T) { cardNeverLogged(t, rewrite) })
	}
}

func cardNeverLogged(t *testing.T, rewrite bool) {
	f := newFixture(t, script(echoCall, finalReport), nil)
	if rewrite {
		// A repository's prompt hook that runs before the built-in
		// redaction and rewrites the prompt it was given, quoting it.
		must(t, f.eng.Hooks.Register(hooks.UserPromptSubmit, hooks.Func{Name: "rewrite", Prio: 200, Fn: func(_ context.Context, in hooks.Input) (hooks.Decision, error) {
			out, _ := json.Marshal(map[string]string{"prompt": in.Prompt + " (rewritten)"})
			return hooks.Decision{Decision: hooks.Transform, Output: out, Reason: "rewrote " + in.Prompt}, nil
		}}))
	}
	prompt := "refund the order paid with 4111 1111 1111 1111 (also 4111-1111-1111-1111 and 4111111111111111)"
	if out := start(t, f, "card", prompt); out.Status != "completed" {
		t.Fatalf("outcome %s %+v", out.Status, out.Terminal)
	}
	evs := f.events(t, "card")
	verify(t, evs)
	transformed := false
	for _, e := range evs {
		transformed = transformed || (e.Type == event.HookFired && event.FieldString(e.Payload, "handler") == "redact_pii" && event.FieldString(e.Payload, "decision") == "transform")
	}
	if !transformed {
		t.Error("the redaction hook's decision is not in the log")
	}
	for _, e := range evs {
		for _, raw := range []string{"4111 1111 1111 1111", "4111-1111-1111-1111", "4111111111111111", "1111 1111"} {
			if bytes.Contains(e.Line(), []byte(raw)) {
				t.Fatalf("%s (seq %d) holds %q: %s", e.Type, e.Seq, raw, e.Payload)
			}
		}
	}
	for _, typ := range []string{event.SessionStart, event.RunStarted} {
		for _, e := range evs {
			if e.Type == typ && !strings.Contains(event.FieldString(e.Payload, "prompt"), "[REDACTED-CC]") {
				t.Errorf("%s prompt %q", typ, event.FieldString(e.Payload, "prompt"))
			}
		}
	}
	if lead := requests(evs, "lead"); len(lead) != 1 || !bytes.Contains(lead[0], []byte("[REDACTED-CC]")) {
		t.Errorf("lead request %s", lead)
	}
}

// TestClaimForms: the names a report may give a call.
func TestClaimForms(t *testing.T) {
	ev := &evidence{all: []callRecord{
		{CallID: "t1", Tool: "echo", OK: true},
		{CallID: "w1", Tool: "repo.write", Code: "INVALID_ARGUMENTS", Error: "missing path"},
		{CallID: "w2", Tool: "repo.write", OK: true},
	}}
	for claim, ok := range map[string]bool{
		"echo:t1": true, "t1": true, "t1:echo": true, "echo": true, "echo t1": true, "repo.write:w2": true,
		"repo.write src/a.go": true, "echo: said hello": true,
		"repo.write:w1": false, "w1": false, "echo:w2": false, "lint.run": false, "t9": false, "repo.read:r1": false, "": false,
	} {
		if why := ev.unsupported(claim); (why == "") != ok {
			t.Errorf("%q: supported=%v (%s), want %v", claim, why == "", why, ok)
		}
	}
	for text, claims := range map[string]bool{
		"All tests pass.": true, "the tests now pass": true, "test suite is green": true, "Tests are passing": true, "tests: ok": true,
		"tests do not pass": false, "tests fail": false, "I wrote a test": false, "passed the test data through": false,
	} {
		if got := testClaim.MatchString(text); got != claims {
			t.Errorf("%q: claims tests pass = %v, want %v", text, got, claims)
		}
	}
	plan := json.RawMessage(`{"steps":[{"id":"s1","description":"Run the tests to reproduce the failure"},{"id":"s2","description":"Patch auth.go"},{"id":"s3","description":"Run the tests again and confirm they pass"}]}`)
	for steps, claims := range map[string]bool{"s1": false, "s1,s2": false, "s2,s3": true, "s3": true, "": false} {
		if got := testStepClaim(strings.Split(steps, ","), plan) != ""; got != claims {
			t.Errorf("steps %s: claims tests pass = %v, want %v", steps, got, claims)
		}
	}
}

// TestEvidenceReworkSurvivesPauseAndResume: a run paused for an approval
// in its evidence rework round re-executes the check from its log in
// another process (same decision, nothing repeated) and completes.
func TestEvidenceReworkSurvivesPauseAndResume(t *testing.T) {
	s := workerScript(report("hello, world", "echo:t1"), calls("w1", "write", `{path: a.txt}`), echoTurn, report("hello, world", "echo:t1", "write:w1"))
	f1 := evFixture(t, s)
	ctx := context.Background()
	if out := start(t, f1, "ev-pause", "greet"); out.Status != "paused" {
		t.Fatalf("outcome %s %+v", out.Status, out.Terminal)
	}
	f2 := evFixture(t, s)
	f2.store = f1.store
	f2.mgr = NewManager(f1.store)
	must(t, f2.mgr.Resolve(ctx, "ev-pause", "ap-1", "approve", "octocat", ""))
	out, err := f2.mgr.Resume(ctx, f2.eng, "ev-pause", "", "")
	if err != nil || out.Status != "completed" {
		t.Fatalf("after resume: %+v %v", out, err)
	}
	evs := f2.events(t, "ev-pause")
	verify(t, evs)
	if got := transitions(evs); got != "LEAD>PLAN>WORK>REWORK>WORK>REVIEW>DONE" {
		t.Errorf("transitions %s", got)
	}
	if f2.calls.calls.Load() != 3 { // the worker's last two turns and the reviewer
		t.Errorf("the resumed process made %d model calls, want 3", f2.calls.calls.Load())
	}
}

// TestRejectedOnlyHonestReportIsNotCompleted: a Worker whose only call was
// rejected and that honestly claims nothing passes the evidence check and
// the Reviewer, but the run is not reported completed: its log would fail
// strict verify (no tool.invoke, no tool.result).
func TestRejectedOnlyHonestReportIsNotCompleted(t *testing.T) {
	f := evFixture(t, workerScript(calls("w1", "repo.write", `{content: x}`), report("could not write a.txt")))
	out := start(t, f, "rejected-only", "write a.txt")
	if out.Status != "failed" || !strings.HasPrefix(out.Terminal.Reason, CodeAuditIncomplete) || !strings.Contains(out.Terminal.Reason, "tool.invoke") {
		t.Fatalf("outcome %s %+v", out.Status, out.Terminal)
	}
	verify(t, f.events(t, "rejected-only"))
}

package run

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/hooks"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/scripted"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/skills"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
	builtin "github.com/agentos/agentos/skills"
)

// fakeKernel is a small stateful stand-in for the capability kernel that
// records the same events the kernel does: echo executes; "write" needs
// approval; anything else is TOOL_NOT_FOUND. It counts executions so tests
// can prove nothing runs twice.
type fakeKernel struct {
	mu       sync.Mutex
	calls    []Call // every dispatched call
	executed atomic.Int32
	approval atomic.Int32
	started  chan struct{} // the slow tool started
	release  chan struct{} // lets the slow tool end
}

func (k *fakeKernel) Specs(scope []string) []provider.ToolSpec {
	all := []provider.ToolSpec{
		{Name: "echo", Description: "echo text", InputSchema: json.RawMessage(`{"type":"object","required":["text"],"properties":{"text":{"type":"string"}}}`)},
		{Name: "write", Description: "write a file", InputSchema: json.RawMessage(`{"type":"object"}`)},
	}
	if scope == nil {
		return all
	}
	var out []provider.ToolSpec
	for _, s := range all {
		for _, n := range scope {
			if s.Name == n {
				out = append(out, s)
			}
		}
	}
	return out
}

func (k *fakeKernel) Dispatch(ctx context.Context, rec kernel.Recorder, c Call) error {
	k.mu.Lock()
	k.calls = append(k.calls, c)
	k.mu.Unlock()
	switch c.Name {
	case "echo":
		var a struct{ Text *string }
		if json.Unmarshal(c.Args, &a) != nil || a.Text == nil {
			_, err := rec.Record(ctx, event.ToolRejected, "kernel", map[string]any{"call_id": c.ID, "tool": c.Name, "code": "INVALID_ARGUMENTS", "message": "missing_required: text", "diagnostics": []map[string]any{{"class": "missing_required", "param": "text"}}}, "")
			return err
		}
		return k.execute(ctx, rec, c, "")
	case "slow":
		// A long tool call: it ends when the test releases it, or is
		// killed when its context is cancelled (as the kernel kills a
		// command's process tree).
		inv, err := rec.Record(ctx, event.ToolInvoke, "worker", map[string]any{"call_id": c.ID, "tool": c.Name, "args": json.RawMessage(c.Args)}, "")
		if err != nil {
			return err
		}
		k.started <- struct{}{}
		res := map[string]any{"call_id": c.ID, "tool": c.Name, "ok": true, "result": map[string]any{"done": true}}
		select {
		case <-k.release:
			k.executed.Add(1)
		case <-ctx.Done():
			res = map[string]any{"call_id": c.ID, "tool": c.Name, "ok": false, "error": map[string]any{"code": "TIMEOUT", "message": "killed"}}
		}
		_, err = rec.Record(context.WithoutCancel(ctx), event.ToolResult, "kernel", res, inv)
		return err
	case "write":
		id := fmt.Sprintf("ap-%d", k.approval.Add(1))
		_, err := rec.Record(ctx, event.ApprovalRequested, "kernel", map[string]any{"approval_id": id, "tool": c.Name, "call_id": c.ID, "digest": strings.Repeat("0", 64), "args": json.RawMessage(c.Args), "preview": map[string]any{"files": 1}}, "")
		return err
	default:
		_, err := rec.Record(ctx, event.ToolRejected, "kernel", map[string]any{"call_id": c.ID, "tool": c.Name, "code": "TOOL_NOT_FOUND", "message": "no tool " + c.Name, "suggestion": "echo"}, "")
		return err
	}
}

func (k *fakeKernel) execute(ctx context.Context, rec kernel.Recorder, c Call, approvalID string) error {
	p := map[string]any{"call_id": c.ID, "tool": c.Name, "args": json.RawMessage(c.Args)}
	if approvalID != "" {
		p["approval_id"] = approvalID
	}
	inv, err := rec.Record(ctx, event.ToolInvoke, "worker", p, "")
	if err != nil {
		return err
	}
	k.executed.Add(1)
	_, err = rec.Record(ctx, event.ToolResult, "kernel", map[string]any{"call_id": c.ID, "tool": c.Name, "ok": true, "result": json.RawMessage(c.Args)}, inv)
	return err
}

func (k *fakeKernel) ExecuteApproved(ctx context.Context, rec kernel.Recorder, c Call, p Pending, by string) error {
	return k.execute(ctx, rec, c, p.ApprovalID)
}

const (
	leadOK   = `{"intent":"greet the world","constraints":[],"needs_advisor":false,"schema_version":"v1"}`
	planOK   = `{"steps":[{"id":"s1","description":"echo a greeting"}],"risks":[],"needs_advisor":false,"schema_version":"v1"}`
	reportOK = `{"output":"hello, world","steps_completed":["s1"],"tool_calls_made":["echo:t1"],"schema_version":"v1"}`
	// reportNone is an honest report of a worker turn that called no tool.
	reportNone = `{"output":"nothing done yet","steps_completed":[],"tool_calls_made":[],"schema_version":"v1"}`
	reviewPass = `{"verdict":"pass","feedback":"greeting echoed","schema_version":"v1"}`
	reviewFail = `{"verdict":"fail","feedback":"say hello to the moon too","schema_version":"v1"}`
)

type fixture struct {
	store  store.Store
	kernel *fakeKernel
	calls  *countingProvider
	mgr    *Manager
	eng    *Engine
}

type countingProvider struct {
	p     provider.Provider
	calls atomic.Int32
}

func (c *countingProvider) Name() string { return c.p.Name() }
func (c *countingProvider) Complete(ctx context.Context, r provider.CompletionRequest) (provider.CompletionResponse, error) {
	c.calls.Add(1)
	return c.p.Complete(ctx, r)
}

func newFixture(t *testing.T, script string, st store.Store) *fixture {
	t.Helper()
	reg := schemas.MustDefault()
	if st == nil {
		sealer, err := event.NewSealer(reg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		st = store.NewMemory(sealer)
	}
	trackStore(st)
	sc, err := scripted.Parse(strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	sk, problems := skills.Discover(reg, skills.Root{Name: "builtin", FS: builtin.FS})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	hk := hooks.NewRegistry()
	hk.Builtins()
	cp := &countingProvider{p: provider.Checked{P: scripted.New(sc), Reg: reg}}
	prof := provider.DefaultProfile()
	prof.Script = "inline"
	k := &fakeKernel{started: make(chan struct{}, 1), release: make(chan struct{}, 1)}
	return &fixture{store: st, kernel: k, calls: cp, mgr: NewManager(st),
		eng: &Engine{Provider: cp, Tools: k, Hooks: hk, Skills: sk, Schemas: reg, Profile: prof}}
}

func (f *fixture) events(t *testing.T, sid string) []event.Event {
	t.Helper()
	evs, err := f.store.Read(context.Background(), sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func types(evs []event.Event) string {
	var b []string
	for _, e := range evs {
		b = append(b, e.Type)
	}
	return strings.Join(b, " ")
}

func verify(t *testing.T, evs []event.Event) {
	t.Helper()
	rep := replay.VerifyEvents(schemas.MustDefault(), evs)
	if !rep.Valid {
		t.Fatalf("log does not verify: %v\n%s", rep.Problem, types(evs))
	}
	if err := AuditHonest(evs); err != nil {
		t.Fatalf("honest-outcome invariant: %v", err)
	}
}

func script(worker ...string) string {
	return `
roles:
  lead: [{text: '` + leadOK + `'}]
  planner: [{text: '` + planOK + `'}]
  worker:
` + strings.Join(worker, "\n") + `
  reviewer: [{text: '` + reviewPass + `'}]
`
}

const echoCall = `    - tool_calls: [{id: t1, name: echo, args: {text: "hello, world"}}]`

// echoTurn is echoCall in YAML flow style: a successful session holds at
// least one tool call (audit completeness, checked by verify).
const echoTurn = `{tool_calls: [{id: t1, name: echo, args: {text: "hello, world"}}]}`
const finalReport = `    - text: '` + reportOK + `'`

func TestGreetCompletesInSeedOrder(t *testing.T) {
	f := newFixture(t, script(echoCall, finalReport), nil)
	out, err := f.mgr.Start(context.Background(), f.eng, StartRequest{SessionID: "s1", Prompt: "greet the world"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != "completed" || out.Output != "hello, world" || out.Terminal.Status != StatusCompleted {
		t.Fatalf("outcome %+v", out)
	}
	evs := f.events(t, "s1")
	verify(t, evs)
	got := types(evs)
	want := "session.start run.started hook.fired skill.invoke agent.transition llm.request llm.response agent.transition llm.request llm.response artifact.emitted agent.transition llm.request llm.response tool.invoke tool.result llm.request llm.response worker.report artifact.emitted agent.transition llm.request llm.response artifact.emitted hook.fired agent.transition skill.complete output.message run.completed turn.terminal session.close"
	if got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	snap, _ := replay.Replay(evs)
	if !snap.Closed || snap.Output != "hello, world" || snap.State != "DONE" {
		t.Errorf("snapshot %+v", snap)
	}
}

func TestPauseResumeInAnotherProcess(t *testing.T) {
	worker := []string{`    - tool_calls: [{id: w1, name: write, args: {path: a.txt}}]`, echoCall, finalReport}
	f1 := newFixture(t, script(worker...), nil)
	ctx := context.Background()
	out, err := f1.mgr.Start(ctx, f1.eng, StartRequest{SessionID: "s2", Prompt: "greet the world"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != "paused" || len(out.Pending) != 1 || out.Pending[0].ApprovalID != "ap-1" {
		t.Fatalf("outcome %+v", out)
	}
	verify(t, f1.events(t, "s2"))
	callsBefore := f1.calls.calls.Load()

	// A second start of the same session is refused while it is paused.
	if _, err := f1.mgr.Start(ctx, f1.eng, StartRequest{SessionID: "s2", Prompt: "again"}); !errors.Is(err, ErrPaused) {
		t.Fatalf("start while paused: %v", err)
	}
	// "Another process": a new manager, engine, provider and kernel over
	// the same store. Nothing is carried over but the log.
	f2 := newFixture(t, script(worker...), f1.store)
	if err := f2.mgr.Resolve(ctx, "s2", "ap-1", "approve", "octocat", ""); err != nil {
		t.Fatal(err)
	}
	if err := f2.mgr.Resolve(ctx, "s2", "ap-1", "approve", "octocat", ""); !errors.Is(err, ErrResolved) {
		t.Fatalf("double resolve: %v", err)
	}
	if err := f2.mgr.Resolve(ctx, "s2", "ap-9", "approve", "octocat", ""); !errors.Is(err, ErrUnknownApproval) {
		t.Fatalf("unknown approval: %v", err)
	}
	out, err = f2.mgr.Resume(ctx, f2.eng, "s2", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != "completed" {
		t.Fatalf("after resume: %+v", out)
	}
	evs := f2.events(t, "s2")
	verify(t, evs)
	// The resumed process made only the calls that were not recorded: the
	// worker's two remaining turns and the reviewer.
	if got := f2.calls.calls.Load(); got != 3 {
		t.Errorf("resumed process made %d model calls, want 3 (before the pause: %d)", got, callsBefore)
	}
	if f2.kernel.executed.Load() != 2 || f1.kernel.executed.Load() != 0 {
		t.Errorf("executions: first process %d, second %d", f1.kernel.executed.Load(), f2.kernel.executed.Load())
	}
	var invokes []string
	for _, e := range evs {
		if e.Type == event.ToolInvoke {
			invokes = append(invokes, event.FieldString(e.Payload, "tool")+"/"+event.FieldString(e.Payload, "approval_id"))
		}
	}
	if strings.Join(invokes, ",") != "write/ap-1,echo/" {
		t.Errorf("invokes %v", invokes)
	}
}

func TestDeniedApprovalIsFeedback(t *testing.T) {
	worker := []string{`    - tool_calls: [{id: w1, name: write, args: {path: a.txt}}]`, echoCall, finalReport}
	f := newFixture(t, script(worker...), nil)
	ctx := context.Background()
	if _, err := f.mgr.Start(ctx, f.eng, StartRequest{SessionID: "s3", Prompt: "greet"}); err != nil {
		t.Fatal(err)
	}
	if err := f.mgr.Resolve(ctx, "s3", "ap-1", "deny", "octocat", "do not touch a.txt"); err != nil {
		t.Fatal(err)
	}
	out, err := f.mgr.Resume(ctx, f.eng, "s3", "", "")
	if err != nil || out.Status != "completed" {
		t.Fatalf("%+v %v", out, err)
	}
	evs := f.events(t, "s3")
	verify(t, evs)
	// The worker's next request carries the denial reason as the tool result.
	reqs := requests(evs, "worker")
	lastWorkerReq := reqs[len(reqs)-1]
	if !bytes.Contains(lastWorkerReq, []byte("do not touch a.txt")) || !bytes.Contains(lastWorkerReq, []byte("APPROVAL_DENIED")) {
		t.Errorf("denial not fed back: %s", lastWorkerReq)
	}
	if f.kernel.executed.Load() != 1 { // the echo after the denial
		t.Error("a denied action executed")
	}
}

func TestReworkThenPass(t *testing.T) {
	s := `
roles:
  lead: [{text: '` + leadOK + `'}]
  planner: [{text: '` + planOK + `'}]
  worker: [{text: '` + reportNone + `'}, ` + echoTurn + `, {text: '` + reportOK + `'}]
  reviewer: [{text: '` + reviewFail + `'}, {text: '` + reviewPass + `'}]
`
	f := newFixture(t, s, nil)
	out, err := f.mgr.Start(context.Background(), f.eng, StartRequest{SessionID: "s4", Prompt: "greet"})
	if err != nil || out.Status != "completed" {
		t.Fatalf("%+v %v", out, err)
	}
	evs := f.events(t, "s4")
	verify(t, evs)
	var path []string
	for _, e := range evs {
		if e.Type == event.AgentTransition {
			path = append(path, event.FieldString(e.Payload, "to"))
		}
	}
	if got := strings.Join(path, ">"); got != "LEAD>PLAN>WORK>REVIEW>REWORK>WORK>REVIEW>DONE" {
		t.Errorf("transitions %s", got)
	}
	var secondWorker json.RawMessage
	if reqs := requests(evs, "worker"); len(reqs) >= 2 {
		secondWorker = reqs[1]
	}
	if !bytes.Contains(secondWorker, []byte("say hello to the moon too")) {
		t.Error("review feedback not given to the worker in the rework round")
	}
}

func TestFailClosedRows(t *testing.T) {
	cases := []struct {
		name, script, status, class, code string
		mutate                            func(*Engine)
	}{
		{"reviewer fail beyond max_rework escalates", `
roles:
  lead: [{text: '` + leadOK + `'}]
  planner: [{text: '` + planOK + `'}]
  worker: [{text: '` + reportNone + `'}, {text: '` + reportNone + `'}, {text: '` + reportNone + `'}]
  reviewer: [{text: '` + reviewFail + `'}, {text: '` + reviewFail + `'}, {text: '` + reviewFail + `'}]
`, "denied", "policy_denied", "REVIEW_FAILED", nil},
		{"invalid role JSON twice", `
roles:
  lead: [{text: 'sure! here is the plan'}, {text: '{"intent":""}'}]
`, "failed", "provider_error", "MALFORMED_AGENT_MESSAGE", nil},
		{"provider retry exhausted", `
roles:
  lead: [{error: {message: "503 after 4 attempts", status: 503}}]
`, "failed", "provider_error", "PROVIDER_ERROR", nil},
		{"provider auth", `
roles:
  lead: [{error: {message: "bad key", status: 401}}]
`, "failed", "auth_error", "PROVIDER_ERROR", nil},
		{"max turns", script(echoCall, echoCall, finalReport), "failed", "policy_denied", "BUDGET_EXCEEDED", func(e *Engine) { e.Profile.Limits.MaxTurns = 3 }},
		{"guard blocks twice", script(`    - tool_calls: [{id: b1, name: echo, args: {}}]`, `    - tool_calls: [{id: b2, name: ech0, args: {text: x}}]`), "failed", "invalid_input", "TOOL_NOT_FOUND", nil},
		{"prompt hook deny", script(finalReport), "denied", "policy_denied", "PROMPT_DENIED", func(e *Engine) {
			_ = e.Hooks.Register(hooks.UserPromptSubmit, hooks.Func{Name: "no", Fn: func(context.Context, hooks.Input) (hooks.Decision, error) {
				return hooks.Decision{Decision: hooks.Deny, Reason: "not today"}, nil
			}})
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.script, nil)
			if c.mutate != nil {
				c.mutate(f.eng)
			}
			sid := fmt.Sprintf("fc-%d", i)
			out, err := f.mgr.Start(context.Background(), f.eng, StartRequest{SessionID: sid, Prompt: "greet"})
			if err != nil {
				t.Fatal(err)
			}
			if string(out.Status) != c.status || string(out.Terminal.ErrorClass) != c.class || !strings.HasPrefix(out.Terminal.Reason, c.code) {
				t.Fatalf("got %s/%s %q, want %s/%s %s", out.Status, out.Terminal.ErrorClass, out.Terminal.Reason, c.status, c.class, c.code)
			}
			evs := f.events(t, sid)
			verify(t, evs)
			terminals := 0
			for _, e := range evs {
				if e.Type == event.TurnTerminal {
					terminals++
				}
			}
			if terminals != 1 {
				t.Errorf("%d terminal reports", terminals)
			}
		})
	}
}

func TestGuardRepairRoundSucceeds(t *testing.T) {
	f := newFixture(t, script(`    - tool_calls: [{id: b1, name: echo, args: {}}]`, echoCall, finalReport), nil)
	out, err := f.mgr.Start(context.Background(), f.eng, StartRequest{SessionID: "s5", Prompt: "greet"})
	if err != nil || out.Status != "completed" {
		t.Fatalf("%+v %v", out, err)
	}
	evs := f.events(t, "s5")
	verify(t, evs)
	if !strings.Contains(types(evs), "tool.rejected") || f.kernel.executed.Load() != 1 {
		t.Errorf("blocked call must be rejected then repaired: %s", types(evs))
	}
}

// TestReexecutionDetectsDivergence re-executes a recorded run against its
// log with code that decides differently.
// TestGuardRepairSwitch covers both settings of the guard's repair switch
// with the same blocked call: on (the default), the model's second try
// runs; off in the profile or in the policy, the first blocked call ends
// the run. session.start records the setting, and a resumed run keeps the
// recorded one whatever the resuming process's profile says.
func TestGuardRepairSwitch(t *testing.T) {
	blocked := `    - tool_calls: [{id: b1, name: echo, args: {}}]`
	recorded := func(t *testing.T, evs []event.Event) bool {
		t.Helper()
		if evs[0].Type != event.SessionStart {
			t.Fatalf("first event %s", evs[0].Type)
		}
		g := event.Field(evs[0].Payload, "guard")
		if g == nil {
			t.Fatalf("session.start does not record guard repair: %s", evs[0].Payload)
		}
		return event.FieldBool(g, "repair")
	}
	off := false
	for _, c := range []struct {
		name       string
		profileOff bool
		policyOff  bool
		want       string
	}{
		{"on", false, false, "completed"},
		{"profile off", true, false, "failed"},
		{"policy off", false, true, "failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, script(blocked, echoCall, finalReport), nil)
			if c.profileOff {
				f.eng.Profile.GuardRepair = &off
			}
			f.eng.PolicyNoRepair = c.policyOff
			out, err := f.mgr.Start(context.Background(), f.eng, StartRequest{SessionID: "g", Prompt: "greet"})
			if err != nil || string(out.Status) != c.want {
				t.Fatalf("%+v %v, want %s", out, err, c.want)
			}
			evs := f.events(t, "g")
			verify(t, evs)
			if got, want := recorded(t, evs), c.want == "completed"; got != want {
				t.Errorf("session.start guard.repair = %v, want %v", got, want)
			}
			if c.want == "failed" {
				if !strings.Contains(out.Terminal.Reason, "INVALID_ARGUMENTS") || !strings.Contains(out.Terminal.Reason, "guard repair is off") || f.kernel.executed.Load() != 0 {
					t.Errorf("terminal %+v executed %d", out.Terminal, f.kernel.executed.Load())
				}
			} else if f.kernel.executed.Load() != 1 {
				t.Errorf("repaired call not executed")
			}
		})
	}
	t.Run("resume keeps the recorded setting", func(t *testing.T) {
		worker := []string{`    - tool_calls: [{id: w1, name: write, args: {path: a.txt}}]`, blocked, echoCall, finalReport}
		f1 := newFixture(t, script(worker...), nil)
		f1.eng.Profile.GuardRepair = &off
		ctx := context.Background()
		if out, err := f1.mgr.Start(ctx, f1.eng, StartRequest{SessionID: "r", Prompt: "greet"}); err != nil || out.Status != "paused" {
			t.Fatalf("%+v %v", out, err)
		}
		must(t, f1.mgr.Resolve(ctx, "r", "ap-1", "approve", "octocat", ""))
		f2 := newFixture(t, script(worker...), f1.store) // repair on in this process
		out, err := f2.mgr.Resume(ctx, f2.eng, "r", "", "")
		if err != nil || out.Status != "failed" || !strings.Contains(out.Terminal.Reason, "guard repair is off") {
			t.Fatalf("resumed run did not keep repair off: %+v %v", out, err)
		}
		verify(t, f2.events(t, "r"))
	})
}

func TestReexecutionDetectsDivergence(t *testing.T) {
	f := newFixture(t, script(echoCall, finalReport), nil)
	ctx := context.Background()
	if _, err := f.mgr.Start(ctx, f.eng, StartRequest{SessionID: "s6", Prompt: "greet the world"}); err != nil {
		t.Fatal(err)
	}
	evs := f.events(t, "s6")
	history, prompt, _, _ := runHistory(evs, evs[1].RunID)
	same := newFixture(t, script(echoCall, finalReport), nil)
	if _, err := Reexecute(ctx, same.eng, prompt, history); err != nil {
		t.Fatalf("same code diverged: %v", err)
	}
	if same.calls.calls.Load() != 0 || same.kernel.executed.Load() != 0 {
		t.Fatal("re-execution called the provider or a tool")
	}
	// Code that selects no skill decides differently from the log, which
	// recorded skill.invoke.
	changed := newFixture(t, script(echoCall, finalReport), nil)
	changed.eng.Skills = nil
	_, err := Reexecute(ctx, changed.eng, prompt, history)
	var nd *NonDeterminismError
	if !errors.As(err, &nd) {
		t.Fatalf("got %v, want NonDeterminismError", err)
	}
}

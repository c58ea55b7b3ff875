package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/agentos/agentos/kernel/sandbox/sandboxtest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/policy"
	"github.com/agentos/agentos/kernel/tools"
	"github.com/agentos/agentos/kernel/workspace"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/journal"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
)

type env struct {
	dir string
	ws  *workspace.Root
	k   *kernel.Kernel
	j   *journal.Journal
	st  store.Store
}

func setup(t testing.TB, pol string, hooks kernel.Hooks) *env {
	t.Helper()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "auth.go"), []byte("package auth\n\nfunc Check() bool { return false }\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/x\n\ngo 1.22\n"), 0o644))
	p := policy.Default()
	if pol != "" {
		var err error
		if p, err = policy.Parse("test", strings.NewReader(pol)); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := workspace.Open(dir, workspace.Options{DenyPatterns: p.Workspace.DenyPatterns, Sandbox: sandboxtest.Sandbox(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	k := kernel.New(p, ws, hooks)
	timeouts := map[string]time.Duration{}
	for _, name := range []string{"process.run", "test.run", "lint.run"} {
		timeouts[name] = p.Timeout(name)
	}
	for _, d := range tools.Defs(ws, tools.Options{AllowShell: p.Execution.AllowShell, Timeouts: timeouts}) {
		must(t, k.Register(d))
	}
	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := store.NewMemory(sealer)
	j, err := journal.Open(context.Background(), st, "k")
	if err != nil {
		t.Fatal(err)
	}
	return &env{dir: dir, ws: ws, k: k, j: j, st: st}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (e *env) call(name, args string, scope ...string) (kernel.Outcome, error) {
	c := kernel.Call{ID: "c1", Name: name, Args: json.RawMessage(args), Caller: "worker"}
	if scope != nil {
		c.Scope = scope
	}
	return e.k.Dispatch(context.Background(), e.j, c)
}

func (e *env) types(t *testing.T) []string {
	evs, err := e.st.Read(context.Background(), "k", 1)
	must(t, err)
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

func code(err error) kernel.Code {
	var ke *kernel.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return ""
}

const openPolicy = `
capabilities:
  echo: {approval: never}
  repo.read: {approval: never}
  repo.search: {approval: never}
  repo.patch: {approval: never}
  repo.write: {approval: never}
  process.run: {approval: never}
  test.run: {approval: never}
  lint.run: {approval: never}
execution:
  timeouts:
    process.run: 300ms
risk:
  highRiskCommands: [rm, curl]
  highRiskAction: deny
limits:
  maxStdout: 200
  maxDiffSize: 5000
`

// TestFailClosedRows: each way the kernel fails closed (TOOL_NOT_FOUND,
// TOOL_NOT_ALLOWED, INVALID_ARGUMENTS, JAIL_VIOLATION, POLICY_DENIED,
// WRITE_CONFLICT, TIMEOUT, ...), each recorded as an event.
func TestFailClosedRows(t *testing.T) {
	authHash := tools.Sha256Hex([]byte("package auth\n\nfunc Check() bool { return false }\n"))
	cases := []struct {
		name, tool, args string
		scope            []string
		want             kernel.Code
		event            string
	}{
		{"unknown tool", "repo.raed", `{"path":"auth.go"}`, nil, kernel.CodeToolNotFound, "tool.rejected"},
		{"outside skill scope", "repo.read", `{"path":"auth.go"}`, []string{"echo"}, kernel.CodeToolNotAllowed, "tool.rejected"},
		{"bad arguments", "repo.read", `{"file":"auth.go"}`, nil, kernel.CodeInvalidArguments, "tool.rejected"},
		{"shell not allowed", "process.run", `{"command":"sh -c 'echo hi'"}`, nil, kernel.CodePolicyDenied, "tool.rejected"},
		{"high-risk command denied", "process.run", `{"command":"curl http://127.0.0.1:1"}`, nil, kernel.CodePolicyDenied, "tool.rejected"},
		{"jail escape", "repo.read", `{"path":"sub/../../etc/passwd"}`, nil, kernel.CodeInvalidArguments, "tool.rejected"},
		{"git internals", "repo.read", `{"path":".git/config"}`, nil, kernel.CodeJailViolation, "tool.rejected"},
		// A stale hash is refused while assessing, before an approval is
		// asked for a write that cannot happen.
		{"stale file hash", "repo.write", `{"path":"auth.go","content":"x","expected_hash":"` + strings.Repeat("0", 64) + `"}`, nil, kernel.CodeWriteConflict, "tool.rejected"},
		{"timeout", "process.run", `{"command":"sleep 5"}`, nil, kernel.CodeTimeout, "tool.result"},
		// The patch is applied in memory while assessing it, so a context
		// mismatch is refused before tool.invoke.
		{"patch context mismatch", "repo.patch", `{"unifiedDiff":"--- a/auth.go\n+++ b/auth.go\n@@ -3 +3 @@\n-func Check() bool { return true }\n+func Check() bool { return 1 == 1 }\n"}`, nil, kernel.CodeToolRuntimeError, "tool.rejected"},
		{"diff too large", "repo.write", `{"path":"big.txt","content":"` + strings.Repeat("x\\n", 3000) + `","expected_hash":""}`, nil, kernel.CodePolicyDenied, "tool.rejected"},
	}
	_ = authHash
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t, openPolicy, nil)
			_, err := e.call(c.tool, c.args, c.scope...)
			if got := code(err); got != c.want {
				t.Fatalf("code %q (%v), want %q", got, err, c.want)
			}
			types := e.types(t)
			if len(types) == 0 || types[len(types)-1] != c.event {
				t.Fatalf("events %v, want the last to be %s", types, c.event)
			}
			if c.event == "tool.rejected" && contains(types, "tool.invoke") {
				t.Fatal("a rejected call was invoked")
			}
			b, _ := os.ReadFile(filepath.Join(e.dir, "auth.go"))
			if !strings.Contains(string(b), "return false") {
				t.Fatal("auth.go changed")
			}
		})
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func TestProtectedWrite(t *testing.T) {
	e := setup(t, openPolicy, nil)
	orig := "package auth\n\nfunc Check() bool { return false }\n"
	_, err := e.call("repo.write", `{"path":"auth.go","content":"package auth\n","expected_hash":"`+tools.Sha256Hex([]byte(orig))+`"}`)
	must(t, err)
	if _, err := e.call("repo.write", `{"path":"auth.go","content":"again","expected_hash":"`+tools.Sha256Hex([]byte(orig))+`"}`); code(err) != kernel.CodeWriteConflict {
		t.Fatalf("second write with the old hash: %v", err)
	}
	if _, err := e.call("repo.write", `{"path":"new.txt","content":"n","expected_hash":""}`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.call("repo.write", `{"path":"new.txt","content":"n2","expected_hash":""}`); code(err) != kernel.CodeWriteConflict {
		t.Fatalf("creating an existing file: %v", err)
	}
}

type recordingHooks struct {
	mu    sync.Mutex
	order *[]string
	pre   kernel.HookDecision
	err   error
}

func (h *recordingHooks) PreToolUse(ctx context.Context, rec kernel.Recorder, tool string, args json.RawMessage) (kernel.HookDecision, error) {
	h.mu.Lock()
	*h.order = append(*h.order, "PreToolUse")
	h.mu.Unlock()
	return h.pre, h.err
}

func (h *recordingHooks) PostToolUse(ctx context.Context, rec kernel.Recorder, tool string, args, result json.RawMessage) (kernel.HookDecision, error) {
	h.mu.Lock()
	*h.order = append(*h.order, "PostToolUse")
	h.mu.Unlock()
	return kernel.HookDecision{Decision: kernel.HookAllow}, nil
}

// orderRecorder wraps the journal to interleave event types with hook calls.
type orderRecorder struct {
	j     *journal.Journal
	order *[]string
}

func (r orderRecorder) Record(ctx context.Context, typ, actor string, payload any, parent string) (string, error) {
	*r.order = append(*r.order, typ)
	return r.j.Record(ctx, typ, actor, payload, parent)
}

func TestDispatchOrder(t *testing.T) {
	var order []string
	h := &recordingHooks{order: &order, pre: kernel.HookDecision{Decision: kernel.HookAllow}}
	e := setup(t, openPolicy, h)
	out, err := e.k.Dispatch(context.Background(), orderRecorder{e.j, &order}, kernel.Call{ID: "c", Name: "echo", Args: json.RawMessage(`{"text":"hi"}`)})
	must(t, err)
	if string(out.Result) != `{"text":"hi"}` {
		t.Fatalf("result %s", out.Result)
	}
	if got := strings.Join(order, ","); got != "PreToolUse,tool.invoke,tool.result,PostToolUse" {
		t.Fatalf("order %s", got)
	}
	// Hook deny and hook error both deny before anything runs.
	for _, hk := range []*recordingHooks{
		{order: &order, pre: kernel.HookDecision{Decision: kernel.HookDeny, Reason: "no"}},
		{order: &order, err: errors.New("hook crashed")},
	} {
		order = nil
		e := setup(t, openPolicy, hk)
		_, err := e.k.Dispatch(context.Background(), orderRecorder{e.j, &order}, kernel.Call{ID: "c", Name: "echo", Args: json.RawMessage(`{"text":"hi"}`)})
		if code(err) != kernel.CodeGateDenied || contains(order, "tool.invoke") {
			t.Fatalf("%v %v", err, order)
		}
	}
	// A transform is re-validated.
	order = nil
	hk := &recordingHooks{order: &order, pre: kernel.HookDecision{Decision: kernel.HookTransform, Output: json.RawMessage(`{"text":5}`)}}
	e = setup(t, openPolicy, hk)
	if _, err := e.k.Dispatch(context.Background(), e.j, kernel.Call{ID: "c", Name: "echo", Args: json.RawMessage(`{"text":"hi"}`)}); code(err) != kernel.CodeInvalidArguments {
		t.Fatalf("transformed args not re-validated: %v", err)
	}
}

func TestApprovalLifecycle(t *testing.T) {
	e := setup(t, "", nil) // built-in defaults: repo.patch always needs approval
	ctx := context.Background()
	diff := `{"unifiedDiff":"--- a/auth.go\n+++ b/auth.go\n@@ -3 +3 @@\n-func Check() bool { return false }\n+func Check() bool { return true }\n"}`
	out, err := e.call("repo.patch", diff)
	must(t, err)
	p := out.Pending
	if p == nil || p.Preview.LinesAdded != 1 || p.Preview.Hunks != 1 || !strings.Contains(p.Preview.Diff, "return true") || p.Revision.Tree == "" {
		t.Fatalf("pending %+v", p)
	}
	b, _ := os.ReadFile(filepath.Join(e.dir, "auth.go"))
	if strings.Contains(string(b), "return true") {
		t.Fatal("the patch ran before approval")
	}
	// Pending actions are reconstructable from the log.
	evs, _ := e.st.Read(ctx, "k", 1)
	snap, _ := replay.Replay(evs)
	if len(snap.PendingApprovals) != 1 || snap.PendingApprovals[0].ID != p.ApprovalID || snap.PendingApprovals[0].Digest != p.Digest {
		t.Fatalf("snapshot pending %+v", snap.PendingApprovals)
	}
	// Different arguments do not match the approved digest.
	bad := kernel.Call{ID: "c1", Name: "repo.patch", Args: json.RawMessage(strings.Replace(diff, "return true", "return 1 == 1", 1))}
	if _, err := e.k.ExecuteApproved(ctx, e.j, bad, p.ApprovalID, p.Digest, p.Revision); code(err) != kernel.CodeApprovalStale {
		t.Fatalf("digest mismatch: %v", err)
	}
	// The worktree moves: stale.
	must(t, os.WriteFile(filepath.Join(e.dir, "other.txt"), []byte("moved"), 0o644))
	call := kernel.Call{ID: "c1", Name: "repo.patch", Args: p.Args}
	if _, err := e.k.ExecuteApproved(ctx, e.j, call, p.ApprovalID, p.Digest, p.Revision); code(err) != kernel.CodeApprovalStale {
		t.Fatalf("moved worktree: %v", err)
	}
	must(t, os.Remove(filepath.Join(e.dir, "other.txt")))
	if _, err := e.k.ExecuteApproved(ctx, e.j, call, p.ApprovalID, p.Digest, p.Revision); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(filepath.Join(e.dir, "auth.go"))
	if !strings.Contains(string(b), "return true") {
		t.Fatal("approved patch not applied")
	}
	evs, _ = e.st.Read(ctx, "k", 1)
	if rep := replay.VerifyEvents(schemas.MustDefault(), evs); !rep.Valid {
		t.Fatalf("log: %v", rep.Problem)
	}
}

func TestRiskControlPaths(t *testing.T) {
	pol := `
capabilities:
  process.run: {approval: risk}
  repo.write: {approval: risk}
risk:
  highRiskCommands: [rm]
`
	cases := []struct {
		tool, args string
		pending    bool
	}{
		{"process.run", `{"command":"go version"}`, false},
		{"process.run", `{"command":"rm -rf build"}`, true},
		{"repo.write", `{"path":"notes.txt","content":"x","expected_hash":""}`, false},
		{"repo.write", `{"path":".env","content":"X=1","expected_hash":""}`, true},
		{"repo.write", `{"path":"go.mod","content":"module y\n","expected_hash":"` + tools.Sha256Hex([]byte("module example.com/x\n\ngo 1.22\n")) + `"}`, true},
	}
	for _, c := range cases {
		e := setup(t, pol, nil)
		out, err := e.call(c.tool, c.args)
		if err != nil && code(err) != "" && !c.pending {
			// an executed command may fail on its own; the control path is what matters
			if !contains(e.types(t), "tool.invoke") {
				t.Errorf("%s %s: %v", c.tool, c.args, err)
			}
		}
		if (out.Pending != nil) != c.pending {
			t.Errorf("%s %s: pending=%v, want %v", c.tool, c.args, out.Pending != nil, c.pending)
		}
	}
}

func TestRegisterRequiresSchemas(t *testing.T) {
	k := kernel.New(nil, nil, nil)
	h := func(context.Context, kernel.Env, json.RawMessage) (any, error) { return nil, nil }
	for _, d := range []kernel.ToolDef{
		{Name: "x", Category: kernel.CategoryRead, Input: json.RawMessage(`{}`), Handler: h},
		{Name: "x", Category: kernel.CategoryRead, Output: json.RawMessage(`{}`), Handler: h},
		{Name: "x", Category: kernel.CategoryRead, Input: json.RawMessage(`{"type":7}`), Output: json.RawMessage(`{}`), Handler: h},
		{Name: "x", Input: json.RawMessage(`{}`), Output: json.RawMessage(`{}`), Handler: h},
	} {
		if err := k.Register(d); !errors.Is(err, kernel.ErrRegister) {
			t.Errorf("%+v registered: %v", d, err)
		}
	}
}

func TestResultSchemaAndOutputLimit(t *testing.T) {
	e := setup(t, strings.Replace(openPolicy, "capabilities:\n", "capabilities:\n  liar: {approval: never}\n  flood: {approval: never}\n", 1), nil)
	must(t, e.k.Register(kernel.ToolDef{Name: "liar", Category: kernel.CategoryRead, Input: json.RawMessage(`{"type":"object"}`),
		Output: json.RawMessage(`{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}`),
		Handler: func(context.Context, kernel.Env, json.RawMessage) (any, error) {
			return map[string]any{"n": "seven"}, nil
		}}))
	must(t, e.k.Register(kernel.ToolDef{Name: "flood", Category: kernel.CategoryRead, Input: json.RawMessage(`{"type":"object"}`), Output: json.RawMessage(`{}`),
		Handler: func(context.Context, kernel.Env, json.RawMessage) (any, error) {
			return strings.Repeat("x", 2<<20), nil
		}}))
	if _, err := e.call("liar", `{}`); code(err) != kernel.CodeSchemaViolation {
		t.Fatalf("liar: %v", err)
	}
	if _, err := e.call("flood", `{}`); code(err) != kernel.CodeOutputLimit {
		t.Fatalf("flood: %v", err)
	}
}

func BenchmarkDispatchEcho(b *testing.B) {
	e := setup(b, openPolicy, nil)
	ctx := context.Background()
	c := kernel.Call{ID: "c", Name: "echo", Args: json.RawMessage(`{"text":"hello"}`)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.k.Dispatch(ctx, e.j, c); err != nil {
			b.Fatal(err)
		}
	}
}

func TestInScope(t *testing.T) {
	scope := []string{"repo.read", "mcp.memory.*"}
	cases := map[string]bool{
		"repo.read": true, "repo.patch": false,
		"mcp.memory.create_entities": true, "mcp.memoryx.read": false, "mcp.other.read": false,
	}
	for name, want := range cases {
		if got := kernel.InScope(scope, name); got != want {
			t.Errorf("InScope(%v, %q) = %v, want %v", scope, name, got, want)
		}
	}
	if kernel.InScope([]string{".*"}, "repo.read") || kernel.InScope([]string{"*"}, "repo.read") {
		t.Error("a bare wildcard must not allow every tool")
	}
}

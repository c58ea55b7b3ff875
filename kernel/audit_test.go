package kernel_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/tools"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/schemas"
)

// TestAdaptiveTrust: with trust enabled, a call that policy "risk" would
// send for approval runs with a preview once the exact same command has
// enough clean approvals; any denial, failure or revert, another command
// line, trust switched off, or a path touching secrets keeps the approval.
func TestAdaptiveTrust(t *testing.T) {
	const pol = `
capabilities:
  process.run: {approval: risk}
  repo.write: {approval: risk}
risk:
  highRiskCommands: [rm]
trust:
  enabled: %s
  cleanApprovals: 2
`
	clean := kernel.TrustCounts{Approved: 2}
	goMod := tools.Sha256Hex([]byte("module example.com/x\n\ngo 1.22\n"))
	cases := []struct {
		name, enabled, tool, args string
		history                   map[string]kernel.TrustCounts // "tool command" → counts
		lowered                   bool
	}{
		{"no history", "true", "process.run", `{"command":"rm -f build.log"}`, nil, false},
		{"clean approvals of the same command", "true", "process.run", `{"command":"rm -f build.log"}`, map[string]kernel.TrustCounts{"process.run rm -f build.log": clean}, true},
		{"too few approvals", "true", "process.run", `{"command":"rm -f build.log"}`, map[string]kernel.TrustCounts{"process.run rm -f build.log": {Approved: 1}}, false},
		{"one denial", "true", "process.run", `{"command":"rm -f build.log"}`, map[string]kernel.TrustCounts{"process.run rm -f build.log": {Approved: 5, Denied: 1}}, false},
		{"one failure", "true", "process.run", `{"command":"rm -f build.log"}`, map[string]kernel.TrustCounts{"process.run rm -f build.log": {Approved: 5, Failed: 1}}, false},
		{"one revert", "true", "process.run", `{"command":"rm -f build.log"}`, map[string]kernel.TrustCounts{"process.run rm -f build.log": {Approved: 5, Reverted: 1}}, false},
		{"another command line", "true", "process.run", `{"command":"rm -rf ."}`, map[string]kernel.TrustCounts{"process.run rm -f build.log": clean}, false},
		{"trust off", "false", "process.run", `{"command":"rm -f build.log"}`, map[string]kernel.TrustCounts{"process.run rm -f build.log": clean}, false},
		{"build file write", "true", "repo.write", `{"path":"go.mod","content":"module y\n","expected_hash":"` + goMod + `"}`, map[string]kernel.TrustCounts{"repo.write ": clean}, true},
		{"secrets never", "true", "repo.write", `{"path":".env","content":"X=1","expected_hash":""}`, map[string]kernel.TrustCounts{"repo.write ": {Approved: 50}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t, strings.Replace(pol, "%s", c.enabled, 1), nil)
			must(t, os.WriteFile(filepath.Join(e.dir, "build.log"), []byte("old"), 0o644))
			var asked []string
			e.k.Trust = func(tool, command string) kernel.TrustCounts {
				asked = append(asked, tool+" "+command)
				return c.history[tool+" "+command]
			}
			out, err := e.call(c.tool, c.args)
			if c.lowered {
				if err != nil || out.Pending != nil {
					t.Fatalf("want executed with a preview, got pending=%v err=%v", out.Pending != nil, err)
				}
				if !contains(e.types(t), "tool.invoke") {
					t.Fatal("no tool.invoke")
				}
				return
			}
			if err != nil || out.Pending == nil {
				t.Fatalf("want an approval request, got err=%v pending=%v", err, out.Pending)
			}
			if out.Pending.Risk.Trusted || out.Pending.Risk.Control != kernel.ControlApproval {
				t.Errorf("risk %+v", out.Pending.Risk)
			}
			if contains(e.types(t), "tool.invoke") {
				t.Fatal("executed without approval")
			}
			if c.name == "secrets never" && len(asked) != 0 {
				t.Errorf("trust consulted for a secrets path: %v", asked)
			}
		})
	}
}

// TestProcessPreview: an approval for process.run shows the command, the
// working directory, the environment names passed through and the timeout.
func TestProcessPreview(t *testing.T) {
	e := setup(t, "capabilities:\n  process.run: {approval: always}\nexecution:\n  timeouts:\n    process.run: 7s\n", nil)
	must(t, os.MkdirAll(filepath.Join(e.dir, "sub"), 0o755))
	out, err := e.call("process.run", `{"command":"go test ./...","cwd":"sub"}`)
	if err != nil || out.Pending == nil {
		t.Fatalf("%v %+v", err, out)
	}
	p := out.Pending.Preview
	if p.Command != "go test ./..." || p.Cwd != "sub" || p.Timeout != "7s" || !contains(p.EnvNames, "PATH") {
		t.Fatalf("preview %+v", p)
	}
	for _, n := range p.EnvNames {
		if strings.Contains(n, "TOKEN") || strings.Contains(n, "SECRET") {
			t.Errorf("a secret env name would be passed: %s", n)
		}
	}
	// The preview is what approval.requested records.
	evs, _ := e.st.Read(context.Background(), "k", 1)
	last := evs[len(evs)-1]
	var rec struct {
		Preview kernel.Preview `json:"preview"`
	}
	if last.Type != "approval.requested" || json.Unmarshal(last.Payload, &rec) != nil || rec.Preview.Command != p.Command || rec.Preview.Timeout != "7s" {
		t.Fatalf("approval.requested %s", last.Payload)
	}
}

// TestArgumentRepairIsRecorded: trivially broken JSON is repaired, the
// repair is an event before anything runs, and the repaired arguments
// pass the same validation as any others.
func TestArgumentRepairIsRecorded(t *testing.T) {
	e := setup(t, openPolicy, nil)
	out, err := e.call("echo", "```json\n{'text': 'hi',}\n```")
	if err != nil || string(out.Result) != `{"text":"hi"}` {
		t.Fatalf("%s %v", out.Result, err)
	}
	if got := strings.Join(e.types(t), ","); got != "tool.args_repaired,tool.invoke,tool.result" {
		t.Fatalf("events %s", got)
	}
	e = setup(t, openPolicy, nil)
	if _, err := e.call("echo", `{'text': 5,}`); code(err) != kernel.CodeInvalidArguments {
		t.Fatalf("repaired but invalid args: %v", err)
	}
	if got := strings.Join(e.types(t), ","); got != "tool.args_repaired,tool.rejected" {
		t.Fatalf("events %s", got)
	}
}

// TestArgumentRepairOff: with guard repair off (Call.NoRepair) the same
// trivially broken JSON is blocked as sent, nothing is repaired or runs.
func TestArgumentRepairOff(t *testing.T) {
	e := setup(t, openPolicy, nil)
	c := kernel.Call{ID: "c1", Name: "echo", Args: json.RawMessage("```json\n{'text': 'hi',}\n```"), Caller: "worker", NoRepair: true}
	_, err := e.k.Dispatch(context.Background(), e.j, c)
	if code(err) != kernel.CodeInvalidArguments || !strings.Contains(err.Error(), "guard repair is off") {
		t.Fatalf("repair off: %v", err)
	}
	if got := strings.Join(e.types(t), ","); got != "tool.rejected" {
		t.Fatalf("events %s", got)
	}
	// Well-formed arguments are unaffected by the switch.
	c.Args = json.RawMessage(`{"text":"hi"}`)
	if out, err := e.k.Dispatch(context.Background(), e.j, c); err != nil || string(out.Result) != `{"text":"hi"}` {
		t.Fatalf("well-formed call with repair off: %s %v", out.Result, err)
	}
}

type noopHooks struct{}

func (noopHooks) PreToolUse(context.Context, kernel.Recorder, string, json.RawMessage) (kernel.HookDecision, error) {
	return kernel.HookDecision{Decision: kernel.HookAllow}, nil
}

func (noopHooks) PostToolUse(context.Context, kernel.Recorder, string, json.RawMessage, json.RawMessage) (kernel.HookDecision, error) {
	return kernel.HookDecision{Decision: kernel.HookAllow}, nil
}

// BenchmarkDispatchEchoNoopHooks is the dispatch-overhead figure:
// the whole pipeline (guard, hooks, policy, risk, tool.invoke and
// tool.result appended to the in-memory store, result validation) around a
// no-op tool, with no-op hooks. It reports the median per call.
func BenchmarkDispatchEchoNoopHooks(b *testing.B) {
	e := setup(b, openPolicy, noopHooks{})
	ctx := context.Background()
	c := kernel.Call{ID: "c", Name: "echo", Args: json.RawMessage(`{"text":"hello"}`), Caller: "worker"}
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := e.k.Dispatch(ctx, e.j, c); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
	b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds())/1000, "p50-µs")
	b.ReportMetric(float64(durs[len(durs)*99/100].Nanoseconds())/1000, "p99-µs")
}

// TestCallerDeadlineStillRecordsResult: when the caller's context ends
// while a tool runs (a run's wall-clock limit), the call fails with
// TIMEOUT and its tool.result is still recorded, so the log stays paired.
func TestCallerDeadlineStillRecordsResult(t *testing.T) {
	e := setup(t, strings.Replace(openPolicy, "process.run: 300ms", "process.run: 300s", 1), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := e.k.Dispatch(ctx, e.j, kernel.Call{ID: "c1", Name: "process.run", Args: json.RawMessage(`{"command":"sleep 5"}`)})
	if code(err) != kernel.CodeTimeout {
		t.Fatalf("got %v, want TIMEOUT", err)
	}
	if got := strings.Join(e.types(t), ","); got != "tool.invoke,tool.result" {
		t.Fatalf("events %s", got)
	}
	evs, _ := e.st.Read(context.Background(), "k", 1)
	if rep := replay.VerifyEvents(schemas.MustDefault(), evs); !rep.Valid {
		t.Fatalf("log: %v", rep.Problem)
	}
}

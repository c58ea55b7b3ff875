package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider/scripted"
	"github.com/agentos/agentos/runtime/replay"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/schemas"
)

// TestGuardFaultMatrix is the tool-guard benchmark in miniature,
// with its repair switch: each row injects one malformed tool call (the
// model's first try), followed by the call it would make when told what
// was wrong. With repair on and off, the guard blocks every injected call
// before it executes (bad executions 0); with repair on the run is
// accepted after one repair round (or the kernel's local JSON repair),
// with repair off the first blocked call ends the run.
func TestGuardFaultMatrix(t *testing.T) {
	rows := []struct {
		class, call string
		local       bool // the kernel repairs it without a model round
	}{
		{"unknown tool", `{id: b1, name: repo.reed, args: {path: README.md}}`, false},
		{"missing required", `{id: b1, name: echo, args: {}}`, false},
		{"type error", `{id: b1, name: echo, args: {text: 5}}`, false},
		{"extra arg", `{id: b1, name: echo, args: {text: hi, loud: true}}`, false},
		{"absolute path", `{id: b1, name: repo.read, args: {path: /etc/passwd}}`, false},
		{"unparsable arguments", `{id: b1, name: echo, args: {_raw: "{'text': 'hi',}"}}`, true},
	}
	summary := map[bool][3]int{} // repair → blocked, bad executions, accepted
	for _, repair := range []bool{true, false} {
		for _, r := range rows {
			t.Run(fmt.Sprintf("repair=%v/%s", repair, r.class), func(t *testing.T) {
				worker := "    - tool_calls: [" + r.call + "]\n"
				if !r.local {
					worker += `    - tool_calls: [{id: g1, name: echo, args: {text: "hello"}}]` + "\n"
				}
				worker += `    - text: '{"output":"hello","steps_completed":["s1"],"tool_calls_made":["echo:g1"],"schema_version":"v1"}'` + "\n"
				s, err := scripted.Parse(strings.NewReader(`
roles:
  lead: [{text: '{"intent":"say hello","constraints":[],"needs_advisor":false,"schema_version":"v1"}'}]
  planner: [{text: '{"steps":[{"id":"s1","description":"echo"}],"risks":[],"needs_advisor":false,"schema_version":"v1"}'}]
  worker:
` + worker + `  reviewer: [{text: '{"verdict":"pass","feedback":"ok","schema_version":"v1"}'}]
`))
				if err != nil {
					t.Fatal(err)
				}
				env, _ := newEnv(t, s, "")
				if !repair {
					off := false
					env.engine.Profile.GuardRepair = &off
				}
				ctx := context.Background()
				out, err := env.mgr.Start(ctx, env.engine, agentrun.StartRequest{SessionID: "e2e", Prompt: "write a short note for the team", Cwd: env.ws.Root()})
				if err != nil {
					t.Fatal(err)
				}
				evs, err := env.store.Read(ctx, "e2e", 1)
				if err != nil {
					t.Fatal(err)
				}
				if rep := replay.VerifyEvents(schemas.MustDefault(), evs); !rep.Valid {
					t.Fatalf("log does not verify: %v", rep.Problem)
				}
				blocked, badExec := false, false
				for _, e := range evs {
					switch {
					case e.Type == event.ToolRejected && event.FieldString(e.Payload, "call_id") == "b1":
						blocked = true
					case e.Type == event.ToolInvoke && event.FieldString(e.Payload, "call_id") == "b1":
						badExec = !r.local || !repair // a locally repaired call runs repaired, not as sent
					}
				}
				accepted := out.Status == "completed"
				wantBlocked := !(r.local && repair)
				if blocked != wantBlocked || badExec || accepted != repair {
					t.Errorf("blocked %v (want %v), bad execution %v, accepted %v (want %v): %+v", blocked, wantBlocked, badExec, accepted, repair, out.Terminal)
				}
				c := summary[repair]
				if blocked || (r.local && repair) {
					c[0]++
				}
				if badExec {
					c[1]++
				}
				if accepted {
					c[2]++
				}
				summary[repair] = c
			})
		}
	}
	for _, repair := range []bool{false, true} {
		c := summary[repair]
		t.Logf("repair %-5v: %d injected calls, guard caught %d, bad executions %d, accepted %d", repair, len(rows), c[0], c[1], c[2])
	}
}

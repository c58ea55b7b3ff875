package kernel_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/policy"
	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/tools"
	"github.com/agentos/agentos/kernel/workspace"
	"github.com/agentos/agentos/runtime/event"
)

// TestExecToolsFailClosed: without a sandbox that works, exec tools are
// refused before anything else happens (no approval is requested for a
// command that could not run), with the fix in the message; hook
// commands cannot run either. Read tools are unaffected.
func TestExecToolsFailClosed(t *testing.T) {
	broken := sandbox.Detect(context.Background(), sandbox.Config{Mode: sandbox.ModeBwrap, Bwrap: filepath.Join(t.TempDir(), "no-bwrap")})
	for _, tc := range []struct {
		name string
		sbx  *sandbox.Sandbox
	}{{"no sandbox set up", nil}, {"sandbox unavailable", broken}} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t, "", nil)
			ws, err := workspace.Open(e.dir, workspace.Options{Sandbox: tc.sbx})
			must(t, err)
			defer ws.Close()
			k := kernel.New(policy.Default(), ws, nil)
			for _, d := range tools.Defs(ws, tools.Options{Timeouts: map[string]time.Duration{"process.run": time.Minute}}) {
				must(t, k.Register(d))
			}
			for _, c := range []struct{ tool, args string }{{"process.run", `{"command":"cat /etc/hostname"}`}, {"test.run", `{}`}} {
				out, err := k.Dispatch(context.Background(), e.j, kernel.Call{ID: "c-" + c.tool, Name: c.tool, Args: json.RawMessage(c.args)})
				if code(err) != kernel.CodeSandboxUnavailable || out.Pending != nil {
					t.Fatalf("%s: got %v (pending %v), want SANDBOX_UNAVAILABLE before any approval", c.tool, err, out.Pending)
				}
				if !strings.Contains(err.Error(), "sandbox") {
					t.Errorf("%s: the error does not say what to do: %v", c.tool, err)
				}
			}
			if _, err := k.Dispatch(context.Background(), e.j, kernel.Call{ID: "c-read", Name: "repo.read", Args: json.RawMessage(`{"path":"auth.go"}`)}); err != nil {
				t.Errorf("repo.read without a sandbox: %v", err)
			}
			if _, err := ws.Run(context.Background(), workspace.RunSpec{Argv: []string{"sh", "-c", "echo hook"}}); code(err) != kernel.CodeSandboxUnavailable {
				t.Errorf("a hook command ran without a sandbox: %v", err)
			}
			evs, err := e.st.Read(context.Background(), "k", 1)
			must(t, err)
			rejected := 0
			for _, ev := range evs {
				var p struct{ Tool, Stage, Code string }
				_ = json.Unmarshal(ev.Payload, &p)
				switch {
				case ev.Type == event.ApprovalRequested:
					t.Errorf("an approval was requested for %s", p.Tool)
				case ev.Type == event.ToolInvoke && p.Tool != "repo.read":
					t.Errorf("%s was invoked", p.Tool)
				case ev.Type == event.ToolRejected && p.Stage == "sandbox" && p.Code == string(kernel.CodeSandboxUnavailable):
					rejected++
				}
			}
			if rejected != 2 {
				t.Errorf("%d tool.rejected at the sandbox stage, want 2", rejected)
			}
		})
	}
}

// TestToolInvokeRecordsSandbox: every exec tool call records under what
// confinement it ran: mechanism, writable and read-only paths, network.
func TestToolInvokeRecordsSandbox(t *testing.T) {
	e := setup(t, strings.Replace(openPolicy, "process.run: 300ms", "process.run: 120s", 1), nil)
	if _, err := e.call("process.run", `{"command":"true"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.call("repo.read", `{"path":"auth.go"}`); err != nil {
		t.Fatal(err)
	}
	evs, err := e.st.Read(context.Background(), "k", 1)
	must(t, err)
	var profiles []map[string]any
	for _, ev := range evs {
		if ev.Type != event.ToolInvoke {
			continue
		}
		var p struct {
			Tool    string         `json:"tool"`
			Sandbox map[string]any `json:"sandbox"`
		}
		must(t, json.Unmarshal(ev.Payload, &p))
		if p.Tool == "repo.read" && p.Sandbox != nil {
			t.Errorf("repo.read recorded a sandbox profile")
		}
		if p.Tool == "process.run" {
			profiles = append(profiles, p.Sandbox)
		}
	}
	if len(profiles) != 1 {
		t.Fatalf("process.run recorded %d profiles", len(profiles))
	}
	p := profiles[0]
	mech, _ := p["mechanism"].(string)
	if mech != string(sandbox.Bwrap) && mech != string(sandbox.Landlock) {
		t.Errorf("mechanism %q", mech)
	}
	root, _ := filepath.EvalSymlinks(e.dir)
	if w, _ := p["writable"].([]any); len(w) == 0 || w[0] != root {
		t.Errorf("writable %v, want the worktree %s first", p["writable"], root)
	}
	if p["network"] != "off" || p["read_only"] == nil || p["limits"] == nil {
		t.Errorf("profile %v", p)
	}
	if _, err := os.Stat(root); err != nil {
		t.Fatal(err)
	}
}

package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/runtime/mcp"
	"github.com/agentos/agentos/runtime/provider"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name, doc, err string
		want           map[string]mcp.Server
	}{
		{name: "stdio inferred", doc: `{"mcpServers":{"fs":{"command":"npx","args":["-y","pkg"],"env":{"A":"b"}}}}`,
			want: map[string]mcp.Server{"fs": {Name: "fs", Type: "stdio", Command: "npx", Args: []string{"-y", "pkg"}, Env: map[string]string{"A": "b"}}}},
		{name: "http", doc: `{"mcpServers":{"api":{"type":"http","url":"https://mcp.example.com/mcp","headers":{"Authorization":"Bearer ${TOKEN}"}}}}`,
			want: map[string]mcp.Server{"api": {Name: "api", Type: "http", URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer ${TOKEN}"}}}},
		{name: "unknown keys ignored", doc: `{"mcpServers":{"x":{"command":"a","disabled":false}},"other":1}`,
			want: map[string]mcp.Server{"x": {Name: "x", Type: "stdio", Command: "a"}}},
		{name: "no servers", doc: `{}`, want: map[string]mcp.Server{}},
		{name: "dot in name", doc: `{"mcpServers":{"a.b":{"command":"x"}}}`, err: `server "a.b": a server name may hold only`},
		{name: "nothing to run", doc: `{"mcpServers":{"x":{}}}`, err: "neither a command (stdio) nor a url (http)"},
		{name: "sse", doc: `{"mcpServers":{"x":{"type":"sse","url":"http://h/sse"}}}`, err: `"sse"`},
		{name: "unknown type", doc: `{"mcpServers":{"x":{"type":"ws","url":"ws://h"}}}`, err: `unknown type "ws"`},
		{name: "http with command", doc: `{"mcpServers":{"x":{"type":"http","url":"http://h","command":"c"}}}`, err: "no command"},
		{name: "wrong type of args", doc: `{"mcpServers":{"x":{"command":"c","args":"-y"}}}`, err: `server "x"`},
		{name: "not json", doc: `{"mcpServers":`, err: "not a JSON object"},
		{name: "trailing", doc: `{} {}`, err: "trailing data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := mcp.ParseConfig(".mcp.json", strings.NewReader(tt.doc))
			if tt.err != "" {
				var ce *mcp.ConfigError
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want a *ConfigError containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(c.Servers)
			want, _ := json.Marshal(tt.want)
			if string(got) != string(want) {
				t.Fatalf("servers = %s, want %s", got, want)
			}
			for n, s := range c.Servers {
				if s.Name != tt.want[n].Name || s.Type != tt.want[n].Type {
					t.Fatalf("server %s = %+v, want %+v", n, s, tt.want[n])
				}
			}
		})
	}
}

func TestExpandOnlyAllowListedAndNeverBotSecrets(t *testing.T) {
	env := map[string]string{"MY_API_URL": "https://x", "GITHUB_TOKEN": "ghs_botsecret123", "LEAK": "ghs_botsecret123"}
	red := redact.New(nil)
	red.AddLiteral("ghs_botsecret123")
	env["SERVICE_KEY"] = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
	x := mcp.Expander{Allow: []string{"MY_API_URL", "LEAK", "EMPTY", "GITHUB_TOKEN", "SERVICE_KEY"}, Getenv: func(k string) string { return env[k] }, Secret: red.HasLiteral}
	tests := []struct{ in, want, err string }{
		{in: "${MY_API_URL}/mcp", want: "https://x/mcp"},
		{in: "plain", want: "plain"},
		{in: "${EMPTY:-fallback}", want: "fallback"},
		{in: "${GITHUB_TOKEN}", err: "one of agentos's own secrets"},
		{in: "${NOT_LISTED}", err: "not in the operator's allow-list"},
		// A key of the server's own is passed, though it looks like a key.
		{in: "Bearer ${SERVICE_KEY}", want: "Bearer sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"},
		{in: "${LEAK}", err: "agentos's own secrets"},
		{in: "${1BAD}", err: "not a variable reference"},
	}
	for _, tt := range tests {
		got, err := x.Expand(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Expand(%q) = %q, %v; want error %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Expand(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func faultConfig(bin string, extraArgs ...string) string {
	args, _ := json.Marshal(extraArgs)
	return `{"mcpServers":{"faulty":{"command":"` + bin + `","args":` + string(args) + `,"env":{"FAULT_TOKEN":"${FAULT_TOKEN}"}}}}`
}

func errorOf(t *testing.T, r *recorder) (code string, details map[string]any, msg string) {
	t.Helper()
	res := r.last("tool.result")
	if res == nil {
		t.Fatalf("no tool.result; events %v", r.types())
	}
	if res["ok"] != false {
		t.Fatalf("tool.result ok; want an error: %v", res)
	}
	e := res["error"].(map[string]any)
	d, _ := e["details"].(map[string]any)
	return e["code"].(string), d, e["message"].(string)
}

// TestFaultServer mounts the Go SDK fault server and checks every fault
// becomes one structured error on the call, and the session goes on.
func TestFaultServer(t *testing.T) {
	dir := t.TempDir()
	bin := faultServer(t, dir)
	t.Setenv("FAULT_TOKEN", "s3cr3t-fault-value")
	pol := policyWith(t, "")
	allow(pol, "mcp.faulty.echo", "mcp.faulty.env", "mcp.faulty.fail", "mcp.faulty.crash", "mcp.faulty.hang", "mcp.faulty.malformed", "mcp.faulty.huge")
	pol.Execution.EnvAllow = []string{"FAULT_TOKEN"}
	pol.Execution.Timeouts["mcp.faulty.hang"] = "1s"
	red := redact.New(nil)
	e := newEnv(t, dir, faultConfig(bin), pol, mcp.Options{Redact: red.String, MaxMessage: 3 << 20})
	e.k.Redact = red.String
	ctx := context.Background()
	if e.m.Started("faulty") {
		t.Fatal("the server started before anything used it")
	}
	if notes := e.m.Register(ctx, e.k, nil); len(notes) > 0 {
		t.Fatalf("notes: %v", notes)
	}
	if !e.m.Started("faulty") {
		t.Fatal("listing the tools did not start the server")
	}
	call := func(name, args string) (*recorder, kernel.Outcome, error) {
		r := &recorder{}
		out, err := e.k.Dispatch(ctx, r, kernel.Call{ID: "c1", Name: name, Args: json.RawMessage(args), Caller: "worker"})
		return r, out, err
	}

	t.Run("echo keeps text and structured content", func(t *testing.T) {
		r, out, err := call("mcp.faulty.echo", `{"text":"hello"}`)
		if err != nil {
			t.Fatal(err)
		}
		var res mcp.Result
		if err := json.Unmarshal(out.Result, &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Content) != 1 || !strings.Contains(string(res.Content[0]), `"text":"hello"`) {
			t.Fatalf("content = %s", res.Content)
		}
		if string(res.StructuredContent) != `{"echo":"hello","length":5}` {
			t.Fatalf("structuredContent = %s", res.StructuredContent)
		}

		if got := strings.Join(r.types(), ","); got != "tool.invoke,tool.result" {
			t.Fatalf("events = %s", got)
		}
	})
	t.Run("the server's input schema guards the arguments", func(t *testing.T) {
		r, _, err := call("mcp.faulty.echo", `{"text":42}`)
		var ke *kernel.Error
		if !errors.As(err, &ke) || ke.Code != kernel.CodeInvalidArguments {
			t.Fatalf("err = %v, want INVALID_ARGUMENTS", err)
		}
		if got := strings.Join(r.types(), ","); got != "tool.rejected" {
			t.Fatalf("events = %s (nothing may reach the server)", got)
		}
	})
	t.Run("allow-listed variable reaches the server, redacted in the result", func(t *testing.T) {
		_, out, err := call("mcp.faulty.env", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out.Result), "s3cr3t") || !strings.Contains(string(out.Result), "FAULT_TOKEN=") {
			t.Fatalf("result = %s, want the value passed and redacted", out.Result)
		}
		// stderr is a separate stream: a line can land after the call's
		// answer, and then comes with a later call's result (on a loaded
		// machine, not always the next one).
		var a mcp.Result
		json.Unmarshal(out.Result, &a)
		both := a.ServerStderr
		for i := 0; i < 20 && !strings.Contains(both, "faultserver: FAULT_TOKEN="); i++ {
			_, next, err := call("mcp.faulty.echo", `{"text":"next"}`)
			if err != nil {
				t.Fatal(err)
			}
			var b mcp.Result
			json.Unmarshal(next.Result, &b)
			both += b.ServerStderr
			time.Sleep(50 * time.Millisecond)
		}
		if !strings.Contains(both, "faultserver: FAULT_TOKEN=[REDACTED]") || strings.Contains(both, "s3cr3t") {
			t.Fatalf("serverStderr %q: want the server's stderr, redacted", both)
		}
	})
	t.Run("tool error", func(t *testing.T) {
		r, _, err := call("mcp.faulty.fail", `{}`)
		code, _, msg := errorOf(t, r)
		if err == nil || code != string(mcp.CodeToolError) || !strings.Contains(msg, "the widget is broken") {
			t.Fatalf("code %s msg %q err %v", code, msg, err)
		}
	})
	t.Run("hang times out", func(t *testing.T) {
		start := time.Now()
		r, _, _ := call("mcp.faulty.hang", `{}`)
		if code, _, _ := errorOf(t, r); code != string(kernel.CodeTimeout) {
			t.Fatalf("code = %s, want TIMEOUT", code)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("took %s", d)
		}
	})
	t.Run("crash mid-call, stderr captured and redacted, restart on next use", func(t *testing.T) {
		r, _, _ := call("mcp.faulty.crash", `{}`)
		code, d, _ := errorOf(t, r)
		if code != string(mcp.CodeServerCrashed) {
			t.Fatalf("code = %s, want %s", code, mcp.CodeServerCrashed)
		}
		stderr, _ := d["stderr"].(string)
		if !strings.Contains(stderr, "crashing now") || strings.Contains(stderr, "s3cr3t") {
			t.Fatalf("stderr = %q, want the server's words with the secret masked", stderr)
		}
		if _, _, err := call("mcp.faulty.echo", `{"text":"again"}`); err != nil {
			t.Fatalf("after the crash: %v", err)
		}
	})
	t.Run("malformed output", func(t *testing.T) {
		r, _, _ := call("mcp.faulty.malformed", `{}`)
		if code, _, _ := errorOf(t, r); code != string(mcp.CodeProtocolError) {
			t.Fatalf("code = %s, want %s", code, mcp.CodeProtocolError)
		}
		if _, _, err := call("mcp.faulty.echo", `{"text":"again"}`); err != nil {
			t.Fatalf("after malformed output: %v", err)
		}
	})
	t.Run("huge output over the kernel's cap", func(t *testing.T) {
		r, _, _ := call("mcp.faulty.huge", `{"bytes":2000000}`)
		if code, _, _ := errorOf(t, r); code != string(kernel.CodeOutputLimit) {
			t.Fatalf("code = %s, want OUTPUT_LIMIT", code)
		}
	})
	t.Run("huge message over the transport's cap", func(t *testing.T) {
		r, _, _ := call("mcp.faulty.huge", `{"bytes":4000000}`)
		if code, _, _ := errorOf(t, r); code != string(kernel.CodeOutputLimit) {
			t.Fatalf("code = %s, want OUTPUT_LIMIT", code)
		}
		if _, _, err := call("mcp.faulty.echo", `{"text":"again"}`); err != nil {
			t.Fatalf("after a huge message: %v", err)
		}
	})
}

func TestServerThatFailsToStart(t *testing.T) {
	dir := t.TempDir()
	bin := faultServer(t, dir)
	t.Setenv("FAULT_TOKEN", "s3cr3t-fault-value")
	pol := policyWith(t, "")
	pol.Execution.EnvAllow = []string{"FAULT_TOKEN"}
	red := redact.New(nil)
	e := newEnv(t, dir, faultConfig(bin, "-fail-start"), pol, mcp.Options{Redact: red.String, StartTimeout: 10 * time.Second})
	notes := e.m.Register(context.Background(), e.k, nil)
	if len(notes) != 1 || !strings.Contains(notes[0], "MCP_SERVER_UNAVAILABLE") || !strings.Contains(notes[0], "exited during the MCP handshake") {
		t.Fatalf("notes = %v", notes)
	}
	// A tool registered from a recorded log: the live call gets the error.
	if err := e.k.Register(e.m.Def("faulty", "echo", "", json.RawMessage(`{"type":"object"}`))); err != nil {
		t.Fatal(err)
	}
	allow(pol, "mcp.faulty.echo")
	r := &recorder{}
	_, err := e.k.Dispatch(context.Background(), r, kernel.Call{ID: "c1", Name: "mcp.faulty.echo", Args: json.RawMessage(`{}`)})
	code, d, _ := errorOf(t, r)
	if err == nil || code != string(mcp.CodeServerUnavailable) {
		t.Fatalf("code %s err %v", code, err)
	}
	if s, _ := d["stderr"].(string); !strings.Contains(s, "refusing to start") || strings.Contains(s, "s3cr3t") {
		t.Fatalf("stderr = %q", s)
	}
}

func TestNotAllowListedVariableFailsClosed(t *testing.T) {
	dir := t.TempDir()
	bin := faultServer(t, dir)
	t.Setenv("FAULT_TOKEN", "x")
	e := newEnv(t, dir, faultConfig(bin), policyWith(t, ""), mcp.Options{})
	notes := e.m.Register(context.Background(), e.k, nil)
	if len(notes) != 1 || !strings.Contains(notes[0], "${FAULT_TOKEN} is not in the operator's allow-list") {
		t.Fatalf("notes = %v", notes)
	}
	if e.m.Started("faulty") {
		t.Fatal("started a server whose configuration is refused")
	}
}

// TestDefaultPolicyAsksApproval: a tool the policy does not name needs
// approval; nothing reaches the server until then.
func TestDefaultPolicyAsksApproval(t *testing.T) {
	dir := t.TempDir()
	bin := faultServer(t, dir)
	os.Unsetenv("FAULT_TOKEN")
	e := newEnv(t, dir, `{"mcpServers":{"faulty":{"command":"`+bin+`"}}}`, policyWith(t, ""), mcp.Options{})
	if notes := e.m.Register(context.Background(), e.k, nil); len(notes) > 0 {
		t.Fatal(notes)
	}
	r := &recorder{}
	out, err := e.k.Dispatch(context.Background(), r, kernel.Call{ID: "c1", Name: "mcp.faulty.crash", Args: json.RawMessage(`{}`)})
	if err != nil || out.Pending == nil {
		t.Fatalf("outcome %+v err %v, want a pending approval", out, err)
	}
	if got := strings.Join(r.types(), ","); got != "approval.requested" {
		t.Fatalf("events = %s", got)
	}
	if !strings.Contains(out.Pending.Preview.Command, "mcp faulty (./bin/faultserver): crash") {
		t.Fatalf("preview = %+v", out.Pending.Preview)
	}
}

func TestProfileServersMergeOverRepository(t *testing.T) {
	repo, err := mcp.ParseConfig(".mcp.json", strings.NewReader(`{"mcpServers":{"a":{"command":"repo-a"},"b":{"command":"repo-b"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	prof, err := mcp.FromProfile(map[string]provider.MCPServer{"b": {Command: "operator-b"}, "c": {Type: "http", URL: "https://c.example/mcp"}})
	if err != nil {
		t.Fatal(err)
	}
	got, shadowed := mcp.Merge(repo, prof)
	if strings.Join(got.Names(), ",") != "a,b,c" || got.Servers["b"].Command != "operator-b" || got.Servers["c"].Type != mcp.TypeHTTP || strings.Join(shadowed, ",") != "b" {
		t.Fatalf("merged %+v shadowed %v", got.Servers, shadowed)
	}
	if _, err := mcp.FromProfile(map[string]provider.MCPServer{"x.y": {Command: "c"}}); err == nil {
		t.Fatal("a dotted profile server name was accepted")
	}
	if _, err := mcp.FromProfile(map[string]provider.MCPServer{"x": {}}); err == nil {
		t.Fatal("a profile server with nothing to run was accepted")
	}
}

func TestSchemaWithOutsideRefIsRefused(t *testing.T) {
	for doc, ok := range map[string]bool{
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}}`: true,
		`{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`:                        false,
		`{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`:                false,
		`{"$id":"file:///tmp/","type":"object","properties":{"a":{"$ref":"x.json"}}}`:               false,
	} {
		err := mcp.LocalRefsOnly(json.RawMessage(doc))
		if (err == nil) != ok {
			t.Errorf("%s: err = %v, want ok=%v", doc, err, ok)
		}
	}
}

// TestBotCredentialsNeverReachAServer: even when the policy passes
// GITHUB_TOKEN to commands, a server's process does not get it.
func TestBotCredentialsNeverReachAServer(t *testing.T) {
	dir := t.TempDir()
	bin := faultServer(t, dir)
	t.Setenv("GITHUB_TOKEN", "ghs_should_not_pass_1234")
	t.Setenv("FAULT_TOKEN", "")
	pol := policyWith(t, "")
	allow(pol, "mcp.faulty.env")
	pol.Execution.EnvAllow = []string{"GITHUB_TOKEN"}
	e := newEnv(t, dir, `{"mcpServers":{"faulty":{"command":"`+bin+`","args":["-env-name","GITHUB_TOKEN"]}}}`, pol, mcp.Options{})
	if notes := e.m.Register(context.Background(), e.k, nil); len(notes) > 0 {
		t.Fatal(notes)
	}
	out, err := e.k.Dispatch(context.Background(), &recorder{}, kernel.Call{ID: "c", Name: "mcp.faulty.env", Args: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out.Result), "GITHUB_TOKEN=(unset)") {
		t.Fatalf("result %s: the server saw the bot's token", out.Result)
	}
}

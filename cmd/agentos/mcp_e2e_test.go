package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/mcp"
	"github.com/agentos/agentos/runtime/provider/scripted"
	"github.com/agentos/agentos/runtime/replay"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/setup"
	"github.com/agentos/agentos/schemas"
)

// everythingEntry returns server-everything's entry point from the npm
// test packages, made readable to the sandbox; a failure under CI=true.
func everythingEntry(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("AGENTOS_NPM_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "agentos-npm")
	}
	entry := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	_, err := os.Stat(entry)
	testenv.Require(t, "npm package @modelcontextprotocol/server-everything (bash .ci/npm-deps.sh)", err)
	testenv.LookPath(t, "node")
	t.Setenv(setup.EnvSandboxReadOnly, dir)
	return entry
}

// mcpRepo writes a repository whose .mcp.json mounts server-everything,
// whose greet skill uses its echo tool, and whose policy allows names.
func mcpRepo(t *testing.T, entry string, allowTools ...string) string {
	t.Helper()
	repo := t.TempDir()
	files := map[string]string{
		".mcp.json": `{"mcpServers":{"everything":{"command":"node","args":["` + entry + `","stdio"]}}}`,
		".agent/skills/greet/SKILL.md": "---\nname: greet\ndescription: Echoes a greeting back to the user through the everything MCP server's echo tool.\n" +
			"triggers:\n  - greet\nallowed-tools:\n  - mcp.everything.echo\n  - mcp.everything.get-sum\nversion: 1\nschema_version: v1\n---\n\nEcho the greeting with mcp.everything.echo.\n",
	}
	if len(allowTools) > 0 {
		pol := "capabilities:\n"
		for _, n := range allowTools {
			pol += "  " + n + ":\n    approval: never\n"
		}
		files[".agent/policy.yaml"] = pol
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(repo, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := exec.Command("sh", "-c", "git init -q && git add -A && git -c user.name=t -c user.email=t@example.com commit -qm init")
	git.Dir = repo
	if b, err := git.CombinedOutput(); err != nil {
		t.Fatalf("git: %v %s", err, b)
	}
	return repo
}

const mcpGreetScript = `roles:
  lead: [{text: '{"intent":"greet the world","constraints":[],"needs_advisor":false,"schema_version":"v1"}'}]
  planner: [{text: '{"steps":[{"id":"s1","description":"echo a greeting"}],"risks":[],"needs_advisor":false,"schema_version":"v1"}'}]
  worker:
    - tool_calls: [{id: t1, name: %s, args: %s}]
    - text: '{"output":"hello, world","steps_completed":["s1"],"tool_calls_made":["%s:t1"],"schema_version":"v1"}'
  reviewer: [{text: '{"verdict":"pass","feedback":"greeting echoed","schema_version":"v1"}'}]
`

// TestMCPEchoSeedOrder runs the specification's echo example with the echo tool of
// a real MCP server (server-everything over stdio): the event trace holds
// the seed's order, the tool result comes from the server, and the log
// verifies.
func TestMCPEchoSeedOrder(t *testing.T) {
	entry := everythingEntry(t)
	repo := mcpRepo(t, entry, "mcp.everything.echo")
	script, err := scripted.Parse(strings.NewReader(fmt.Sprintf(mcpGreetScript, "mcp.everything.echo", `{message: "hello, world"}`, "mcp.everything.echo")))
	if err != nil {
		t.Fatal(err)
	}
	env, _ := newEnv(t, script, repo)
	ctx := context.Background()
	out, err := env.mgr.Start(ctx, env.engine, agentrun.StartRequest{SessionID: "e2e", Prompt: "greet the world", Cwd: env.ws.Root()})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != "completed" {
		t.Fatalf("outcome %+v", out)
	}
	evs, err := env.store.Read(ctx, "e2e", 1)
	if err != nil {
		t.Fatal(err)
	}
	// The specification's trace, in order (a subsequence of the full log).
	seed := []string{"session.start", "hook.fired:UserPromptSubmit", "skill.invoke:greet", "agent.transition:lead", "llm.request:lead", "llm.response:lead",
		"agent.transition:planner", "llm.request:planner", "llm.response:planner", "agent.transition:worker", "tool.invoke:mcp.everything.echo",
		"tool.result:mcp.everything.echo", "llm.response:worker", "agent.transition:reviewer", "llm.response:reviewer", "hook.fired:Stop",
		"skill.complete:greet", "session.close"}
	i := 0
	for _, e := range evs {
		if i < len(seed) && matchesSeed(e, seed[i]) {
			i++
		}
	}
	if i < len(seed) {
		var got []string
		for _, e := range evs {
			got = append(got, e.Type+":"+e.Actor)
		}
		t.Fatalf("the log lacks the seed's %q (after %v) in order:\n%s", seed[i], seed[:i], strings.Join(got, " "))
	}
	for _, e := range evs {
		if e.Type == event.ToolResult {
			if !strings.Contains(string(e.Payload), "Echo: hello, world") {
				t.Fatalf("tool.result %s: want the server's echo", e.Payload)
			}
		}
	}
	if rep := replay.VerifyEvents(schemas.MustDefault(), evs); !rep.Valid {
		t.Fatal(rep.Problem)
	}
	// Re-execution in a fresh runtime (another process's view): the
	// current code reaches the same decisions from the log alone, and no
	// MCP server is started.
	env2, _ := newEnv(t, script, repo)
	var history []event.Event
	for _, e := range evs {
		if e.Type == event.RunStarted || len(history) > 0 {
			history = append(history, e)
		}
	}
	if _, err := agentrun.Reexecute(ctx, env2.engine, "greet the world", history); err != nil {
		t.Fatalf("re-execution: %v", err)
	}
	if env2.mcp.(*mcp.Mount).Started("everything") {
		t.Fatal("re-execution started the MCP server")
	}
}

func matchesSeed(e event.Event, want string) bool {
	typ, detail, _ := strings.Cut(want, ":")
	if e.Type != typ {
		return false
	}
	switch {
	case detail == "":
		return true
	case typ == "tool.invoke" || typ == "tool.result":
		return event.FieldString(e.Payload, "tool") == detail
	case typ == "hook.fired":
		return strings.Contains(string(e.Payload), `"`+detail+`"`)
	case typ == "skill.invoke" || typ == "skill.complete":
		return strings.Contains(string(e.Payload), `"`+detail+`"`)
	}
	return e.Actor == detail
}

// TestMCPToolUnderApprovalAcrossProcesses: a run in a repository whose
// .mcp.json mounts server-everything calls get-sum, which the policy does
// not name: the run pauses for approval; a second process approves, the
// call runs on a server started then (nothing before the pause is
// repeated), the run completes, and agentos verify accepts the log.
func TestMCPToolUnderApprovalAcrossProcesses(t *testing.T) {
	entry := everythingEntry(t)
	repo := mcpRepo(t, entry)
	data := t.TempDir()
	scriptFile := filepath.Join(t.TempDir(), "script.yaml")
	if err := os.WriteFile(scriptFile, []byte(fmt.Sprintf(mcpGreetScript, "mcp.everything.get-sum", `{a: 2, b: 40}`, "mcp.everything.get-sum")), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"--repo", repo, "--data", data, "--provider", "scripted", "--script", scriptFile, "--json"}
	out1 := cliProcess(t, exitApproval, append([]string{"run", "--session", "s-mcp"}, append(common, "greet the world")...)...)
	var r1 runReport
	if err := json.Unmarshal(out1, &r1); err != nil || r1.Status != "paused" || len(r1.Pending) != 1 || r1.Pending[0].Tool != "mcp.everything.get-sum" {
		t.Fatalf("first process: %v %s", err, out1)
	}
	out2 := cliProcess(t, exitOK, append([]string{"approve", "s-mcp", r1.Pending[0].ApprovalID, "--by", "octocat"}, common...)...)
	var r2 runReport
	if err := json.Unmarshal(out2, &r2); err != nil || r2.Status != "completed" {
		t.Fatalf("second process: %v %s", err, out2)
	}
	cliProcess(t, exitOK, "verify", r2.LogPath)
	evs, err := readJSONL(r2.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	var invokes, results []string
	for _, e := range evs {
		switch e.Type {
		case event.ToolInvoke:
			invokes = append(invokes, string(e.Payload))
		case event.ToolResult:
			results = append(results, string(e.Payload))
		}
	}
	if len(invokes) != 1 || !strings.Contains(invokes[0], `"approval_id":"`+r1.Pending[0].ApprovalID+`"`) {
		t.Fatalf("tool invocations %v: want one, carrying the approval", invokes)
	}
	if len(results) != 1 || !strings.Contains(results[0], `"ok":true`) || !strings.Contains(results[0], "42") {
		t.Fatalf("tool results %v: want one approved get-sum = 42", results)
	}
}

// TestReadmeMCPExamples: the .mcp.json examples of docs/customizing.md
// parse, and the client snippet names a real command.
func TestReadmeMCPExamples(t *testing.T) {
	block := docBlock(t, "docs/customizing.md", "### Using a repository's servers", "json")
	c, err := mcp.ParseConfig("customizing.md", strings.NewReader(block))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Names(), ","); got != "everything,fs,tickets" || c.Servers["tickets"].Type != mcp.TypeHTTP {
		t.Fatalf("servers %s %+v", got, c.Servers)
	}
	readme := string(readRepoFile(t, "docs/customizing.md"))
	if !strings.Contains(readme, `"args": ["mcp", "serve", "--workspace", "."]`) {
		t.Fatal("the client snippet of docs/customizing.md changed: check it against agentos mcp serve -h")
	}
	if _, ok := commands()["mcp"]; !ok {
		t.Fatal("no mcp command")
	}
}

// TestMCPToolInTheDefaultScope: a request no skill matches runs in the
// default skill's scope, which takes in the mounted servers' tools
// (mcp.<server>.*, recorded as scope_extra): an MCP tool is offered and
// called, and waits for approval as the policy says, instead of being
// refused as out of scope.
func TestMCPToolInTheDefaultScope(t *testing.T) {
	entry := everythingEntry(t)
	repo := mcpRepo(t, entry)
	data := t.TempDir()
	scriptFile := filepath.Join(t.TempDir(), "script.yaml")
	if err := os.WriteFile(scriptFile, []byte(fmt.Sprintf(mcpGreetScript, "mcp.everything.get-sum", `{a: 2, b: 40}`, "mcp.everything.get-sum")), 0o644); err != nil {
		t.Fatal(err)
	}
	out := cliProcess(t, exitApproval, "run", "--session", "s-scope", "--repo", repo, "--data", data, "--provider", "scripted", "--script", scriptFile, "--json", "add two numbers")
	var r runReport
	if err := json.Unmarshal(out, &r); err != nil || r.Status != "paused" || len(r.Pending) != 1 || r.Pending[0].Tool != "mcp.everything.get-sum" {
		t.Fatalf("run: %v %s", err, out)
	}
	evs, err := readJSONL(r.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == event.SkillInvoke {
			if p := string(e.Payload); !strings.Contains(p, `"scope":"default"`) || !strings.Contains(p, `"scope_extra":["mcp.everything.*"]`) {
				t.Errorf("skill.invoke %s", p)
			}
		}
		if e.Type == event.ToolRejected {
			t.Errorf("rejected: %s", e.Payload)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/scripted"
	"github.com/agentos/agentos/runtime/replay"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/store/sqlite"
	"github.com/agentos/agentos/schemas"
	"github.com/agentos/agentos/skills"
)

var updateSessions = flag.Bool("update-sessions", false, "re-record testdata/sessions")

func loadScript(t *testing.T, name string) *scripted.Script {
	t.Helper()
	s, err := scripted.Load(filepath.Join("..", "..", "testdata", "scripts", name))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newEnv(t *testing.T, script *scripted.Script, repo string) (*runtimeEnv, string) {
	t.Helper()
	if repo == "" {
		repo = t.TempDir()
	}
	data := t.TempDir()
	prof := provider.DefaultProfile()
	prof.Script = "inline"
	env, err := buildRuntime(context.Background(), envOptions{repo: repo, dataDir: data, profile: prof, script: script, sessionID: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	return env, data
}

func greetRun(t *testing.T) (*runtimeEnv, agentrun.Outcome, []event.Event) {
	t.Helper()
	env, _ := newEnv(t, loadScript(t, "greet.yaml"), "")
	ctx := context.Background()
	out, err := env.mgr.Start(ctx, env.engine, agentrun.StartRequest{SessionID: "e2e", Prompt: "greet the world", Cwd: env.ws.Root()})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := env.store.Read(ctx, "e2e", 1)
	if err != nil {
		t.Fatal(err)
	}
	return env, out, evs
}

// The eleven end-to-end test criteria of the specification.

func TestE2E01RequiredSchemasLoaded(t *testing.T) {
	r := schemas.MustDefault()
	for _, id := range []string{"completion_request_v1", "completion_response_v1", "lead_directive_v1", "plan_v1", "worker_report_v1", "review_result_v1", "skill_frontmatter_v1", "write_claim_v1"} {
		if !r.Has(id) {
			t.Errorf("%s not loaded", id)
		}
	}
}

func TestE2E02GreetSkillDiscovered(t *testing.T) {
	env, _ := newEnv(t, loadScript(t, "greet.yaml"), "")
	s := env.engine.Skills.Select("please greet everyone")
	if s == nil || s.Name != "greet" || strings.Join(s.AllowedTools, ",") != "echo" {
		t.Fatalf("greet skill: %+v", s)
	}
	if _, err := fsStat(skills.FS, "greet/SKILL.md"); err != nil {
		t.Fatal(err)
	}
}

func TestE2E03EchoToolRegistered(t *testing.T) {
	env, _ := newEnv(t, loadScript(t, "greet.yaml"), "")
	found := false
	for _, d := range env.kernel.Tools() {
		found = found || d.Name == "echo"
	}
	if !found {
		t.Fatal("echo not registered")
	}
}

func TestE2E04HooksRegistered(t *testing.T) {
	env, _ := newEnv(t, loadScript(t, "greet.yaml"), "")
	for _, ev := range []string{"PreToolUse", "Stop", "UserPromptSubmit"} {
		if len(env.hooks.Handlers(hooksEvent(ev))) == 0 {
			t.Errorf("no %s hook registered", ev)
		}
	}
}

// TestE2E05ProviderSwapThroughProfile: the provider is chosen by the
// profile alone; the engine code does not change.
func TestE2E05ProviderSwapThroughProfile(t *testing.T) {
	reg := providers(loadScript(t, "greet.yaml"))
	reg["other"] = func(ctx context.Context, p provider.Profile) (provider.Provider, error) {
		return scripted.New(&scripted.Script{Model: "other-model", Roles: map[string][]scripted.Entry{"lead": {{Text: "x"}}}}), nil
	}
	for name, wantModel := range map[string]string{"scripted": "scripted", "other": "other-model"} {
		p := provider.DefaultProfile()
		p.Provider = name
		prov, err := reg.New(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := prov.Complete(context.Background(), provider.CompletionRequest{Role: "lead", Messages: []provider.Message{{Role: "user", Content: "x"}}, Model: p.Model})
		if err != nil || resp.Model != wantModel {
			t.Errorf("%s: %+v %v", name, resp, err)
		}
	}
	p := provider.DefaultProfile()
	p.Provider = "missing"
	if _, err := reg.New(context.Background(), p); err == nil {
		t.Error("an unknown provider was accepted")
	}
}

func TestE2E06HandleUserRequestCompletes(t *testing.T) {
	_, out, evs := greetRun(t)
	if out.Status != "completed" || out.Output != "hello, world" {
		t.Fatalf("%+v", out)
	}
	var roles []string
	for _, e := range evs {
		if e.Type == event.AgentTransition {
			roles = append(roles, e.Actor)
		}
	}
	if got := strings.Join(roles, ">"); got != "lead>planner>worker>reviewer>reviewer" {
		t.Errorf("roles %s", got)
	}
}

func TestE2E07EventsContainEveryKind(t *testing.T) {
	_, _, evs := greetRun(t)
	have := map[string]bool{}
	for _, e := range evs {
		have[e.Type] = true
	}
	// The audit-completeness list.
	for _, typ := range []string{"session.start", "hook.fired", "skill.invoke", "agent.transition", "llm.request", "llm.response", "tool.invoke", "tool.result", "worker.report", "skill.complete", "session.close"} {
		if !have[typ] {
			t.Errorf("no %s event", typ)
		}
	}
	if rep := replay.VerifyEvents(schemas.MustDefault(), evs); !rep.Valid {
		t.Fatal(rep.Problem)
	}
}

func TestE2E08ReplayReproducesSnapshot(t *testing.T) {
	_, out, evs := greetRun(t)
	a, err := replay.Replay(evs)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for i := range evs {
		buf.Write(append(evs[i].Line(), '\n'))
	}
	b, err := replay.ReplayReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !a.Closed || a.Output != out.Output || !bytes.Equal(ja, jb) {
		t.Fatalf("snapshot closed=%v output=%q", a.Closed, a.Output)
	}
}

func TestE2E09ProtectedWriteRejectsStaleHash(t *testing.T) {
	repo := t.TempDir()
	os.WriteFile(filepath.Join(repo, "f.txt"), []byte("v1"), 0o644)
	env, _ := newEnv(t, loadScript(t, "greet.yaml"), repo)
	env.kernel.Policy.Capabilities["repo.write"] = struct {
		Approval string `json:"approval"`
	}{"never"}
	_, err := env.kernel.Dispatch(context.Background(), discard{}, kernel.Call{ID: "w", Name: "repo.write", Args: json.RawMessage(`{"path":"f.txt","content":"v2","expected_hash":"` + strings.Repeat("a", 64) + `"}`)})
	var ke *kernel.Error
	if !errors.As(err, &ke) || ke.Code != kernel.CodeWriteConflict {
		t.Fatalf("got %v, want WRITE_CONFLICT", err)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "f.txt")); string(b) != "v1" {
		t.Fatal("file changed")
	}
}

func TestE2E10InvalidSchemaPayloadFailsClosed(t *testing.T) {
	env, _ := newEnv(t, loadScript(t, "greet.yaml"), "")
	_, err := env.store.Append(context.Background(), "bad", 0, event.Draft{Type: event.LLMResponse, Actor: "lead", Payload: map[string]any{"role": "lead", "response": map[string]any{"text": 5}}})
	var sv *event.SchemaViolationError
	if !errors.As(err, &sv) {
		t.Fatalf("got %v", err)
	}
	evs, _ := env.store.Read(context.Background(), "bad", 1)
	if len(evs) != 1 || evs[0].Type != event.SchemaViolation {
		t.Fatalf("want only schema.violation, got %v", evs)
	}
	// And a role output that violates its schema twice ends the run.
	s := &scripted.Script{Roles: map[string][]scripted.Entry{"lead": {{Text: `{"intent":""}`}, {Text: "not json"}}}}
	env2, _ := newEnv(t, s, "")
	out, err := env2.mgr.Start(context.Background(), env2.engine, agentrun.StartRequest{SessionID: "m", Prompt: "greet"})
	if err != nil || out.Status != "failed" || !strings.HasPrefix(out.Terminal.Reason, "MALFORMED_AGENT_MESSAGE") {
		t.Fatalf("%+v %v", out, err)
	}
}

func TestE2E11UserPromptSubmitRedacts16Digits(t *testing.T) {
	env, _ := newEnv(t, loadScript(t, "greet.yaml"), "")
	ctx := context.Background()
	if _, err := env.mgr.Start(ctx, env.engine, agentrun.StartRequest{SessionID: "cc", Prompt: "greet card 4111111111111111"}); err != nil {
		t.Fatal(err)
	}
	evs, _ := env.store.Read(ctx, "cc", 1)
	for _, e := range evs {
		if e.Type == event.LLMRequest && bytes.Contains(e.Payload, []byte("4111111111111111")) {
			t.Fatal("the card number reached the model")
		}
	}
	found := false
	for _, e := range evs {
		found = found || (e.Type == event.HookFired && event.FieldString(e.Payload, "decision") == "transform")
	}
	if !found {
		t.Fatal("no transform decision recorded")
	}
}

// TestRecordedSessions re-executes the sessions under testdata/sessions
// with the current code against their recorded model and tool results.
func TestRecordedSessions(t *testing.T) {
	cases := []struct {
		name, script, prompt string
		approve              bool
	}{
		{"success", "greet.yaml", "greet the world", false},
		{"rework", "greet-rework.yaml", "greet the world", false},
		{"approval", "", demo.Prompt, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join("..", "..", "testdata", "sessions", c.name+".events.jsonl")
			var script *scripted.Script
			repo := t.TempDir()
			if c.script != "" {
				script = loadScript(t, c.script)
			} else {
				var err error
				if script, err = demo.Script(); err != nil {
					t.Fatal(err)
				}
				if err := demo.WriteSample(repo); err != nil {
					t.Fatal(err)
				}
			}
			if *updateSessions {
				recordSession(t, script, repo, c.prompt, c.approve, path)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (record with: go test ./cmd/agentos -run RecordedSessions -update-sessions)", err)
			}
			if rep, _ := replay.VerifyReader(schemas.MustDefault(), bytes.NewReader(b)); !rep.Valid {
				t.Fatalf("recorded log invalid: %v", rep.Problem)
			}
			evs, err := readJSONL(path)
			if err != nil {
				t.Fatal(err)
			}
			env, _ := newEnv(t, script, repo)
			// Re-execute the last run of the session.
			var runID string
			for _, e := range evs {
				if e.Type == event.RunStarted {
					runID = e.RunID
				}
			}
			var history []event.Event
			prompt := ""
			for _, e := range evs {
				if e.RunID == runID && (e.Type == event.RunStarted || len(history) > 0) {
					if e.Type == event.RunStarted {
						prompt = event.FieldString(e.Payload, "prompt")
					}
					history = append(history, e)
				}
			}
			if _, err := agentrun.Reexecute(context.Background(), env.engine, prompt, history); err != nil {
				var nd *agentrun.NonDeterminismError
				if errors.As(err, &nd) {
					t.Fatalf("the current code diverges from the recorded session: %v", err)
				}
				t.Fatal(err)
			}
		})
	}
}

func recordSession(t *testing.T, script *scripted.Script, repo, prompt string, approve bool, path string) {
	t.Helper()
	env, _ := newEnv(t, script, repo)
	ctx := context.Background()
	sid := "recorded-" + strings.TrimSuffix(filepath.Base(path), ".events.jsonl")
	out, err := env.mgr.Start(ctx, env.engine, agentrun.StartRequest{SessionID: sid, Prompt: prompt, Cwd: env.ws.Root()})
	if err != nil {
		t.Fatal(err)
	}
	for approve && out.Status == "paused" {
		if err := env.mgr.Resolve(ctx, sid, out.Pending[0].ApprovalID, "approve", "octocat", ""); err != nil {
			t.Fatal(err)
		}
		if out, err = env.mgr.Resume(ctx, env.engine, sid, env.ws.Root(), ""); err != nil {
			t.Fatal(err)
		}
	}
	if out.Status != "completed" {
		t.Fatalf("recording ended %+v", out)
	}
	evs, err := env.store.Read(ctx, sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for i := range evs {
		buf.Write(append(evs[i].Line(), '\n'))
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPauseKillResumeAcrossProcesses runs `agentos run` in one process until
// it pauses for approval, lets that process end, and approves in a new
// process, which completes the run from the log.
func TestPauseKillResumeAcrossProcesses(t *testing.T) {
	repo, data := t.TempDir(), t.TempDir()
	if err := demo.WriteSample(repo); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "script.yaml")
	b, _ := os.ReadFile(filepath.Join("..", "..", "runtime", "demo", "testdata", "fix-auth.script.yaml"))
	os.WriteFile(script, b, 0o644)
	common := []string{"--repo", repo, "--data", data, "--provider", "scripted", "--script", script, "--json"}
	out1 := cliProcess(t, exitApproval, append([]string{"run", "--session", "s-proc"}, append(common, demo.Prompt)...)...)
	var r1 runReport
	if err := json.Unmarshal(out1, &r1); err != nil || r1.Status != "paused" || len(r1.Pending) != 1 {
		t.Fatalf("first process: %v %s", err, out1)
	}
	out2 := cliProcess(t, exitOK, append([]string{"approve", "s-proc", r1.Pending[0].ApprovalID, "--by", "octocat"}, common...)...)
	var r2 runReport
	if err := json.Unmarshal(out2, &r2); err != nil || r2.Status != "completed" {
		t.Fatalf("second process: %v %s", err, out2)
	}
	f, err := os.Open(r2.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, _ := replay.VerifyReader(schemas.MustDefault(), f)
	if !rep.Valid {
		t.Fatalf("final log: %v", rep.Problem)
	}
	evs, _ := readJSONL(r2.LogPath)
	calls := map[string]int{}
	for _, e := range evs {
		if e.Type == event.ToolInvoke {
			calls[event.FieldString(e.Payload, "call_id")]++
		}
	}
	for id, n := range calls {
		if n != 1 {
			t.Errorf("tool call %s executed %d times", id, n)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "auth.go")); !bytes.Contains(b, []byte("ConstantTimeCompare")) {
		t.Error("the fix is not in the repository")
	}
}

// cliProcess runs the CLI in a separate process (this test binary re-run
// as the CLI), checks its exit code and returns its stdout.
func cliProcess(t *testing.T, wantCode int, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCLIProcess$")
	cmd.Env = append(os.Environ(), "AGENTOS_CLI_ARGS="+strings.Join(args, "\x1f"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("agentos %v: %v", args, err)
	}
	if code := cmd.ProcessState.ExitCode(); code != wantCode {
		t.Fatalf("agentos %v: exit %d, want %d\n%s%s", args, code, wantCode, out.String(), errb.String())
	}
	return out.Bytes()
}

func TestCLIProcess(t *testing.T) {
	args := os.Getenv("AGENTOS_CLI_ARGS")
	if args == "" {
		t.Skip("runs only as a child of TestPauseKillResumeAcrossProcesses")
	}
	err := run(context.Background(), strings.Split(args, "\x1f"), os.Stdout, os.Stderr)
	os.Exit(exitCode(err, os.Stderr))
}

func TestToolCallExitCodes(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hello\n"), 0o644)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	cases := []struct {
		args []string
		code int
	}{
		{[]string{"tool", "call", "repo.read", "--args", `{"path":"a.txt"}`, "--workspace", ws}, 0},
		{[]string{"tool", "call", "repo.read", "--args", `{"path":"../etc/passwd"}`, "--workspace", ws, "--events", events}, 3},
		{[]string{"tool", "call", "repo.write", "--args", `{"path":"b.txt","content":"x","expected_hash":""}`, "--workspace", ws, "--events", events}, 4},
		{[]string{"tool", "call", "repo.read", "--args", `{"path":"a.txt"}`}, 2},
		{[]string{"tool", "frobnicate"}, 2},
	}
	for _, c := range cases {
		out, errOut, code := runCLI(t, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d\n%s%s", c.args, code, c.code, out, errOut)
		}
	}
	evs, err := readJSONL(events)
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := replay.Replay(evs)
	if len(snap.PendingApprovals) != 1 {
		t.Fatalf("pending %+v", snap.PendingApprovals)
	}
	out, errOut, code := runCLI(t, "tool", "approve", snap.PendingApprovals[0].ID, "--workspace", ws, "--events", events)
	if code != 0 {
		t.Fatalf("approve: %d %s%s", code, out, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "b.txt")); string(b) != "x" {
		t.Fatal("approved write not executed")
	}
	if _, _, code := runCLI(t, "verify", events); code != 0 {
		t.Fatal("the tool call log does not verify")
	}
}

func TestDemo(t *testing.T) {
	out := t.TempDir()
	stdout, stderr, code := runCLI(t, "demo", "--out", out)
	if code != 0 {
		t.Fatalf("demo exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"The run paused: repo.patch needs approval", "ConstantTimeCompare", "turn.terminal", "status    completed", "agentos verify: OK", "agentos view " + filepath.Join(out, "events.jsonl"),
		"workflow.started", "workflow.phase_advanced", "workflow.policy_gated", "workflow.completed"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	// The audit-completeness list holds for the demo session.
	vout, _, code := runCLI(t, "verify", "--json", filepath.Join(out, "events.jsonl"))
	var rep replay.Report
	if code != 0 || json.Unmarshal([]byte(vout), &rep) != nil || !rep.Valid {
		t.Fatalf("demo events.jsonl does not verify (exit %d):\n%s", code, vout)
	}
	if rep.Audit == nil || !rep.Audit.Complete {
		t.Errorf("demo session is not audit-complete: %+v", rep.Audit)
	}
	evs, err := readJSONL(filepath.Join(out, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, e := range evs {
		have[e.Type] = true
	}
	for _, typ := range append(append([]string(nil), replay.SuccessfulSessionTypes...), event.ApprovalRequested, event.RunPaused, event.ApprovalResolved, event.RunResumed, event.TurnTerminal,
		event.WorkflowStarted, event.WorkflowPhaseAdvanced, event.WorkflowCompleted) {
		if !have[typ] {
			t.Errorf("demo session has no %s event", typ)
		}
	}
	cmd := exec.Command("go", "test", "./...")
	cmd.Dir = filepath.Join(out, "repo")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the sample's tests still fail after the demo: %v\n%s", err, b)
	}
	_ = fmt.Sprint()
}

// TestRecoverFromLogAlone: the local-first guarantee. A run pauses,
// the database is deleted, and an approval from a new process finds the
// session in its exported events.jsonl, imports it after verifying it,
// and completes; the final log verifies. A log edited while the database
// is gone is refused and nothing is imported.
func TestRecoverFromLogAlone(t *testing.T) {
	repo, data := t.TempDir(), t.TempDir()
	if err := demo.WriteSample(repo); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "script.yaml")
	b, _ := os.ReadFile(filepath.Join("..", "..", "runtime", "demo", "testdata", "fix-auth.script.yaml"))
	os.WriteFile(script, b, 0o644)
	common := []string{"--repo", repo, "--data", data, "--provider", "scripted", "--script", script, "--json"}
	out1 := cliProcess(t, exitApproval, append([]string{"run", "--session", "s-lost"}, append(common, demo.Prompt)...)...)
	var r1 runReport
	if err := json.Unmarshal(out1, &r1); err != nil || r1.Status != "paused" || len(r1.Pending) != 1 {
		t.Fatalf("first process: %v %s", err, out1)
	}
	deleteDB := func() {
		t.Helper()
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(filepath.Join(data, sqlite.FileName+suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
		}
	}
	deleteDB()
	good, err := os.ReadFile(r1.LogPath)
	if err != nil {
		t.Fatal(err)
	}

	// An edited log is refused: approve fails and imports nothing.
	edited := bytes.Replace(good, []byte(`"prompt":"`), []byte(`"prompt":"also delete everything; `), 1)
	if bytes.Equal(edited, good) {
		t.Fatal("test log has no prompt to edit")
	}
	if err := os.WriteFile(r1.LogPath, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	cliProcess(t, exitFailure, append([]string{"approve", "s-lost", r1.Pending[0].ApprovalID, "--by", "octocat"}, common...)...)
	if evs, err := readStoreSession(context.Background(), data, "s-lost"); err == nil && len(evs) > 0 {
		t.Fatalf("an edited log was imported: %d events", len(evs))
	}
	deleteDB()
	if err := os.WriteFile(r1.LogPath, good, 0o644); err != nil {
		t.Fatal(err)
	}

	out2 := cliProcess(t, exitOK, append([]string{"approve", "s-lost", r1.Pending[0].ApprovalID, "--by", "octocat"}, common...)...)
	var r2 runReport
	if err := json.Unmarshal(out2, &r2); err != nil || r2.Status != "completed" {
		t.Fatalf("approve after the database was deleted: %v %s", err, out2)
	}
	f, err := os.Open(r2.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if rep, _ := replay.VerifyReader(schemas.MustDefault(), f); !rep.Valid {
		t.Fatalf("final log: %v", rep.Problem)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "auth.go")); !bytes.Contains(b, []byte("ConstantTimeCompare")) {
		t.Error("the fix is not in the repository")
	}
}

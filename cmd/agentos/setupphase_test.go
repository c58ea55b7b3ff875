package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider/scripted"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/setup"
)

// The setup phase end to end (docs/project-config.md): `agentos run` on
// a repository whose tests need a dependency from a package registry.

// setupTestScript: the Worker runs the tests and reports them passing.
const setupTestScript = `roles:
  lead: [{text: '{"intent":"run the tests","constraints":[],"needs_advisor":false,"schema_version":"v1"}'}]
  planner: [{text: '{"steps":[{"id":"s1","description":"run the tests and confirm they pass"}],"risks":[],"needs_advisor":false,"schema_version":"v1"}'}]
  worker:
    - tool_calls: [{id: t1, name: test.run, args: {}}]
    - text: '{"output":"all tests pass","steps_completed":["s1"],"tool_calls_made":["test.run:t1"],"schema_version":"v1"}'
  reviewer: [{text: '{"verdict":"pass","feedback":"ok","schema_version":"v1"}'}]
`

// A Go module whose test needs github.com/google/uuid.
const (
	uuidGoMod = "module example.com/setupsample\n\ngo 1.22\n\nrequire github.com/google/uuid v1.6.0\n"
	uuidGoSum = "github.com/google/uuid v1.6.0 h1:NIvaJDMOsjHA8n1jAhLSgzrAzy1Hgr+hNrb57e+94F0=\n" +
		"github.com/google/uuid v1.6.0/go.mod h1:TIyPZe4MgqvfeYDBFedMoGGpEw/LqOeaOT+nhxU+yHo=\n"
	uuidTest = `package setupsample

import (
	"testing"

	"github.com/google/uuid"
)

func TestParse(t *testing.T) {
	u, err := uuid.Parse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	if err != nil || u.Version() != 1 {
		t.Fatalf("uuid %v %v", u, err)
	}
}
`
)

// An npm package whose test needs is-number from the npm registry, with
// its lock file (so the detected setup is npm ci).
const (
	isNumberPackage = `{"name":"setupsample","version":"1.0.0","private":true,"scripts":{"test":"node test.js"},"dependencies":{"is-number":"7.0.0"}}
`
	isNumberLock = `{
  "name": "setupsample",
  "version": "1.0.0",
  "lockfileVersion": 3,
  "requires": true,
  "packages": {
    "": {"name": "setupsample", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}},
    "node_modules/is-number": {
      "version": "7.0.0",
      "resolved": "https://registry.npmjs.org/is-number/-/is-number-7.0.0.tgz",
      "integrity": "sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004MRL43QKPDlK9cGvNp6NZWZUBlbGXYxxng==",
      "license": "MIT",
      "engines": {"node": ">=0.12.0"}
    }
  }
}
`
	isNumberTest = `const isNumber = require("is-number");
if (!isNumber(5) || isNumber("x")) { console.error("is-number is wrong"); process.exit(1); }
console.log("is-number works");
`
)

// offlineSetupPolicy is a repository policy that narrows the setup
// phase's network to none.
const offlineSetupPolicy = "setup:\n  network:\n    allow: []\n"

// requireRegistry ends the test unless host:443 answers: a failure under
// CI=true, a loud skip elsewhere (kernel/testenv).
func requireRegistry(t *testing.T, host string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", host+":443", 10*time.Second)
	if err == nil {
		c.Close()
	}
	testenv.Require(t, "the package registry "+host, err)
}

// setupEvent is an event of a run's log, as much as these tests read.
type setupEvent struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Actor   string          `json:"actor"`
	Parent  *string         `json:"parent_id"`
	Payload json.RawMessage `json:"payload"`
}

// setupCall is one tool call of a log: its invoke and result payloads.
type setupCall struct {
	Tool    string
	Actor   string
	Invoke  map[string]any
	Command string
	OK      bool
	Result  map[string]any
}

func readCalls(t *testing.T, logPath string) (calls []setupCall, order []string) {
	t.Helper()
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	byID := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e setupEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		order = append(order, e.Type+"/"+e.Actor)
		var p map[string]any
		_ = json.Unmarshal(e.Payload, &p)
		switch e.Type {
		case "tool.invoke":
			args, _ := p["args"].(map[string]any)
			cmd, _ := args["command"].(string)
			tool, _ := p["tool"].(string)
			byID[e.ID] = len(calls)
			calls = append(calls, setupCall{Tool: tool, Actor: e.Actor, Invoke: p, Command: cmd})
		case "tool.result":
			if e.Parent == nil {
				t.Fatalf("tool.result without parent: %s", e.Payload)
			}
			i, ok := byID[*e.Parent]
			if !ok {
				t.Fatalf("tool.result of no invoke: %s", e.Payload)
			}
			calls[i].OK, _ = p["ok"].(bool)
			calls[i].Result = p
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return calls, order
}

// result is a call's result object (or its error's details).
func (c setupCall) result() map[string]any {
	if r, ok := c.Result["result"].(map[string]any); ok {
		return r
	}
	if e, ok := c.Result["error"].(map[string]any); ok {
		if d, ok := e["details"].(map[string]any); ok {
			return d
		}
	}
	return nil
}

func (c setupCall) durationMS() float64 {
	d, _ := c.result()["duration_ms"].(float64)
	return d
}

// cacheOf is the dependency cache a setup call's profile names writable.
func (c setupCall) cacheOf(t *testing.T, what string) string {
	t.Helper()
	sb, _ := c.Invoke["sandbox"].(map[string]any)
	w, _ := sb["writable"].([]any)
	for _, x := range w {
		if s, _ := x.(string); strings.HasSuffix(s, " (the repository's "+what+")") {
			return strings.TrimSuffix(s, " (the repository's "+what+")")
		}
	}
	t.Fatalf("the setup call's profile names no %s: %v", what, c.Invoke["sandbox"])
	return ""
}

// removeTree removes a directory the Go command made read-only.
func removeTree(dir string) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}

// agentRun runs `agentos run` with the scripted Worker on repo.
func agentRun(t *testing.T, repo string) (runReport, string, int) {
	t.Helper()
	script := writeFile(t, t.TempDir(), "script.yaml", setupTestScript)
	out, errOut, code := runCLI(t, "run", "--repo", repo, "--data", t.TempDir(), "--provider", "scripted", "--script", script, "--json", "run the tests")
	var r runReport
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Terminal == nil {
		t.Fatalf("exit %d %s%s", code, out, errOut)
	}
	if vout, verr, vcode := runCLI(t, "verify", r.LogPath); vcode != exitOK {
		t.Fatalf("verify of %s: exit %d %s%s", r.LogPath, vcode, vout, verr)
	}
	return r, errOut, code
}

// onSandboxes runs f under bwrap and under Landlock (each must work under
// CI=true). Without bwrap on the PATH its case is skipped: .ci/run's
// Landlock pass hides it on purpose, and kernel/sandbox's tests require it
// under CI.
func onSandboxes(t *testing.T, f func(t *testing.T)) {
	for _, mode := range []sandbox.Mode{sandbox.ModeBwrap, sandbox.ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			if _, err := exec.LookPath("bwrap"); err != nil && mode == sandbox.ModeBwrap {
				t.Skipf("SKIPPING: bwrap is not on the PATH: %v", err)
			}
			t.Setenv(sandbox.EnvMode, string(mode))
			// The host's module cache, which commands see read-only, is
			// empty: what the tests find, the setup phase brought. (A
			// sandbox is detected once per process and setting: naming
			// the empty cache in AGENTOS_SANDBOX_READONLY too makes this
			// one detected anew, with it.)
			empty := t.TempDir()
			t.Setenv("GOMODCACHE", empty)
			t.Setenv(setup.EnvSandboxReadOnly, empty)
			sb, err := setup.Sandbox(context.Background(), os.Getenv)
			if err != nil {
				t.Fatal(err)
			}
			testenv.Require(t, "the "+string(mode)+" sandbox", sb.Err())
			f(t)
		})
	}
}

// TestSetupPhaseGo: the detected setup (go mod download) fetches a module
// through the egress proxy into the repository's own module cache; the
// tests then pass with the network off; a second run of the same
// repository needs no network for its setup; a fresh repository whose
// setup has no network fails with a terminal report naming the command.
// Every log verifies.
func TestSetupPhaseGo(t *testing.T) {
	testenv.LookPath(t, "go")
	requireRegistry(t, "proxy.golang.org")
	onSandboxes(t, func(t *testing.T) {
		repo := t.TempDir()
		writeFile(t, repo, "go.mod", uuidGoMod)
		writeFile(t, repo, "go.sum", uuidGoSum)
		writeFile(t, repo, "uuid_test.go", uuidTest)

		// Cold: the module is downloaded.
		r, errOut, code := agentRun(t, repo)
		calls, order := readCalls(t, r.LogPath)
		if code != exitOK || r.Status != "completed" || len(calls) < 2 {
			t.Fatalf("exit %d, status %s, terminal %+v, calls %+v\n%s", code, r.Status, r.Terminal, calls, errOut)
		}
		set, tst := calls[0], calls[len(calls)-1]
		modcache := set.cacheOf(t, "Go module cache")
		t.Cleanup(func() { removeTree(filepath.Dir(modcache)) })
		if set.Tool != "setup.run" || set.Actor != "agentos" || set.Command != "go mod download" || !set.OK || set.Invoke["detected"] != true {
			t.Fatalf("setup call %+v", set)
		}
		if sb, _ := set.Invoke["sandbox"].(map[string]any); sb["network"] != "allow-list" {
			t.Fatalf("setup ran without the allow-list: %v", sb)
		}
		// Before the Lead's first model call.
		iSetup, iLLM := index(order, "tool.result/agentos"), index(order, "llm.request/lead")
		if iSetup < 0 || iLLM < 0 || iSetup > iLLM {
			t.Fatalf("setup is not before the agent phase: %v", order)
		}
		if _, err := os.Stat(filepath.Join(modcache, "github.com", "google", "uuid@v1.6.0", "uuid.go")); err != nil {
			t.Fatalf("the module is not in the repository's cache: %v", err)
		}
		if tst.Tool != "test.run" || !tst.OK || tst.result()["passed"] != true {
			t.Fatalf("test.run %+v", tst)
		}
		if sb, _ := tst.Invoke["sandbox"].(map[string]any); sb["network"] != "off" || !strings.Contains(strings.Join(strs(sb["read_only"]), "\n"), modcache+" (the repository's Go module cache)") {
			t.Fatalf("test.run's profile: %v", sb)
		}
		cold, inside := set.durationMS(), tst.durationMS()
		// Re-execution from the log runs no setup command and decides the
		// same.
		if err := reexecuteLog(t, repo, r.LogPath); err != nil {
			t.Fatalf("re-execution: %v", err)
		}

		// Warm: the same repository, its setup without network.
		writeFile(t, repo, ".agent/policy.yaml", offlineSetupPolicy)
		r2, errOut2, code2 := agentRun(t, repo)
		calls2, _ := readCalls(t, r2.LogPath)
		if code2 != exitOK || r2.Status != "completed" || len(calls2) < 2 || !calls2[0].OK || calls2[0].Tool != "setup.run" {
			t.Fatalf("second run: exit %d, status %s, terminal %+v, calls %+v\n%s", code2, r2.Status, r2.Terminal, calls2, errOut2)
		}
		if sb, _ := calls2[0].Invoke["sandbox"].(map[string]any); sb["network"] != "off" || calls2[0].cacheOf(t, "Go module cache") != modcache {
			t.Fatalf("second setup: %v", sb)
		}
		warm := calls2[0].durationMS()

		// The same tests outside the sandbox, with the same caches.
		gocache := os.Getenv(setup.EnvGoCache)
		host := exec.Command("go", "test", "-count=1", "./...")
		host.Dir = repo
		host.Env = append(os.Environ(), "GOMODCACHE="+modcache, "GOPROXY=off", "GOFLAGS=-mod=readonly")
		if gocache != "" {
			host.Env = append(host.Env, "GOCACHE="+gocache)
		}
		start := time.Now()
		if out, err := host.CombinedOutput(); err != nil {
			t.Fatalf("go test outside the sandbox: %v\n%s", err, out)
		}
		outside := time.Since(start).Milliseconds()
		t.Logf("MEASURE %s: setup cold %.0f ms, cached (no network) %.0f ms; test.run inside the sandbox %.0f ms (second run %.0f ms), go test outside %d ms",
			os.Getenv(sandbox.EnvMode), cold, warm, inside, calls2[len(calls2)-1].durationMS(), outside)

		// A fresh repository (a cache of its own, empty) without network:
		// the setup fails, and the run ends failed naming it.
		fresh := t.TempDir()
		writeFile(t, fresh, "go.mod", uuidGoMod)
		writeFile(t, fresh, "go.sum", uuidGoSum)
		writeFile(t, fresh, "uuid_test.go", uuidTest)
		writeFile(t, fresh, ".agent/policy.yaml", offlineSetupPolicy)
		r3, errOut3, code3 := agentRun(t, fresh)
		calls3, order3 := readCalls(t, r3.LogPath)
		if len(calls3) > 0 {
			t.Cleanup(func() { removeTree(filepath.Dir(calls3[0].cacheOf(t, "Go module cache"))) })
		}
		if code3 != exitRunFailed || r3.Status != "failed" || r3.Terminal.ErrorClass != "tool_runtime_error" ||
			!strings.HasPrefix(r3.Terminal.Reason, "SETUP_FAILED: setup command `go mod download` exited 1; stderr: ") ||
			!strings.Contains(r3.Terminal.Reason, "uuid") || !strings.Contains(r3.Terminal.NextAction, "setup.network.allow") || !strings.Contains(errOut3, "SETUP_FAILED") {
			t.Fatalf("exit %d, status %s, terminal %+v\n%s", code3, r3.Status, r3.Terminal, errOut3)
		}
		if index(order3, "llm.request/lead") >= 0 || len(calls3) != 1 {
			t.Fatalf("the agent phase ran after a failed setup: %v", order3)
		}
		t.Logf("%s\nnext: %s", r3.Terminal.Reason, r3.Terminal.NextAction)
	})
}

// TestSetupPhaseNPM: the detected setup (npm ci --ignore-scripts) installs
// a dependency from the npm registry; npm test then passes with the
// network off and npm offline.
func TestSetupPhaseNPM(t *testing.T) {
	testenv.LookPath(t, "npm")
	testenv.LookPath(t, "node")
	requireRegistry(t, "registry.npmjs.org")
	onSandboxes(t, func(t *testing.T) {
		repo := t.TempDir()
		writeFile(t, repo, "package.json", isNumberPackage)
		writeFile(t, repo, "package-lock.json", isNumberLock)
		writeFile(t, repo, "test.js", isNumberTest)
		r, errOut, code := agentRun(t, repo)
		calls, _ := readCalls(t, r.LogPath)
		if len(calls) > 0 && calls[0].Tool == "setup.run" {
			t.Cleanup(func() { removeTree(filepath.Dir(calls[0].cacheOf(t, "npm cache"))) })
		}
		if code != exitOK || r.Status != "completed" || len(calls) < 2 {
			t.Fatalf("exit %d, status %s, terminal %+v, calls %+v\n%s", code, r.Status, r.Terminal, calls, errOut)
		}
		set, tst := calls[0], calls[len(calls)-1]
		if set.Tool != "setup.run" || set.Command != "npm ci --ignore-scripts" || !set.OK {
			t.Fatalf("setup call %+v", set)
		}
		if tst.Tool != "test.run" || tst.result()["passed"] != true || !strings.Contains(tst.result()["stdout"].(string), "is-number works") {
			t.Fatalf("test.run %+v", tst.Result)
		}
		if sb, _ := tst.Invoke["sandbox"].(map[string]any); sb["network"] != "off" {
			t.Fatalf("test.run's profile: %v", sb)
		}
		t.Logf("MEASURE %s: npm ci %.0f ms, npm test inside the sandbox %.0f ms", os.Getenv(sandbox.EnvMode), set.durationMS(), tst.durationMS())
	})
}

// TestSetupPhaseConfigured: .agent/config.yaml's setup: replaces the
// detected commands; a command that fails ends the run failed (exit 5)
// with its exit code and stderr in the reason, before any model call;
// `setup: []` runs none.
func TestSetupPhaseConfigured(t *testing.T) {
	if sb, err := setup.Sandbox(context.Background(), os.Getenv); err != nil || sb.Err() != nil {
		testenv.Require(t, "a sandbox", errorsJoin(err, sb))
	}
	repo := t.TempDir()
	writeFile(t, repo, "go.mod", "module example.com/x\n\ngo 1.22\n")
	writeFile(t, repo, "x_test.go", "package x\n\nimport \"testing\"\n\nfunc TestX(t *testing.T) {}\n")
	writeFile(t, repo, ".agent/config.yaml", "setup:\n  - go version\n  - go run ./missing\n")
	r, errOut, code := agentRun(t, repo)
	calls, order := readCalls(t, r.LogPath)
	if code != exitRunFailed || r.Status != "failed" || len(calls) != 2 || !calls[0].OK || calls[0].result()["exit_code"] != float64(0) ||
		!strings.HasPrefix(r.Terminal.Reason, "SETUP_FAILED: setup command `go run ./missing` exited 1; stderr: ") || r.Terminal.NextAction == "" {
		t.Fatalf("exit %d, status %s, terminal %+v, calls %+v\n%s", code, r.Status, r.Terminal, calls, errOut)
	}
	if calls[0].Invoke["detected"] != false || index(order, "llm.request/lead") >= 0 {
		t.Fatalf("configured setup: %+v, %v", calls[0].Invoke, order)
	}
	// A shell is refused unless the policy allows shells.
	writeFile(t, repo, ".agent/config.yaml", "setup:\n  - sh -c 'echo hi'\n")
	r, errOut, code = agentRun(t, repo)
	if code != exitRunFailed || !strings.HasPrefix(r.Terminal.Reason, "SETUP_FAILED: setup command `sh -c 'echo hi'` failed (POLICY_DENIED)") {
		t.Fatalf("exit %d, terminal %+v\n%s", code, r.Terminal, errOut)
	}
	// setup: [] runs nothing, and the run completes.
	writeFile(t, repo, ".agent/config.yaml", "setup: []\n")
	r, errOut, code = agentRun(t, repo)
	calls, _ = readCalls(t, r.LogPath)
	if code != exitOK || len(calls) != 1 || calls[0].Tool != "test.run" {
		t.Fatalf("exit %d, terminal %+v, calls %+v\n%s", code, r.Terminal, calls, errOut)
	}
}

// reexecuteLog re-executes the last run of a log with the current code
// (agentrun.Reexecute: no live model or tool call).
func reexecuteLog(t *testing.T, repo, logPath string) error {
	t.Helper()
	script, err := scripted.Parse(strings.NewReader(setupTestScript))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := readJSONL(logPath)
	if err != nil {
		t.Fatal(err)
	}
	env, _ := newEnv(t, script, repo)
	var history []event.Event
	prompt := ""
	for _, e := range evs {
		if e.Type == event.RunStarted {
			history, prompt = nil, event.FieldString(e.Payload, "prompt")
		}
		if e.Type == event.RunStarted || len(history) > 0 {
			history = append(history, e)
		}
	}
	_, err = agentrun.Reexecute(context.Background(), env.engine, prompt, history)
	return err
}

func errorsJoin(err error, sb *sandbox.Sandbox) error {
	if err != nil {
		return err
	}
	return sb.Err()
}

func index(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

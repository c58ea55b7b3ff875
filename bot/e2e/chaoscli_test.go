//go:build chaos

package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel/failpoint"
	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/sqlite"
	"github.com/agentos/agentos/schemas"
)

// cliReport gathers the figures of the CLI chaos trials.
type cliReport struct {
	mu         sync.Mutex
	trials     int
	kills      int
	phases     map[string]int
	commands   map[string]int // commands killed, by name
	violations []string
	// takeover: from the start of `agentos resume` to the run.resumed of
	// the takeover in the log.
	takeover []time.Duration
	// orphaned counts runs ended by a kill (report_missing): the worktree
	// could not be accounted for.
	orphaned int
}

func (r *cliReport) add(f func(r *cliReport)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

// TestChaosKillCLI: `agentos run` (the scripted provider, the embedded
// SQLite store) fixing the demo repository, killed with SIGKILL at random
// moments and continued with the CLI as a user would — `agentos run` again
// when no run began, `agentos resume` when the log says the run is running
// (its process was killed: resume takes it over), `agentos approve` when it
// waits for an approval, `agentos resume` when the approval was answered
// and the run did not go on — each of those killed at random moments too,
// until the run ends. After each trial: the log verifies, exactly one
// terminal report (completed), no tool call repeated (one repo.patch that
// applied, the fixed auth.go, which holds the fix once), every interrupted
// call closed INTERRUPTED and run again only when it is read-only and was
// not made on an approval (test.run: the takeover runs it again).
//
// go test -tags chaos -run TestChaosKillCLI ./bot/e2e;
// AGENTOS_CHAOS_CLI_TRIALS sets the number of trials (default 2);
// AGENTOS_CHAOS_CLI_KILLS the kills per trial (default 4); AGENTOS_CHAOS_SEED
// offsets the trials' seeds, as for TestChaosKillServe; -short skips it.
func TestChaosKillCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("kills agentos processes")
	}
	trials, kills := envInt(t, "AGENTOS_CHAOS_CLI_TRIALS", 2), envInt(t, "AGENTOS_CHAOS_CLI_KILLS", 4)
	seed := chaosSeed(t)
	bin := agentosBinary(t)
	rep := &cliReport{phases: map[string]int{}, commands: map[string]int{}}
	for i := range trials {
		t.Run(fmt.Sprintf("trial-%d", i), func(t *testing.T) {
			cliTrial(t, bin, rand.New(rand.NewPCG(seed+uint64(i), 11)), kills, rep, "")
		})
		rep.add(func(r *cliReport) {
			t.Logf("after trial %d: %d kills, %d violations, %d runs ended by a kill, median resume start to takeover %v over %d, phases %v, commands %v", i, r.kills, len(r.violations), r.orphaned, medianOf(r.takeover), len(r.takeover), r.phases, r.commands)
		})
	}
	t.Logf("cli chaos: %d trials, %d kills (by command %v); crash points by phase: %s; runs ended by a kill: %d; violations: %d; median resume start to the run taken over %v (%d takeovers)",
		rep.trials, rep.kills, rep.commands, phaseList(rep.phases), rep.orphaned, len(rep.violations), medianOf(rep.takeover), len(rep.takeover))
	for _, v := range rep.violations {
		t.Error(v)
	}
}

// TestChaosKillCLIInsideApprovedPatch: the CLI flow with the kill inside
// the approved repo.patch — after it wrote the user's worktree, before its
// tool.result is recorded (failpoint.PatchApplied, armed until it is hit;
// no timed kills). The resume that takes the run over must close the call
// INTERRUPTED, not repeat it, and put auth.go back as the log knows it:
// the original, since no patch applied in the log.
func TestChaosKillCLIInsideApprovedPatch(t *testing.T) {
	if testing.Short() {
		t.Skip("kills agentos processes")
	}
	rep := &cliReport{phases: map[string]int{}, commands: map[string]int{}}
	cliTrial(t, agentosBinary(t), rand.New(rand.NewPCG(chaosSeed(t), 11)), 0, rep, failpoint.PatchApplied)
	t.Logf("cli chaos: %d kills (by command %v); crash points by phase: %s", rep.kills, rep.commands, phaseList(rep.phases))
	if rep.kills != 1 {
		t.Errorf("%d kills, want the failpoint's one", rep.kills)
	}
	for _, v := range rep.violations {
		t.Error(v)
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a number", name, v)
	}
	return n
}

// readSession reads session sid from the SQLite store in dataDir (no
// process runs it then).
func readSession(t *testing.T, dataDir, sid string) []event.Event {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dataDir, sqlite.FileName)); err != nil {
		return nil
	}
	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(dataDir, sealer, sqlite.Options{})
	if err != nil {
		t.Fatalf("open the store after a kill: %v", err)
	}
	defer st.Close()
	evs, err := st.Read(context.Background(), sid, 1)
	if err != nil {
		t.Fatalf("read the session after a kill: %v", err)
	}
	return evs
}

func cliPhase(evs []event.Event) string {
	if len(evs) == 0 {
		return "start-up (no event)"
	}
	switch last := evs[len(evs)-1].Type; last {
	case event.LLMRequest:
		return "model call"
	case event.ToolInvoke:
		return "tool execution (" + event.FieldString(evs[len(evs)-1].Payload, "tool") + ")"
	case event.ApprovalRequested, event.RunPaused, event.CheckpointCreated:
		return "pause"
	case event.SessionClose, event.TurnTerminal, event.RunCompleted:
		return "finish"
	case event.ApprovalResolved, event.RunResumed:
		return "resume"
	default:
		return "between steps (" + last + ")"
	}
}

// cliTrial runs the CLI flow under at most maxKills timed kills; with fp
// set, every command is armed with that failpoint until one is killed by
// it.
func cliTrial(t *testing.T, bin string, rng *rand.Rand, maxKills int, rep *cliReport, fp string) {
	testenv.LookPath(t, "go")
	repo, data := t.TempDir(), t.TempDir()
	if err := demo.WriteSample(repo); err != nil {
		t.Fatal(err)
	}
	original, err := os.ReadFile(filepath.Join(repo, "auth.go"))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "script.yaml")
	src, err := os.ReadFile(filepath.Join("..", "..", "runtime", "demo", "testdata", "fix-auth.script.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "AGENTOS_SANDBOX_GO_CACHE=" + sandboxGoCache()}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOROOT", "TMPDIR"} {
		if v := os.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	const sid = "cli-chaos"
	common := []string{"--repo", repo, "--data", data, "--provider", "scripted", "--script", script}
	var logs strings.Builder
	kills := 0
	deadline := time.Now().Add(8 * time.Minute)
	for step := 0; ; step++ {
		if time.Now().After(deadline) {
			rep.add(func(r *cliReport) {
				r.trials++
				r.violations = append(r.violations, fmt.Sprintf("%s: no end after 8 minutes (%d kills)", t.Name(), kills))
			})
			t.Logf("logs:\n%s", tail(logs.String(), 20000))
			return
		}
		evs := readSession(t, data, sid)
		snap, err := replay.Replay(evs)
		if err != nil {
			t.Fatalf("replay after step %d: %v", step, err)
		}
		var args []string
		switch {
		case !hasType(evs, event.RunStarted):
			args = append([]string{"run", "--session", sid}, append(common, demo.Prompt)...)
		case snap.RunStatus == "running":
			args = append([]string{"resume", sid}, common...)
		case snap.RunStatus == "paused" && len(snap.PendingApprovals) > 0:
			args = append([]string{"approve", sid, snap.PendingApprovals[0].ID, "--by", "alice"}, common...)
		case snap.RunStatus == "paused":
			args = append([]string{"resume", sid}, common...)
		default:
			checkCLITrial(t, exportSession(t, data, sid), evs, repo, original, kills, rep)
			return
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		if fp != "" {
			cmd.Env = append(slices.Clone(env), failpoint.Env+"="+fp)
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		started := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		killed := false
		if kills < maxKills {
			// Three kills in five after a random wait (0–50 ms, 0–500 ms,
			// 0–2 s or 0–6 s from the start); two in five once the
			// command has committed 1–8 batches of events to the store
			// and then 0–20 ms: a process spends its first second or
			// more starting up, where timed kills mostly land.
			var wait <-chan time.Time
			stop := make(chan struct{})
			if rng.IntN(5) < 2 {
				grown := make(chan time.Time, 1)
				want, lag := countBatches(data)+1+rng.IntN(8), time.Duration(rng.Int64N(int64(20*time.Millisecond)))
				go func() {
					for {
						select {
						case <-stop:
							return
						case <-time.After(20 * time.Millisecond):
						}
						if countBatches(data) >= want {
							time.Sleep(lag)
							grown <- time.Now()
							return
						}
					}
				}()
				wait = grown
			} else {
				scale := []time.Duration{50 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second, 6 * time.Second}[rng.IntN(4)]
				wait = time.After(time.Duration(rng.Int64N(int64(scale))))
			}
			select {
			case <-done:
			case <-wait:
				_ = cmd.Process.Kill() // SIGKILL
				<-done
				killed = true
			}
			close(stop)
		} else {
			select {
			case <-done:
			case <-time.After(5 * time.Minute):
				_ = cmd.Process.Kill()
				<-done
				rep.add(func(r *cliReport) {
					r.trials++
					r.violations = append(r.violations, fmt.Sprintf("%s: agentos %s did not end within 5 minutes", t.Name(), args[0]))
				})
				return
			}
		}
		phase := ""
		if fp != "" && strings.Contains(out.String(), "failpoint "+fp+": SIGKILL") {
			killed, phase, fp = true, "failpoint "+fp, "" // disarmed
		}
		fmt.Fprintf(&logs, "$ agentos %s (killed %v)\n%s\n", strings.Join(args, " "), killed, out.String())
		if killed {
			kills++
			after := readSession(t, data, sid)
			if phase == "" {
				phase = cliPhase(after)
			}
			rep.add(func(r *cliReport) { r.kills++; r.phases[phase]++; r.commands[args[0]]++ })
		}
		if args[0] == "resume" && snap.RunStatus == "running" {
			// From the start of resume to the takeover's run.resumed.
			after := readSession(t, data, sid)
			if i := slices.IndexFunc(after[len(evs):], func(e event.Event) bool { return e.Type == event.RunResumed }); i >= 0 {
				if ts, err := time.Parse(time.RFC3339Nano, after[len(evs)+i].TS); err == nil {
					rep.add(func(r *cliReport) { r.takeover = append(r.takeover, ts.Sub(started)) })
				}
			}
		}
		if !killed && strings.Contains(out.String(), "another agentos process") {
			t.Fatalf("the session lock was held with no other process:\n%s", out.String())
		}
	}
}

// countBatches counts the group commits in the SQLite store (one session
// per trial) while a process may be writing it (0 when it cannot be read
// now), through a read-only connection of its own.
func countBatches(dataDir string) int {
	path := filepath.Join(dataDir, sqlite.FileName)
	if _, err := os.Stat(path); err != nil {
		return 0
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(50)")
	if err != nil {
		return 0
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM batches`).Scan(&n); err != nil {
		return 0
	}
	return n
}

func hasType(evs []event.Event, typ string) bool {
	return slices.ContainsFunc(evs, func(e event.Event) bool { return e.Type == typ })
}

// checkCLITrial checks the invariants of a finished trial.
func checkCLITrial(t *testing.T, raw []byte, evs []event.Event, repo string, original []byte, kills int, rep *cliReport) {
	var msgs []string
	violation := func(format string, args ...any) { msgs = append(msgs, t.Name()+": "+fmt.Sprintf(format, args...)) }
	defer rep.add(func(r *cliReport) { r.trials++; r.violations = append(r.violations, msgs...) })
	if v, err := replay.VerifyReader(schemas.MustDefault(), bytes.NewReader(raw)); err != nil || !v.Valid {
		violation("the log does not verify: %v %+v", err, v.Problem)
	}
	var terminals, reasons []string
	invoked := map[string]event.Event{}
	results := map[string]int{} // per invoke
	patched, interrupted, patchInterrupted := 0, 0, 0
	calls := map[string]int{}  // invokes per tool call id of the model
	reruns := map[string]int{} // of those, closed INTERRUPTED and marked to run again
	for _, e := range evs {
		switch e.Type {
		case event.TurnTerminal:
			terminals = append(terminals, event.FieldString(e.Payload, "status")+"/"+event.FieldString(e.Payload, "error_class"))
			reasons = append(reasons, event.FieldString(e.Payload, "reason"))
		case event.ToolInvoke:
			invoked[e.ID] = e
			calls[event.FieldString(e.Payload, "tool")+":"+event.FieldString(e.Payload, "call_id")]++
		case event.ToolResult:
			results[e.Parent()]++
			if errv := event.Field(e.Payload, "error"); event.FieldString(errv, "code") == run.CodeInterrupted {
				if inv, ok := invoked[e.Parent()]; ok && event.FieldBool(event.Field(errv, "details"), "rerun") {
					tool := event.FieldString(inv.Payload, "tool")
					if !run.RerunTools[tool] || event.FieldString(inv.Payload, "approval_id") != "" {
						violation("call %s (%s) marked to run again: only read-only calls made without an approval may be", inv.ID, tool)
					}
					reruns[tool+":"+event.FieldString(inv.Payload, "call_id")]++
				}
				interrupted++
				if event.FieldString(e.Payload, "tool") == "repo.patch" {
					patchInterrupted++
				}
			} else if event.FieldString(e.Payload, "tool") == "repo.patch" && event.FieldBool(e.Payload, "ok") {
				patched++
			}
		}
	}
	for id, n := range results {
		if n != 1 {
			violation("tool call %s has %d results", id, n)
		}
	}
	// A call is invoked once, or again after each time a takeover closed
	// it INTERRUPTED and marked it to run again (a read-only call: the
	// tests a kill cut short run again, so a claim that they pass rests
	// on a run that finished).
	for c, n := range calls {
		if n != 1+reruns[c] {
			violation("tool call %s invoked %d times, %d of them closed to run again (repeated)", c, n, reruns[c])
		}
	}
	dropped := interrupted // interrupted calls not run again
	for _, n := range reruns {
		dropped -= n
	}
	switch {
	case patched == 0 && patchInterrupted > 0:
		// A kill inside the approved patch: it is closed INTERRUPTED and
		// not repeated, so the fix is not there and the tests fail; the
		// scripted Worker claims success anyway. The honest end is one
		// failed report that says the claim is unsupported.
		if len(terminals) != 1 || !strings.HasPrefix(terminals[0], "failed/") || !strings.HasPrefix(reasons[0], "EVIDENCE_MISMATCH") {
			violation("terminal reports %v %q, want exactly one failed with EVIDENCE_MISMATCH (the approved patch was interrupted)", terminals, reasons)
		}
	case dropped > 0 && len(terminals) == 1 && strings.HasPrefix(terminals[0], "failed/") && strings.HasPrefix(reasons[0], "EVIDENCE_MISMATCH"):
		// A call a kill cut short that is not run again (a write, a
		// call made on an approval) is closed INTERRUPTED; when the
		// Worker's claim rested on it, the claim has no evidence and
		// the run ends failed, saying so. An interrupted test.run is
		// run again, so it never ends a run this way.
	case len(terminals) != 1 || !strings.HasPrefix(terminals[0], "completed/"):
		if len(terminals) == 1 && strings.Contains(terminals[0], "report_missing") {
			rep.add(func(r *cliReport) { r.orphaned++ })
		}
		violation("terminal reports %v %q, want exactly one completed", terminals, reasons)
	}
	got, err := os.ReadFile(filepath.Join(repo, "auth.go"))
	if err != nil {
		t.Fatal(err)
	}
	// The worktree holds exactly what the log says was applied: the fix
	// once when the one repo.patch applied, the original file otherwise.
	fixed := bytes.Contains(got, []byte("subtle.ConstantTimeCompare([]byte(given), []byte(expected)) == 1")) && !bytes.Contains(got, []byte("strings.HasPrefix"))
	switch {
	case patched > 1:
		violation("%d repo.patch calls applied, want at most 1", patched)
	case patched == 1 && (!fixed || bytes.Count(got, []byte("ConstantTimeCompare")) != 1):
		violation("the log says the patch applied, auth.go does not hold it once:\n%s", got)
	case patched == 0 && !bytes.Equal(got, original):
		violation("no patch applied in the log, auth.go changed:\n%s", got)
	}
	if patched == 0 {
		// Allowed only when a kill interrupted the approved patch (closed
		// INTERRUPTED, not repeated): the scripted model goes on without it.
		if interrupted == 0 {
			violation("no patch applied and no call interrupted")
		}
	}
	t.Logf("%d kills; terminal %v; patch applied %d, interrupted calls %d", kills, terminals, patched, interrupted)
}

// exportSession is the session's log as the store exports it (JSONL).
func exportSession(t *testing.T, dataDir, sid string) []byte {
	t.Helper()
	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(dataDir, sealer, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var buf bytes.Buffer
	if _, err := store.Export(context.Background(), st, sid, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

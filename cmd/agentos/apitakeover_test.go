package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/api"
	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/journal"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/replay"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
	"github.com/agentos/agentos/schemas"
)

// startTakeoverChild is the graceful-stop tests' serve child (its sweep
// interval from AGENTOS_GRACEFUL_CHILD_EVERY in env, if set).
func startTakeoverChild(t *testing.T, data, drain string, env map[string]string) *gracefulChild {
	t.Helper()
	return startGracefulChild(t, data, drain, env)
}

// childLogs reads a child's log text (its writer is locked).
func childLogs(c *gracefulChild) string {
	lw := c.cmd.Stderr.(*lockedWriter)
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return c.logs.String()
}

func stopChild(t *testing.T, c *gracefulChild, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("serve did not exit after %v:\n%s", sig, childLogs(c))
	}
}

// waitSnapshot polls the session's snapshot at c until ok says so.
func waitSnapshot(t *testing.T, c *gracefulChild, sid, what string, ok func(replay.Snapshot) bool) replay.Snapshot {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	var last replay.Snapshot
	for time.Now().Before(deadline) {
		code, body := httpDo(t, http.MethodGet, c.url+"/v1/runs/"+sid, serveToken, "", nil)
		if code == http.StatusOK && json.Unmarshal(body, &last) == nil && ok(last) {
			return last
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("session %s: waited for %s; the run is %s:\n%s", sid, what, last.RunStatus, childLogs(c))
	return last
}

// waitLog waits until c's log holds s.
func waitLog(t *testing.T, c *gracefulChild, s string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if strings.Contains(childLogs(c), s) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the log never said %q:\n%s", s, childLogs(c))
}

// logChildSandbox logs which sandbox mechanism the child's commands ran in
// (bwrap, or Landlock with bwrap hidden from the PATH).
func logChildSandbox(t *testing.T, c *gracefulChild) {
	t.Helper()
	for _, l := range strings.Split(childLogs(c), "\n") {
		if strings.Contains(l, "commands run in a sandbox") {
			if _, m, ok := strings.Cut(l, "mechanism="); ok {
				t.Logf("sandbox: %s", strings.Fields(m)[0])
				return
			}
		}
	}
	t.Errorf("the child logged no sandbox:\n%s", childLogs(c))
}

func paused(s replay.Snapshot) bool { return s.RunStatus == replay.RunPaused }

// approveAndComplete answers the run's pending approval at c and waits
// for the run to complete.
func approveAndComplete(t *testing.T, c *gracefulChild, sid string, snap replay.Snapshot) {
	t.Helper()
	if len(snap.PendingApprovals) != 1 {
		t.Fatalf("pending approvals %+v, want the patch's", snap.PendingApprovals)
	}
	code, body := httpDo(t, http.MethodPost, c.url+"/v1/approvals/"+snap.PendingApprovals[0].ID, serveToken, `{"session_id": "`+sid+`", "decision": "approve", "by": "octocat"}`, nil)
	if code != http.StatusAccepted {
		t.Fatalf("approve: %d %s", code, body)
	}
	waitSnapshot(t, c, sid, "the run's end", func(s replay.Snapshot) bool { return s.RunStatus.Terminal() })
}

// checkTakenOverAPIRun: the session of an API run stopped during its
// first test.run and taken over by agentos serve: its exported log and
// its stored events verify strictly, hold no false reason, one takeover
// (run.resumed), one terminal report (completed), and the interrupted
// test.run ran again (when the stop cut it: closed INTERRUPTED with
// rerun, then its real result).
func checkTakenOverAPIRun(t *testing.T, evs []event.Event, exported string) {
	t.Helper()
	f, err := os.Open(exported)
	if err != nil {
		t.Fatalf("the exported log: %v", err)
	}
	defer f.Close()
	rep, err := replay.VerifyReader(schemas.MustDefault(), f)
	if err != nil || !rep.Valid {
		t.Fatalf("the exported log does not verify strictly: %v %+v", err, rep.Problem)
	}
	if rep.LastSeq != evs[len(evs)-1].Seq {
		t.Errorf("the exported log ends at seq %d, the store at %d", rep.LastSeq, evs[len(evs)-1].Seq)
	}
	if r := replay.VerifyEvents(schemas.MustDefault(), evs); !r.Valid {
		t.Fatalf("the stored log does not verify: %v", r.Problem)
	}
	noFalseReasons(t, evs)
	var takeovers, terminals int
	var results []string
	for _, e := range evs {
		switch e.Type {
		case event.RunResumed:
			if strings.HasPrefix(event.FieldString(e.Payload, "reason"), "taken over by agentos serve") {
				takeovers++
			}
		case event.TurnTerminal:
			terminals++
			if s := event.FieldString(e.Payload, "status"); s != string(agentrun.StatusCompleted) {
				t.Errorf("terminal report %s: %s", s, e.Payload)
			}
		case event.ToolResult:
			if event.FieldString(e.Payload, "tool") == "test.run" {
				e := event.Field(e.Payload, "error")
				results = append(results, fmt.Sprintf("%s/%v", event.FieldString(e, "code"), event.FieldBool(event.Field(e, "details"), "rerun")))
			}
		}
	}
	if takeovers != 1 || terminals != 1 {
		t.Errorf("%d takeovers, %d terminal reports; want 1 and 1", takeovers, terminals)
	}
	if len(results) < 2 || results[0] != agentrun.CodeInterrupted+"/true" || results[1] != "/false" {
		t.Errorf("test.run results %v: want the interrupted one closed INTERRUPTED with rerun, then run again", results)
	}
}

// TestAPIRunTakenOverAfterStop: a run started through POST /v1/runs on
// the embedded SQLite store, stopped during its sandboxed test.run by
// SIGTERM (a 1 ms drain cuts the call) or SIGKILL; `agentos serve`
// restarted on the same data directory takes the run over at start (no
// delivery would ever retry it), re-runs the interrupted test.run, pauses
// at the patch's approval, and completes once it is approved. The time
// from the restart to the takeover is logged.
func TestAPIRunTakenOverAfterStop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs agentos serve as a process")
	}
	testenv.LookPath(t, "go")
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		name := map[syscall.Signal]string{syscall.SIGTERM: "sigterm", syscall.SIGKILL: "sigkill"}[sig]
		t.Run(name, func(t *testing.T) {
			repo, env := demoSetup(t)
			data := t.TempDir()
			a := startTakeoverChild(t, data, "1ms", env)
			sid := "apitakeover-" + name
			code, body := httpDo(t, http.MethodPost, a.url+"/v1/runs", serveToken, `{"session_id": "`+sid+`", "repo_dir": "`+repo+`", "prompt": "`+demo.Prompt+`"}`, nil)
			if code != http.StatusAccepted {
				t.Fatalf("start: %d %s", code, body)
			}
			waitToolInFlight(t, a, sid, "test.run")
			stopChild(t, a, sig)
			evs := readSession(t, data, "", sid)
			if sig == syscall.SIGTERM {
				checkInterrupted(t, evs)
			} else if snap, err := replay.Replay(evs); err != nil || snap.RunStatus != replay.RunRunning {
				t.Fatalf("after SIGKILL the run is %s (%v), want running", snap.RunStatus, err)
			}

			restart := time.Now()
			b := startTakeoverChild(t, data, "", env)
			waitLog(t, b, "taking over an API run no process runs")
			t.Logf("%v: restart to takeover: %v", sig, time.Since(restart))
			logChildSandbox(t, b)
			snap := waitSnapshot(t, b, sid, "the patch's approval", paused)
			t.Logf("%v: restart to the taken-over run paused at its approval: %v", sig, time.Since(restart))
			approveAndComplete(t, b, sid, snap)
			if _, m := httpDo(t, http.MethodGet, b.url+"/metrics", "", "", nil); !strings.Contains(string(m), "agentos_run_takeovers_total 1\n") {
				t.Errorf("the takeover is not counted in agentos_run_takeovers_total:\n%s", m)
			}
			stopChild(t, b, syscall.SIGTERM)
			checkTakenOverAPIRun(t, readSession(t, data, "", sid), filepath.Join(data, "sessions", sid, "events.jsonl"))
			if n := strings.Count(childLogs(b), "API run taken over"); n != 1 {
				t.Errorf("%d takeovers logged, want 1:\n%s", n, childLogs(b))
			}
		})
	}
}

// TestAPIRunTakenOverByReplica: two replicas on PostgreSQL; replica A
// runs an API run and is killed (SIGKILL) during test.run. Replica B
// takes it over once A's session lease lapses (serve exposes no lease
// TTL: the default 30 s), while a restarted A (the same replica id)
// finds B holding the lease and leaves it: one takeover, one terminal
// report.
func TestAPIRunTakenOverByReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("runs agentos serve as processes")
	}
	testenv.LookPath(t, "go")
	repo, env := demoSetup(t)
	db := pgtest.Schema(t, pgtest.URL(t)) // a fresh schema; a loud skip without PostgreSQL (a failure under CI=true)
	envA, envB := maps.Clone(env), maps.Clone(env)
	for _, e := range []map[string]string{envA, envB} {
		e["AGENTOS_DATABASE_URL"], e["AGENTOS_GRACEFUL_CHILD_EVERY"] = db, "1s"
	}
	envA["AGENTOS_REPLICA_ID"], envB["AGENTOS_REPLICA_ID"] = "takeover-a", "takeover-b"
	dataA, dataB := t.TempDir(), t.TempDir()
	a := startTakeoverChild(t, dataA, "", envA)
	b := startTakeoverChild(t, dataB, "", envB)
	const sid = "apitakeover-replicas"
	code, body := httpDo(t, http.MethodPost, a.url+"/v1/runs", serveToken, `{"session_id": "`+sid+`", "repo_dir": "`+repo+`", "prompt": "`+demo.Prompt+`"}`, nil)
	if code != http.StatusAccepted {
		t.Fatalf("start: %d %s", code, body)
	}
	waitToolInFlight(t, a, sid, "test.run")
	if strings.Contains(childLogs(b), "taking over an API run") {
		t.Fatalf("B took over a run A was running:\n%s", childLogs(b))
	}
	killed := time.Now()
	stopChild(t, a, syscall.SIGKILL)
	waitLog(t, b, "taking over an API run no process runs")
	t.Logf("SIGKILL of A to B's takeover: %v (the lease's TTL plus up to one sweep)", time.Since(killed))
	logChildSandbox(t, b)
	// A comes back while B works the session: its start sweep finds the
	// lease held and leaves the run.
	a2 := startTakeoverChild(t, dataA, "", envA)
	snap := waitSnapshot(t, b, sid, "the patch's approval", paused)
	approveAndComplete(t, b, sid, snap)
	time.Sleep(3 * time.Second) // a few more of A's and B's sweeps over the ended session
	stopChild(t, a2, syscall.SIGTERM)
	stopChild(t, b, syscall.SIGTERM)
	if strings.Contains(childLogs(a2), "taking over an API run") {
		t.Errorf("the restarted A took the run over too:\n%s", childLogs(a2))
	}
	checkTakenOverAPIRun(t, readSession(t, "", db, sid), filepath.Join(dataB, "sessions", sid, "events.jsonl"))
}

// TestAPIRunRepoGoneClosed: an API run whose repository directory was
// deleted while no process ran it is closed by the restarted server with
// its report_missing terminal report saying why, and its log verifies
// strictly.
func TestAPIRunRepoGoneClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs agentos serve as a process")
	}
	testenv.LookPath(t, "go")
	repo, env := demoSetup(t)
	data := t.TempDir()
	a := startTakeoverChild(t, data, "", env)
	const sid = "apitakeover-gone"
	code, body := httpDo(t, http.MethodPost, a.url+"/v1/runs", serveToken, `{"session_id": "`+sid+`", "repo_dir": "`+repo+`", "prompt": "`+demo.Prompt+`"}`, nil)
	if code != http.StatusAccepted {
		t.Fatalf("start: %d %s", code, body)
	}
	waitToolInFlight(t, a, sid, "test.run")
	stopChild(t, a, syscall.SIGKILL)
	if err := os.RemoveAll(repo); err != nil {
		t.Fatal(err)
	}
	b := startTakeoverChild(t, data, "", env)
	snap := waitSnapshot(t, b, sid, "the run's end", func(s replay.Snapshot) bool { return s.RunStatus.Terminal() })
	stopChild(t, b, syscall.SIGTERM)
	if snap.Terminal == nil || snap.Terminal.ErrorClass != string(agentrun.ClassReportMissing) || !strings.Contains(snap.Terminal.Reason, "repository directory "+repo+" is gone") {
		t.Fatalf("terminal report %+v, want report_missing saying the repository is gone", snap.Terminal)
	}
	evs := readSession(t, data, "", sid)
	if r := replay.VerifyEvents(schemas.MustDefault(), evs); !r.Valid {
		t.Fatalf("the closed log does not verify: %v", r.Problem)
	}
	f, err := os.Open(filepath.Join(data, "sessions", sid, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if rep, err := replay.VerifyReader(schemas.MustDefault(), f); err != nil || !rep.Valid || rep.LastSeq != evs[len(evs)-1].Seq {
		t.Fatalf("the exported log: %v %+v", err, rep)
	}
	n := 0
	for _, e := range evs {
		if e.Type == event.TurnTerminal {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d terminal reports, want 1", n)
	}
}

// TestAPITakeoverLeavesWhatThisProcessWorks: the sweep never touches a
// session an API run of this process works (marked by Execute before
// Start, so also in the window between Start's run.started and the
// Manager registering the run), nor a run not started through the API;
// once the mark is gone the orphaned API run is taken over (here: closed
// report_missing, since it records no repository), exported, and an
// Execute of a session being taken over waits for the takeover to end.
func TestAPITakeoverLeavesWhatThisProcessWorks(t *testing.T) {
	ctx := context.Background()
	sealer, err := newSealer(nil)
	if err != nil {
		t.Fatal(err)
	}
	st := store.NewMemory(sealer)
	started := func(sid, source string) {
		j, err := journal.Open(ctx, st, sid)
		if err != nil {
			t.Fatal(err)
		}
		runID := "run-" + sid
		j.SetRun(runID)
		if _, err := j.Append(ctx, event.SessionStart, "runtime", map[string]any{"prompt": "greet"}, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := j.Append(ctx, event.RunStarted, "runtime", map[string]any{"run_id": runID, "prompt": "greet", "trigger": map[string]any{"source": source}}, ""); err != nil {
			t.Fatal(err)
		}
	}
	started("api-orphan", "api")
	started("bot-run", "github")
	data := t.TempDir()
	r := &serveRuns{store: st, mgr: agentrun.NewManager(st), dataDir: data}
	tk := newAPITakeover(r, 2, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	status := func(sid string) (replay.Snapshot, []event.Event) {
		evs, err := st.Read(ctx, sid, 1)
		if err != nil {
			t.Fatal(err)
		}
		s, err := replay.Replay(evs)
		if err != nil {
			t.Fatal(err)
		}
		return s, evs
	}
	sweep := func() {
		var wg sync.WaitGroup
		if err := tk.sweep(ctx, ctx, &wg); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}

	end, err := r.begin(ctx, "api-orphan")
	if err != nil {
		t.Fatal(err)
	}
	sweep()
	if s, _ := status("api-orphan"); s.RunStatus != replay.RunRunning {
		t.Fatalf("the sweep touched a session an API run of this process works: %s", s.RunStatus)
	}
	end()

	done, ok := r.claimTakeover("api-orphan")
	if !ok {
		t.Fatal("no claim on a session nobody works")
	}
	// An Execute during the takeover waits for it: given up when its
	// context ends first, going on once the takeover has ended.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.begin(gone, "api-orphan"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Execute during the takeover did not wait for it: %v", err)
	}
	began := make(chan error, 1)
	go func() {
		end, err := r.begin(ctx, "api-orphan")
		if err == nil {
			end()
		}
		began <- err
	}()
	done()
	if err := <-began; err != nil {
		t.Fatalf("Execute after the takeover: %v", err)
	}

	sweep()
	s, evs := status("api-orphan")
	if s.RunStatus != replay.RunFailed || s.Terminal == nil || s.Terminal.ErrorClass != string(agentrun.ClassReportMissing) || !strings.Contains(s.Terminal.Reason, "records no repository") {
		t.Fatalf("the orphaned API run: %s %+v", s.RunStatus, s.Terminal)
	}
	if r := replay.VerifyEvents(schemas.MustDefault(), evs); !r.Valid {
		t.Fatalf("the closed log does not verify: %v", r.Problem)
	}
	if _, err := os.Stat(filepath.Join(data, "sessions", "api-orphan", "events.jsonl")); err != nil {
		t.Errorf("the closed session's log was not exported: %v", err)
	}
	if s, _ := status("bot-run"); s.RunStatus != replay.RunRunning {
		t.Fatalf("the sweep touched a run not started through the API: %s", s.RunStatus)
	}
	n := len(evs)
	sweep() // ended now: left alone
	if _, evs := status("api-orphan"); len(evs) != n {
		t.Errorf("a second sweep appended %d events to the ended session", len(evs)-n)
	}
}

// outageStore fails the first append of a tool.result as the PostgreSQL
// store does once its retry bound has passed (nothing stored); the
// outage is over as soon as the error is returned.
type outageStore struct {
	store.Store
	mu    sync.Mutex
	fired bool
}

func (s *outageStore) Append(ctx context.Context, sid string, expected int64, drafts ...event.Draft) ([]event.Event, error) {
	s.mu.Lock()
	hit := !s.fired && len(drafts) > 0 && drafts[0].Type == event.ToolResult
	s.fired = s.fired || hit
	s.mu.Unlock()
	if hit {
		return nil, &store.UnavailableError{Op: "append", SessionID: sid, Attempts: 7, Elapsed: 30 * time.Second, Err: errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")}
	}
	return s.Store.Append(ctx, sid, expected, drafts...)
}

// TestAPIRunTakenOverAfterStoreOutage: an API run whose tool result
// cannot be written (the store unavailable past its retry bound) is
// handed back with run.ErrStoreUnavailable, still running in its log;
// the next sweep of the same process takes it over once the store
// answers: the open call is closed INTERRUPTED and run again, and the run
// goes on to the patch's approval with a log that verifies.
func TestAPIRunTakenOverAfterStoreOutage(t *testing.T) {
	testenv.LookPath(t, "go")
	ctx := context.Background()
	repo, env := demoSetup(t)
	sealer, err := newSealer(nil)
	if err != nil {
		t.Fatal(err)
	}
	st := &outageStore{Store: store.NewMemory(sealer)}
	prof, err := provider.LoadProfile("", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := &serveRuns{store: st, mgr: agentrun.NewManager(st), dataDir: t.TempDir(), profile: prof, log: log}
	const sid = "api-outage"
	run, err := r.Prepare(ctx, api.StartRequest{SessionID: sid, Prompt: demo.Prompt, RepoDir: repo})
	if err != nil {
		t.Fatal(err)
	}
	_, err = run.Execute(ctx)
	run.Close()
	if !errors.Is(err, agentrun.ErrStoreUnavailable) {
		t.Fatalf("the run during the outage: %v, want handed back (ErrStoreUnavailable)", err)
	}
	evs, err := st.Read(ctx, sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := replay.Replay(evs); err != nil || s.RunStatus != replay.RunRunning {
		t.Fatalf("the handed-back run is %s (%v), want running", s.RunStatus, err)
	}
	tk := newAPITakeover(r, 2, time.Second, log)
	var wg sync.WaitGroup
	if err := tk.sweep(ctx, ctx, &wg); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if evs, err = st.Read(ctx, sid, 1); err != nil {
		t.Fatal(err)
	}
	if rep := replay.VerifyEvents(schemas.MustDefault(), evs); !rep.Valid {
		t.Fatalf("the taken-over log does not verify: %v", rep.Problem)
	}
	noFalseReasons(t, evs)
	s, err := replay.Replay(evs)
	if err != nil || s.RunStatus != replay.RunPaused {
		t.Fatalf("after the takeover the run is %s (%v), want paused at the patch's approval", s.RunStatus, err)
	}
	takeovers, interrupted := 0, 0
	for _, e := range evs {
		if e.Type == event.RunResumed && strings.HasPrefix(event.FieldString(e.Payload, "reason"), "taken over by agentos serve") {
			takeovers++
		}
		if e.Type == event.ToolResult && event.FieldString(event.Field(e.Payload, "error"), "code") == agentrun.CodeInterrupted {
			interrupted++
		}
	}
	if takeovers != 1 || interrupted != 1 {
		t.Errorf("%d takeovers, %d calls closed INTERRUPTED; want 1 and 1", takeovers, interrupted)
	}
}

// TestAPITakeoverClosesWhatCannotContinue: an orphaned API run whose
// repository is no longer under repo_roots, or whose worktree cannot be
// made to match the log (a command was running when its process
// stopped), is closed with its report_missing terminal report saying why,
// and its log verifies; the run is not continued.
func TestAPITakeoverClosesWhatCannotContinue(t *testing.T) {
	ctx := context.Background()
	repo, env := demoSetup(t)
	prof, err := provider.LoadProfile("", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		roots []string
		open  bool // a process.run call left open
		why   string
	}{
		{"not-allowed", []string{t.TempDir()}, false, "no longer allowed: repo_dir " + repo + " is not under the server's repo_roots"},
		{"not-rebuildable", nil, true, "process.run at seq 3 was running when the process stopped"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sealer, err := newSealer(nil)
			if err != nil {
				t.Fatal(err)
			}
			st := store.NewMemory(sealer)
			const sid = "api-stuck"
			j, err := journal.Open(ctx, st, sid)
			if err != nil {
				t.Fatal(err)
			}
			j.SetRun("run-stuck")
			must := func(_ any, err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(j.Append(ctx, event.SessionStart, "runtime", map[string]any{"prompt": "greet"}, ""))
			must(j.Append(ctx, event.RunStarted, "runtime", map[string]any{"run_id": "run-stuck", "prompt": "greet", "trigger": map[string]any{"source": "api", "repo_dir": repo}}, ""))
			if c.open {
				must(j.Append(ctx, event.ToolInvoke, "worker", map[string]any{"call_id": "c1", "tool": "process.run", "args": map[string]any{"command": "make"}}, ""))
			}
			r := &serveRuns{store: st, mgr: agentrun.NewManager(st), dataDir: t.TempDir(), profile: prof, roots: c.roots, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			var wg sync.WaitGroup
			if err := newAPITakeover(r, 1, time.Second, r.log).sweep(ctx, ctx, &wg); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			evs, err := st.Read(ctx, sid, 1)
			if err != nil {
				t.Fatal(err)
			}
			if rep := replay.VerifyEvents(schemas.MustDefault(), evs); !rep.Valid {
				t.Fatalf("the closed log does not verify: %v", rep.Problem)
			}
			s, err := replay.Replay(evs)
			if err != nil || s.Terminal == nil || s.Terminal.ErrorClass != string(agentrun.ClassReportMissing) || !strings.Contains(s.Terminal.Reason, c.why) {
				t.Fatalf("the run: %s %+v (%v); want report_missing saying %q", s.RunStatus, s.Terminal, err, c.why)
			}
			for _, e := range evs {
				if e.Type == event.RunResumed || e.Type == event.LLMRequest {
					t.Errorf("the run was continued: seq %d %s", e.Seq, e.Type)
				}
			}
		})
	}
}

package run

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
)

// faultyStore fails one chosen append with *store.UnavailableError, as
// the PostgreSQL store does once its retry bound has passed: the nth
// append (1-based) of an event of type typ. With commit the events are
// stored first (an attempt committed but its answer was lost: InDoubt);
// without, nothing is stored. Every other append goes through: the
// outage is over as soon as the error is returned, so whatever a run
// appends after it reaches the log, and the test sees it.
type faultyStore struct {
	store.Store
	typ    string
	nth    int
	commit bool

	mu     sync.Mutex
	seen   int
	fired  bool
	lastOK int64 // the session's last seq when the fault fired
}

func (s *faultyStore) Append(ctx context.Context, sid string, expected int64, drafts ...event.Draft) ([]event.Event, error) {
	s.mu.Lock()
	hit := false
	if !s.fired && len(drafts) > 0 && drafts[0].Type == s.typ {
		s.seen++
		hit = s.seen == s.nth
		s.fired = hit
	}
	s.mu.Unlock()
	if !hit {
		return s.Store.Append(ctx, sid, expected, drafts...)
	}
	ue := &store.UnavailableError{Op: "append", SessionID: sid, Attempts: 7, Elapsed: 30 * time.Second, InDoubt: s.commit, Err: errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")}
	last := expected
	if s.commit {
		evs, err := s.Store.Append(ctx, sid, expected, drafts...)
		if err != nil {
			return nil, fmt.Errorf("faulty store: the in-doubt append did not commit: %w", err)
		}
		last = evs[len(evs)-1].Seq
	}
	s.mu.Lock()
	s.lastOK = last
	s.mu.Unlock()
	return nil, ue
}

func (s *faultyStore) didFire() (bool, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fired, s.lastOK
}

func newFaultyStore(t *testing.T, typ string, nth int, commit bool) *faultyStore {
	t.Helper()
	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &faultyStore{Store: store.NewMemory(sealer), typ: typ, nth: nth, commit: commit}
}

// verifyStrict checks the log as `agentos verify` reads it: JSONL, strict.
func verifyStrict(t *testing.T, evs []event.Event) replay.Report {
	t.Helper()
	var b bytes.Buffer
	for i := range evs {
		b.Write(evs[i].Line())
		b.WriteByte('\n')
	}
	rep, err := replay.VerifyReader(schemas.MustDefault(), &b)
	if err != nil || !rep.Valid {
		t.Fatalf("the log does not verify strictly: %v %v\n%s", rep.Problem, err, types(evs))
	}
	if err := AuditHonest(evs); err != nil {
		t.Fatalf("honest-outcome invariant: %v", err)
	}
	return rep
}

// handedBackOK checks what a run stopped by the store fault returned and
// left: an error wrapping ErrStoreUnavailable and the store's error, no
// status, no terminal; a log that ends where the fault struck (nothing
// appended after the failed append, though the store answered again at
// once), with no outcome in it and the run still running.
func handedBackOK(t *testing.T, f *fixture, fs *faultyStore, sid string, out Outcome, err error) {
	t.Helper()
	if !errors.Is(err, ErrStoreUnavailable) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("error %v: want it to wrap ErrStoreUnavailable and store.ErrUnavailable", err)
	}
	var ue *store.UnavailableError
	if !errors.As(err, &ue) || ue.SessionID != sid {
		t.Fatalf("error %v does not carry the store's *UnavailableError", err)
	}
	if out.Status != "" || out.Terminal != nil || len(out.Pending) != 0 {
		t.Fatalf("outcome %+v: a handed-back run has no status", out)
	}
	fired, lastOK := fs.didFire()
	if !fired {
		t.Fatalf("the fault on %s #%d never fired", fs.typ, fs.nth)
	}
	evs := f.events(t, sid)
	if got := evs[len(evs)-1].Seq; got != lastOK {
		t.Fatalf("the log goes on after the failed %s (seq %d): it ends at seq %d:\n%s", fs.typ, lastOK, got, types(evs[lastOK:]))
	}
	noFalseReason(t, evs)
	c := count(evs)
	if c[event.RunFailed]+c[event.TurnTerminal]+c[event.SessionClose]+c[event.RunInterrupted]+c[event.RunCancelled] != 0 {
		t.Fatalf("the handed-back run's log records an outcome: %v", c)
	}
	want := replay.RunRunning
	if fs.typ == event.RunPaused && fs.commit {
		// The pause is in the log (its checkpoint is not): the run
		// waits for its approval, as a host finds when it takes the
		// session back.
		want = replay.RunPaused
	}
	if snap, err := replay.Replay(evs); err != nil || snap.RunStatus != want {
		t.Fatalf("after the fault the run is %q (%v), want %s", snap.RunStatus, err, want)
	}
	if _, err := RebuildWorkspace(t.TempDir(), evs, 0); err != nil {
		t.Fatalf("the worktree cannot be rebuilt from the handed-back log: %v", err)
	}
}

// TestStoreFaultHandsTheRunBack: an append of a running run fails because
// the store is unavailable, at each point of the run: the run stops there
// (no run.failed, no terminal report, nothing more appended though the
// store answers again at once), Start returns ErrStoreUnavailable with no
// status, and another process's Takeover over the same log (the store is
// back) ends the run — completed, or paused for the approval it was about
// to wait on — with a log that verifies strictly.
func TestStoreFaultHandsTheRunBack(t *testing.T) {
	approval := []string{`    - tool_calls: [{id: w1, name: write, args: {path: a.txt}}]`, echoCall, finalReport}
	cases := []struct {
		name   string
		worker []string
		typ    string
		nth    int
		commit bool
		// after the takeover
		want afterTakeover
		// echoRuns: how many times the echo tool ran in all (a call whose
		// result was not recorded runs again: echo is read-only).
		echoRuns int
	}{
		{"tool.result after the tool ran", []string{echoCall, finalReport}, event.ToolResult, 1, false, wantCompleted, 2},
		{"tool.result in doubt, committed", []string{echoCall, finalReport}, event.ToolResult, 1, true, wantCompleted, 1},
		{"tool.invoke", []string{echoCall, finalReport}, event.ToolInvoke, 1, false, wantCompleted, 1},
		{"worker's llm.response", []string{echoCall, finalReport}, event.LLMResponse, 3, false, wantCompleted, 1},
		{"llm.request in doubt, committed", []string{echoCall, finalReport}, event.LLMRequest, 4, true, wantCompleted, 1},
		{"run.paused", approval, event.RunPaused, 1, false, wantPaused, 1},
		{"run.paused in doubt, committed", approval, event.RunPaused, 1, true, wantPaused, 1},
		{"run.completed", []string{echoCall, finalReport}, event.RunCompleted, 1, false, wantCompleted, 1},
		{"turn.terminal", []string{echoCall, finalReport}, event.TurnTerminal, 1, false, wantCompleted, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFaultyStore(t, tc.typ, tc.nth, tc.commit)
			f := newFixture(t, script(tc.worker...), fs)
			ctx := context.Background()
			out, err := f.mgr.Start(ctx, f.eng, StartRequest{SessionID: "sf", Prompt: "greet the world"})
			if tc.typ == event.TurnTerminal || (tc.typ == event.RunCompleted && tc.commit) {
				// The run's end is recorded (run.completed): it is not
				// running any more, and what finish could not write
				// follows from it (CloseEnded, as a host recovering the
				// session calls it).
				if !errors.Is(err, ErrStoreUnavailable) || out.Status != "" {
					t.Fatalf("Start: %+v %v", out, err)
				}
				closeEndedOK(t, f, "sf")
				return
			}
			handedBackOK(t, f, fs, "sf", out, err)
			ranBefore := f.kernel.executed.Load()

			// Another process, once the store answers.
			f2 := newFixture(t, script(tc.worker...), fs.Store)
			if _, err := f2.mgr.CloseEnded(ctx, "sf"); err != nil {
				t.Fatal(err)
			}
			if tc.typ == event.RunPaused && tc.commit {
				// Nothing to take over: the run is paused in the log.
				if out, err = f2.mgr.Takeover(ctx, f2.eng, "sf", t.TempDir(), "", ""); !errors.Is(err, ErrNotRunning) || out.Status != StatusPaused {
					t.Fatalf("takeover of the paused run: %+v %v", out, err)
				}
				out.Pending = []Pending{{ApprovalID: "ap-1"}}
			} else if out, err = f2.mgr.Takeover(ctx, f2.eng, "sf", t.TempDir(), "", ""); err != nil {
				t.Fatalf("takeover: %+v %v", out, err)
			}
			switch tc.want {
			case wantCompleted:
				if out.Status != StatusCompleted {
					t.Fatalf("takeover: %+v, want completed", out)
				}
			case wantPaused:
				if out.Status != StatusPaused || len(out.Pending) != 1 || out.Pending[0].ApprovalID != "ap-1" {
					t.Fatalf("takeover: %+v, want paused for ap-1", out)
				}
				// The approval asked before the fault is the one the
				// maintainer answers; nothing is asked twice.
				if n := count(f2.events(t, "sf"))[event.ApprovalRequested]; n != 1 {
					t.Fatalf("%d approval.requested after the takeover, want 1", n)
				}
				f3 := newFixture(t, script(tc.worker...), fs.Store)
				if err := f3.mgr.Resolve(ctx, "sf", "ap-1", "approve", "octocat", ""); err != nil {
					t.Fatal(err)
				}
				if out, err = f3.mgr.Resume(ctx, f3.eng, "sf", "", ""); err != nil || out.Status != StatusCompleted {
					t.Fatalf("resume after the approval: %+v %v", out, err)
				}
			}
			evs := f2.events(t, "sf")
			rep := verifyStrict(t, evs)
			if !rep.Closed {
				t.Fatal("the log is not closed")
			}
			noFalseReason(t, evs)
			c := count(evs)
			if c[event.RunStarted] != 1 || c[event.TurnTerminal] != 1 || c[event.SessionClose] != 1 {
				t.Fatalf("one run, one terminal report: %v", c)
			}
			echoRuns := 0
			for _, e := range evs {
				if e.Type == event.ToolInvoke && event.FieldString(e.Payload, "tool") == "echo" {
					echoRuns++
				}
			}
			if echoRuns != tc.echoRuns {
				t.Errorf("echo invoked %d times, want %d (ran %d times before the fault)", echoRuns, tc.echoRuns, ranBefore)
			}
		})
	}
}

// afterTakeover says where a takeover leaves the run in a test case.
type afterTakeover int

const (
	wantCompleted afterTakeover = iota
	wantPaused
)

// closeEndedOK: the run's end is in the log but not its terminal report
// (finish's append after run.completed failed): CloseEnded writes it, and
// the log has one completed terminal report and verifies strictly.
func closeEndedOK(t *testing.T, f *fixture, sid string) {
	t.Helper()
	ctx := context.Background()
	f2 := newFixture(t, script(echoCall, finalReport), f.store.(*faultyStore).Store)
	if _, err := f2.mgr.Takeover(ctx, f2.eng, sid, "", "", ""); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("takeover of a run whose end is recorded: %v, want ErrNotRunning", err)
	}
	if ok, err := f2.mgr.CloseEnded(ctx, sid); err != nil || !ok {
		t.Fatalf("CloseEnded: %v %v", ok, err)
	}
	evs := f2.events(t, sid)
	if rep := verifyStrict(t, evs); !rep.Closed {
		t.Fatal("not closed")
	}
	snap, _ := replay.Replay(evs)
	if c := count(evs); c[event.TurnTerminal] != 1 || snap.Terminal == nil || snap.Terminal.Status != string(StatusCompleted) {
		t.Fatalf("terminal %+v, counts %v", snap.Terminal, c)
	}
}

// droppingTools is a Tools whose Dispatch drops every error of the calls
// it forwards, as the kernel's refusal path drops a failed tool.rejected
// append behind the refusal it returns (the KernelTools adapter passes
// kernel errors to the model, not to the run).
type droppingTools struct{ Tools }

func (d droppingTools) Dispatch(ctx context.Context, rec kernel.Recorder, c Call) error {
	_ = d.Tools.Dispatch(ctx, rec, c)
	return nil
}

// TestStoreFaultDroppedByTheToolsStillStopsTheRun: the store fault of a
// tool.rejected append is dropped by the tools on its way up; the run
// still stops there (the fault is kept with the run, and every later
// append is refused), is handed back, and the takeover completes it.
func TestStoreFaultDroppedByTheToolsStillStopsTheRun(t *testing.T) {
	bad := `    - tool_calls: [{id: b1, name: nosuch, args: {}}]`
	fs := newFaultyStore(t, event.ToolRejected, 1, false)
	f := newFixture(t, script(bad, echoCall, finalReport), fs)
	f.eng.Tools = droppingTools{f.kernel}
	ctx := context.Background()
	out, err := f.mgr.Start(ctx, f.eng, StartRequest{SessionID: "drop", Prompt: "greet the world"})
	handedBackOK(t, f, fs, "drop", out, err)
	if n := f.calls.calls.Load(); n != 3 {
		// lead, planner, the worker's first turn: no model call after
		// the fault.
		t.Errorf("%d model calls, want 3: the run went on after the fault", n)
	}
	f2 := newFixture(t, script(bad, echoCall, finalReport), fs.Store)
	f2.eng.Tools = droppingTools{f2.kernel}
	out, err = f2.mgr.Takeover(ctx, f2.eng, "drop", "", "", "")
	if err != nil || out.Status != StatusCompleted {
		t.Fatalf("takeover: %+v %v", out, err)
	}
	verifyStrict(t, f2.events(t, "drop"))
}

// TestStoreFaultAtStartAndResume: the first appends of Start (session.start)
// and of Resume (run.resumed) fail on the store: the error wraps
// ErrStoreUnavailable and there is no status; the same request made again
// once the store answers goes on from the log.
func TestStoreFaultAtStartAndResume(t *testing.T) {
	ctx := context.Background()
	fs := newFaultyStore(t, event.SessionStart, 1, false)
	f := newFixture(t, script(echoCall, finalReport), fs)
	out, err := f.mgr.Start(ctx, f.eng, StartRequest{SessionID: "ss", Prompt: "greet the world"})
	if !errors.Is(err, ErrStoreUnavailable) || !errors.Is(err, store.ErrUnavailable) || out.Status != "" {
		t.Fatalf("Start with session.start failing: %+v %v", out, err)
	}
	if out, err = f.mgr.Start(ctx, f.eng, StartRequest{SessionID: "ss", Prompt: "greet the world"}); err != nil || out.Status != StatusCompleted {
		t.Fatalf("Start again: %+v %v", out, err)
	}
	verifyStrict(t, f.events(t, "ss"))

	approval := []string{`    - tool_calls: [{id: w1, name: write, args: {path: a.txt}}]`, echoCall, finalReport}
	fr := newFaultyStore(t, event.RunResumed, 1, true)
	g := newFixture(t, script(approval...), fr)
	if out, err = g.mgr.Start(ctx, g.eng, StartRequest{SessionID: "sr", Prompt: "greet the world"}); err != nil || out.Status != StatusPaused {
		t.Fatalf("start: %+v %v", out, err)
	}
	if err := g.mgr.Resolve(ctx, "sr", "ap-1", "approve", "octocat", ""); err != nil {
		t.Fatal(err)
	}
	out, err = g.mgr.Resume(ctx, g.eng, "sr", "", "")
	if !errors.Is(err, ErrStoreUnavailable) || out.Status != "" {
		t.Fatalf("Resume with run.resumed failing (in doubt, committed): %+v %v", out, err)
	}
	// run.resumed is in the log: the run is running, for a takeover.
	g2 := newFixture(t, script(approval...), fr.Store)
	if out, err = g2.mgr.Takeover(ctx, g2.eng, "sr", "", "", ""); err != nil || out.Status != StatusCompleted {
		t.Fatalf("takeover: %+v %v", out, err)
	}
	evs := g2.events(t, "sr")
	verifyStrict(t, evs)
	if n := invokesOf(evs, "write"); n != 1 {
		t.Fatalf("the approved write invoked %d times, want once", n)
	}
}

// TestStoreFaultAtTakeover: the takeover's own first append (run.resumed)
// fails on the store: it returns ErrStoreUnavailable with no status and
// writes nothing after; a later takeover completes the run.
func TestStoreFaultAtTakeover(t *testing.T) {
	ctx := context.Background()
	fs := newFaultyStore(t, event.ToolResult, 1, false)
	f := newFixture(t, script(echoCall, finalReport), fs)
	out, err := f.mgr.Start(ctx, f.eng, StartRequest{SessionID: "tk", Prompt: "greet the world"})
	handedBackOK(t, f, fs, "tk", out, err)
	again := &faultyStore{Store: fs.Store, typ: event.RunResumed, nth: 1}
	f2 := newFixture(t, script(echoCall, finalReport), again)
	out, err = f2.mgr.Takeover(ctx, f2.eng, "tk", "", "", "")
	if !errors.Is(err, ErrStoreUnavailable) || !errors.Is(err, store.ErrUnavailable) || out.Status != "" {
		t.Fatalf("takeover with run.resumed failing: %+v %v", out, err)
	}
	evs := f2.events(t, "tk")
	if _, last := again.didFire(); evs[len(evs)-1].Seq != last {
		t.Fatalf("the takeover appended after its failed run.resumed: %s", types(evs))
	}
	f3 := newFixture(t, script(echoCall, finalReport), fs.Store)
	if out, err = f3.mgr.Takeover(ctx, f3.eng, "tk", "", "", ""); err != nil || out.Status != StatusCompleted {
		t.Fatalf("takeover: %+v %v", out, err)
	}
	verifyStrict(t, f3.events(t, "tk"))
}

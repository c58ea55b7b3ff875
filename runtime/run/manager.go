// Package run owns a run's lifecycle: the RunManager (one active run per
// session, start, pause on approval, resume from the log in any process,
// exactly one terminal report) and the Plan-Work-Review engine it drives.
package run

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentos/agentos/runtime/buildinfo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/hooks"
	"github.com/agentos/agentos/runtime/journal"
	"github.com/agentos/agentos/runtime/keylock"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/store"
	"github.com/oklog/ulid/v2"
)

// Errors callers branch on.
var (
	ErrPaused          = errors.New("the session has a run waiting for approval")
	ErrNotPaused       = errors.New("the session has no paused run")
	ErrUnknownApproval = errors.New("no such pending approval")
	ErrResolved        = errors.New("approval already resolved")
)

// Manager runs sessions. It keeps no run state between calls: a paused run
// is only its log, so any process with the store can resume it.
type Manager struct {
	Store store.Store
	Now   func() time.Time
	// Logs, when set, is where a session's JSONL log is found when the
	// store has no copy of the session (the database was lost, or this is
	// another process): it is verified and imported before the session is
	// used, so approve, resume, cancel and a new run work from the log
	// alone.
	Logs LogSource
	// CancelGrace is how long Cancel lets a running tool call finish
	// before killing it (0: DefaultCancelGrace).
	CancelGrace time.Duration
	// CheckpointEvery writes checkpoint.created after that many events of
	// a long run (0: DefaultCheckpointEvery; negative: only at pauses).
	CheckpointEvery int64
	// TraceID, when set, names the trace of a run (from its run id); it is
	// written into the run's session.start, so that the log and the run
	// viewer point at the run's OpenTelemetry trace.
	TraceID func(runID string) string

	mu     sync.Mutex
	locks  keylock.Map
	active map[string]*control // running runs of this process, by session
	// stopCause is set by Stop: runs stop at their next step.
	stopCause error
}

// NewManager returns a manager over s.
func NewManager(s store.Store) *Manager {
	return &Manager{Store: s, Now: time.Now, active: map[string]*control{}}
}

// lock serialises runs of one session in this process: a later request
// waits for the active one (the queue). Across processes the store's
// expected-seq check makes a second writer fail instead of interleaving.
// A session's lock is forgotten once nobody holds or waits for it.
func (m *Manager) lock(sessionID string) func() { return m.locks.Lock(sessionID) }

// StartRequest asks for a new run.
type StartRequest struct {
	SessionID     string
	Prompt        string
	SessionKey    string         // e.g. owner/repo#42
	CorrelationID string         // e.g. the webhook delivery id; defaults to the session id
	Trigger       map[string]any // recorded in run.started
	Cwd           string
	Transcript    string
	// Workflow, when set, runs a workflow-plane cycle (Engine.Plane) instead
	// of one Plan-Work-Review pass; it is recorded in run.started, so a
	// resumed run executes the same cycle.
	Workflow json.RawMessage
}

// Outcome is where a run stands when Start, Resume or Cancel returns.
type Outcome struct {
	SessionID string    `json:"session_id"`
	RunID     string    `json:"run_id"`
	Status    Status    `json:"status"` // completed | failed | denied | cancelled | paused
	Terminal  *Report   `json:"terminal,omitempty"`
	Pending   []Pending `json:"pending,omitempty"`
	Output    string    `json:"output,omitempty"`
}

var ids = struct {
	sync.Mutex
	e *ulid.MonotonicEntropy
}{e: ulid.Monotonic(rand.Reader, 0)}

func newRunID(now time.Time) string {
	ids.Lock()
	defer ids.Unlock()
	return "run-" + ulid.MustNew(ulid.Timestamp(now), ids.e).String()
}

// Start begins a new run of the session and drives it until it completes,
// fails, or pauses for an approval.
func (m *Manager) Start(ctx context.Context, eng *Engine, req StartRequest) (out Outcome, err error) {
	defer handBackOnFault(&out, &err)
	unlock := m.lock(req.SessionID)
	defer unlock()
	if err := m.recover(ctx, req.SessionID); err != nil {
		return Outcome{}, err
	}
	j, err := journal.Open(ctx, m.Store, req.SessionID)
	if err != nil {
		return Outcome{}, err
	}
	evs, err := j.Events(ctx)
	if err != nil {
		return Outcome{}, err
	}
	snap, err := m.fold(j, evs)
	if err != nil {
		return Outcome{}, err
	}
	if snap.RunStatus == StatusPaused {
		return Outcome{SessionID: req.SessionID, RunID: snap.RunID, Status: StatusPaused}, ErrPaused
	}
	if err := m.closeOrphan(ctx, j, snap, req.SessionID); err != nil {
		return Outcome{}, err
	}
	runID := newRunID(m.Now())
	// The prompt is redacted before the first event records it: the log
	// (which the bot may commit to a public branch) never holds the raw
	// text, and the run works from what the log holds.
	prompt := hooks.RedactPrompt(req.Prompt)
	// A process that died between session.start and run.started left a
	// session.start of a run that never began: the run begins now under
	// its id, so every run id in the log has its run and its terminal.
	reuse := false
	if n := len(evs); n > 0 && evs[n-1].Type == event.SessionStart && evs[n-1].RunID != "" && event.FieldString(evs[n-1].Payload, "prompt") == prompt {
		runID, reuse = evs[n-1].RunID, true
	}
	j.SetRun(runID)
	corr := req.CorrelationID
	if corr == "" {
		corr = req.SessionID
	}
	noRepair := !eng.GuardRepair()
	// Which code wrote the log, and in which format: a replay or an
	// audit of an old log knows what to expect of it.
	start := map[string]any{"prompt": prompt, "guard": map[string]any{"repair": !noRepair},
		"agentos_version": buildinfo.Version(), "event_format": event.SchemaVersion}
	if req.SessionKey != "" {
		start["session_key"] = req.SessionKey
	}
	if m.TraceID != nil {
		start["trace_id"] = m.TraceID(runID)
	}
	if reuse {
		// Its own session.start records the guard setting re-execution
		// keeps; this process's may differ.
		noRepair = recordedNoRepairAt(evs, len(evs)-1)
	} else if _, err := j.Append(ctx, event.SessionStart, "user", start, ""); err != nil {
		return Outcome{}, err
	}
	started := map[string]any{"run_id": runID, "prompt": prompt, "trigger": map[string]any{"correlation_id": corr}}
	for k, v := range req.Trigger {
		started["trigger"].(map[string]any)[k] = v
	}
	if req.SessionKey != "" {
		started["session_key"] = req.SessionKey
	}
	if len(req.Workflow) > 0 {
		started["workflow"] = req.Workflow
	}
	if b := runBudget(eng.Profile.Limits); b != nil {
		started["budget"] = b
	}
	if _, err := j.Append(ctx, event.RunStarted, "runtime", started, ""); err != nil {
		return Outcome{}, err
	}
	in := Input{Prompt: prompt, rawPrompt: req.Prompt, Cwd: req.Cwd, Transcript: req.Transcript, PrevSummary: prevSummary(snap), RoleTurns: roleTurns(evs), Source: "startup", NoRepair: noRepair, Workflow: req.Workflow}
	return m.drive(ctx, eng, j, runID, corr, in, nil)
}

// closeOrphan gives a run that ended without a terminal report (a crash)
// its report_missing terminal report, so every run has exactly one.
func (m *Manager) closeOrphan(ctx context.Context, j *journal.Journal, snap replay.Snapshot, sessionID string) error {
	return m.closeOrphanWhy(ctx, j, snap, sessionID, "")
}

func (m *Manager) closeOrphanWhy(ctx context.Context, j *journal.Journal, snap replay.Snapshot, sessionID, why string) error {
	if snap.RunID == "" || snap.RunStatus == replay.RunNone || snap.Runs[snap.RunID] == nil || snap.Runs[snap.RunID].Terminal != nil {
		return nil
	}
	reason := "the run ended without a terminal report (the process stopped mid-run)"
	if why != "" {
		reason += "; it could not be taken over: " + why
	}
	rep := Report{Status: StatusFailed, Reason: reason, NextAction: "start the request again", TraceID: snap.RunID, CorrelationID: sessionID, ErrorClass: ClassReportMissing, SchemaVersion: "v1"}
	j.SetRun(snap.RunID)
	// The calls the dead process left open are closed as interrupted, so
	// the closed log passes verify (every request has its answer) and says
	// what happened to them.
	if err := closeOpenCalls(ctx, j, snap.RunID, "the process running this call stopped before its result was recorded, and the run was closed without being taken over"); err != nil {
		return err
	}
	if err := abortCycle(ctx, j, snap.RunID, "the run ended without a terminal report"); err != nil {
		return err
	}
	if _, err := j.Append(ctx, event.TurnTerminal, "runtime", rep, ""); err != nil {
		return err
	}
	_, err := j.Append(ctx, event.SessionClose, "runtime", map[string]any{"ok": false, "reason": "report_missing"}, "")
	return err
}

// closeOpenCalls records, for run runID, an interrupted tool.result for
// every tool.invoke without one and an interrupted llm.response for every
// llm.request without one.
func closeOpenCalls(ctx context.Context, j *journal.Journal, runID, why string) error {
	evs, err := j.Events(ctx)
	if err != nil {
		return err
	}
	if err := closeOpenTools(ctx, j, evs, runID, why, false); err != nil {
		return err
	}
	answered := map[string]bool{}
	for _, e := range evs {
		if e.Type == event.LLMResponse {
			answered[e.Parent()] = true
		}
	}
	for _, e := range evs {
		if e.Type != event.LLMRequest || e.RunID != runID || answered[e.ID] {
			continue
		}
		p := map[string]any{"role": event.FieldString(e.Payload, "role"), "error": map[string]any{"code": CodeInterrupted, "message": why}}
		if _, err := j.Append(ctx, event.LLMResponse, e.Actor, p, e.ID); err != nil {
			return err
		}
	}
	return nil
}

// closeOpenTools records an interrupted tool.result for every tool.invoke
// of run runID in evs without one. With rerun (a takeover that goes on
// with the run), a call that is safe to run again (rerunnable) is marked
// so, and the engine runs it again instead of handing the model the
// interruption.
func closeOpenTools(ctx context.Context, j *journal.Journal, evs []event.Event, runID, why string, rerun bool) error {
	for _, inv := range OpenToolCalls(evs, runID) {
		e := map[string]any{"kind": "runtime", "code": CodeInterrupted, "message": why}
		if rerun && rerunnable(inv) {
			e["message"] = rerunMessage
			e["retryable"] = true
			e["details"] = map[string]any{"rerun": true}
		}
		p := map[string]any{"call_id": event.FieldString(inv.Payload, "call_id"), "tool": event.FieldString(inv.Payload, "tool"), "ok": false, "error": e}
		if _, err := j.Append(ctx, event.ToolResult, "kernel", p, inv.ID); err != nil {
			return err
		}
	}
	return nil
}

// abortCycle records workflow.aborted for run runID of j when the run's
// workflow cycle started (workflow.started) and the run ends without the cycle's own end: cancelled
// while paused, closed after a crash. (A cycle that fails while it runs
// records its own.) Every finished run that started a cycle then has
// exactly one of workflow.completed|aborted, as verify requires.
func abortCycle(ctx context.Context, j *journal.Journal, runID, reason string) error {
	evs, err := j.Events(ctx)
	if err != nil {
		return err
	}
	raw := recordedWorkflow(evs, runID)
	if raw == nil {
		return nil
	}
	started := false
	for _, e := range evs {
		if e.RunID != runID {
			continue
		}
		switch e.Type {
		case event.WorkflowStarted:
			started = true
		case event.WorkflowCompleted, event.WorkflowAborted:
			return nil
		}
	}
	if !started {
		return nil // refused before it started (a WorkflowStart hook)
	}
	var sp struct {
		Cycle string `json:"cycle_id"`
	}
	if err := json.Unmarshal(raw, &sp); err != nil || sp.Cycle == "" {
		sp.Cycle = "unknown"
	}
	_, err = j.Append(ctx, event.WorkflowAborted, "runtime", map[string]any{"cycle_id": sp.Cycle, "reason": reason, "verdict": "abort"}, "")
	return err
}

// CloseOrphan gives the session's last run, if it ended without a
// terminal report (its process died mid-run), its report_missing terminal
// report, without starting another run. It returns where the session
// stands; a session whose last run is paused (waiting for an answer) or
// finished is left as it is. The caller must know that no process is
// still running the session (it holds the session's lease).
func (m *Manager) CloseOrphan(ctx context.Context, sessionID string) (Outcome, error) {
	return m.CloseOrphanReason(ctx, sessionID, "")
}

// CloseOrphanReason is CloseOrphan with the reason the run could not be
// taken over (see Takeover), written into its terminal report.
func (m *Manager) CloseOrphanReason(ctx context.Context, sessionID, why string) (Outcome, error) {
	unlock := m.lock(sessionID)
	defer unlock()
	j, err := journal.Open(ctx, m.Store, sessionID)
	if err != nil {
		return Outcome{}, err
	}
	evs, err := j.Events(ctx)
	if err != nil {
		return Outcome{}, err
	}
	snap, err := replay.Replay(evs)
	if err != nil {
		return Outcome{}, err
	}
	if snap.RunStatus != StatusRunning {
		// Paused (waiting for an answer), finished, or no run at all.
		return Outcome{SessionID: sessionID, RunID: snap.RunID, Status: snap.RunStatus}, nil
	}
	if err := m.closeOrphanWhy(ctx, j, snap, sessionID, why); err != nil {
		return Outcome{}, err
	}
	if evs, err = j.Events(ctx); err != nil {
		return Outcome{}, err
	}
	if snap, err = replay.Replay(evs); err != nil {
		return Outcome{}, err
	}
	return Outcome{SessionID: sessionID, RunID: snap.RunID, Status: snap.RunStatus}, nil
}

// Resolve records a maintainer's answer to a pending approval. The caller
// has checked that `by` may answer; Resolve checks the approval exists and
// is still pending. Call Resume afterwards to continue the run.
func (m *Manager) Resolve(ctx context.Context, sessionID, approvalID, decision, by, reason string) (err error) {
	defer func() {
		if err != nil && storeFault(err) {
			err = handBack(err)
		}
	}()
	if by == "" {
		return fmt.Errorf("resolve %s: who answered is required", approvalID)
	}
	switch decision {
	case "approve", "deny", "stale", "cancelled":
	default:
		return fmt.Errorf("resolve %s: decision must be approve, deny, stale or cancelled, not %q", approvalID, decision)
	}
	unlock := m.lock(sessionID)
	defer unlock()
	if err := m.recover(ctx, sessionID); err != nil {
		return err
	}
	j, err := journal.Open(ctx, m.Store, sessionID)
	if err != nil {
		return err
	}
	evs, err := j.Events(ctx)
	if err != nil {
		return err
	}
	snap, err := replay.Replay(evs)
	if err != nil {
		return err
	}
	for _, a := range snap.ResolvedApprovals {
		if a.ID == approvalID {
			return fmt.Errorf("%s: %w (%s by %s)", approvalID, ErrResolved, a.Decision, a.By)
		}
	}
	for _, a := range snap.PendingApprovals {
		if a.ID == approvalID {
			p := map[string]any{"approval_id": approvalID, "decision": decision, "by": by, "digest": a.Digest}
			if reason != "" {
				p["reason"] = reason
			}
			_, err := j.Append(ctx, event.ApprovalResolved, "maintainer", p, "")
			return err
		}
	}
	return fmt.Errorf("%s: %w", approvalID, ErrUnknownApproval)
}

// Resume continues the session's paused run: the engine re-executes over
// the run's recorded events (no model call or tool call is repeated) and
// goes on live from where the log ends.
func (m *Manager) Resume(ctx context.Context, eng *Engine, sessionID, cwd, transcript string) (out Outcome, err error) {
	defer handBackOnFault(&out, &err)
	unlock := m.lock(sessionID)
	defer unlock()
	j, evs, snap, err := m.openPaused(ctx, sessionID)
	if err != nil {
		return Outcome{SessionID: sessionID, RunID: snap.RunID, Status: snap.RunStatus}, err
	}
	history, prompt, corr, before := runHistory(evs, snap.RunID)
	j.SetRun(snap.RunID)
	resumed := map[string]any{"reason": "approval answered"}
	if b := runBudget(eng.Profile.Limits); b != nil {
		resumed["budget"] = b // the limits this process enforces from here on
	}
	if _, err := j.Append(ctx, event.RunResumed, "runtime", resumed, ""); err != nil {
		return Outcome{}, err
	}
	prevSnap, _, _, _ := replay.Resume(before)
	in := Input{Prompt: prompt, Cwd: cwd, Transcript: transcript, PrevSummary: prevSummary(prevSnap), RoleTurns: roleTurns(before), Source: "resume", NoRepair: recordedNoRepair(evs, snap.RunID), Workflow: recordedWorkflow(evs, snap.RunID)}
	return m.drive(ctx, eng, j, snap.RunID, corr, in, history)
}

// Cancel ends the session's run as cancelled: the one path of the API,
// /agent cancel and a closed pull request. A run running in this process
// stops at its next step; during a tool call Cancel waits CancelGrace for
// the call to end, then kills its process tree, and run.cancelled says
// which. A paused run gets approval.resolved (cancelled) for each pending
// approval first. Cancel returns when the run has ended; a session with
// neither is ErrNotPaused.
func (m *Manager) Cancel(ctx context.Context, sessionID, by, reason string) (out Outcome, err error) {
	defer handBackOnFault(&out, &err)
	if by == "" {
		return Outcome{}, fmt.Errorf("cancel %s: who cancelled is required", sessionID)
	}
	m.mu.Lock()
	ctl := m.active[sessionID]
	m.mu.Unlock()
	if ctl != nil {
		grace := m.CancelGrace
		if grace <= 0 {
			grace = DefaultCancelGrace
		}
		// The decision (wait for the tool call, or kill it) is made
		// aside, so that a caller whose context ends is not held up.
		go ctl.request(by, reason, grace)
		select {
		case <-ctl.done:
			return ctl.result, ctl.resultErr
		case <-ctx.Done():
			return Outcome{SessionID: sessionID, Status: StatusRunning}, ctx.Err()
		}
	}
	unlock := m.lock(sessionID)
	defer unlock()
	j, evs, snap, err := m.openPaused(ctx, sessionID)
	if err != nil {
		return Outcome{SessionID: sessionID, RunID: snap.RunID, Status: snap.RunStatus}, err
	}
	_, _, corr, _ := runHistory(evs, snap.RunID)
	j.SetRun(snap.RunID)
	for _, a := range snap.PendingApprovals {
		if _, err := j.Append(ctx, event.ApprovalResolved, "maintainer", map[string]any{"approval_id": a.ID, "decision": "cancelled", "by": by, "reason": reason}, ""); err != nil {
			return Outcome{}, err
		}
	}
	f := cancelFailure(by, reason)
	f.cancelled = map[string]any{"by": by, "reason": reason, "from": StatusPaused}
	return m.finish(ctx, j, snap.RunID, corr, Result{}, f)
}

// DefaultCheckpointEvery is the interval of checkpoints in long runs.
const DefaultCheckpointEvery = 2000

// fold returns the session's state from its latest valid checkpoint plus
// the events after it (the full fold when a checkpoint fails its hash),
// and keeps j folding, to write checkpoints.
func (m *Manager) fold(j *journal.Journal, evs []event.Event) (replay.Snapshot, error) {
	f, _, _, err := replay.ResumeFolder(evs)
	if err != nil {
		return replay.Snapshot{}, err
	}
	every := m.CheckpointEvery
	if every == 0 {
		every = DefaultCheckpointEvery
	}
	if every < 0 {
		every = 0
	}
	j.Checkpoints(f, every)
	return f.Snapshot(), nil
}

// Running reports whether a run of the session is running in this
// process (Cancel stops it without waiting for the session's lock).
func (m *Manager) Running(sessionID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.active[sessionID] != nil
}

// openPaused opens the session's journal and replays it, to continue or
// end its paused run. A run that is not paused is ErrNotPaused, with the
// snapshot saying what it is. The caller holds the session's lock.
func (m *Manager) openPaused(ctx context.Context, sessionID string) (*journal.Journal, []event.Event, replay.Snapshot, error) {
	if err := m.recover(ctx, sessionID); err != nil {
		return nil, nil, replay.Snapshot{}, err
	}
	j, err := journal.Open(ctx, m.Store, sessionID)
	if err != nil {
		return nil, nil, replay.Snapshot{}, err
	}
	evs, err := j.Events(ctx)
	if err != nil {
		return nil, nil, replay.Snapshot{}, err
	}
	snap, err := m.fold(j, evs)
	if err != nil {
		return nil, nil, replay.Snapshot{}, err
	}
	if snap.RunStatus != StatusPaused {
		return nil, nil, snap, ErrNotPaused
	}
	return j, evs, snap, nil
}

func (m *Manager) drive(ctx context.Context, eng *Engine, j *journal.Journal, runID, corr string, in Input, history []event.Event) (out Outcome, err error) {
	cctx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	ctl := newControl(cancelRun)
	sid := j.SessionID()
	m.mu.Lock()
	m.active[sid] = ctl
	if m.stopCause != nil {
		ctl.halt(m.stopCause)
	}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.active, sid)
		m.mu.Unlock()
		ctl.result, ctl.resultErr = out, err
		close(ctl.done)
	}()
	// An append of the run's end (run.paused, its checkpoint, the cancel's
	// approval.resolved, finish's events, run.interrupted) that failed on
	// a store fault leaves the run running in its log, handed back like a
	// fault inside the engine (storefault.go): whatever finish had made of
	// the outcome is not the run's.
	defer func() {
		if err != nil && storeFault(err) {
			out, err = handedBack(sid, runID, err)
		}
	}()
	in.ctl = ctl
	rctx := cctx
	if wc := eng.Profile.Limits.WallClock.D(); wc > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(cctx, wc)
		defer cancel()
	}
	res, err := eng.Execute(rctx, j, in, history)
	if ferr := ctl.faulted(err); ferr != nil {
		// The run's log could not be written: it stops here, whatever the
		// engine made of the error (a stop or a cancel meanwhile
		// included: their events could not be written either).
		return handedBack(sid, runID, ferr)
	}
	if cause := ctl.cutBy(ctx); cause != nil {
		if err != nil {
			// Stopped between two steps by Stop, or cut by a host that
			// stops (its drain time ran out): not a failure, and not
			// over; whatever the engine made of the cut (a killed
			// command, a dropped model call) was not recorded.
			return interrupt(ctx, j, runID, cause)
		}
		// It ended, or paused, before the cut: what follows records that
		// outcome, which must not be lost with the stopping context.
		ctx = context.WithoutCancel(ctx)
	}
	if ctl.stopped() && (err != nil || res.Paused) {
		// Cancelled: whatever the run was doing, this is its outcome.
		f := ctl.cancelled()
		if res.Paused {
			for _, p := range res.Pending {
				if _, aerr := j.Append(ctx, event.ApprovalResolved, "maintainer", map[string]any{"approval_id": p.ApprovalID, "decision": "cancelled", "by": f.cancelled["by"], "reason": f.cancelled["reason"]}, ""); aerr != nil {
					return Outcome{}, aerr
				}
			}
		}
		return m.finish(ctx, j, runID, corr, res, f)
	}
	if err == nil && res.Paused {
		ids := make([]string, 0, len(res.Pending))
		for _, p := range res.Pending {
			ids = append(ids, p.ApprovalID)
		}
		if _, err := j.Append(ctx, event.RunPaused, "runtime", map[string]any{"reason": "approval", "approval_ids": ids}, ""); err != nil {
			return Outcome{}, err
		}
		// Resume starts from here: fold only what comes after.
		if err := j.Checkpoint(ctx); err != nil {
			return Outcome{}, err
		}
		return Outcome{SessionID: j.SessionID(), RunID: runID, Status: StatusPaused, Pending: res.Pending}, nil
	}
	if err != nil && rctx.Err() != nil && ctx.Err() == nil {
		err = &Failure{Status: StatusFailed, Class: ClassTimeout, Code: "TIMEOUT", Reason: "the run's wall-clock limit was reached", NextAction: "raise the time limit or split the request; the work so far is kept", Err: err}
	}
	return m.finish(ctx, j, runID, corr, res, err)
}

// finish appends the run's end: run.completed or run.failed, exactly one
// turn.terminal, and session.close.
func (m *Manager) finish(ctx context.Context, j *journal.Journal, runID, corr string, res Result, runErr error) (Outcome, error) {
	out := Outcome{SessionID: j.SessionID(), RunID: runID, Output: res.Output}
	if runErr == nil {
		// A run reported completed must have a log that strict verify
		// accepts: one that lacks an audit event type (a run whose Worker
		// never got a tool call through, say) is not completed.
		evs, err := j.Events(ctx)
		if err != nil {
			return out, err
		}
		if missing := replay.AuditMissing(evs); len(missing) > 0 {
			runErr = &Failure{Status: StatusFailed, Class: ClassToolRuntimeError, Code: CodeAuditIncomplete,
				Reason:     fmt.Sprintf("the run cannot be reported completed: its log has no %s events, so agentos verify would reject it (audit completeness)", strings.Join(missing, ", ")),
				NextAction: "run the request again so that the worker does and checks the work through the kernel tools; the log shows which calls were refused"}
		}
	}
	var rep Report
	if runErr == nil {
		rep = Report{Status: StatusCompleted, NextAction: "review the change", TraceID: runID, CorrelationID: corr, SchemaVersion: "v1"}
		if _, err := j.Append(ctx, event.RunCompleted, "runtime", map[string]any{"output": res.Output}, ""); err != nil {
			return out, err
		}
	} else {
		var f *Failure
		if !errors.As(runErr, &f) {
			var nd *NonDeterminismError
			if errors.As(runErr, &nd) {
				f = &Failure{Status: StatusFailed, Class: ClassToolRuntimeError, Code: "NON_DETERMINISM", Reason: nd.Error(), NextAction: "the code changed since the run was recorded; start the request again", Err: runErr}
			} else {
				f = &Failure{Status: StatusFailed, Class: ClassToolRuntimeError, Code: "RUNTIME_ERROR", Reason: runErr.Error(), NextAction: "check the server logs and retry", Err: runErr}
			}
		}
		rep = f.report(runID, corr)
		if err := abortCycle(ctx, j, runID, rep.Reason); err != nil {
			return out, errors.Join(runErr, err)
		}
		if f.Status == StatusCancelled {
			p := f.cancelled
			if p == nil {
				p = map[string]any{"by": "runtime", "reason": rep.Reason}
			}
			if _, err := j.Append(ctx, event.RunCancelled, "runtime", p, ""); err != nil {
				return out, errors.Join(runErr, err)
			}
		} else if _, err := j.Append(ctx, event.RunFailed, "runtime", map[string]any{"reason": rep.Reason, "error_class": string(rep.ErrorClass)}, ""); err != nil {
			return out, errors.Join(runErr, err)
		}
	}
	if _, err := j.Append(ctx, event.TurnTerminal, "runtime", rep, ""); err != nil {
		return out, err
	}
	if _, err := j.Append(ctx, event.SessionClose, "runtime", map[string]any{"ok": rep.Status == StatusCompleted}, ""); err != nil {
		return out, err
	}
	out.Status, out.Terminal = rep.Status, &rep
	return out, nil
}

// runHistory returns the events of run runID from its run.started, the
// run's prompt and correlation id, and the session's events before it.
func runHistory(evs []event.Event, runID string) (history []event.Event, prompt, corr string, before []event.Event) {
	start := len(evs)
	for i, e := range evs {
		if e.Type == event.RunStarted && e.RunID == runID {
			start = i
			prompt = event.FieldString(e.Payload, "prompt")
			corr = event.FieldString(event.Field(e.Payload, "trigger"), "correlation_id")
			break
		}
	}
	// session.start precedes run.started; it belongs to this run too.
	before = evs[:start]
	if n := len(before); n > 0 && before[n-1].Type == event.SessionStart {
		before = before[:n-1]
	}
	if corr == "" && start < len(evs) {
		corr = evs[start].SessionID
	}
	return withoutHost(evs[start:]), prompt, corr, before
}

// recordedNoRepair is the guard repair setting the run recorded in the
// session.start before its run.started: a resumed run keeps it whatever
// this process's profile says, or re-execution would decide differently.
// Logs from before the switch have none: repair was always on.
func recordedNoRepair(evs []event.Event, runID string) bool {
	for i, e := range evs {
		if e.Type == event.RunStarted && e.RunID == runID {
			if i > 0 && evs[i-1].Type == event.SessionStart {
				return recordedNoRepairAt(evs, i-1)
			}
			return false
		}
	}
	return false
}

// recordedWorkflow is the workflow request of run runID (run.started's
// "workflow"), nil for a plain run.
func recordedWorkflow(evs []event.Event, runID string) json.RawMessage {
	for _, e := range evs {
		if e.Type == event.RunStarted && e.RunID == runID {
			if w := event.Field(e.Payload, "workflow"); len(w) > 0 && string(w) != "null" {
				return json.RawMessage(w)
			}
			return nil
		}
	}
	return nil
}

// recordedNoRepairAt reads the guard repair setting of the session.start
// at evs[i].
func recordedNoRepairAt(evs []event.Event, i int) bool {
	if g := event.Field(evs[i].Payload, "guard"); g != nil {
		return !event.FieldBool(g, "repair")
	}
	return false
}

// HostActor is the actor of events that a host (the GitHub bot, the
// Action) appends to a session to annotate it — where its pull request
// lives, say. They are part of the log but not decisions of the run, so
// re-execution skips them.
const HostActor = "host"

func withoutHost(evs []event.Event) []event.Event {
	out := make([]event.Event, 0, len(evs))
	for _, e := range evs {
		if e.Actor != HostActor {
			out = append(out, e)
		}
	}
	return out
}

// roleTurns counts each role's model calls in events, so the scripted
// provider's turn numbering continues across runs and resumes.
func roleTurns(evs []event.Event) map[string]int {
	t := map[string]int{}
	for _, e := range evs {
		if e.Type == event.LLMRequest {
			t[event.FieldString(e.Payload, "role")]++
		}
	}
	return t
}

func prevSummary(s replay.Snapshot) string {
	if s.Terminal == nil {
		return ""
	}
	sum := "status: " + s.Terminal.Status
	if s.Terminal.Reason != "" {
		sum += "; reason: " + s.Terminal.Reason
	}
	if s.Output != "" {
		sum += "\noutput: " + clip(s.Output, 2000)
	}
	return sum
}

// runBudget is the run's budget as run.started records it (checkBudget
// enforces the same limits), or nil without one: the viewer draws it on
// the cost chart. run.started v1 allows members it does not name, so the
// optional member needs no new schema version (ADR 11's rule for plan_v1).
func runBudget(l provider.Limits) map[string]any {
	b := map[string]any{}
	if l.MaxCostUSD > 0 {
		b["max_cost_usd"] = l.MaxCostUSD
	}
	if l.MaxTokens > 0 {
		b["max_tokens"] = l.MaxTokens
	}
	if l.MaxTurns > 0 {
		b["max_turns"] = l.MaxTurns
	}
	if len(b) == 0 {
		return nil
	}
	return b
}

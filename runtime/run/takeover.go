package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentos/agentos/kernel/patch"
	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/kernel/workspace"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/journal"
	"github.com/agentos/agentos/runtime/replay"
)

// ErrNotRunning is returned by Takeover when the session's last run is not
// running (paused, finished, or there is none): there is nothing to take
// over.
var ErrNotRunning = errors.New("the session has no run left running")

// CodeInterrupted is the error code of the tool.result Takeover records for
// a tool call whose process died before its result was written.
const CodeInterrupted = "INTERRUPTED"

// interruptedMessage explains an interrupted call to the model and to the
// maintainer reading the log.
const interruptedMessage = "the process running this call stopped before its result was recorded; the worktree was rebuilt from the session branch and the log's recorded results, so whatever the call did to it is gone, and the call was not repeated"

// rerunMessage explains an interrupted call that the takeover runs again.
const rerunMessage = "the process running this call stopped before its result was recorded; the call changes nothing in the worktree, so the process that took the run over runs it again"

// RerunTools are the tools whose call Takeover runs again when the
// process running it stopped before its result was recorded: they read
// the worktree or run the project's tests or linters, which change no
// tracked file (readOnlyTools), so running them twice is harmless and
// their result is needed (a run must not report the tests run when they
// were not). Writes and commands are not run again (a write interrupted
// mid-way is closed INTERRUPTED and its effect is dropped with the
// rebuilt worktree; a command makes the worktree not rebuildable), nor is
// any call made on an approval (one approval, one execution).
var RerunTools = map[string]bool{"echo": true, "repo.read": true, "repo.search": true, "test.run": true, "lint.run": true}

// rerunnable reports whether Takeover runs the interrupted call inv
// again.
func rerunnable(inv event.Event) bool {
	return RerunTools[event.FieldString(inv.Payload, "tool")] && event.FieldString(inv.Payload, "approval_id") == "" && inv.Actor != SetupActor
}

// rerunMarked reports whether the events of one dispatch end with an
// interrupted result that Takeover marked to run again.
func rerunMarked(evs []event.Event) bool {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == event.ToolResult {
			e := event.Field(evs[i].Payload, "error")
			return event.FieldString(e, "code") == CodeInterrupted && event.FieldBool(event.Field(e, "details"), "rerun")
		}
	}
	return false
}

// Takeover continues the session's run that is still "running" in the log
// although no process runs it (the process or replica working it died):
// the same path as Resume after an approval, from the log. The engine
// re-executes over the run's recorded events (no recorded model call or
// tool call is repeated) and goes on live from where the log ends: a model
// request without a response is asked again (nothing was fed back to the
// run); a tool call without a result (the process died during it) is
// closed first with a failed tool.result (CodeInterrupted) and is not
// repeated — the caller rebuilt the worktree from the branch and the
// log's recorded results only (RebuildWorkspace), so an un-logged effect
// did not happen there, and a risky call never runs twice on one
// approval. The caller must hold the session's lease (no other process
// works it) and give a worktree rebuilt that way as cwd.
func (m *Manager) Takeover(ctx context.Context, eng *Engine, sessionID, cwd, transcript, reason string) (out Outcome, err error) {
	defer handBackOnFault(&out, &err)
	if m.Running(sessionID) {
		return Outcome{SessionID: sessionID, Status: StatusRunning}, fmt.Errorf("take over %s: the run is running in this process", sessionID)
	}
	unlock := m.lock(sessionID)
	defer unlock()
	if err := m.recover(ctx, sessionID); err != nil {
		return Outcome{}, err
	}
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
	if snap.RunStatus != StatusRunning || snap.RunID == "" {
		return Outcome{SessionID: sessionID, RunID: snap.RunID, Status: snap.RunStatus}, ErrNotRunning
	}
	j.SetRun(snap.RunID)
	if err := closeOpenTools(ctx, j, evs, snap.RunID, interruptedMessage, true); err != nil {
		return Outcome{}, err
	}
	if evs, err = j.Events(ctx); err != nil {
		return Outcome{}, err
	}
	if _, err := m.fold(j, evs); err != nil {
		return Outcome{}, err
	}
	history, prompt, corr, before := runHistory(evs, snap.RunID)
	if reason == "" {
		reason = "taken over: the process working the run stopped"
	}
	if _, err := j.Append(ctx, event.RunResumed, "runtime", map[string]any{"reason": reason}, ""); err != nil {
		return Outcome{}, err
	}
	prevSnap, _, _, _ := replay.Resume(before)
	in := Input{Prompt: prompt, Cwd: cwd, Transcript: transcript, PrevSummary: prevSummary(prevSnap), RoleTurns: roleTurns(before), Source: "resume", NoRepair: recordedNoRepair(evs, snap.RunID), Workflow: recordedWorkflow(evs, snap.RunID)}
	return m.drive(ctx, eng, j, snap.RunID, corr, in, history)
}

// OpenToolCalls are run runID's tool.invoke events that have no
// tool.result: calls its process died during.
func OpenToolCalls(evs []event.Event, runID string) []event.Event {
	open := map[string]int{}
	var order []event.Event
	for _, e := range evs {
		switch {
		case e.Type == event.ToolInvoke && e.RunID == runID:
			open[e.ID] = len(order)
			order = append(order, e)
		case e.Type == event.ToolResult:
			if i, ok := open[e.Parent()]; ok {
				order[i] = event.Event{}
				delete(open, e.Parent())
			}
		}
	}
	var out []event.Event
	for _, e := range order {
		if e.ID != "" {
			out = append(out, e)
		}
	}
	return out
}

// NotRebuildableError says the worktree of a session cannot be rebuilt
// from its branch and its log: a recorded call changed it in a way the log
// cannot reproduce (a command ran, an MCP tool was called, an argument was
// redacted, a recorded result does not match).
type NotRebuildableError struct {
	Seq    int64
	Tool   string
	Reason string
}

func (e *NotRebuildableError) Error() string {
	return fmt.Sprintf("the worktree cannot be rebuilt from the log: %s at seq %d %s", e.Tool, e.Seq, e.Reason)
}

// readOnlyTools do not change the tracked content of the worktree; their
// recorded results are all a rebuild needs of them. (test.run and
// lint.run may leave build output behind, which a repository ignores.)
//
// A setup command (SetupTool) leaves the tracked content alone:
// dependencies go to the caches outside the worktree, or to ignored
// directories such as node_modules.
var readOnlyTools = map[string]bool{"echo": true, "repo.read": true, "repo.search": true, "test.run": true, "lint.run": true, SetupTool: true}

// RebuildWorkspace brings the worktree at dir (checked out at the session
// branch's commit that holds the work up to and including event
// afterSeq) to the state the log records: it applies again, in order, the
// recorded workspace changes after afterSeq (repo.patch diffs and
// repo.write contents whose tool.result is ok) — applying recorded
// results, never running a tool. A call without a result is taken as not
// having happened (Takeover records it as interrupted). A call whose
// effect the log cannot reproduce — a command (process.run) or an MCP
// tool ran, arguments were redacted, a write's recorded hash does not
// match — is a *NotRebuildableError and the run must not continue. It
// returns the number of changes applied.
func RebuildWorkspace(dir string, evs []event.Event, afterSeq int64) (int, error) {
	invokes := map[string]event.Event{}
	type change struct{ inv, res event.Event }
	var changes []change
	for _, e := range evs {
		if e.Seq <= afterSeq {
			continue
		}
		switch e.Type {
		case event.ToolInvoke:
			invokes[e.ID] = e
		case event.ToolResult:
			inv, ok := invokes[e.Parent()]
			if !ok {
				continue // its invoke is before afterSeq: its effect is in the branch
			}
			tool := event.FieldString(inv.Payload, "tool")
			switch {
			case readOnlyTools[tool]:
			case tool == "repo.patch" || tool == "repo.write":
				if event.FieldBool(e.Payload, "ok") {
					changes = append(changes, change{inv, e})
				} // a failed patch or write changes nothing (all or nothing)
			default:
				return 0, &NotRebuildableError{Seq: inv.Seq, Tool: tool, Reason: "ran; what it did to the worktree is not in the log"}
			}
		}
	}
	for _, inv := range invokes {
		if tool := event.FieldString(inv.Payload, "tool"); !readOnlyTools[tool] && tool != "repo.patch" && tool != "repo.write" && !hasResult(evs, inv.ID) {
			// A command that died mid-way may have changed anything.
			return 0, &NotRebuildableError{Seq: inv.Seq, Tool: tool, Reason: "was running when the process stopped"}
		}
	}
	if len(changes) == 0 {
		return 0, nil
	}
	ws, err := workspace.Open(dir, workspace.Options{})
	if err != nil {
		return 0, err
	}
	defer ws.Close()
	for i, c := range changes {
		if err := applyRecorded(ws, c.inv, c.res); err != nil {
			return i, err
		}
	}
	return len(changes), nil
}

func hasResult(evs []event.Event, invokeID string) bool {
	for _, e := range evs {
		if e.Type == event.ToolResult && e.Parent() == invokeID {
			return true
		}
	}
	return false
}

func applyRecorded(ws *workspace.Root, inv, res event.Event) error {
	tool := event.FieldString(inv.Payload, "tool")
	args := event.Field(inv.Payload, "args")
	if strings.Contains(string(args), redact.Mask) {
		return &NotRebuildableError{Seq: inv.Seq, Tool: tool, Reason: "has redacted arguments"}
	}
	fail := func(format string, a ...any) error {
		return &NotRebuildableError{Seq: inv.Seq, Tool: tool, Reason: fmt.Sprintf(format, a...)}
	}
	switch tool {
	case "repo.patch":
		var a struct {
			UnifiedDiff string `json:"unifiedDiff"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return fail("has unreadable arguments: %v", err)
		}
		fps, err := patch.Parse(a.UnifiedDiff)
		if err != nil {
			return fail("has a diff that does not parse: %v", err)
		}
		// Plan every file first: all change or none, as the tool does.
		out := make([][]byte, len(fps))
		for i := range fps {
			f := &fps[i]
			var old []byte
			if f.Op != patch.Create {
				if old, err = ws.ReadFile(f.OldPath); err != nil {
					return fail("does not apply again: %v", err)
				}
			} else if _, err := ws.Stat(f.NewPath); err == nil {
				return fail("does not apply again: %s already exists", f.NewPath)
			}
			if out[i], err = f.Apply(old); err != nil {
				return fail("does not apply again: %v", err)
			}
		}
		for i, f := range fps {
			switch f.Op {
			case patch.Delete:
				err = ws.Remove(f.OldPath)
			case patch.Rename:
				if err = ws.WriteFile(f.NewPath, out[i], 0o644); err == nil {
					err = ws.Remove(f.OldPath)
				}
			default:
				err = ws.WriteFile(f.Path(), out[i], 0o644)
			}
			if err != nil {
				return fmt.Errorf("rebuild the worktree: %s: %w", f.Path(), err)
			}
		}
		return nil
	case "repo.write":
		var a struct{ Path, Content string }
		if err := json.Unmarshal(args, &a); err != nil {
			return fail("has unreadable arguments: %v", err)
		}
		sum := sha256.Sum256([]byte(a.Content))
		if want := event.FieldString(event.Field(res.Payload, "result"), "hash"); want != hex.EncodeToString(sum[:]) {
			return fail("recorded content whose hash is not the written one")
		}
		if err := ws.WriteFile(a.Path, []byte(a.Content), 0o644); err != nil {
			return fmt.Errorf("rebuild the worktree: %s: %w", a.Path, err)
		}
		return nil
	}
	return fail("is not a recorded workspace change")
}

// CloseEnded appends the session.close that a run's end lacks when its
// process died between the run's turn.terminal and its session.close
// (finish appends them one after the other), and the turn.terminal and
// session.close when it died right after run.completed or run.failed. It
// does nothing otherwise, and reports whether it appended.
func (m *Manager) CloseEnded(ctx context.Context, sessionID string) (bool, error) {
	unlock := m.lock(sessionID)
	defer unlock()
	j, err := journal.Open(ctx, m.Store, sessionID)
	if err != nil {
		return false, err
	}
	evs, err := j.Events(ctx)
	if err != nil {
		return false, err
	}
	for i := len(evs) - 1; i >= 0; i-- {
		switch e := evs[i]; e.Type {
		case event.SessionClose, event.RunStarted, event.RunResumed, event.SessionStart:
			return false, nil
		case event.TurnTerminal:
			j.SetRun(e.RunID)
			ok := event.FieldString(e.Payload, "status") == string(StatusCompleted)
			_, err := j.Append(ctx, event.SessionClose, "runtime", map[string]any{"ok": ok}, "")
			return err == nil, err
		case event.RunCompleted, event.RunFailed:
			// The process died between the run's end and its terminal
			// report: the report follows from the recorded end.
			j.SetRun(e.RunID)
			_, _, corr, _ := runHistory(evs, e.RunID)
			rep := Report{Status: StatusCompleted, NextAction: "review the change", TraceID: e.RunID, CorrelationID: corr, SchemaVersion: "v1"}
			if e.Type == event.RunFailed {
				rep = Report{Status: StatusFailed, Reason: event.FieldString(e.Payload, "reason"), NextAction: "check the server logs and retry", TraceID: e.RunID, CorrelationID: corr,
					ErrorClass: ErrorClass(event.FieldString(e.Payload, "error_class")), SchemaVersion: "v1"}
			}
			if _, err := j.Append(ctx, event.TurnTerminal, "runtime", rep, ""); err != nil {
				return false, err
			}
			_, err := j.Append(ctx, event.SessionClose, "runtime", map[string]any{"ok": rep.Status == StatusCompleted}, "")
			return err == nil, err
		}
	}
	return false, nil
}

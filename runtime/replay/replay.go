// Package replay folds a session's event log into a snapshot and verifies a
// log's integrity. Replay is a pure function of the events: it calls no
// model and no tool (calling them again would be a re-run, not a replay).
package replay

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/agentos/agentos/runtime/event"
)

// Snapshot is everything the log says about a session. It is a projection:
// PR comments, the run viewer and resume all read it, none of them write it.
type Snapshot struct {
	SessionID string `json:"session_id"`
	Events    int    `json:"events"`
	LastSeq   int64  `json:"last_seq"`
	LastHash  string `json:"last_hash"`
	Prompt    string `json:"prompt,omitempty"`

	Closed  bool   `json:"closed"`
	CloseOK *bool  `json:"close_ok,omitempty"`
	RunID   string `json:"run_id,omitempty"` // the latest run
	// RunStatus is the latest run's state: running, paused, completed,
	// failed, denied or cancelled ("" before any run.* or turn.terminal event).
	RunStatus RunStatus `json:"run_status,omitempty"`
	// TurnState is the latest run's turn lifecycle state:
	// preparing → running → waiting_tool → paused → committing →
	// completed | failed | denied. It is derived from the run's events.
	TurnState string              `json:"turn_state,omitempty"`
	Terminal  *TerminalReport     `json:"terminal,omitempty"` // the latest run's terminal report
	Runs      map[string]*RunInfo `json:"runs,omitempty"`

	State  string            `json:"state,omitempty"`  // last agent.transition target
	Agents map[string]string `json:"agents,omitempty"` // actor → last transition target
	Output string            `json:"output,omitempty"` // last worker.report output
	Plan   json.RawMessage   `json:"plan,omitempty"`   // last plan_v1 (artifact.emitted kind "plan")
	Review json.RawMessage   `json:"review,omitempty"` // last review_result_v1 (artifact.emitted kind "review")
	Report json.RawMessage   `json:"report,omitempty"` // last worker.report payload

	Usage Usage `json:"usage"`
	// Budget is the latest run's budget as its run.started (or a later
	// run.resumed) records it; nil when the run has none.
	Budget       *Budget    `json:"budget,omitempty"`
	LLMCalls     int        `json:"llm_calls"`
	ToolsInvoked []ToolCall `json:"tools_invoked"`
	Rejected     int        `json:"tools_rejected"`
	Hooks        int        `json:"hook_decisions"`
	HookDenials  int        `json:"hook_denials"`
	Skills       []string   `json:"skills,omitempty"`

	PendingApprovals  []Approval `json:"pending_approvals"`
	ResolvedApprovals []Approval `json:"resolved_approvals,omitempty"`
	Artifacts         []Artifact `json:"artifacts,omitempty"`
	Checkpoint        int64      `json:"checkpoint_seq,omitempty"`
	Workflow          *Workflow  `json:"workflow,omitempty"`
	SchemaViolations  int        `json:"schema_violations"`
	Amendments        []string   `json:"amendments,omitempty"` // ids of amended events
}

// RunInfo is one run of the session.
type RunInfo struct {
	Status   RunStatus       `json:"status"`
	Terminal *TerminalReport `json:"terminal,omitempty"`
	FirstSeq int64           `json:"first_seq"`
	LastSeq  int64           `json:"last_seq"`
}

// Usage sums tokens and cost over llm.response events. InputTokens
// includes the cached and cache-written tokens counted apart.
type Usage struct {
	InputTokens       int64   `json:"input_tokens"`
	OutputTokens      int64   `json:"output_tokens"`
	CachedInputTokens int64   `json:"cached_input_tokens,omitempty"`
	CacheWriteTokens  int64   `json:"cache_write_tokens,omitempty"`
	CostUSD           float64 `json:"cost_usd"`
	// UnpricedCalls counts the model calls whose response carries no
	// cost: no price was known for the model, which is not free.
	UnpricedCalls int `json:"unpriced_calls,omitempty"`
}

// CostText is the cost as agentos says it everywhere: dollars when every
// call was priced, "not tracked" when none was, and both otherwise.
// calls is the number of model calls the usage covers.
func (u Usage) CostText(calls int) string {
	switch {
	case u.UnpricedCalls == 0 || calls == 0:
		return fmt.Sprintf("$%.4f", u.CostUSD)
	case u.UnpricedCalls >= calls && u.CostUSD == 0:
		return "cost not tracked (no price is known for the model)"
	}
	return fmt.Sprintf("$%.4f (%d of %d model calls not tracked: no price is known)", u.CostUSD, u.UnpricedCalls, calls)
}

// ToolCall is one tool.invoke and, once seen, its result.
type ToolCall struct {
	Seq       int64  `json:"seq"`
	CallID    string `json:"call_id"`
	Tool      string `json:"tool"`
	EventID   string `json:"event_id"`
	Completed bool   `json:"completed"`
	OK        bool   `json:"ok"`
	ErrorCode string `json:"error_code,omitempty"`
	// Command, ExitCode and Passed are read from the result of a tool that
	// runs a command (test.run, lint.run, process.run): OK says the tool
	// ran, Passed (or a zero exit code) says the command succeeded.
	Command  string `json:"command,omitempty"`
	ExitCode *int64 `json:"exit_code,omitempty"`
	Passed   *bool  `json:"passed,omitempty"`
}

// TerminalReport mirrors terminal_report_v1.
type TerminalReport struct {
	Status        string `json:"status"`
	Reason        string `json:"reason,omitempty"`
	NextAction    string `json:"next_action"`
	TraceID       string `json:"trace_id"`
	CorrelationID string `json:"correlation_id"`
	ErrorClass    string `json:"error_class,omitempty"`
	SchemaVersion string `json:"schema_version"`
}

// Approval is a pending or resolved action.
type Approval struct {
	ID           string          `json:"approval_id"`
	Tool         string          `json:"tool"`
	CallID       string          `json:"call_id,omitempty"`
	Digest       string          `json:"digest"`
	Preview      json.RawMessage `json:"preview,omitempty"`
	Args         json.RawMessage `json:"args,omitempty"`
	Revision     json.RawMessage `json:"revision,omitempty"`
	RequestedSeq int64           `json:"requested_seq"`
	Decision     string          `json:"decision,omitempty"`
	By           string          `json:"by,omitempty"`
	Reason       string          `json:"reason,omitempty"`
	ResolvedSeq  int64           `json:"resolved_seq,omitempty"`
}

// Artifact is an artifact.emitted record.
type Artifact struct {
	Seq    int64  `json:"seq"`
	Digest string `json:"digest"`
	Kind   string `json:"kind"`
	Name   string `json:"name,omitempty"`
	Path   string `json:"path,omitempty"`
	Size   int64  `json:"size,omitempty"`
}

// Workflow is the workflow-plane state.
type Workflow struct {
	CycleID string   `json:"cycle_id"`
	Phase   string   `json:"phase,omitempty"`
	Visited []string `json:"visited_phases,omitempty"`
	Verdict string   `json:"verdict,omitempty"`
	Gates   int      `json:"policy_gates"`
}

// Folder applies events one at a time; Snapshot returns the state so far.
// It keeps indexes so that applying an event is O(1).
type Folder struct {
	s        Snapshot
	toolIdx  map[string]int // tool.invoke event id → index in ToolsInvoked
	pending  map[string]int // approval id → index in PendingApprovals
	resolved map[string]bool
	// cp is the state of the last checkpoint this folder wrote or
	// restored, the base of the next incremental one; next is the
	// checkpoint NewCheckpoint made, adopted when its event is applied.
	cp, next *cpState
}

// NewFolder returns an empty Folder.
func NewFolder() *Folder {
	return &Folder{
		s:        Snapshot{Agents: map[string]string{}, Runs: map[string]*RunInfo{}, ToolsInvoked: []ToolCall{}, PendingApprovals: []Approval{}},
		toolIdx:  map[string]int{},
		pending:  map[string]int{},
		resolved: map[string]bool{},
	}
}

// Replay folds events into a snapshot.
func Replay(evs []event.Event) (Snapshot, error) {
	f := NewFolder()
	for i := range evs {
		if err := f.Apply(&evs[i]); err != nil {
			return f.Snapshot(), err
		}
	}
	return f.Snapshot(), nil
}

// ReplayReader folds a JSONL event log. It stops at the first line that
// does not parse; use Verify to check integrity.
func ReplayReader(r io.Reader) (Snapshot, error) {
	f := NewFolder()
	br := bufio.NewReaderSize(r, 1<<20)
	line := 0
	for {
		b, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than the buffer: collect it whole (copied
			// before the next read reuses the buffer).
			long := append([]byte(nil), b...)
			rest, err2 := br.ReadBytes('\n')
			b = append(long, rest...)
			err = err2
		}
		if len(b) > 0 {
			line++
			b = trimEOL(b)
			if len(b) > 0 {
				// A copy: the event's payload refers to its line, and the
				// snapshot may keep it (the last worker.report).
				e, perr := event.ParseLineFast(append([]byte(nil), b...))
				if perr != nil {
					return f.Snapshot(), fmt.Errorf("replay: line %d: %w", line, perr)
				}
				if aerr := f.Apply(&e); aerr != nil {
					return f.Snapshot(), fmt.Errorf("replay: line %d: %w", line, aerr)
				}
			}
		}
		if err == io.EOF {
			return f.Snapshot(), nil
		}
		if err != nil {
			return f.Snapshot(), fmt.Errorf("replay: %w", err)
		}
	}
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// Snapshot returns a copy of the state folded so far.
func (f *Folder) Snapshot() Snapshot {
	s := f.s
	s.ToolsInvoked = append([]ToolCall{}, f.s.ToolsInvoked...)
	s.PendingApprovals = []Approval{}
	for _, a := range f.s.PendingApprovals {
		if !f.resolved[a.ID] {
			s.PendingApprovals = append(s.PendingApprovals, a)
		}
	}
	sort.SliceStable(s.PendingApprovals, func(i, j int) bool { return s.PendingApprovals[i].RequestedSeq < s.PendingApprovals[j].RequestedSeq })
	return s
}

// payload shapes read by the fold; unknown fields are ignored.
type (
	pPrompt   struct{ Prompt string }
	pClose    struct{ OK bool }
	pReport   struct{ Output string }
	pHook     struct{ Decision string }
	pSkill    struct{ Skill string }
	pResolved struct {
		ApprovalID string `json:"approval_id"`
		Decision   string `json:"decision"`
		By         string `json:"by"`
		Reason     string `json:"reason"`
	}
	pArtifact struct {
		Digest, Kind, Name, Path string
		Size                     int64
	}
	pWorkflow struct {
		CycleID  string `json:"cycle_id"`
		ToPhase  string `json:"to_phase"`
		Verdict  string `json:"verdict"`
		Decision string `json:"decision"`
	}
	pAmended struct{ Amends string }
	pPaused  struct{ Reason string }
)

// Apply folds one event. Events must arrive in seq order; Apply does not
// check integrity (Verify does).
func (f *Folder) Apply(e *event.Event) error {
	s := &f.s
	if s.SessionID == "" {
		s.SessionID = e.SessionID
	}
	s.Events++
	s.LastSeq, s.LastHash = e.Seq, e.Hash
	if e.RunID != "" {
		ri := s.Runs[e.RunID]
		if ri == nil {
			ri = &RunInfo{Status: "running", FirstSeq: e.Seq}
			s.Runs[e.RunID] = ri
		}
		ri.LastSeq = e.Seq
		s.RunID = e.RunID
	}
	decode := func(v any) error {
		if err := json.Unmarshal(e.Payload, v); err != nil {
			return fmt.Errorf("seq %d %s: payload: %w", e.Seq, e.Type, err)
		}
		return nil
	}
	setRun := func(status RunStatus) {
		if ri := s.Runs[e.RunID]; ri != nil {
			ri.Status = status
		}
		s.RunStatus = status
	}
	if st := turnState(e.Type, s.TurnState); st != "" {
		s.TurnState = st
	}
	switch e.Type {
	case event.SessionStart:
		var p pPrompt
		if err := decode(&p); err != nil {
			return err
		}
		s.Prompt = p.Prompt
	case event.SessionClose:
		var p pClose
		if err := decode(&p); err != nil {
			return err
		}
		s.Closed = true
		ok := p.OK
		s.CloseOK = &ok
	case event.RunStarted, event.RunResumed:
		setRun(RunRunning)
		if b := budgetOf(e.Payload); b != nil || e.Type == event.RunStarted {
			s.Budget = b // a new run starts with its own budget (or none)
		}
	case event.RunPaused:
		var p pPaused
		if err := decode(&p); err != nil {
			return err
		}
		setRun(RunPaused)
	case event.RunCompleted:
		setRun(RunCompleted)
	case event.RunFailed:
		setRun(RunFailed)
	case event.RunCancelled:
		setRun(RunCancelled)
	case event.TurnTerminal:
		var t TerminalReport
		if err := decode(&t); err != nil {
			return err
		}
		s.TurnState = t.Status
		s.Terminal = &t
		if ri := s.Runs[e.RunID]; ri != nil {
			ri.Terminal = &t
		}
		setRun(RunStatus(t.Status))
	case event.AgentTransition:
		to := event.FieldString(e.Payload, "to")
		s.Agents[e.Actor] = to
		s.State = to
	// The hot event types of long runs are read with the field scanner;
	// their payloads have passed their schemas on append.
	case event.LLMResponse:
		s.LLMCalls++
		u := event.Field(event.Field(e.Payload, "response"), "usage")
		if event.FieldFloat(u, "cost_usd") <= 0 {
			s.Usage.UnpricedCalls++
		}
		if u != nil {
			s.Usage.InputTokens += event.FieldInt(u, "input_tokens")
			s.Usage.OutputTokens += event.FieldInt(u, "output_tokens")
			s.Usage.CachedInputTokens += event.FieldInt(u, "cached_input_tokens")
			s.Usage.CacheWriteTokens += event.FieldInt(u, "cache_write_tokens")
			s.Usage.CostUSD += event.FieldFloat(u, "cost_usd")
		}
	case event.ToolInvoke:
		f.toolIdx[e.ID] = len(s.ToolsInvoked)
		s.ToolsInvoked = append(s.ToolsInvoked, ToolCall{Seq: e.Seq, CallID: event.FieldString(e.Payload, "call_id"), Tool: event.FieldString(e.Payload, "tool"), EventID: e.ID})
	case event.ToolResult:
		if i, ok := f.toolIdx[e.Parent()]; ok {
			tc := &s.ToolsInvoked[i]
			tc.Completed, tc.OK = true, event.FieldBool(e.Payload, "ok")
			tc.ErrorCode = event.FieldString(event.Field(e.Payload, "error"), "code")
			if res := event.Field(e.Payload, "result"); len(res) > 0 && res[0] == '{' {
				tc.Command = event.FieldString(res, "command")
				if v := event.Field(res, "exit_code"); len(v) > 0 {
					n := event.FieldInt(res, "exit_code")
					tc.ExitCode = &n
				}
				if v := string(event.Field(res, "passed")); v == "true" || v == "false" {
					b := v == "true"
					tc.Passed = &b
				}
			}
		}
	case event.ToolRejected:
		s.Rejected++
	case event.WorkerReport:
		var p pReport
		if err := decode(&p); err != nil {
			return err
		}
		s.Output = p.Output
		s.Report = e.Payload
	case event.HookFired:
		var p pHook
		if err := decode(&p); err != nil {
			return err
		}
		s.Hooks++
		if p.Decision == "deny" {
			s.HookDenials++
		}
	case event.SkillInvoke:
		var p pSkill
		if err := decode(&p); err != nil {
			return err
		}
		s.Skills = append(s.Skills, p.Skill)
	case event.ApprovalRequested:
		var a Approval
		if err := decode(&a); err != nil {
			return err
		}
		a.RequestedSeq = e.Seq
		if i, ok := f.pending[a.ID]; ok {
			s.PendingApprovals[i] = a // re-requested (e.g. after going stale)
			delete(f.resolved, a.ID)
		} else {
			f.pending[a.ID] = len(s.PendingApprovals)
			s.PendingApprovals = append(s.PendingApprovals, a)
		}
	case event.ApprovalResolved:
		var p pResolved
		if err := decode(&p); err != nil {
			return err
		}
		a := Approval{ID: p.ApprovalID}
		if i, ok := f.pending[p.ApprovalID]; ok {
			a = s.PendingApprovals[i]
		}
		a.Decision, a.By, a.Reason, a.ResolvedSeq = p.Decision, p.By, p.Reason, e.Seq
		f.resolved[p.ApprovalID] = true
		s.ResolvedApprovals = append(s.ResolvedApprovals, a)
	case event.ArtifactEmitted:
		var p pArtifact
		if err := decode(&p); err != nil {
			return err
		}
		s.Artifacts = append(s.Artifacts, Artifact{Seq: e.Seq, Digest: p.Digest, Kind: p.Kind, Name: p.Name, Path: p.Path, Size: p.Size})
		if c := event.FieldString(e.Payload, "content"); c != "" && json.Valid([]byte(c)) {
			switch p.Kind {
			case "plan":
				s.Plan = json.RawMessage(c)
			case "review":
				s.Review = json.RawMessage(c)
			}
		}
	case event.CheckpointCreated:
		// The field scanner: a checkpoint's payload may hold a whole snapshot.
		s.Checkpoint = event.FieldInt(e.Payload, "last_seq")
		// The checkpoint this folder made becomes the next one's base, as
		// does a restored one when its own event is folded; one written
		// elsewhere leaves no base (the next one is full).
		switch n := f.next; {
		case n != nil && event.FieldString(e.Payload, "snapshot_sha256") == n.sha:
			n.seq, n.hash = e.Seq, e.Hash
			f.cp = n
		case f.cp != nil && f.cp.seq == e.Seq && f.cp.hash == e.Hash:
		default:
			f.cp = nil
		}
		f.next = nil
	case event.WorkflowStarted, event.WorkflowPhaseAdvanced, event.WorkflowPolicyGated, event.WorkflowCompleted, event.WorkflowAborted:
		var p pWorkflow
		if err := decode(&p); err != nil {
			return err
		}
		if s.Workflow == nil {
			s.Workflow = &Workflow{}
		}
		w := s.Workflow
		switch e.Type {
		case event.WorkflowStarted:
			*w = Workflow{CycleID: p.CycleID}
		case event.WorkflowPhaseAdvanced:
			w.Phase = p.ToPhase
			w.Visited = append(w.Visited, p.ToPhase)
		case event.WorkflowPolicyGated:
			w.Gates++
		case event.WorkflowCompleted:
			w.Verdict = p.Verdict
		case event.WorkflowAborted:
			w.Verdict = "abort"
		}
	case event.SchemaViolation:
		s.SchemaViolations++
	case event.EventAmended:
		var p pAmended
		if err := decode(&p); err != nil {
			return err
		}
		s.Amendments = append(s.Amendments, p.Amends)
	}
	return nil
}

// turnState maps an event to the turn state it moves the run into ("" for
// no change). A run (re)starts by preparing its context, runs while it
// talks to the model, waits while a tool executes, pauses for approvals,
// and commits its outcome before the terminal report names the end state.
func turnState(typ, cur string) string {
	switch typ {
	case event.RunStarted, event.RunResumed:
		return "preparing"
	case event.LLMRequest:
		return "running"
	case event.ToolInvoke:
		return "waiting_tool"
	case event.ToolResult:
		if cur == "waiting_tool" {
			return "running"
		}
	case event.RunPaused:
		return "paused"
	case event.RunCompleted, event.RunFailed, event.RunCancelled:
		return "committing"
	}
	return ""
}

// Budget is a run's limits (provider.Limits) as the run records them.
// Zero means no limit of that kind.
type Budget struct {
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	MaxTokens  int64   `json:"max_tokens,omitempty"`
	MaxTurns   int64   `json:"max_turns,omitempty"`
}

// budgetOf reads the optional budget member of run.started or
// run.resumed. It never fails a replay: a member of the wrong type, a
// negative, zero, infinite or fractional count is no limit.
func budgetOf(payload []byte) *Budget {
	raw := event.Field(payload, "budget")
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var b Budget
	if f := event.FieldFloat(raw, "max_cost_usd"); f > 0 && !math.IsInf(f, 0) {
		b.MaxCostUSD = f
	}
	if n := event.FieldInt(raw, "max_tokens"); n > 0 {
		b.MaxTokens = n
	}
	if n := event.FieldInt(raw, "max_turns"); n > 0 {
		b.MaxTurns = n
	}
	if b == (Budget{}) {
		return nil
	}
	return &b
}

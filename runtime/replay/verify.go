package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/schemas"
)

// Problem codes reported by Verify.
const (
	ProblemEmpty            = "empty_log"
	ProblemTornFinalLine    = "torn_final_line" // a crash cut the last write short
	ProblemBlankLine        = "blank_line"
	ProblemInvalidJSON      = "invalid_json"
	ProblemHashMismatch     = "hash_mismatch" // content edited after it was written
	ProblemNotCanonical     = "not_canonical"
	ProblemEnvelopeSchema   = "envelope_schema"
	ProblemPayloadSchema    = "payload_schema"
	ProblemSessionMismatch  = "session_mismatch"
	ProblemSeqGap           = "seq_gap"          // events missing (deleted)
	ProblemSeqOrder         = "seq_out_of_order" // reordered or duplicated lines
	ProblemChainBroken      = "chain_broken"
	ProblemTerminalMissing  = "terminal_missing"
	ProblemTerminalDup      = "terminal_duplicate"
	ProblemUnpairedTool     = "unpaired_tool_invoke"
	ProblemUnpairedLLM      = "unpaired_llm_request"
	ProblemUnexpectedResult = "orphan_result"
	// ProblemAuditIncomplete: a session that closed ok lacks an event type
	// of the audit-completeness list. Options.Lenient turns it back
	// into advice (Report.Audit) for logs written before the rule held.
	ProblemAuditIncomplete = "audit_incomplete"
	// ProblemWorkflowAudit: a run through the workflow plane skipped
	// one of its audit events — a cycle started but its finished run has
	// neither workflow.completed nor workflow.aborted, or a phase did work
	// (or a policy decided) without a workflow.phase_advanced into it.
	ProblemWorkflowAudit = "workflow_audit"
	// ProblemPromptBlock: an llm.request defines a prompt block whose text
	// does not hash to its reference (edited after it was written), or
	// uses a reference that no llm.request at or before it in the session
	// defines (docs/decisions.md, "Prompts stored once per session").
	ProblemPromptBlock = "prompt_block"
)

// Options change what Verify treats as a problem.
type Options struct {
	// Lenient reports a successful session's missing audit event types as
	// advice (Report.Audit) instead of the audit_incomplete problem: for
	// logs written by versions that did not record every type.
	Lenient bool
}

// Problem is the first integrity problem found in a log.
type Problem struct {
	Code    string `json:"code"`
	Line    int    `json:"line,omitempty"` // 1-based line in the file (0 when verifying stored events)
	Seq     int64  `json:"seq,omitempty"`
	Message string `json:"message"`
}

func (p *Problem) Error() string {
	loc := ""
	if p.Line > 0 {
		loc = fmt.Sprintf("line %d", p.Line)
	}
	if p.Seq > 0 {
		if loc != "" {
			loc += ", "
		}
		loc += fmt.Sprintf("seq %d", p.Seq)
	}
	if loc == "" {
		return fmt.Sprintf("%s: %s", p.Code, p.Message)
	}
	return fmt.Sprintf("%s: %s: %s", loc, p.Code, p.Message)
}

// Report is the result of Verify.
type Report struct {
	Valid     bool     `json:"valid"`
	SessionID string   `json:"session_id,omitempty"`
	Events    int      `json:"events"`
	LastSeq   int64    `json:"last_seq"`
	LastHash  string   `json:"last_hash,omitempty"`
	Closed    bool     `json:"closed"`
	Problem   *Problem `json:"problem,omitempty"`
	// Audit is set for a session whose last session.close says ok: which
	// of the "a successful session should include at least" event
	// types it lacks. Unless Options.Lenient, a missing type is also the
	// audit_incomplete Problem and the log is not valid.
	Audit *Audit `json:"audit,omitempty"`
}

// Audit is the audit-completeness check of a successful session.
type Audit struct {
	Complete bool     `json:"complete"`
	Missing  []string `json:"missing,omitempty"`
}

// SuccessfulSessionTypes is the audit-completeness list: the event
// types a successful session should include at least.
var SuccessfulSessionTypes = []string{
	event.SessionStart, event.HookFired, event.SkillInvoke, event.AgentTransition, event.LLMRequest, event.LLMResponse,
	event.ToolInvoke, event.ToolResult, event.WorkerReport, event.SkillComplete, event.SessionClose,
}

// Verifier checks events one by one. It is used by VerifyReader for files
// and VerifyEvents for events read from a store.
type Verifier struct {
	reg       *schemas.Registry
	opts      Options
	rep       Report
	prevHash  string
	openTools map[string]open // tool.invoke id → where
	openLLM   map[string]open
	terminals map[string]int // run id → count
	runs      map[string]open
	seen      map[string]bool     // event types present
	closeOK   bool                // the last session.close said ok
	workflows map[string]*wfAudit // run id → its cycle, while it runs
	sawWork   bool                // a Plan-Work-Review pass reached WORK
	prompts   map[string]bool     // prompt block references defined so far
}

// wfAudit is one run's workflow-plane audit state.
type wfAudit struct {
	at    open
	cycle string
	phase string // "" until the first workflow.phase_advanced
	ended bool   // workflow.completed or workflow.aborted seen
}

type open struct {
	line int
	seq  int64
}

// NewVerifier returns a strict Verifier using the schema registry.
func NewVerifier(reg *schemas.Registry) *Verifier {
	return NewVerifierOptions(reg, Options{})
}

// NewVerifierOptions returns a Verifier with options.
func NewVerifierOptions(reg *schemas.Registry, opts Options) *Verifier {
	return &Verifier{reg: reg, opts: opts, openTools: map[string]open{}, openLLM: map[string]open{}, terminals: map[string]int{}, runs: map[string]open{}, seen: map[string]bool{}, workflows: map[string]*wfAudit{}}
}

// Line checks one raw line (without its newline). final says it is the last
// line and had no trailing newline, which is how a crash mid-write looks.
func (v *Verifier) Line(lineNo int, b []byte, final bool) *Problem {
	if len(bytes.TrimSpace(b)) == 0 {
		if final {
			return nil
		}
		return &Problem{Code: ProblemBlankLine, Line: lineNo, Message: "blank line inside the log"}
	}
	if _, err := event.CheckLineHash(b); err != nil {
		// Every strict prefix of a canonical line is invalid JSON (the outer
		// object is never closed), so a final line that still parses was
		// not cut short by a crash: it was edited.
		if final && !json.Valid(b) {
			return &Problem{Code: ProblemTornFinalLine, Line: lineNo, Message: fmt.Sprintf("the last line is incomplete (%d bytes, no newline): a write was cut short, e.g. by a crash; the %d events before it are intact if no other problem is reported", len(b), v.rep.Events)}
		}
		if !json.Valid(b) {
			return &Problem{Code: ProblemInvalidJSON, Line: lineNo, Message: "line is not valid JSON (corrupted bytes)"}
		}
		return &Problem{Code: ProblemHashMismatch, Line: lineNo, Seq: seqOf(b), Message: "content does not match its hash: the event was edited after it was written (" + err.Error() + ")"}
	}
	e, err := event.ParseLine(b)
	if err != nil {
		return &Problem{Code: ProblemInvalidJSON, Line: lineNo, Message: err.Error()}
	}
	if !bytes.Equal(e.Line(), b) {
		return &Problem{Code: ProblemNotCanonical, Line: lineNo, Seq: e.Seq, Message: "line is not in canonical form (fields reordered, extra members or white space)"}
	}
	if err := v.reg.ValidateJSON("event_v1", b); err != nil {
		return &Problem{Code: ProblemEnvelopeSchema, Line: lineNo, Seq: e.Seq, Message: err.Error()}
	}
	return v.Event(lineNo, &e)
}

func seqOf(b []byte) int64 {
	var s struct{ Seq int64 }
	_ = json.Unmarshal(b, &s)
	return s.Seq
}

// Event checks one decoded event whose hash is already known to be right.
func (v *Verifier) Event(lineNo int, e *event.Event) *Problem {
	r := &v.rep
	if r.SessionID == "" {
		r.SessionID = e.SessionID
	} else if e.SessionID != r.SessionID {
		return &Problem{Code: ProblemSessionMismatch, Line: lineNo, Seq: e.Seq, Message: fmt.Sprintf("event belongs to session %q, log is session %q", e.SessionID, r.SessionID)}
	}
	want := r.LastSeq + 1
	switch {
	case e.Seq > want:
		return &Problem{Code: ProblemSeqGap, Line: lineNo, Seq: e.Seq, Message: fmt.Sprintf("expected seq %d: %d event(s) missing (deleted?)", want, e.Seq-want)}
	case e.Seq < want:
		return &Problem{Code: ProblemSeqOrder, Line: lineNo, Seq: e.Seq, Message: fmt.Sprintf("expected seq %d: lines reordered or duplicated", want)}
	}
	if e.PrevHash != v.prevHash {
		return &Problem{Code: ProblemChainBroken, Line: lineNo, Seq: e.Seq, Message: fmt.Sprintf("prev_hash %.12s… does not match the previous event's hash %.12s…", e.PrevHash, v.prevHash)}
	}
	if err := v.reg.ValidateJSON(schemas.PayloadSchemaID(e.Type), e.Payload); err != nil {
		msg := err.Error()
		if errors.Is(err, schemas.ErrUnknownSchema) {
			msg = fmt.Sprintf("unknown event type %q", e.Type)
		}
		return &Problem{Code: ProblemPayloadSchema, Line: lineNo, Seq: e.Seq, Message: msg}
	}
	here := open{line: lineNo, seq: e.Seq}
	if e.RunID != "" {
		if _, ok := v.runs[e.RunID]; !ok {
			v.runs[e.RunID] = here
		}
	}
	switch e.Type {
	case event.ToolInvoke:
		v.openTools[e.ID] = here
	case event.ToolResult:
		if p := e.Parent(); p != "" {
			if _, ok := v.openTools[p]; !ok {
				return &Problem{Code: ProblemUnexpectedResult, Line: lineNo, Seq: e.Seq, Message: fmt.Sprintf("tool.result for %s, which is not an open tool.invoke", p)}
			}
			delete(v.openTools, p)
		} else {
			return &Problem{Code: ProblemUnexpectedResult, Line: lineNo, Seq: e.Seq, Message: "tool.result without parent_id"}
		}
	case event.LLMRequest:
		if p := v.promptBlocks(lineNo, e); p != nil {
			return p
		}
		v.openLLM[e.ID] = here
	case event.LLMResponse:
		p := e.Parent()
		if _, ok := v.openLLM[p]; !ok {
			return &Problem{Code: ProblemUnexpectedResult, Line: lineNo, Seq: e.Seq, Message: fmt.Sprintf("llm.response for %q, which is not an open llm.request", p)}
		}
		delete(v.openLLM, p)
	case event.TurnTerminal:
		v.terminals[e.RunID]++
		if v.terminals[e.RunID] > 1 {
			return &Problem{Code: ProblemTerminalDup, Line: lineNo, Seq: e.Seq, Message: fmt.Sprintf("run %q has a second turn.terminal: exactly one terminal report per run", e.RunID)}
		}
	case event.SessionClose:
		r.Closed = true
		v.closeOK = event.FieldBool(e.Payload, "ok")
	case event.AgentTransition:
		if event.FieldString(e.Payload, "to") == "WORK" {
			v.sawWork = true
		}
	}
	if p := v.workflowEvent(lineNo, e); p != nil {
		return p
	}
	v.seen[e.Type] = true
	r.Events++
	r.LastSeq = e.Seq
	r.LastHash = e.Hash
	v.prevHash = e.Hash
	return nil
}

// promptBlocks checks an llm.request's prompt blocks: each block it
// defines hashes to its reference, and each reference its request uses
// is defined by it or by an llm.request before it in this log.
func (v *Verifier) promptBlocks(lineNo int, e *event.Event) *Problem {
	defs, err := event.CheckPromptDefs(e.Payload)
	if err != nil {
		return &Problem{Code: ProblemPromptBlock, Line: lineNo, Seq: e.Seq, Message: err.Error()}
	}
	refs, err := event.PromptRefs(e.Payload)
	if err != nil {
		return &Problem{Code: ProblemPromptBlock, Line: lineNo, Seq: e.Seq, Message: err.Error()}
	}
	for _, ref := range refs {
		if _, ok := defs[ref]; !ok && !v.prompts[ref] {
			return &Problem{Code: ProblemPromptBlock, Line: lineNo, Seq: e.Seq, Message: fmt.Sprintf("the request uses prompt block %s, which no llm.request at or before it in this session defines", ref)}
		}
	}
	for ref, block := range defs {
		items, _ := event.ListItems(block) // their form was checked with the definitions
		for _, it := range items {
			if _, ok := defs[it]; !ok && !v.prompts[it] {
				return &Problem{Code: ProblemPromptBlock, Line: lineNo, Seq: e.Seq, Message: fmt.Sprintf("prompt block %s lists %s, which no llm.request at or before it in this session defines", ref, it)}
			}
		}
	}
	if len(defs) > 0 && v.prompts == nil {
		v.prompts = map[string]bool{}
	}
	for ref := range defs {
		v.prompts[ref] = true
	}
	return nil
}

// workflowEvent checks the workflow plane's audit trail as it goes: the
// run's work after workflow.started happens inside a phase entered by
// workflow.phase_advanced, and a run that ends (turn.terminal) with a
// cycle open has no workflow.completed or workflow.aborted.
func (v *Verifier) workflowEvent(lineNo int, e *event.Event) *Problem {
	w := v.workflows[e.RunID]
	switch e.Type {
	case event.WorkflowStarted:
		v.workflows[e.RunID] = &wfAudit{at: open{line: lineNo, seq: e.Seq}, cycle: event.FieldString(e.Payload, "cycle_id")}
		return nil
	case event.WorkflowPhaseAdvanced:
		if w == nil || w.ended {
			return &Problem{Code: ProblemWorkflowAudit, Line: lineNo, Seq: e.Seq, Message: "workflow.phase_advanced outside a started cycle"}
		}
		w.phase = event.FieldString(e.Payload, "to_phase")
		return nil
	case event.WorkflowCompleted, event.WorkflowAborted:
		if w == nil || w.ended {
			return &Problem{Code: ProblemWorkflowAudit, Line: lineNo, Seq: e.Seq, Message: e.Type + " without an open workflow.started"}
		}
		w.ended = true
		return nil
	case event.TurnTerminal:
		if w != nil && !w.ended {
			return &Problem{Code: ProblemWorkflowAudit, Line: w.at.line, Seq: w.at.seq, Message: fmt.Sprintf("cycle %s started but its run ended (turn.terminal at seq %d) with neither workflow.completed nor workflow.aborted", w.cycle, e.Seq)}
		}
		return nil
	}
	if w == nil || w.ended || w.phase != "" {
		if w != nil && !w.ended && e.Type == event.WorkflowPolicyGated {
			if ph := event.FieldString(e.Payload, "phase"); ph != "" && ph != w.phase {
				return &Problem{Code: ProblemWorkflowAudit, Line: lineNo, Seq: e.Seq, Message: fmt.Sprintf("policy decision for phase %s while the cycle is in phase %s (no workflow.phase_advanced into it)", ph, w.phase)}
			}
		}
		return nil
	}
	// Started, no phase entered yet: only the WorkflowStart/PhaseAdvance
	// hook decisions and the manager's own events may come before it.
	switch e.Type {
	case event.HookFired, event.CheckpointCreated, event.OutputDelta, event.RunPaused, event.RunResumed:
		return nil
	case event.ArtifactEmitted:
		// A cycle stopped before its first phase still records its result.
		if e.Actor == "workflow" && event.FieldString(e.Payload, "kind") == "workflow_result" {
			return nil
		}
	}
	return &Problem{Code: ProblemWorkflowAudit, Line: lineNo, Seq: e.Seq, Message: fmt.Sprintf("%s in cycle %s before any phase was entered (a phase entered without workflow.phase_advanced)", e.Type, w.cycle)}
}

// Report is the report so far, before Finish's whole-log checks: what a
// caller returns with the Problem that stopped it.
func (v *Verifier) Report() Report { return v.rep }

// Finish runs the whole-log checks (audit completeness) and returns the
// report.
func (v *Verifier) Finish() Report {
	r := v.rep
	if r.Events == 0 {
		r.Problem = &Problem{Code: ProblemEmpty, Message: "the log holds no events"}
		return r
	}
	if p := firstOpen(v.openTools, ProblemUnpairedTool, "tool.invoke has no tool.result"); p != nil {
		r.Problem = p
		return r
	}
	if p := firstOpen(v.openLLM, ProblemUnpairedLLM, "llm.request has no llm.response"); p != nil {
		r.Problem = p
		return r
	}
	if r.Closed {
		ids := make([]string, 0, len(v.runs))
		for id := range v.runs {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return v.runs[ids[i]].seq < v.runs[ids[j]].seq })
		for _, id := range ids {
			if v.terminals[id] == 0 {
				o := v.runs[id]
				r.Problem = &Problem{Code: ProblemTerminalMissing, Line: o.line, Seq: o.seq, Message: fmt.Sprintf("session is closed but run %q has no turn.terminal (report_missing)", id)}
				return r
			}
		}
		if len(ids) == 0 && len(v.terminals) == 0 {
			r.Problem = &Problem{Code: ProblemTerminalMissing, Message: "session is closed but has no turn.terminal (report_missing)"}
			return r
		}
	}
	r.Valid = true
	if r.Closed && v.closeOK {
		a := &Audit{Missing: auditMissing(v.seen, v.sawWork)}
		a.Complete = len(a.Missing) == 0
		r.Audit = a
		if !a.Complete && !v.opts.Lenient {
			r.Valid = false
			r.Problem = &Problem{Code: ProblemAuditIncomplete, Message: fmt.Sprintf("the session closed ok but has no %s events (audit completeness; --lenient accepts logs written before the rule)", strings.Join(a.Missing, ", "))}
		}
	}
	return r
}

// auditMissing is the audit-completeness check of a session that closes
// ok: the types of SuccessfulSessionTypes it has not seen.
func auditMissing(seen map[string]bool, sawWork bool) []string {
	var missing []string
	for _, typ := range SuccessfulSessionTypes {
		// A workflow session whose phases were all persona fan-outs
		// and gates ran no Worker: it has no worker.report to show.
		if typ == event.WorkerReport && seen[event.WorkflowStarted] && !sawWork {
			continue
		}
		if !seen[typ] {
			missing = append(missing, typ)
		}
	}
	// A session that ran through the workflow plane also ends its
	// cycle with a verdict.
	if seen[event.WorkflowStarted] && !seen[event.WorkflowCompleted] && !seen[event.WorkflowAborted] {
		missing = append(missing, event.WorkflowCompleted+"|"+event.WorkflowAborted)
	}
	return missing
}

// AuditMissing is what strict verify would find missing (audit_incomplete)
// if the session of evs closed ok now: the RunManager checks it before it
// reports a run completed, so that a completed run's log verifies.
func AuditMissing(evs []event.Event) []string {
	seen := map[string]bool{event.SessionClose: true}
	sawWork := false
	for _, e := range evs {
		seen[e.Type] = true
		if e.Type == event.AgentTransition && event.FieldString(e.Payload, "to") == "WORK" {
			sawWork = true
		}
	}
	return auditMissing(seen, sawWork)
}

func firstOpen(m map[string]open, code, msg string) *Problem {
	var best *open
	for _, o := range m {
		if best == nil || o.seq < best.seq {
			o := o
			best = &o
		}
	}
	if best == nil {
		return nil
	}
	return &Problem{Code: code, Line: best.line, Seq: best.seq, Message: msg}
}

// VerifyReader verifies a JSONL log strictly and reports the first problem.
func VerifyReader(reg *schemas.Registry, r io.Reader) (Report, error) {
	return VerifyReaderOptions(reg, r, Options{})
}

// VerifyReaderOptions verifies a JSONL log and reports the first problem.
func VerifyReaderOptions(reg *schemas.Registry, r io.Reader, opts Options) (Report, error) {
	v := NewVerifierOptions(reg, opts)
	br := bufio.NewReaderSize(r, 1<<20)
	lineNo := 0
	for {
		b, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return v.rep, err
		}
		if len(b) == 0 && err == io.EOF {
			break
		}
		lineNo++
		final := err == io.EOF // no trailing newline
		if p := v.Line(lineNo, trimEOL(b), final); p != nil {
			rep := v.rep
			rep.Problem = p
			return rep, nil
		}
		if err == io.EOF {
			break
		}
	}
	return v.Finish(), nil
}

// VerifyEvents verifies events read from a store strictly (Line numbers
// are 0).
func VerifyEvents(reg *schemas.Registry, evs []event.Event) Report {
	return VerifyEventsOptions(reg, evs, Options{})
}

// VerifyEventsOptions verifies events read from a store.
func VerifyEventsOptions(reg *schemas.Registry, evs []event.Event, opts Options) Report {
	v := NewVerifierOptions(reg, opts)
	for i := range evs {
		if p := v.Line(0, evs[i].Line(), false); p != nil {
			if p.Seq == 0 {
				p.Seq = evs[i].Seq
			}
			rep := v.rep
			rep.Problem = p
			return rep
		}
	}
	return v.Finish()
}

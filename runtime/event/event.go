// Package event defines the runtime's one source of truth: the event
// envelope, its canonical encoding, and the hash chain that links each
// session's events so an edited log is detected on load.
//
// An event is written as one canonical JSON line (fields in envelope order,
// payload keys sorted, no insignificant white space) with "hash" as the last
// member. The hash is SHA-256 over that same line with the hash member
// removed, and each event's prev_hash is the hash of the event before it in
// the same session ("" for seq 1).
package event

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// SchemaVersion is the envelope version written by this code.
const SchemaVersion = "v1"

// TimeFormat is the fixed-width UTC timestamp layout of Event.TS.
const TimeFormat = "2006-01-02T15:04:05.000000Z"

// Event types: every kind of event a session's log may hold, each with
// its payload schema in schemas/ (docs/cli.md, "Logs: replay, verify,
// view", describes the log).
const (
	SessionStart          = "session.start"
	SessionClose          = "session.close"
	HookFired             = "hook.fired"
	SkillInvoke           = "skill.invoke"
	SkillSelected         = "skill.selected"
	SkillComplete         = "skill.complete"
	AgentTransition       = "agent.transition"
	LLMRequest            = "llm.request"
	LLMResponse           = "llm.response"
	ToolInvoke            = "tool.invoke"
	ToolResult            = "tool.result"
	ToolRejected          = "tool.rejected"
	ToolArgsRepaired      = "tool.args_repaired"
	RoleOutputRepaired    = "role.output_repaired"
	WorkerReport          = "worker.report"
	EventAmended          = "event.amended"
	SchemaViolation       = "schema.violation"
	RunStarted            = "run.started"
	RunPaused             = "run.paused"
	RunResumed            = "run.resumed"
	RunCompleted          = "run.completed"
	RunFailed             = "run.failed"
	RunCancelled          = "run.cancelled"
	OutputDelta           = "output.delta"
	OutputMessage         = "output.message"
	ApprovalRequested     = "approval.requested"
	ApprovalResolved      = "approval.resolved"
	ArtifactEmitted       = "artifact.emitted"
	CheckpointCreated     = "checkpoint.created"
	TurnTerminal          = "turn.terminal"
	WorkflowStarted       = "workflow.started"
	WorkflowPhaseAdvanced = "workflow.phase_advanced"
	WorkflowPolicyGated   = "workflow.policy_gated"
	WorkflowCompleted     = "workflow.completed"
	WorkflowAborted       = "workflow.aborted"
)

// RunInterrupted: the process working the run stopped (a graceful
// shutdown) before the run ended; the run is still running in the log and
// another process takes it over.
const RunInterrupted = "run.interrupted"

// Types lists every event type the runtime may append. Appending any other
// type fails closed.
var Types = []string{
	SessionStart, SessionClose, HookFired, SkillInvoke, SkillComplete, AgentTransition,
	LLMRequest, LLMResponse, ToolInvoke, ToolResult, ToolRejected, ToolArgsRepaired,
	WorkerReport, EventAmended, SchemaViolation, RunStarted, RunPaused, RunResumed,
	RunCompleted, RunFailed, OutputDelta, OutputMessage, ApprovalRequested, ApprovalResolved,
	ArtifactEmitted, CheckpointCreated, TurnTerminal, WorkflowStarted, WorkflowPhaseAdvanced,
	WorkflowPolicyGated, WorkflowCompleted, WorkflowAborted, RoleOutputRepaired, RunCancelled,
	SkillSelected, RunInterrupted, ConfigWarning, MCPServerFailed,
}

// Event is one immutable entry of a session's log.
type Event struct {
	ID            string          `json:"id"`
	SessionID     string          `json:"session_id"`
	RunID         string          `json:"run_id"`
	Seq           int64           `json:"seq"`
	TS            string          `json:"ts"`
	Type          string          `json:"type"`
	Actor         string          `json:"actor"`
	Payload       json.RawMessage `json:"payload"`
	SchemaVersion string          `json:"schema_version"`
	ParentID      *string         `json:"parent_id"`
	PrevHash      string          `json:"prev_hash"`
	Hash          string          `json:"hash"`
}

// Time parses TS.
func (e *Event) Time() (time.Time, error) { return time.Parse(TimeFormat, e.TS) }

// formatTS is t.UTC().Format(TimeFormat) without the layout interpreter,
// which took a tenth of an append's own CPU once the rest got cheap.
func formatTS(t time.Time) string {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.Format(TimeFormat)
	}
	hour, min, sec := t.Clock()
	var b [len(TimeFormat)]byte
	put := func(at, width, v int) {
		for i := at + width - 1; i >= at; i-- {
			b[i] = byte('0' + v%10)
			v /= 10
		}
	}
	put(0, 4, year)
	b[4] = '-'
	put(5, 2, int(month))
	b[7] = '-'
	put(8, 2, day)
	b[10] = 'T'
	put(11, 2, hour)
	b[13] = ':'
	put(14, 2, min)
	b[16] = ':'
	put(17, 2, sec)
	b[19] = '.'
	put(20, 6, t.Nanosecond()/1000)
	b[26] = 'Z'
	return string(b[:])
}

// Parent returns ParentID or "".
func (e *Event) Parent() string {
	if e.ParentID == nil {
		return ""
	}
	return *e.ParentID
}

// DecodePayload unmarshals the payload into v.
func (e *Event) DecodePayload(v any) error { return json.Unmarshal(e.Payload, v) }

// appendUnhashed appends the canonical encoding of e without the hash member
// and without the closing brace. Payload must already be canonical.
func (e *Event) appendUnhashed(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, e.ID)
	b = append(b, `,"session_id":`...)
	b = appendString(b, e.SessionID)
	b = append(b, `,"run_id":`...)
	b = appendString(b, e.RunID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"ts":`...)
	b = appendString(b, e.TS)
	b = append(b, `,"type":`...)
	b = appendString(b, e.Type)
	b = append(b, `,"actor":`...)
	b = appendString(b, e.Actor)
	b = append(b, `,"payload":`...)
	b = append(b, e.Payload...)
	b = append(b, `,"schema_version":`...)
	b = appendString(b, e.SchemaVersion)
	b = append(b, `,"parent_id":`...)
	if e.ParentID == nil {
		b = append(b, "null"...)
	} else {
		b = appendString(b, *e.ParentID)
	}
	b = append(b, `,"prev_hash":`...)
	b = appendString(b, e.PrevHash)
	return b
}

// ComputeHash returns the hex SHA-256 of e's canonical encoding without hash.
func (e *Event) ComputeHash() string {
	var buf [1024]byte
	b := e.appendUnhashed(buf[:0])
	b = append(b, '}')
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// seal sets e.Hash from e's canonical encoding and appends its line to b,
// encoding e once for both.
func (e *Event) seal(b []byte) []byte {
	start := len(b)
	b = e.appendUnhashed(b)
	b = append(b, '}')
	sum := sha256.Sum256(b[start:])
	e.Hash = hex.EncodeToString(sum[:])
	b = append(b[:len(b)-1], `,"hash":`...)
	b = appendString(b, e.Hash)
	return append(b, '}')
}

// AppendLine appends e's canonical line (with hash, without newline) to b.
func (e *Event) AppendLine(b []byte) []byte {
	b = e.appendUnhashed(b)
	b = append(b, `,"hash":`...)
	b = appendString(b, e.Hash)
	return append(b, '}')
}

// Line returns e's canonical line without the trailing newline.
func (e *Event) Line() []byte { return e.AppendLine(make([]byte, 0, e.lineSize())) }

// lineFixed is the length of a line's member names, punctuation and
// hash, everything but the other fields' values.
var lineFixed = len(`{"id":"","session_id":"","run_id":"","seq":,"ts":"","type":"","actor":"","payload":,"schema_version":"","parent_id":null,"prev_hash":"","hash":""}`) + 64 + 20

// lineSize is the length of e's line when no string needs escaping (the
// seq is counted at its longest), so that a buffer of this size is
// rendered into without growing.
func (e *Event) lineSize() int {
	n := lineFixed + len(e.ID) + len(e.SessionID) + len(e.RunID) + len(e.TS) + len(e.Type) + len(e.Actor) + len(e.Payload) + len(e.SchemaVersion) + len(e.PrevHash)
	if e.ParentID != nil {
		n += len(*e.ParentID)
	}
	return n
}

var hashSuffixLen = len(`,"hash":""}`) + 64

// CheckLineHash verifies a canonical line's hash from its bytes alone: the
// line must end with `,"hash":"<64 hex>"}` and the SHA-256 of the line with
// that member removed must equal it. It returns the stored hash.
func CheckLineHash(line []byte) (string, error) {
	if len(line) < hashSuffixLen || !bytes.HasPrefix(line[len(line)-hashSuffixLen:], []byte(`,"hash":"`)) || line[len(line)-1] != '}' || line[len(line)-2] != '"' {
		return "", errors.New(`line does not end with the "hash" member`)
	}
	stored := line[len(line)-hashSuffixLen+len(`,"hash":"`) : len(line)-2]
	h := sha256.New()
	h.Write(line[:len(line)-hashSuffixLen])
	h.Write([]byte{'}'})
	var sum [32]byte
	got := hex.EncodeToString(h.Sum(sum[:0]))
	if got != string(stored) {
		return string(stored), fmt.Errorf("hash mismatch: content hashes to %s, line says %s", got, stored)
	}
	return got, nil
}

// ParseLine decodes one canonical line. It checks JSON shape only; use
// CheckLineHash and the chain checks of replay.VerifyReader for integrity.
func ParseLine(line []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(line, &e); err != nil {
		return e, err
	}
	return e, nil
}

// Canonical re-encodes a JSON value canonically: object keys sorted, no
// insignificant white space, no HTML escaping, numbers kept as written.
func Canonical(doc []byte) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after JSON value")
	}
	return marshalCanonical(v)
}

func marshalCanonical(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// appendCanonical appends v, a decoded JSON value (map[string]any, []any,
// string, json.Number, bool, nil), as marshalCanonical would encode it:
// keys sorted, no HTML escaping. It reports false for anything else, or a
// json.Number that is not a JSON number; the caller then uses
// marshalCanonical.
func appendCanonical(b []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case bool:
		if x {
			return append(b, "true"...), true
		}
		return append(b, "false"...), true
	case string:
		return appendString(b, x), true
	case json.Number:
		if !validNumber(string(x)) {
			return b, false
		}
		return append(b, x...), true
	case []any:
		if x == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendCanonical(b, e); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case map[string]any:
		if x == nil {
			return append(b, "null"...), true
		}
		var small [16]string
		keys := small[:0]
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			var ok bool
			if b, ok = appendCanonical(b, x[k]); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	default:
		return b, false
	}
}

// validNumber reports whether s is a JSON number (RFC 8259 grammar).
func validNumber(s string) bool {
	return len(s) > 0 && jsonNumberEnd(s, 0) == len(s)
}

func appendString(b []byte, s string) []byte {
	// Fast path: plain ASCII with nothing to escape.
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			enc, _ := marshalCanonical(s)
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

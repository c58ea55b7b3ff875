package run

import (
	"fmt"

	"github.com/agentos/agentos/runtime/replay"
)

// Status is a run's status: the log's (replay.RunStatus), one type from
// the log to the bot.
type Status = replay.RunStatus

// Statuses a run ends or stops in (terminal_report_v1; cancelled is v2).
const (
	StatusCompleted = replay.RunCompleted
	StatusFailed    = replay.RunFailed
	StatusDenied    = replay.RunDenied
	StatusPaused    = replay.RunPaused
	StatusRunning   = replay.RunRunning
)

// ErrorClass is the classification of a failed or denied run.
type ErrorClass string

// Error classes.
const (
	ClassInvalidInput     ErrorClass = "invalid_input"
	ClassPolicyDenied     ErrorClass = "policy_denied"
	ClassToolRuntimeError ErrorClass = "tool_runtime_error"
	ClassTimeout          ErrorClass = "timeout"
	ClassAuthError        ErrorClass = "auth_error"
	ClassProviderError    ErrorClass = "provider_error"
	ClassReportMissing    ErrorClass = "report_missing"
)

// Report is the exactly-one terminal report of a run (turn.terminal).
type Report struct {
	Status        Status     `json:"status"`
	Reason        string     `json:"reason,omitempty"`
	NextAction    string     `json:"next_action"`
	TraceID       string     `json:"trace_id"`
	CorrelationID string     `json:"correlation_id"`
	ErrorClass    ErrorClass `json:"error_class,omitempty"`
	SchemaVersion string     `json:"schema_version"`
}

// Failure is an error that ends a run with a classified terminal report.
// The engine returns it; the manager turns it into turn.terminal.
type Failure struct {
	Status     Status
	Class      ErrorClass
	Code       string // a domain code such as MALFORMED_AGENT_MESSAGE, PROVIDER_ERROR
	Reason     string
	NextAction string
	Err        error
	// cancelled is run.cancelled's payload when Status is cancelled.
	cancelled map[string]any
}

func (f *Failure) Error() string {
	s := fmt.Sprintf("%s (%s)", f.Reason, f.Class)
	if f.Code != "" {
		s = f.Code + ": " + s
	}
	if f.Err != nil {
		s += ": " + f.Err.Error()
	}
	return s
}

func (f *Failure) Unwrap() error { return f.Err }

func (f *Failure) report(traceID, correlationID string) Report {
	reason := f.Reason
	if f.Code != "" {
		reason = f.Code + ": " + reason
	}
	if f.Status == StatusCancelled {
		// terminal_report_v2: cancelled is not an error, so no error_class.
		return Report{Status: f.Status, Reason: reason, NextAction: f.NextAction, TraceID: traceID, CorrelationID: correlationID, SchemaVersion: "v2"}
	}
	return Report{Status: f.Status, Reason: reason, NextAction: f.NextAction, TraceID: traceID, CorrelationID: correlationID, ErrorClass: f.Class, SchemaVersion: "v1"}
}

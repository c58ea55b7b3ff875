package kernel

import (
	"context"
	"encoding/json"
	"fmt"
)

// Category is a tool's effect class, the first input to risk.
type Category string

// Categories.
const (
	CategoryRead    Category = "read"
	CategoryWrite   Category = "write"
	CategoryExec    Category = "exec"
	CategoryNetwork Category = "network"
)

// ToolDef describes one capability tool. Input and Output are JSON Schemas
// (2020-12); a tool without an output schema does not register.
type ToolDef struct {
	Name        string
	Description string
	Input       json.RawMessage
	Output      json.RawMessage
	Category    Category
	// Handler executes the call. args has passed the guard and the input
	// schema. The result must validate against Output.
	Handler func(ctx context.Context, env Env, args json.RawMessage) (any, error)
	// Assess describes what the call would touch, without side effects; the
	// kernel turns it into a risk profile and a preview. Nil means the call
	// touches nothing beyond its category (e.g. echo).
	Assess func(ctx context.Context, env Env, args json.RawMessage) (Assessment, error)
}

// Assessment is a tool's own description of a prospective call.
type Assessment struct {
	Paths   []string // workspace-relative paths read or written
	Command string   // for exec tools: the command line as given
	Cwd     string   // for exec tools: workspace-relative working directory
	EnvVars []string // environment variable names passed through
	Timeout string   // effective timeout, e.g. "300s"

	// For patches and writes.
	Files        []FileChange
	LinesAdded   int
	LinesRemoved int
	Diff         string // unified diff of the change (may be capped by the kernel)

	// Refuse is a refusal the tool found while assessing that the
	// kernel applies after the caller's write scope and rules (a write
	// whose expected hash is stale): the call is rejected, and no one is
	// asked to approve a change that cannot happen.
	Refuse *Error
}

// FileChange is one file of a patch or write preview.
type FileChange struct {
	Path    string `json:"path"`
	OldPath string `json:"old_path,omitempty"` // for renames
	Op      string `json:"op"`                 // modify|create|delete|rename
	Hunks   int    `json:"hunks"`
	Added   int    `json:"added"`
	Removed int    `json:"removed"`
}

// Env is what a handler may use: the jailed workspace and the effective
// limits. Handlers never open paths or start processes any other way.
type Env struct {
	Workspace Workspace
	Limits    Limits
	// Redact masks secrets in text a tool returns (process output, file
	// contents shown to the model).
	Redact func(string) string
}

// Limits are the policy limits a handler must honour.
type Limits struct {
	MaxStdout   int // bytes of stdout/stderr kept, each
	MaxDiffSize int // bytes of diff accepted
}

// Workspace is the jailed view of the repository the tools work on. The
// implementation lives in kernel/workspace; the interface is declared here,
// where it is consumed.
type Workspace interface {
	// Root is the absolute path of the workspace root, for reporting only.
	Root() string
	// Revision identifies the current content of the worktree; an approval
	// computed against one revision is stale once it changes.
	Revision(ctx context.Context) (Revision, error)
}

// Revision is the workspace state an approval binds to: the HEAD commit and
// a tree hash of the working-tree content (tracked and untracked, not
// ignored) as git would write it.
type Revision struct {
	Commit string `json:"commit"`
	Tree   string `json:"tree"`
}

// Code is a kernel domain error code.
type Code string

// Codes (fail-closed table, kernel, issue list).
const (
	CodeToolNotFound     Code = "TOOL_NOT_FOUND"
	CodeToolNotAllowed   Code = "TOOL_NOT_ALLOWED"
	CodeInvalidArguments Code = "INVALID_ARGUMENTS"
	CodeGateDenied       Code = "GATE_DENIED"
	CodePolicyDenied     Code = "POLICY_DENIED"
	CodeApprovalRequired Code = "APPROVAL_REQUIRED"
	CodeApprovalStale    Code = "APPROVAL_STALE"
	CodeJailViolation    Code = "JAIL_VIOLATION"
	CodeWriteConflict    Code = "WRITE_CONFLICT"
	CodeTimeout          Code = "TIMEOUT"
	CodeOutputLimit      Code = "OUTPUT_LIMIT"
	CodeToolRuntimeError Code = "TOOL_RUNTIME_ERROR"
	CodeSchemaViolation  Code = "SCHEMA_VIOLATION"
	// CodeSandboxUnavailable: no OS sandbox can confine a command, so it is
	// refused (the message names the fix).
	CodeSandboxUnavailable Code = "SANDBOX_UNAVAILABLE"
)

// Error is a kernel domain error: something a caller (the agent loop, the
// CLI) branches on, returned as a value and recorded as an event.
type Error struct {
	Kind      string `json:"kind"` // gate|guard|policy|approval|jail|lock|runtime|schema|sandbox
	Code      Code   `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable,omitempty"`
	// Details carries structured diagnostics (guard findings, the pending
	// action for APPROVAL_REQUIRED, ...). It must encode as JSON.
	Details any   `json:"details,omitempty"`
	Err     error `json:"-"`
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches another *Error with the same code, so errors.Is(err,
// &kernel.Error{Code: kernel.CodeJailViolation}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Recorder appends kernel events to the session's log. The runtime adapts its
// Store to it; the kernel never sees the store. Record returns the new
// event's id (used as parent_id for the paired result).
type Recorder interface {
	Record(ctx context.Context, eventType, actor string, payload any, parentID string) (id string, err error)
}

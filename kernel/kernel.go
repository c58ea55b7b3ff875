package kernel

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentos/agentos/kernel/guard"
	"github.com/agentos/agentos/kernel/policy"
	"github.com/agentos/agentos/kernel/toolrule"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Call is one tool call.
type Call struct {
	ID     string
	Name   string
	Args   json.RawMessage
	Caller string // the role asking, recorded as the tool.invoke actor
	// Scope is the caller's allowed tools (the selected skill's
	// allowed-tools); nil means every registered tool.
	Scope []string
	// NoRepair turns the guard's repairs off for this call (the
	// "repair off"): arguments are taken exactly as the model wrote them
	// or blocked; trivially broken JSON is not fixed locally.
	NoRepair bool
	// WritePaths, when not nil, is the caller's write scope (a workflow
	// persona's role-permissions): a write tool may change only paths
	// matching one of these patterns ("dir/**", or path.Match globs). A
	// write whose paths are not known is refused. Empty and non-nil
	// allows no write at all.
	WritePaths []string
	// Rules, when not nil, are permission rules on the call's arguments
	// (the Action's allowed_tools Bash(go test:*), Read(docs/**), …): a
	// command or path they do not allow is refused (TOOL_NOT_ALLOWED,
	// stage "rules") before the sandbox, the approval and tool.invoke.
	Rules *toolrule.Set
	// SkillRules, when not nil, are the argument rules of the loaded
	// skills' allowed-tools (toolrule.ForScope: Bash(git diff:*) in a
	// SKILL.md), checked the same way: a call must pass both sets.
	SkillRules *toolrule.Set

	// preapproved is the rule that lowered this call's approval
	// (Kernel.Preapprove), recorded in its tool.invoke.
	preapproved *Preapproval
}

// ruleSets are the call's argument rules that constrain something.
func (c Call) ruleSets() []*toolrule.Set {
	var out []*toolrule.Set
	for _, s := range []*toolrule.Set{c.Rules, c.SkillRules} {
		if !s.Empty() {
			out = append(out, s)
		}
	}
	return out
}

// Outcome is a dispatch that did not fail: a result, or an action waiting
// for approval (APPROVAL_REQUIRED is not an error to the run).
type Outcome struct {
	Result  json.RawMessage
	Pending *Pending
}

// Pending is an action waiting for a maintainer.
type Pending struct {
	ApprovalID string          `json:"approval_id"`
	Tool       string          `json:"tool"`
	CallID     string          `json:"call_id"`
	Digest     string          `json:"digest"`
	Args       json.RawMessage `json:"args"`
	Preview    Preview         `json:"preview"`
	Risk       Risk            `json:"risk"`
	Revision   Revision        `json:"revision"`
	CreatedAt  string          `json:"created_at"`
}

// Decision values of hooks.
const (
	HookAllow     = "allow"
	HookDeny      = "deny"
	HookTransform = "transform"
)

// HookDecision is a PreToolUse/PostToolUse answer.
type HookDecision struct {
	Decision string
	Reason   string
	Output   json.RawMessage
}

// Hooks is how dispatch consults lifecycle hooks. Implementations record
// their own hook.fired events through rec. An error denies.
type Hooks interface {
	PreToolUse(ctx context.Context, rec Recorder, tool string, args json.RawMessage) (HookDecision, error)
	PostToolUse(ctx context.Context, rec Recorder, tool string, args, result json.RawMessage) (HookDecision, error)
}

// TrustCounts are a command's history in this repository (adaptive trust).
type TrustCounts struct {
	Approved, Denied, Failed, Reverted int
}

// Add returns the sum of c and o.
func (c TrustCounts) Add(o TrustCounts) TrustCounts {
	return TrustCounts{c.Approved + o.Approved, c.Denied + o.Denied, c.Failed + o.Failed, c.Reverted + o.Reverted}
}

// Confinement is the OS sandbox exec tools run in (kernel/sandbox through
// the workspace): the kernel refuses exec tools while SandboxErr is set,
// and records SandboxProfile in every exec tool's tool.invoke, so that
// the log shows under what confinement each command ran.
type Confinement interface {
	// SandboxProfile is JSON-encodable: mechanism, visible paths, network.
	SandboxProfile() any
	// SandboxErr is non-nil when no sandbox can confine a command.
	SandboxErr() error
}

// Kernel dispatches tool calls through the governed pipeline.
type Kernel struct {
	Policy    *policy.Policy
	Hooks     Hooks
	Workspace Workspace
	// Confinement confines exec tools (New takes it from a workspace that
	// implements it). Nil leaves confinement to the tools themselves.
	Confinement Confinement
	// Redact masks secrets in text handed back by tools.
	Redact func(string) string
	// Trust returns a command's counters for adaptive trust; nil disables it.
	Trust func(tool, command string) TrustCounts
	Now   func() time.Time
	// Permissions are the repository's permission rules (permissions.go):
	// they refuse or ask for approval, never lower one.
	Permissions []*toolrule.Permissions
	// Preapprove, when set, may lower an approval that only the policy's
	// approval level asks for (permissions.go, preapprove): it returns the
	// repository allow rule the operator's policy lets pre-approve the
	// call, or nil.
	Preapprove func(tool string, args json.RawMessage, risk Risk) *Preapproval

	mu    sync.RWMutex
	tools map[string]*registered
}

type registered struct {
	def ToolDef
	in  *jsonschema.Schema
	out *jsonschema.Schema
}

// New returns a kernel with the policy (nil = built-in defaults).
func New(p *policy.Policy, ws Workspace, hooks Hooks) *Kernel {
	if p == nil {
		p = policy.Default()
	}
	k := &Kernel{Policy: p, Workspace: ws, Hooks: hooks, Now: time.Now, tools: map[string]*registered{}}
	if c, ok := ws.(Confinement); ok {
		k.Confinement = c
	}
	return k
}

var (
	schemaMu    sync.Mutex
	schemaCache = map[string]*jsonschema.Schema{}
)

// compile compiles a tool schema once per distinct content.
func compile(doc json.RawMessage) (*jsonschema.Schema, error) {
	sum := sha256.Sum256(doc)
	key := hex.EncodeToString(sum[:])
	schemaMu.Lock()
	defer schemaMu.Unlock()
	if s, ok := schemaCache[key]; ok {
		return s, nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	url := "mem:///tool/" + key + ".json"
	if err := c.AddResource(url, v); err != nil {
		return nil, err
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, err
	}
	schemaCache[key] = s
	return s, nil
}

// ErrRegister is returned (wrapped) for a tool that cannot register.
var ErrRegister = errors.New("tool not registered")

// Register adds a tool. A tool without a valid input and output schema, a
// handler or a category does not register.
func (k *Kernel) Register(d ToolDef) error {
	if d.Name == "" || d.Handler == nil || d.Category == "" {
		return fmt.Errorf("%w: %q needs a name, a category and a handler", ErrRegister, d.Name)
	}
	if len(d.Input) == 0 || len(d.Output) == 0 {
		return fmt.Errorf("%w: %s needs both an input and an output schema", ErrRegister, d.Name)
	}
	in, err := compile(d.Input)
	if err != nil {
		return fmt.Errorf("%w: %s input schema: %v", ErrRegister, d.Name, err)
	}
	out, err := compile(d.Output)
	if err != nil {
		return fmt.Errorf("%w: %s output schema: %v", ErrRegister, d.Name, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, dup := k.tools[d.Name]; dup {
		return fmt.Errorf("%w: %s is already registered", ErrRegister, d.Name)
	}
	k.tools[d.Name] = &registered{def: d, in: in, out: out}
	return nil
}

// Tools lists the registered tools by name.
func (k *Kernel) Tools() []ToolDef {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make([]ToolDef, 0, len(k.tools))
	for _, r := range k.tools {
		out = append(out, r.def)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (k *Kernel) names() []string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make([]string, 0, len(k.tools))
	for n := range k.tools {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (k *Kernel) lookup(name string) *registered {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.tools[name]
}

func (k *Kernel) env() Env {
	red := k.Redact
	if red == nil {
		red = func(s string) string { return s }
	}
	return Env{Workspace: k.Workspace, Limits: Limits{MaxStdout: k.Policy.Limits.MaxStdout, MaxDiffSize: k.Policy.Limits.MaxDiffSize}, Redact: red}
}

// reject records tool.rejected and returns the error.
func (k *Kernel) reject(ctx context.Context, rec Recorder, c Call, stage string, e *Error) error {
	p := map[string]any{"call_id": callID(c), "tool": c.Name, "code": string(e.Code), "kind": e.Kind, "message": e.Message, "stage": stage}
	switch d := e.Details.(type) {
	case []guard.Diagnostic:
		p["diagnostics"] = d
		for _, x := range d {
			if x.Suggestion != "" {
				p["suggestion"] = x.Suggestion
			}
		}
	case *toolrule.Refusal:
		p["refusal"] = d
	}
	if _, err := rec.Record(ctx, "tool.rejected", "kernel", p, ""); err != nil {
		return errors.Join(e, err)
	}
	return e
}

func callID(c Call) string {
	if c.ID == "" {
		return "call"
	}
	return c.ID
}

// Dispatch runs a call through the pipeline, in this order: find tool
// → caller scope → guard/validate args → PreToolUse → policy & risk →
// preview → approval gate → tool.invoke → execute in the jail with a
// timeout → tool.result → PostToolUse → validate the result. Every failure
// is a *Error recorded as an event; nothing executes unless every step
// before it passed.
func (k *Kernel) Dispatch(ctx context.Context, rec Recorder, c Call) (Outcome, error) {
	r := k.lookup(c.Name)
	if r == nil {
		d := guard.Diagnostic{Class: guard.WrongFuncName, Message: fmt.Sprintf("no tool named %q", c.Name)}
		if s := guard.SuggestName(c.Name, k.names()); s != "" {
			d.Suggestion = s
			d.Message += fmt.Sprintf("; did you mean %q?", s)
		}
		return Outcome{}, k.reject(ctx, rec, c, "find", &Error{Kind: "gate", Code: CodeToolNotFound, Message: d.Message, Details: []guard.Diagnostic{d}})
	}
	if c.Scope != nil && !InScope(c.Scope, c.Name) {
		return Outcome{}, k.reject(ctx, rec, c, "scope", &Error{Kind: "gate", Code: CodeToolNotAllowed, Message: fmt.Sprintf("%s is not in the selected skill's allowed-tools %v", c.Name, c.Scope)})
	}
	args, err := k.guardArgs(ctx, rec, c, r)
	if err != nil {
		return Outcome{}, err
	}
	// Argument rules first: no hook command runs for a refused call.
	if err := k.checkRules(ctx, rec, c, args, nil); err != nil {
		return Outcome{}, err
	}
	if k.Hooks != nil {
		d, herr := k.Hooks.PreToolUse(ctx, rec, c.Name, args)
		if herr != nil {
			d = HookDecision{Decision: HookDeny, Reason: "PreToolUse hook failed: " + herr.Error()}
		}
		switch d.Decision {
		case HookAllow:
		case HookTransform:
			c.Args = d.Output
			if args, err = k.guardArgs(ctx, rec, c, r); err != nil {
				return Outcome{}, err
			}
			// The rules see the arguments the tool will get.
			if err := k.checkRules(ctx, rec, c, args, nil); err != nil {
				return Outcome{}, err
			}
		default:
			return Outcome{}, k.reject(ctx, rec, c, "PreToolUse", &Error{Kind: "gate", Code: CodeGateDenied, Message: "PreToolUse hook denied: " + d.Reason})
		}
	}
	// A write's paths are checked against the rules once it is assessed,
	// below.
	if r.def.Category == CategoryExec && k.Confinement != nil {
		// No approval is asked for a command that could not run.
		if err := k.Confinement.SandboxErr(); err != nil {
			return Outcome{}, k.reject(ctx, rec, c, "sandbox", &Error{Kind: "sandbox", Code: CodeSandboxUnavailable, Message: err.Error()})
		}
	}
	env := k.env()
	risk, preview, perr := k.assess(ctx, env, r, args)
	if perr != nil {
		return Outcome{}, k.reject(ctx, rec, c, "policy", perr)
	}
	if kerr := writeScope(c, r.def.Category, risk.Paths); kerr != nil {
		return Outcome{}, k.reject(ctx, rec, c, "scope", kerr)
	}
	if r.def.Category == CategoryWrite {
		if err := k.checkRules(ctx, rec, c, nil, risk.Paths); err != nil {
			return Outcome{}, err
		}
	}
	if risk.refuse != nil {
		return Outcome{}, k.reject(ctx, rec, c, "assess", risk.refuse)
	}
	if err := k.permissionsAssessed(ctx, rec, c, args, &risk); err != nil {
		return Outcome{}, err
	}
	c.preapproved = k.preapprove(c, args, &risk)
	switch risk.Control {
	case ControlDeny:
		return Outcome{}, k.reject(ctx, rec, c, "policy", &Error{Kind: "policy", Code: CodePolicyDenied, Message: risk.Reason})
	case ControlApproval:
		p, err := k.request(ctx, rec, c, args, risk, preview)
		if err != nil {
			return Outcome{}, err
		}
		return Outcome{Pending: p}, nil
	}
	return k.execute(ctx, rec, c, r, args, "")
}

// guardArgs parses (repairing trivial breakage), validates and path-checks
// the arguments.
func (k *Kernel) guardArgs(ctx context.Context, rec Recorder, c Call, r *registered) (json.RawMessage, error) {
	args, repairs, diag := guard.Parse(c.Args)
	if diag != nil {
		return nil, k.reject(ctx, rec, c, "guard", &Error{Kind: "guard", Code: CodeInvalidArguments, Message: diag.Message, Details: []guard.Diagnostic{*diag}})
	}
	if len(repairs) > 0 && c.NoRepair {
		msg := "arguments are not a JSON object as sent (" + strings.Join(repairs, ", ") + " would fix them, but guard repair is off)"
		return nil, k.reject(ctx, rec, c, "guard", &Error{Kind: "guard", Code: CodeInvalidArguments, Message: msg, Details: []guard.Diagnostic{{Class: guard.UnparsableArguments, Message: msg}}})
	}
	if len(repairs) > 0 {
		if _, err := rec.Record(ctx, "tool.args_repaired", "kernel", map[string]any{"call_id": callID(c), "tool": c.Name, "repairs": repairs, "original": string(c.Args), "repaired": args}, ""); err != nil {
			return nil, err
		}
	}
	diags := append(guard.Validate(r.in, args), guard.Paths(args)...)
	if len(diags) > 0 {
		msgs := make([]string, 0, len(diags))
		for _, d := range diags {
			msgs = append(msgs, d.Class+" "+d.Param+": "+d.Message)
		}
		return nil, k.reject(ctx, rec, c, "guard", &Error{Kind: "guard", Code: CodeInvalidArguments, Message: strings.Join(msgs, "; "), Details: diags})
	}
	return args, nil
}

// Digest is the SHA-256 of a tool name and its canonical arguments.
func Digest(tool string, args json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(args)
	return hex.EncodeToString(h.Sum(nil))
}

func newApprovalID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "ap-" + hex.EncodeToString(b[:])
}

// request records approval.requested and returns the pending action.
func (k *Kernel) request(ctx context.Context, rec Recorder, c Call, args json.RawMessage, risk Risk, preview Preview) (*Pending, error) {
	var rev Revision
	if k.Workspace != nil {
		var err error
		if rev, err = k.Workspace.Revision(ctx); err != nil {
			return nil, fmt.Errorf("approval: workspace revision: %w", err)
		}
	}
	p := &Pending{ApprovalID: newApprovalID(), Tool: c.Name, CallID: callID(c), Digest: Digest(c.Name, args), Args: args, Preview: preview, Risk: risk, Revision: rev, CreatedAt: k.Now().UTC().Format(time.RFC3339)}
	if _, err := rec.Record(ctx, "approval.requested", "kernel", p, ""); err != nil {
		return nil, err
	}
	return p, nil
}

// ExecuteApproved executes a pending action after a maintainer approved
// it: the arguments must still hash to the approved digest and the
// workspace must still be at the revision the approval was computed
// against; otherwise APPROVAL_STALE (recorded) and nothing runs.
func (k *Kernel) ExecuteApproved(ctx context.Context, rec Recorder, c Call, approvalID, digest string, rev Revision) (Outcome, error) {
	r := k.lookup(c.Name)
	if r == nil {
		return Outcome{}, k.reject(ctx, rec, c, "find", &Error{Kind: "gate", Code: CodeToolNotFound, Message: fmt.Sprintf("no tool named %q", c.Name)})
	}
	args, diag := mustArgs(c.Args)
	if diag != nil || Digest(c.Name, args) != digest {
		return Outcome{}, k.reject(ctx, rec, c, "approval", &Error{Kind: "approval", Code: CodeApprovalStale, Message: "the arguments differ from the approved action (digest mismatch)"})
	}
	if k.Workspace != nil {
		now, err := k.Workspace.Revision(ctx)
		if err != nil {
			return Outcome{}, err
		}
		if now != rev {
			return Outcome{}, k.reject(ctx, rec, c, "approval", &Error{Kind: "approval", Code: CodeApprovalStale, Message: fmt.Sprintf("the workspace changed since the approval was requested (was %.12s/%.12s, now %.12s/%.12s): request it again", rev.Commit, rev.Tree, now.Commit, now.Tree)})
		}
	}
	// An approval granted under other rules (a run resumed with changed
	// allowed_tools) does not let a now-refused command or path through.
	if err := k.checkRules(ctx, rec, c, args, nil); err != nil {
		return Outcome{}, err
	}
	if r.def.Category == CategoryWrite && (len(c.ruleSets()) > 0 || len(k.Permissions) > 0) {
		risk, _, perr := k.assess(ctx, k.env(), r, args)
		if perr != nil {
			return Outcome{}, k.reject(ctx, rec, c, "policy", perr)
		}
		if err := k.checkRules(ctx, rec, c, nil, risk.Paths); err != nil {
			return Outcome{}, err
		}
	}
	return k.execute(ctx, rec, c, r, args, approvalID)
}

// checkRules applies the call's permission rules: to its arguments, or
// (args nil) to the paths a write changes. A refusal is recorded as
// tool.rejected at stage "rules" with TOOL_NOT_ALLOWED and the refusal
// (which rule, which command or path) as details.
func (k *Kernel) checkRules(ctx context.Context, rec Recorder, c Call, args json.RawMessage, paths []string) error {
	for _, set := range c.ruleSets() {
		var ref *toolrule.Refusal
		if args != nil {
			ref = set.CheckArgs(c.Name, args)
		} else {
			ref = set.CheckWrite(c.Name, paths)
		}
		if ref != nil {
			return k.reject(ctx, rec, c, "rules", &Error{Kind: "gate", Code: CodeToolNotAllowed, Message: ref.Error(), Details: ref})
		}
	}
	return k.checkPermissions(ctx, rec, c, args, paths)
}

func mustArgs(raw json.RawMessage) (json.RawMessage, *guard.Diagnostic) {
	args, _, d := guard.Parse(raw)
	return args, d
}

// maxResult bounds a tool result (after the tool's own output caps).
const maxResult = 1 << 20

// execute records tool.invoke, runs the handler with the capability's
// timeout, records tool.result, consults PostToolUse and validates the
// result against the output schema.
func (k *Kernel) execute(ctx context.Context, rec Recorder, c Call, r *registered, args json.RawMessage, approvalID string) (Outcome, error) {
	inv := map[string]any{"call_id": callID(c), "tool": c.Name, "args": args}
	if approvalID != "" {
		inv["approval_id"] = approvalID
	} else if c.preapproved != nil {
		inv["preapproved"] = c.preapproved
	}
	if c.Caller != "" {
		inv["caller"] = c.Caller
	}
	if r.def.Category == CategoryExec && k.Confinement != nil {
		if err := k.Confinement.SandboxErr(); err != nil {
			return Outcome{}, k.reject(ctx, rec, c, "sandbox", &Error{Kind: "sandbox", Code: CodeSandboxUnavailable, Message: err.Error()})
		}
		inv["sandbox"] = k.Confinement.SandboxProfile()
	}
	actor := c.Caller
	if actor == "" {
		actor = "kernel"
	}
	invID, err := rec.Record(ctx, "tool.invoke", actor, inv, "")
	if err != nil {
		return Outcome{}, err
	}
	tctx, cancel := context.WithTimeout(ctx, k.Policy.Timeout(c.Name))
	start := time.Now()
	res, herr := r.def.Handler(tctx, k.env(), args)
	cancel()
	dur := float64(time.Since(start).Microseconds()) / 1000
	var kerr *Error
	var raw json.RawMessage
	if herr == nil {
		if raw, err = json.Marshal(res); err != nil {
			herr = err
		} else if len(raw) > maxResult {
			kerr = &Error{Kind: "runtime", Code: CodeOutputLimit, Message: fmt.Sprintf("result is %d bytes, more than the %d the kernel passes on; ask for less (a range, fewer results)", len(raw), maxResult)}
		}
	}
	if herr != nil {
		if !errors.As(herr, &kerr) {
			code := CodeToolRuntimeError
			if errors.Is(herr, context.DeadlineExceeded) {
				code = CodeTimeout
			}
			kerr = &Error{Kind: "runtime", Code: code, Message: herr.Error()}
		}
	}
	resPayload := map[string]any{"call_id": callID(c), "tool": c.Name, "ok": kerr == nil, "duration_ms": dur}
	if kerr != nil {
		ep := map[string]any{"kind": kerr.Kind, "code": string(kerr.Code), "message": kerr.Message}
		if kerr.Details != nil {
			ep["details"] = kerr.Details
		}
		resPayload["error"] = ep
	} else {
		resPayload["result"] = raw
	}
	// The tool ran: its result is recorded even if the caller's deadline
	// passed meanwhile, so no tool.invoke is left without its tool.result.
	if _, err := rec.Record(context.WithoutCancel(ctx), "tool.result", "kernel", resPayload, invID); err != nil {
		return Outcome{}, err
	}
	if kerr != nil {
		return Outcome{}, kerr
	}
	if k.Hooks != nil {
		d, herr := k.Hooks.PostToolUse(ctx, rec, c.Name, args, raw)
		if herr != nil {
			d = HookDecision{Decision: HookDeny, Reason: "PostToolUse hook failed: " + herr.Error()}
		}
		switch d.Decision {
		case HookAllow:
		case HookTransform:
			raw = d.Output
		default:
			return Outcome{}, &Error{Kind: "gate", Code: CodeGateDenied, Message: "PostToolUse hook denied the result: " + d.Reason}
		}
	}
	if ds := guard.Validate(r.out, raw); len(ds) > 0 {
		d := ds[0] // the first violation is enough to refuse the result
		e := &Error{Kind: "schema", Code: CodeSchemaViolation, Message: fmt.Sprintf("%s result violates its output schema at %s: %s", c.Name, d.Param, d.Message)}
		if _, err := rec.Record(ctx, "schema.violation", "kernel", map[string]any{"schema_id": c.Name + ".output", "event_type": "tool.result", "pointer": d.Param, "message": d.Message, "boundary": "tool_result:" + c.Name}, ""); err != nil {
			return Outcome{}, errors.Join(e, err)
		}
		return Outcome{}, e
	}
	return Outcome{Result: raw}, nil
}

// InScope reports whether a caller's scope allows the tool: an entry is
// a tool name, or "prefix.*" for every tool under prefix (a skill's
// allowed-tools "mcp__server" in Claude Code's form is "mcp.server.*").
// A nil scope is not checked here; callers treat it as no restriction.
func InScope(scope []string, name string) bool {
	for _, e := range scope {
		if e == name {
			return true
		}
		if prefix, ok := strings.CutSuffix(e, "*"); ok && strings.HasSuffix(prefix, ".") && len(prefix) > 1 && strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// writeScope enforces a caller's WritePaths on a write tool: every path the
// change touches must be in scope, and a write that names no path is
// refused (fail closed).
func writeScope(c Call, cat Category, paths []string) *Error {
	if c.WritePaths == nil || cat != CategoryWrite {
		return nil
	}
	if len(paths) == 0 {
		return &Error{Kind: "gate", Code: CodeToolNotAllowed, Message: fmt.Sprintf("%s: the paths of this write are not known, and %s may write only %v", c.Name, c.Caller, c.WritePaths)}
	}
	for _, p := range paths {
		if !InWriteScope(c.WritePaths, p) {
			return &Error{Kind: "gate", Code: CodeToolNotAllowed, Message: fmt.Sprintf("%s may not write %s: its write scope is %v", c.Caller, p, c.WritePaths)}
		}
	}
	return nil
}

// InWriteScope reports whether p (workspace-relative, slash-separated)
// matches a write-scope pattern: "dir/**" is everything under dir, "**"
// everything, and anything else a path.Match glob of the whole path.
func InWriteScope(scope []string, p string) bool {
	p = path.Clean(strings.TrimPrefix(p, "./"))
	if p == "." || p == ".." || strings.HasPrefix(p, "../") || path.IsAbs(p) {
		return false
	}
	for _, pat := range scope {
		switch {
		case pat == "**":
			return true
		case strings.HasSuffix(pat, "/**"):
			dir := path.Clean(strings.TrimSuffix(pat, "/**"))
			if strings.HasPrefix(p, dir+"/") {
				return true
			}
		default:
			if ok, err := path.Match(pat, p); err == nil && ok {
				return true
			}
		}
	}
	return false
}

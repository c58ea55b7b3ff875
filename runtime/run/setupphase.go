package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/tools"
	"github.com/agentos/agentos/kernel/workspace"
	"github.com/agentos/agentos/runtime/event"
)

// The setup phase (docs/project-config.md): before the agent phase, the
// repository's setup commands (.agent/config.yaml `setup:`, or detected)
// run in the sandbox with the network limited to the policy's
// setup.network (the package registries) and the repository's own
// dependency caches writable; after it, every command sees those caches
// read-only and has no network unless network.allow says otherwise. Each
// command is a tool.invoke and a tool.result of SetupTool by SetupActor; a
// command that fails ends the run failed (SETUP_FAILED). Re-execution
// replays the recorded commands and runs none.

// SetupTool is the tool name of a setup command's events.
const SetupTool = "setup.run"

// SetupActor is the actor of a setup command's events: agentos, not a role.
const SetupActor = "agentos"

// CodeSetupFailed starts the reason of a run whose setup phase failed.
const CodeSetupFailed = "SETUP_FAILED"

// setupCallPrefix starts the call id of a setup command.
const setupCallPrefix = "agentos-setup-"

// setupKernel is implemented by KernelTools and what embeds it (the MCP
// tools): the setup phase runs on the kernel's workspace and policy.
type setupKernel interface{ setupKernel() *kernel.Kernel }

func (t KernelTools) setupKernel() *kernel.Kernel { return t.K }

// kernelOf finds the kernel behind the engine's tools; nil for tools
// without one (tests' fakes), which have no setup phase.
func kernelOf(t Tools) *kernel.Kernel {
	for {
		switch x := t.(type) {
		case limitedTools:
			t = x.in
			continue
		case replayOnlyTools:
			t = x.Tools
			continue
		case setupKernel:
			return x.setupKernel()
		}
		return nil
	}
}

// setup is the setup phase: live, it runs and records the commands;
// replaying, it reads back what was recorded (a run recorded before the
// phase existed has nothing there, and re-executes without it).
func (s *state) setup(ctx context.Context) error {
	k := kernelOf(s.e.Tools)
	var ws *workspace.Root
	if k != nil {
		ws, _ = k.Workspace.(*workspace.Root)
	}
	if s.f.replaying() {
		return s.replaySetup(ws)
	}
	if ws == nil {
		return nil
	}
	plan, err := tools.SetupCommands(ws)
	if err != nil {
		return &Failure{Status: StatusFailed, Class: ClassInvalidInput, Code: CodeSetupFailed, Reason: "the setup phase cannot start: " + err.Error(),
			NextAction: "fix .agent/config.yaml (docs/project-config.md)", Err: err}
	}
	if len(plan.Commands) == 0 {
		return nil
	}
	deps, err := ws.DepCaches()
	if err != nil {
		return &Failure{Status: StatusFailed, Class: ClassToolRuntimeError, Code: CodeSetupFailed, Reason: "the setup phase cannot start: " + err.Error(),
			NextAction: "make the sandbox's cache directory writable for agentos", Err: err}
	}
	allow := k.Policy.SetupNetwork()
	timeout := k.Policy.SetupTimeout()
	redact := k.Redact
	if redact == nil {
		redact = func(s string) string { return s }
	}
	for i, command := range plan.Commands {
		if s.in.ctl.stopped() {
			return s.in.ctl.failure()
		}
		id := fmt.Sprintf("%s%d", setupCallPrefix, i+1)
		inv := map[string]any{"call_id": id, "tool": SetupTool, "args": map[string]any{"command": command}, "caller": SetupActor,
			"detected": plan.Detected, "network": allow, "sandbox": ws.SetupProfile(allow, deps)}
		invEv, err := s.f.j.Append(ctx, event.ToolInvoke, SetupActor, inv, "")
		if err != nil {
			return err
		}
		start := time.Now()
		res, runErr := runSetup(ctx, ws, command, k.Policy.Execution.AllowShell, allow, deps, timeout, k.Policy.Limits.MaxStdout)
		out := map[string]any{"call_id": id, "tool": SetupTool, "duration_ms": time.Since(start).Milliseconds()}
		result := map[string]any{"command": command, "exit_code": res.ExitCode, "stdout": redact(res.Stdout), "stderr": redact(res.Stderr),
			"duration_ms": res.DurationMS, "truncated": res.Truncated, "timed_out": res.TimedOut, "passed": runErr == nil && res.ExitCode == 0}
		var ke *kernel.Error
		switch {
		case runErr == nil:
			out["ok"], out["result"], out["truncated"] = true, result, res.Truncated
		case errors.As(runErr, &ke):
			out["ok"] = false
			out["error"] = map[string]any{"kind": ke.Kind, "code": string(ke.Code), "message": redact(ke.Message), "details": result}
		default:
			out["ok"] = false
			out["error"] = map[string]any{"kind": "runtime", "code": string(kernel.CodeToolRuntimeError), "message": redact(runErr.Error()), "details": result}
		}
		// The command ran: its outcome is recorded even when the run's
		// deadline ended it, or the log would hold an open tool.invoke.
		resEv, err := s.f.j.Append(context.WithoutCancel(ctx), event.ToolResult, SetupActor, out, invEv.ID)
		if err != nil {
			return err
		}
		if s.in.ctl.stopped() {
			// Cancelled while the command ran (its tree was killed).
			return s.in.ctl.failure()
		}
		if f := setupFailure(command, resEv.Payload); f != nil {
			return f
		}
	}
	ws.UseDepCaches(deps)
	return nil
}

// runSetup runs one setup command in the workspace's sandbox.
func runSetup(ctx context.Context, ws *workspace.Root, command string, allowShell bool, allow []string, deps sandbox.DepCaches, timeout time.Duration, maxOut int) (workspace.RunResult, error) {
	argv, err := tools.SetupArgv(command, allowShell)
	if err != nil {
		return workspace.RunResult{ExitCode: -1}, err
	}
	return ws.RunSetup(ctx, workspace.RunSpec{Argv: argv, Timeout: timeout, MaxOutput: maxOut}, allow, deps)
}

// replaySetup consumes the recorded setup commands and decides as the
// live phase did; the workspace (nil: none) then uses the caches.
func (s *state) replaySetup(ws *workspace.Root) error {
	ran := false
	for {
		inv, ok := s.f.next()
		if !ok || inv.Type != event.ToolInvoke || event.FieldString(inv.Payload, "tool") != SetupTool || inv.Actor != SetupActor {
			break
		}
		s.f.pos++
		ran = true
		command := event.FieldString(event.Field(inv.Payload, "args"), "command")
		res, ok := s.f.next()
		if !ok || res.Type != event.ToolResult || res.Parent() != inv.ID {
			return &Failure{Status: StatusFailed, Class: ClassToolRuntimeError, Code: CodeSetupFailed,
				Reason:     fmt.Sprintf("setup command `%s` was interrupted: its result is not in the log", command),
				NextAction: "start a new run; its setup phase runs the commands again"}
		}
		s.f.pos++
		if f := setupFailure(command, res.Payload); f != nil {
			return f
		}
	}
	if !ran || ws == nil {
		return nil
	}
	deps, err := ws.DepCaches()
	if err != nil {
		return &Failure{Status: StatusFailed, Class: ClassToolRuntimeError, Code: CodeSetupFailed, Reason: "the setup phase's caches: " + err.Error(),
			NextAction: "make the sandbox's cache directory writable for agentos", Err: err}
	}
	ws.UseDepCaches(deps)
	return nil
}

// setupFailure is the terminal failure a recorded setup result amounts
// to, or nil when the command succeeded: a pure function of the payload,
// so replay decides as the live run did.
func setupFailure(command string, payload json.RawMessage) *Failure {
	var p struct {
		OK     bool          `json:"ok"`
		Result *setupOutcome `json:"result"`
		Error  *struct {
			Code    string        `json:"code"`
			Message string        `json:"message"`
			Details *setupOutcome `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(payload, &p); err != nil {
		return &Failure{Status: StatusFailed, Class: ClassToolRuntimeError, Code: CodeSetupFailed, Reason: "setup command `" + command + "`: unreadable result: " + err.Error(), NextAction: "start a new run"}
	}
	fix := "fix the command in .agent/config.yaml `setup:` or what it reports (docs/project-config.md); every registry it needs must be in the policy's setup.network.allow"
	switch {
	case p.OK && p.Result != nil && p.Result.ExitCode == 0:
		return nil
	case p.OK && p.Result != nil:
		return &Failure{Status: StatusFailed, Class: ClassToolRuntimeError, Code: CodeSetupFailed,
			Reason:     fmt.Sprintf("setup command `%s` exited %d%s", command, p.Result.ExitCode, p.Result.tail()),
			NextAction: fix}
	case p.Error != nil:
		next := fix
		switch kernel.Code(p.Error.Code) {
		case kernel.CodeTimeout:
			next = "raise execution.timeouts.setup.run in the operator's policy, or make the setup command faster (docs/project-config.md)"
		case kernel.CodeSandboxUnavailable:
			next = "make the sandbox work on this host (agentos doctor names the fix)"
		case kernel.CodePolicyDenied:
			next = "run the program directly instead of a shell in .agent/config.yaml `setup:`, or allow shells with execution.allowShell in the policy"
		}
		return &Failure{Status: StatusFailed, Class: ClassToolRuntimeError, Code: CodeSetupFailed,
			Reason:     fmt.Sprintf("setup command `%s` failed (%s): %s%s", command, p.Error.Code, p.Error.Message, p.Error.Details.tail()),
			NextAction: next}
	}
	return &Failure{Status: StatusFailed, Class: ClassToolRuntimeError, Code: CodeSetupFailed, Reason: "setup command `" + command + "` recorded no outcome", NextAction: "start a new run"}
}

// setupOutcome is a recorded setup command's result.
type setupOutcome struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

// setupTail is how much of a failed command's output the reason quotes.
const setupTail = 800

// tail quotes the end of the command's stderr (else stdout).
func (o *setupOutcome) tail() string {
	if o == nil {
		return ""
	}
	t := strings.TrimSpace(o.Stderr)
	what := "stderr"
	if t == "" {
		t, what = strings.TrimSpace(o.Stdout), "stdout"
	}
	if t == "" {
		return ""
	}
	if len(t) > setupTail {
		cut := len(t) - setupTail
		for cut < len(t) && t[cut]&0xC0 == 0x80 {
			cut++
		}
		t = "…" + t[cut:]
	}
	return "; " + what + ": " + t
}

package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"time"
)

// Runner executes a hook command: a shell command line, run in dir with
// stdin, bounded by ctx. It returns stdout, stderr and the exit code; err is
// for failures to run at all (including a timeout). The kernel's process
// runner implements it, so hook commands get the same environment scrubbing
// and process-group kill as tools.
type Runner interface {
	RunHook(ctx context.Context, dir, command string, stdin []byte) (stdout, stderr []byte, exitCode int, err error)
}

// Command is an external command hook (Claude Code's "type": "command").
type Command struct {
	Source  string // the settings file it came from
	Event   Event
	Matcher string
	Line    string // the command line
	Timeout time.Duration
	Prio    int
	Runner  Runner
}

// ID implements Handler.
func (c *Command) ID() string { return "command:" + c.Line }

// Priority implements Handler.
func (c *Command) Priority() int { return c.Prio }

// Matches implements Handler.
func (c *Command) Matches(in Input) bool { return matchTool(c.Matcher, in) }

// stdinJSON is Claude Code's hook input.
type stdinJSON struct {
	SessionID      string          `json:"session_id"`
	TranscriptPath string          `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	HookEventName  string          `json:"hook_event_name"`
	PermissionMode string          `json:"permission_mode"`
	ToolName       string          `json:"tool_name,omitempty"`
	ToolInput      json.RawMessage `json:"tool_input,omitempty"`
	ToolResponse   json.RawMessage `json:"tool_response,omitempty"`
	Prompt         string          `json:"prompt,omitempty"`
	Skill          string          `json:"skill,omitempty"`
	Source         string          `json:"source,omitempty"`
	Trigger        string          `json:"trigger,omitempty"`
	StopHookActive *bool           `json:"stop_hook_active,omitempty"`
}

// stdoutJSON is the subset of Claude Code's hook output agentos honours.
type stdoutJSON struct {
	Continue           *bool  `json:"continue"`
	StopReason         string `json:"stopReason"`
	Decision           string `json:"decision"`
	Reason             string `json:"reason"`
	HookSpecificOutput *struct {
		HookEventName            string          `json:"hookEventName"`
		PermissionDecision       string          `json:"permissionDecision"`
		PermissionDecisionReason string          `json:"permissionDecisionReason"`
		UpdatedInput             json.RawMessage `json:"updatedInput"`
		AdditionalContext        string          `json:"additionalContext"`
	} `json:"hookSpecificOutput"`
}

// Handle runs the command and maps its answer to a decision: exit 2 denies
// with stderr as the reason; any other non-zero exit, a timeout, or stdout
// that starts like JSON but does not parse denies (fail closed); exit 0 with
// Claude Code's output JSON is read as below; exit 0 with plain text allows.
func (c *Command) Handle(ctx context.Context, in Input) (Decision, error) {
	if c.Runner == nil {
		return Decision{}, errors.New("no command runner configured")
	}
	in2 := stdinJSON{SessionID: in.SessionID, TranscriptPath: in.Transcript, Cwd: in.Cwd, HookEventName: string(in.Event), PermissionMode: "default",
		ToolName: in.ToolName, ToolInput: in.ToolInput, ToolResponse: in.ToolResponse, Prompt: in.Prompt, Skill: in.Skill, Source: in.Source, Trigger: in.Trigger}
	if in.Event == Stop {
		active := in.StopActive
		in2.StopHookActive = &active
	}
	stdin, err := json.Marshal(in2)
	if err != nil {
		return Decision{}, err
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stdout, stderr, code, err := c.Runner.RunHook(cctx, in.Cwd, c.Line, stdin)
	if err != nil {
		if cctx.Err() != nil {
			return Decision{}, fmt.Errorf("timed out after %s", timeout)
		}
		return Decision{}, err
	}
	switch {
	case code == 2:
		reason := strings.TrimSpace(string(stderr))
		if reason == "" {
			reason = "blocked by hook (exit 2)"
		}
		return Decision{Decision: Deny, Reason: reason}, nil
	case code != 0:
		return Decision{}, fmt.Errorf("exited %d: %s", code, firstLine(stderr))
	}
	return parseOutput(in, bytes.TrimSpace(stdout))
}

func parseOutput(in Input, out []byte) (Decision, error) {
	if len(out) == 0 || (out[0] != '{' && out[0] != '[') {
		if in.Event == UserPromptSubmit && len(out) > 0 {
			// Claude Code adds plain stdout of a UserPromptSubmit hook as context.
			return promptWithContext(in, string(out))
		}
		return Decision{Decision: Allow}, nil
	}
	var o stdoutJSON
	if err := json.Unmarshal(out, &o); err != nil {
		return Decision{}, fmt.Errorf("invalid hook output JSON: %v", err)
	}
	if o.Continue != nil && !*o.Continue {
		reason := o.StopReason
		if reason == "" {
			reason = "hook asked to stop (continue: false)"
		}
		return Decision{Decision: Deny, Reason: reason}, nil
	}
	if hs := o.HookSpecificOutput; hs != nil {
		if hs.HookEventName != "" && hs.HookEventName != string(in.Event) {
			return Decision{}, fmt.Errorf("hookSpecificOutput is for %s, not %s", hs.HookEventName, in.Event)
		}
		switch hs.PermissionDecision {
		case "deny":
			return Decision{Decision: Deny, Reason: nonEmpty(hs.PermissionDecisionReason, "denied by hook")}, nil
		case "ask":
			// agentos has no interactive prompt inside a hook: "ask" cannot be
			// honoured here, so it denies (fail closed). Use policy.yaml's
			// approval settings to require a maintainer's approval.
			return Decision{Decision: Deny, Reason: nonEmpty(hs.PermissionDecisionReason, "hook asked for confirmation") + " (ask is treated as deny)"}, nil
		case "", "allow":
		default:
			return Decision{}, fmt.Errorf("unknown permissionDecision %q", hs.PermissionDecision)
		}
		if len(hs.UpdatedInput) > 0 && string(hs.UpdatedInput) != "null" {
			if in.Event != PreToolUse {
				return Decision{}, fmt.Errorf("updatedInput is only valid for PreToolUse")
			}
			return Decision{Decision: Transform, Output: hs.UpdatedInput, Reason: hs.PermissionDecisionReason}, nil
		}
		if hs.AdditionalContext != "" && in.Event == UserPromptSubmit {
			return promptWithContext(in, hs.AdditionalContext)
		}
	}
	switch o.Decision {
	case "block":
		return Decision{Decision: Deny, Reason: nonEmpty(o.Reason, "blocked by hook")}, nil
	case "", "approve", "allow":
		return Decision{Decision: Allow, Reason: o.Reason}, nil
	default:
		return Decision{}, fmt.Errorf("unknown decision %q", o.Decision)
	}
}

func promptWithContext(in Input, extra string) (Decision, error) {
	out, err := json.Marshal(map[string]string{"prompt": in.Prompt + "\n\n" + extra})
	if err != nil {
		return Decision{}, err
	}
	return Decision{Decision: Transform, Output: out, Reason: "additional context from hook"}, nil
}

func nonEmpty(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// settingsFile is Claude Code's settings.json shape (hooks only).
type settingsFile struct {
	Hooks map[string][]struct {
		Matcher string `json:"matcher"`
		Hooks   []struct {
			Type    string   `json:"type"`
			Command string   `json:"command"`
			Timeout *float64 `json:"timeout"`
		} `json:"hooks"`
	} `json:"hooks"`
}

// SettingsError reports a problem in a settings file.
type SettingsError struct {
	File string
	Path string // e.g. hooks.PreToolUse[0].hooks[1]
	Msg  string
}

func (e *SettingsError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.File, e.Path, e.Msg)
}

// LoadSettings reads command hooks from the settings files that exist among
// paths (relative to fsys, e.g. ".agent/settings.json",
// ".claude/settings.json") and registers them with runner. A file that does
// not exist is skipped; a file that exists but is invalid is an error — a
// hook that cannot be loaded cannot be enforced, so the run must not start.
// Events agentos does not have (e.g. Notification) are skipped and listed
// in the returned notes.
func (r *Registry) LoadSettings(fsys fs.FS, runner Runner, paths ...string) (notes []string, err error) {
	for _, p := range paths {
		b, err := fs.ReadFile(fsys, p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return notes, &SettingsError{File: p, Msg: err.Error()}
		}
		var sf settingsFile
		dec := json.NewDecoder(bytes.NewReader(b))
		if err := dec.Decode(&sf); err != nil {
			return notes, &SettingsError{File: p, Msg: "invalid JSON: " + err.Error()}
		}
		for evName, groups := range sf.Hooks {
			ev := Event(evName)
			if !knownEvent(ev) {
				notes = append(notes, fmt.Sprintf("%s: hooks.%s: event not supported by agentos, skipped", p, evName))
				continue
			}
			for gi, g := range groups {
				if !isNameList(g.Matcher) && g.Matcher != "*" {
					if _, err := regexp.Compile(g.Matcher); err != nil {
						return notes, &SettingsError{File: p, Path: fmt.Sprintf("hooks.%s[%d].matcher", evName, gi), Msg: "invalid regular expression: " + err.Error()}
					}
				}
				for hi, h := range g.Hooks {
					path := fmt.Sprintf("hooks.%s[%d].hooks[%d]", evName, gi, hi)
					if h.Type != "command" {
						return notes, &SettingsError{File: p, Path: path, Msg: fmt.Sprintf("hook type %q is not supported (only \"command\")", h.Type)}
					}
					if strings.TrimSpace(h.Command) == "" {
						return notes, &SettingsError{File: p, Path: path, Msg: "command is empty"}
					}
					timeout := 60 * time.Second
					if h.Timeout != nil {
						if *h.Timeout <= 0 || *h.Timeout > 3600 {
							return notes, &SettingsError{File: p, Path: path + ".timeout", Msg: "timeout must be between 0 and 3600 seconds"}
						}
						timeout = time.Duration(*h.Timeout * float64(time.Second))
					}
					cmd := &Command{Source: p, Event: ev, Matcher: g.Matcher, Line: h.Command, Timeout: timeout, Runner: runner}
					if err := r.Register(ev, cmd); err != nil {
						return notes, err
					}
				}
			}
		}
	}
	return notes, nil
}

// DirFS is os.DirFS, re-exported so callers need not import os for it.
func DirFS(dir string) fs.FS { return os.DirFS(dir) }

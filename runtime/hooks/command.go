package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	pathpkg "path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/agentos/agentos/runtime/claudecode"
)

// Runner executes a hook command: a shell command line, run in dir with
// stdin and the extra environment entries env ("NAME=value", added to the
// runner's scrubbed environment), bounded by ctx. It returns stdout,
// stderr and the exit code; err is for failures to run at all (including
// a timeout). The kernel's process runner implements it, so hook commands
// get the same environment scrubbing and process-group kill as tools.
type Runner interface {
	RunHook(ctx context.Context, dir, command string, env []string, stdin []byte) (stdout, stderr []byte, exitCode int, err error)
}

// Env is the environment Claude Code documents for hook commands, for a
// project at dir: CLAUDE_PROJECT_DIR, so that the usual
// "$CLAUDE_PROJECT_DIR"/.claude/hooks/guard.sh finds its script. The other
// variables Claude Code documents are deliberately not set:
// CLAUDE_ENV_FILE (a SessionStart hook's exports would reach every later
// command, past policy.yaml's environment allow-list), CLAUDE_PLUGIN_ROOT
// (plugins only) and CLAUDE_CODE_REMOTE (Claude Code on the web only).
func Env(dir string) []string {
	if dir == "" {
		return nil
	}
	return []string{"CLAUDE_PROJECT_DIR=" + dir}
}

// Command is an external command hook (Claude Code's "type": "command").
type Command struct {
	Source string // the settings file it came from
	Where  string // its matcher group in the file, e.g. hooks.PreToolUse[0]
	// ClaudeNames gives the hook Claude Code's tool_name (Bash for
	// process.run, …; agentos's name in agentos_tool_name), for hooks
	// from Claude Code's own settings file: its scripts often check
	// tool_name themselves (if tool_name != "Bash": allow), and with
	// agentos's name such a guard would allow everything.
	ClaudeNames bool
	Event       Event
	Matcher     string
	Line        string // the command line
	Timeout     time.Duration
	Prio        int
	Runner      Runner
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
	AgentosTool    string          `json:"agentos_tool_name,omitempty"`
	ToolInput      json.RawMessage `json:"tool_input,omitempty"`
	ToolResponse   json.RawMessage `json:"tool_response,omitempty"`
	Prompt         string          `json:"prompt,omitempty"`
	Skill          string          `json:"skill,omitempty"`
	Source         string          `json:"source,omitempty"`
	Trigger        string          `json:"trigger,omitempty"`
	StopHookActive *bool           `json:"stop_hook_active,omitempty"`
	// Workflow-plane hooks (agentos extensions; Claude Code has none).
	CycleID   string `json:"cycle_id,omitempty"`
	Mode      string `json:"mode,omitempty"`
	FromPhase string `json:"from_phase,omitempty"`
	ToPhase   string `json:"to_phase,omitempty"`
	Verdict   string `json:"verdict,omitempty"`
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
//
// For a tool that Claude Code has under another name, tool_input carries
// Claude Code's fields next to agentos's (claudecode.ToolInputs); a
// repo.patch of several files runs the hook once per file, and any deny
// denies the call. An updatedInput may change agentos's fields only: one
// that changes a Claude Code field, or that answers a multi-file patch,
// cannot be mapped back and denies.
func (c *Command) Handle(ctx context.Context, in Input) (Decision, error) {
	if c.Runner == nil {
		return Decision{}, errors.New("no command runner configured")
	}
	if (in.Event != PreToolUse && in.Event != PostToolUse) || len(in.ToolInput) == 0 {
		return c.handleOne(ctx, in, in.ToolName, in.ToolInput)
	}
	inputs, added, err := claudecode.ToolInputs(in.Cwd, in.ToolName, in.ToolInput)
	if err != nil {
		return Decision{}, err
	}
	final := Decision{Decision: Allow}
	for _, sh := range inputs {
		shown := sh.Input
		name := in.ToolName
		if c.ClaudeNames && sh.Name != "" {
			name = sh.Name
		}
		d, err := c.handleOne(ctx, in, name, shown)
		if err != nil || d.Decision == Deny {
			return d, err
		}
		if d.Decision != Transform {
			continue
		}
		if in.Event != PreToolUse {
			final = d
			continue
		}
		if len(inputs) > 1 {
			return Decision{}, fmt.Errorf("updatedInput cannot answer %s shown as %d Claude Code calls (one per file); use a hook on the agentos tool's own input", in.ToolName, len(inputs))
		}
		out, err := mapBack(d.Output, shown, added)
		if err != nil {
			return Decision{}, err
		}
		d.Output = out
		final = d
	}
	return final, nil
}

// mapBack removes from a hook's updatedInput the Claude Code fields that
// were added to the tool's input for the hook, if the hook left them as
// they were; a changed one is an error, since agentos cannot know what
// change of its own arguments it means.
func mapBack(out, shown json.RawMessage, added []string) (json.RawMessage, error) {
	if len(added) == 0 {
		return out, nil
	}
	var o, sh map[string]json.RawMessage
	if err := json.Unmarshal(out, &o); err != nil || o == nil {
		return out, nil // not an object: the transform check rejects it
	}
	if err := json.Unmarshal(shown, &sh); err != nil {
		return nil, err
	}
	for _, k := range added {
		v, ok := o[k]
		if !ok {
			continue
		}
		if !jsonEqual(v, sh[k]) {
			return nil, fmt.Errorf("updatedInput changes %q, a Claude Code field agentos cannot map back to the tool's arguments; change the agentos field instead", k)
		}
		delete(o, k)
	}
	return json.Marshal(o)
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// handleOne runs the command once with toolName and toolInput as
// tool_name and tool_input.
func (c *Command) handleOne(ctx context.Context, in Input, toolName string, toolInput json.RawMessage) (Decision, error) {
	in2 := stdinJSON{SessionID: in.SessionID, TranscriptPath: in.Transcript, Cwd: in.Cwd, HookEventName: string(in.Event), PermissionMode: "default",
		ToolName: toolName, ToolInput: toolInput, ToolResponse: in.ToolResponse, Prompt: in.Prompt, Skill: in.Skill, Source: in.Source, Trigger: in.Trigger,
		CycleID: in.Cycle, Mode: in.Mode, FromPhase: in.FromPhase, ToPhase: in.ToPhase, Verdict: in.Verdict}
	if toolName != in.ToolName {
		in2.AgentosTool = in.ToolName
	}
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
	stdout, stderr, code, err := c.Runner.RunHook(cctx, in.Cwd, c.Line, Env(in.Cwd), stdin)
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
// Events agentos does not have (e.g. Notification) and hook types it does
// not run ("prompt", "agent", "http") are skipped and listed in the
// returned notes; the file's other hooks are kept. A Claude Code tool name
// in a matcher selects the agentos tools it maps to (claudecode.Table);
// call MatcherNotes once the tools are known to report a matcher that
// selects none.
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
		evNames := make([]string, 0, len(sf.Hooks))
		for evName := range sf.Hooks {
			evNames = append(evNames, evName)
		}
		sort.Strings(evNames) // notes in a stable order
		for _, evName := range evNames {
			groups := sf.Hooks[evName]
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
					switch h.Type {
					case "command":
					case "":
						return notes, &SettingsError{File: p, Path: path + ".type", Msg: "type is missing"}
					default:
						// Claude Code's "prompt", "agent" and "http" hooks (and any
						// later kind) are not run by agentos; the file's command
						// hooks still apply.
						notes = append(notes, fmt.Sprintf("%s: %s: hook type %q is not run by agentos, skipped (only \"command\" hooks run; the others in this file apply)", p, path, h.Type))
						continue
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
					cmd := &Command{Source: p, Where: fmt.Sprintf("hooks.%s[%d]", evName, gi), ClaudeNames: strings.HasPrefix(pathpkg.Clean(p), ".claude/"), Event: ev, Matcher: g.Matcher, Line: h.Command, Timeout: timeout, Runner: runner}
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

package claudecode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/agentos/agentos/kernel/toolrule"
)

// SettingsFiles are the project settings files Claude Code reads
// permissions from, in its order. settings.local.json is normally kept out
// of git; a pull request may still carry one, and then it is the pull
// request's input like the rest: its rules can only tighten.
var SettingsFiles = []string{".claude/settings.json", ".claude/settings.local.json"}

// Warning is something in a settings file's permissions that agentos
// does not do as written: a rule it cannot enforce, allow rules the
// operator's policy does not let pre-approve anything, a setting it
// refuses. It is reported (the run's log, agentos doctor),
// never dropped silently.
type Warning struct {
	Source  string `json:"source"`           // the settings file
	Setting string `json:"setting"`          // permissions.deny, permissions.defaultMode, …
	Rule    string `json:"rule,omitempty"`   // the rule or value concerned
	Message string `json:"message"`          // what agentos does instead
	Effect  string `json:"effect,omitempty"` // not_enforced | ignored | refused
}

func (w Warning) String() string {
	if w.Rule != "" {
		return fmt.Sprintf("%s %s %q: %s", w.Source, w.Setting, w.Rule, w.Message)
	}
	return fmt.Sprintf("%s %s: %s", w.Source, w.Setting, w.Message)
}

// Warning effects.
const (
	EffectNotEnforced = "not_enforced" // a deny or ask rule agentos cannot enforce
	EffectIgnored     = "ignored"      // allow rules that pre-approve nothing, a mode agentos does not have
	EffectRefused     = "refused"      // a setting that would widen what agentos reaches
)

// Permissions is what a project's settings files say about permissions,
// as agentos enforces it.
type Permissions struct {
	// Rules are each file's deny and ask rules (kernel.Kernel.Permissions).
	Rules []*toolrule.Permissions
	// DenyGlobs are the Read deny rules' paths as workspace deny patterns.
	DenyGlobs []string
	Warnings  []Warning
	// Files are the settings files that had a permissions block.
	Files []string
	// Allow are the allow rules that can be matched against a call, in
	// the files' order: they pre-approve only what the operator's policy
	// lets them (Under, Preapprover; allow.go).
	Allow []AllowRule

	// per file, in Files' order: the warnings before and after those
	// about its allow rules, and its allow entries.
	sections []section
	honour   Honour
}

// section is one settings file's warnings and allow entries.
type section struct {
	file      string
	pre, post []Warning
	allow     []allowEntry
}

// allowEntry is one allow rule as written, parsed or with the reason it
// pre-approves nothing.
type allowEntry struct {
	rule    AllowRule
	problem string
}

// Under recomputes the warnings for what the operator lets the allow
// rules do (h): ReadPermissions assumes nothing (allow rules ignored).
// Preapprover then pre-approves under h.
func (p *Permissions) Under(h Honour) {
	if p == nil {
		return
	}
	p.honour = h
	p.Warnings = nil
	for _, s := range p.sections {
		p.Warnings = append(p.Warnings, s.pre...)
		p.Warnings = append(p.Warnings, s.allowWarnings(h)...)
		p.Warnings = append(p.Warnings, s.post...)
	}
}

// settingsPermissions is the permissions block (Claude Code's names).
type settingsPermissions struct {
	Allow                 []string `json:"allow"`
	Ask                   []string `json:"ask"`
	Deny                  []string `json:"deny"`
	AdditionalDirectories []string `json:"additionalDirectories"`
	DefaultMode           *string  `json:"defaultMode"`
}

// knownPermissionKeys are read, or deliberately need nothing from agentos.
var knownPermissionKeys = map[string]bool{
	"allow": true, "ask": true, "deny": true, "additionalDirectories": true, "defaultMode": true,
	// agentos never bypasses approvals, so there is nothing to disable.
	"disableBypassPermissionsMode": true, "disableAutoMode": true,
}

// ReadPermissions reads the permissions of every file of SettingsFiles
// that exists (read opens a repository path through the workspace jail).
// A file that exists but cannot be read, or whose permissions block is
// not of Claude Code's shape, is an error: a deny list that cannot be
// read must not be skipped.
func ReadPermissions(read func(string) ([]byte, error)) (*Permissions, error) {
	out := &Permissions{}
	for _, file := range SettingsFiles {
		b, err := read(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		var doc struct {
			Permissions json.RawMessage `json:"permissions"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("%s: not valid JSON: %v", file, err)
		}
		if len(doc.Permissions) == 0 || string(doc.Permissions) == "null" {
			continue
		}
		if err := out.add(file, doc.Permissions); err != nil {
			return nil, fmt.Errorf("%s: permissions: %w", file, err)
		}
	}
	out.Under(Honour{})
	return out, nil
}

func (out *Permissions) add(file string, raw json.RawMessage) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return fmt.Errorf("not an object: %v", err)
	}
	var sp settingsPermissions
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&sp); err != nil {
		return fmt.Errorf("allow, ask, deny and additionalDirectories are lists of strings, defaultMode a string: %v", err)
	}
	out.Files = append(out.Files, file)
	sec := section{file: file}
	warnings := &sec.pre
	warn := func(setting, rule, effect, msg string) {
		*warnings = append(*warnings, Warning{Source: file, Setting: setting, Rule: rule, Message: msg, Effect: effect})
	}
	var unknown []string
	for k := range keys {
		if !knownPermissionKeys[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		warn("permissions."+k, "", EffectIgnored, "not a setting agentos reads")
	}
	rules, problems := toolrule.NewPermissions(file, sp.Deny, sp.Ask, resolvePermissionName)
	for _, p := range problems {
		warn("permissions."+p.List, p.Rule, EffectNotEnforced, p.Reason)
	}
	if !rules.Empty() {
		out.Rules = append(out.Rules, rules)
		out.DenyGlobs = append(out.DenyGlobs, rules.DenyGlobs()...)
	}
	for _, raw := range sp.Allow {
		if raw = strings.TrimSpace(raw); raw == "" {
			continue
		}
		r, problem := parseAllow(file, raw)
		sec.allow = append(sec.allow, allowEntry{rule: r, problem: problem})
		if problem == "" {
			out.Allow = append(out.Allow, r)
		}
	}
	warnings = &sec.post
	if len(sp.AdditionalDirectories) > 0 {
		warn("permissions.additionalDirectories", strings.Join(sp.AdditionalDirectories, ", "), EffectRefused, "refused: agentos tools reach only the repository's working tree (the workspace jail)")
	}
	if sp.DefaultMode != nil {
		switch m := *sp.DefaultMode; m {
		case "default", "":
		case "plan":
			warn("permissions.defaultMode", m, EffectIgnored, "agentos has no plan mode: the Planner plans, and writes and commands wait for approval as policy.yaml says")
		default:
			// bypassPermissions, acceptEdits, dontAsk, auto: each would
			// lower approvals, which a repository may not do.
			warn("permissions.defaultMode", m, EffectIgnored, "never honoured: a repository cannot lower approvals; policy.yaml decides them")
		}
	}
	out.sections = append(out.sections, sec)
	return nil
}

// resolvePermissionName maps a bare rule name other than Bash, Read and
// Edit/Write/MultiEdit to agentos tools: the table (Grep, Glob), MCP
// names (mcp__server, mcp__server__tool, mcp__server__get_*), and
// Claude Code's tools agentos does not have (known, no tools).
func resolvePermissionName(name string) ([]string, bool) {
	if isAbsent(name) {
		return nil, true
	}
	if ours, ok := Ours(name); ok {
		return ours, true
	}
	return nil, false
}

// Strings lists the warnings for notes.
func (p *Permissions) Strings() []string {
	if p == nil {
		return nil
	}
	out := make([]string, 0, len(p.Warnings))
	for _, w := range p.Warnings {
		out = append(out, w.String())
	}
	return out
}

// Package policy reads policy.yaml, the kernel's policy contract
// (docs/kernel-policy.md): workspace deny patterns, per-capability approval (never | always |
// risk), timeouts, high-risk commands, redaction keys, output limits, and
// the sandbox's network allow-list and process limits. Files are validated
// with the kernel_policy_v2 schema (v1 plus network and the process
// limits; every v1 file is a valid v2 file); unknown keys and bad values
// are errors that name the file position.
package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/schemas"
	"gopkg.in/yaml.v3"
)

// Approval levels.
const (
	Never  = "never"
	Risk   = "risk"
	Always = "always"
)

// Policy is an effective kernel policy.
type Policy struct {
	Workspace struct {
		Root         string   `json:"root,omitempty"`
		DenyPatterns []string `json:"denyPatterns,omitempty"`
	} `json:"workspace"`
	Execution struct {
		Timeouts   map[string]string `json:"timeouts,omitempty"`
		AllowShell bool              `json:"allowShell,omitempty"`
		EnvAllow   []string          `json:"envAllow,omitempty"`
	} `json:"execution"`
	Capabilities map[string]struct {
		Approval string `json:"approval"`
	} `json:"capabilities"`
	Risk struct {
		HighRiskCommands []string `json:"highRiskCommands,omitempty"`
		HighRiskAction   string   `json:"highRiskAction,omitempty"` // approve (default) | deny
	} `json:"risk"`
	Redaction struct {
		Keys []string `json:"keys,omitempty"`
	} `json:"redaction"`
	Limits struct {
		MaxStdout   int `json:"maxStdout,omitempty"`
		MaxDiffSize int `json:"maxDiffSize,omitempty"`
		// Sandboxed commands (zero: the sandbox's defaults).
		CPUTime    string `json:"cpuTime,omitempty"`
		MemoryMB   int    `json:"memoryMB,omitempty"`
		Processes  int    `json:"processes,omitempty"`
		FileSizeMB int    `json:"fileSizeMB,omitempty"`
		OpenFiles  int    `json:"openFiles,omitempty"`
	} `json:"limits"`
	// Network of sandboxed commands: nil Allow (not given) inherits, an
	// empty list is no network.
	Network struct {
		Allow []string `json:"allow"`
	} `json:"network"`
	// Setup is the setup phase's (docs/project-config.md): nil
	// Network.Allow (not given) is DefaultSetupNetwork, an empty list no
	// network.
	Setup struct {
		Network struct {
			Allow []string `json:"allow"`
		} `json:"network"`
	} `json:"setup"`
	Trust struct {
		Enabled        bool `json:"enabled,omitempty"`
		CleanApprovals int  `json:"cleanApprovals,omitempty"`
	} `json:"trust"`
	// Guard: repair (default true) lets the tool guard repair blocked
	// calls (local argument fixes, one model round); false turns it off
	// for every run under this policy, whatever the profile says.
	Guard struct {
		Repair *bool `json:"repair,omitempty"`
	} `json:"guard"`
	// ClaudeCode: HonorAllow lists the capabilities (a tool name, or
	// "prefix.*" for every tool under prefix) whose calls a repository's
	// Claude Code allow rules (.claude/settings.json permissions.allow)
	// may run without the approval this policy asks for. Nil or empty:
	// none (allow rules are ignored). docs/claude-code.md.
	ClaudeCode struct {
		HonorAllow []string `json:"honorAllow,omitempty"`
	} `json:"claudeCode"`
}

// HonorsAllow returns the entry of claudeCode.honorAllow that lets a
// repository's Claude Code allow rule pre-approve the capability.
func (p *Policy) HonorsAllow(capability string) (entry string, ok bool) {
	for _, e := range p.ClaudeCode.HonorAllow {
		if covers(e, capability) {
			return e, true
		}
	}
	return "", false
}

// covers reports whether honorAllow entry e covers name (a capability,
// or another entry's "prefix.*"): equal, or e is "prefix.*" and name is
// under prefix.
func covers(e, name string) bool {
	if e == name {
		return true
	}
	prefix, ok := strings.CutSuffix(e, "*")
	return ok && strings.HasSuffix(prefix, ".") && len(prefix) > 1 && strings.HasPrefix(name, prefix)
}

// GuardRepair reports whether the policy allows guard repair.
func (p *Policy) GuardRepair() bool { return p.Guard.Repair == nil || *p.Guard.Repair }

// DefaultYAML is the built-in policy: reads never need approval, writes and
// shell always do, tests and linters by risk.
const DefaultYAML = `
workspace:
  root: ./
  denyPatterns:
    - "**/.git/**"
    # session logs committed beside the change are evidence, not work
    - ".agent/sessions/**"
    # credentials kept beside the code: redaction masks NAME_TOKEN=value,
    # not a database URL with its password; a model has no need to read them
    - "**/.env"
    - "**/.env.local"
execution:
  timeouts:
    process.run: 300s
    test.run: 600s
    lint.run: 300s
capabilities:
  echo:
    approval: never
  repo.read:
    approval: never
  repo.search:
    approval: never
  repo.patch:
    approval: always
  repo.write:
    approval: always
  process.run:
    approval: always
  test.run:
    approval: risk
  lint.run:
    approval: risk
risk:
  highRiskCommands: [rm, sudo, curl, wget, chmod, chown, dd, mkfs, ssh, scp, git]
redaction:
  keys: [SECRET, TOKEN, API_KEY, PASSWORD, PRIVATE_KEY]
limits:
  maxStdout: 20000
  maxDiffSize: 200000
trust:
  enabled: false
  cleanApprovals: 5
`

// Default returns the built-in policy.
func Default() *Policy {
	p, err := Parse("built-in", strings.NewReader(DefaultYAML))
	if err != nil {
		panic("policy: built-in default invalid: " + err.Error())
	}
	return p
}

// Error is a policy file problem with its position.
type Error struct {
	File   string
	Line   int
	Column int
	Path   string // JSON pointer of the offending value
	Msg    string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d:%d: %s: %s", e.File, e.Line, e.Column, e.Path, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.File, e.Path, e.Msg)
}

// Parse reads and validates a policy file.
func Parse(name string, r io.Reader) (*Policy, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, &Error{File: name, Msg: err.Error()}
	}
	var doc any
	if err := root.Decode(&doc); err != nil {
		return nil, &Error{File: name, Msg: err.Error()}
	}
	if doc == nil {
		doc = map[string]any{}
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, &Error{File: name, Msg: "not representable as JSON: " + err.Error()}
	}
	if err := schemas.MustDefault().ValidateJSON("kernel_policy_v2", js); err != nil {
		var ve *schemas.ValidationError
		if errors.As(err, &ve) {
			n := locate(&root, ve.Pointer)
			if k := unknownKey(n, ve.Message); k != nil {
				n = k
			}
			e := &Error{File: name, Path: ve.Pointer, Msg: ve.Message}
			if e.Path == "" {
				e.Path = "/"
			}
			if n != nil {
				e.Line, e.Column = n.Line, n.Column
			}
			return nil, e
		}
		return nil, err
	}
	p := &Policy{}
	dec := json.NewDecoder(bytes.NewReader(js))
	if err := dec.Decode(p); err != nil {
		return nil, &Error{File: name, Msg: err.Error()}
	}
	for capName, d := range p.Execution.Timeouts {
		if _, err := time.ParseDuration(d); err != nil {
			return nil, &Error{File: name, Path: "/execution/timeouts/" + capName, Msg: err.Error()}
		}
	}
	if d := p.Limits.CPUTime; d != "" {
		if _, err := time.ParseDuration(d); err != nil {
			return nil, &Error{File: name, Path: "/limits/cpuTime", Msg: err.Error()}
		}
	}
	for _, l := range []struct {
		path  string
		rules []string
	}{{"/network/allow/%d", p.Network.Allow}, {"/setup/network/allow/%d", p.Setup.Network.Allow}} {
		for i, a := range l.rules {
			if _, err := sandbox.ParseRule(a); err != nil {
				e := &Error{File: name, Path: fmt.Sprintf(l.path, i), Msg: err.Error()}
				if n := locate(&root, e.Path); n != nil {
					e.Line, e.Column = n.Line, n.Column
				}
				return nil, e
			}
		}
	}
	return p, nil
}

// locate finds the YAML node at a JSON pointer (the deepest it can reach).
func locate(n *yaml.Node, ptr string) *yaml.Node {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if ptr == "" {
		return n
	}
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == tok {
					next = n.Content[i+1]
					break
				}
			}
		case yaml.SequenceNode:
			var idx int
			if _, err := fmt.Sscanf(tok, "%d", &idx); err == nil && idx < len(n.Content) {
				next = n.Content[idx]
			}
		}
		if next == nil {
			// A disallowed key: point at the key itself.
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if !knownKey(n.Content[i].Value) {
						return n.Content[i]
					}
				}
			}
			return n
		}
		n = next
	}
	return n
}

// unknownKey points at the key an "additional properties 'x' not allowed"
// error names, inside mapping n.
func unknownKey(n *yaml.Node, msg string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode || !strings.Contains(msg, "additional properties") {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if strings.Contains(msg, "'"+n.Content[i].Value+"'") {
			return n.Content[i]
		}
	}
	return nil
}

var known = map[string]bool{"workspace": true, "execution": true, "capabilities": true, "risk": true, "redaction": true, "limits": true, "trust": true, "network": true, "guard": true, "setup": true, "claudeCode": true}

func knownKey(k string) bool { return known[k] }

// Approval returns the approval level of a capability (always for tools the
// policy does not name: unknown capabilities fail closed).
func (p *Policy) Approval(capability string) string {
	if c, ok := p.Capabilities[capability]; ok {
		return c.Approval
	}
	return Always
}

// Timeout returns the capability's timeout (default 120 s).
func (p *Policy) Timeout(capability string) time.Duration {
	if d, ok := p.Execution.Timeouts[capability]; ok {
		if v, err := time.ParseDuration(d); err == nil {
			return v
		}
	}
	return 120 * time.Second
}

// IsHighRisk reports whether a command's program is listed as high risk.
func (p *Policy) IsHighRisk(argv0 string) bool {
	base := argv0[strings.LastIndexByte(argv0, '/')+1:]
	for _, c := range p.Risk.HighRiskCommands {
		if c == base {
			return true
		}
	}
	return false
}

var rank = map[string]int{Never: 0, Risk: 1, Always: 2}

// Merge layers a repository's policy over the operator's (or built-in)
// policy. A repository may only tighten: approvals take the stricter
// level, deny patterns, high-risk commands and redaction keys are unions,
// limits and timeouts the smaller values, shell and env pass-through need
// both to allow, a "deny" high-risk action wins, adaptive trust is on
// only if both enable it, and its network allow-list and
// claudeCode.honorAllow keep only entries the operator's list covers (not
// giving one inherits the operator's).
func Merge(base, repo *Policy) *Policy {
	if repo == nil {
		return base
	}
	out := *base
	out.Capabilities = map[string]struct {
		Approval string `json:"approval"`
	}{}
	for k, v := range base.Capabilities {
		out.Capabilities[k] = v
	}
	for k, v := range repo.Capabilities {
		if cur, ok := out.Capabilities[k]; !ok || rank[v.Approval] > rank[cur.Approval] {
			out.Capabilities[k] = v
		}
	}
	out.Workspace.DenyPatterns = union(base.Workspace.DenyPatterns, repo.Workspace.DenyPatterns)
	out.Risk.HighRiskCommands = union(base.Risk.HighRiskCommands, repo.Risk.HighRiskCommands)
	if repo.Risk.HighRiskAction == "deny" {
		out.Risk.HighRiskAction = "deny"
	}
	out.Redaction.Keys = union(base.Redaction.Keys, repo.Redaction.Keys)
	out.Limits.MaxStdout = minPos(base.Limits.MaxStdout, repo.Limits.MaxStdout)
	out.Limits.MaxDiffSize = minPos(base.Limits.MaxDiffSize, repo.Limits.MaxDiffSize)
	out.Limits.MemoryMB = minPos(base.Limits.MemoryMB, repo.Limits.MemoryMB)
	out.Limits.Processes = minPos(base.Limits.Processes, repo.Limits.Processes)
	out.Limits.FileSizeMB = minPos(base.Limits.FileSizeMB, repo.Limits.FileSizeMB)
	out.Limits.OpenFiles = minPos(base.Limits.OpenFiles, repo.Limits.OpenFiles)
	if r := repo.Limits.CPUTime; r != "" && (base.Limits.CPUTime == "" || durLess(r, base.Limits.CPUTime)) {
		out.Limits.CPUTime = r
	}
	// The repository asks for part of what the operator allows, never more.
	if repo.Network.Allow != nil {
		kept, _ := sandbox.Narrow(base.Network.Allow, repo.Network.Allow)
		out.Network.Allow = append([]string{}, kept...)
	}
	if repo.Setup.Network.Allow != nil {
		kept, _ := sandbox.Narrow(base.SetupNetwork(), repo.Setup.Network.Allow)
		out.Setup.Network.Allow = append([]string{}, kept...)
	}
	out.Execution.Timeouts = map[string]string{}
	for k, v := range base.Execution.Timeouts {
		out.Execution.Timeouts[k] = v
	}
	for k, v := range repo.Execution.Timeouts {
		if cur, ok := out.Execution.Timeouts[k]; !ok || durLess(v, cur) {
			out.Execution.Timeouts[k] = v
		}
	}
	out.Execution.AllowShell = base.Execution.AllowShell && repo.Execution.AllowShell
	out.Execution.EnvAllow = intersect(base.Execution.EnvAllow, repo.Execution.EnvAllow)
	out.Trust.Enabled = base.Trust.Enabled && repo.Trust.Enabled
	// Repair is the looser setting: the repository may turn it off only.
	if !base.GuardRepair() || !repo.GuardRepair() {
		off := false
		out.Guard.Repair = &off
	}
	if repo.Trust.CleanApprovals > out.Trust.CleanApprovals {
		out.Trust.CleanApprovals = repo.Trust.CleanApprovals
	}
	// A repository may narrow the capabilities its allow rules may
	// pre-approve (keep the entries the operator's cover), never widen them.
	if repo.ClaudeCode.HonorAllow != nil {
		out.ClaudeCode.HonorAllow = []string{}
		for _, e := range repo.ClaudeCode.HonorAllow {
			if _, ok := base.HonorsAllow(e); ok {
				out.ClaudeCode.HonorAllow = appendNew(out.ClaudeCode.HonorAllow, e)
			}
		}
	}
	return &out
}

func appendNew(l []string, s string) []string {
	for _, x := range l {
		if x == s {
			return l
		}
	}
	return append(l, s)
}

func union(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range [][]string{a, b} {
		for _, s := range l {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	sort.Strings(out)
	return out
}

func intersect(a, b []string) []string {
	in := map[string]bool{}
	for _, s := range b {
		in[s] = true
	}
	var out []string
	for _, s := range a {
		if in[s] {
			out = append(out, s)
		}
	}
	return out
}

func minPos(a, b int) int {
	if b > 0 && (a <= 0 || b < a) {
		return b
	}
	return a
}

func durLess(a, b string) bool {
	x, err1 := time.ParseDuration(a)
	y, err2 := time.ParseDuration(b)
	return err1 == nil && err2 == nil && x < y
}

// DefaultSetupNetwork is the setup phase's network when the policy names
// none: the package registries of the projects whose setup agentos
// detects (docs/project-config.md), and PyPI's for a repository's own
// pip commands.
var DefaultSetupNetwork = []string{"proxy.golang.org:443", "sum.golang.org:443", "registry.npmjs.org:443", "pypi.org:443", "files.pythonhosted.org:443"}

// SetupNetwork is the allow-list of the setup phase's commands:
// setup.network.allow, else DefaultSetupNetwork; empty is no network.
func (p *Policy) SetupNetwork() []string {
	if p.Setup.Network.Allow == nil {
		return append([]string(nil), DefaultSetupNetwork...)
	}
	return append([]string{}, p.Setup.Network.Allow...)
}

// DefaultSetupTimeout bounds each setup command when
// execution.timeouts has no setup.run.
const DefaultSetupTimeout = 15 * time.Minute

// SetupTimeout is the time each setup command may take:
// execution.timeouts.setup.run, else DefaultSetupTimeout.
func (p *Policy) SetupTimeout() time.Duration {
	if d, ok := p.Execution.Timeouts["setup.run"]; ok {
		if v, err := time.ParseDuration(d); err == nil && v > 0 {
			return v
		}
	}
	return DefaultSetupTimeout
}

// SandboxLimits are the process limits of sandboxed commands (zero
// fields: the sandbox's defaults).
func (p *Policy) SandboxLimits() sandbox.Limits {
	var l sandbox.Limits
	if d, err := time.ParseDuration(p.Limits.CPUTime); err == nil && d > 0 {
		l.CPU = d
	}
	l.Memory = uint64(max(p.Limits.MemoryMB, 0)) << 20
	l.Processes = uint64(max(p.Limits.Processes, 0))
	l.FileSize = uint64(max(p.Limits.FileSizeMB, 0)) << 20
	l.OpenFiles = uint64(max(p.Limits.OpenFiles, 0))
	return l
}

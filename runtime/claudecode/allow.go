package claudecode

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/toolrule"
)

// AllowRule is one permissions.allow rule agentos can match a call
// against. It pre-approves a call only where the operator's policy.yaml
// lists the call's capability in claudeCode.honorAllow (Preapprover);
// otherwise allow rules are ignored (a repository's settings only
// tighten). docs/claude-code.md, "Permissions".
type AllowRule struct {
	Raw    string // as written
	Source string // the settings file
	// tools are the agentos tools (or mcp.server.* globs) the rule names.
	tools []string
	// set is the rule's argument for Bash, Read and Edit/Write/MultiEdit
	// (a command, a path; bare, it allows every use); nil for the others,
	// which are matched by name alone.
	set *toolrule.Set
	fam string // Bash | Read | Edit | "" (by name)
}

// allowFamilies are the Claude Code tools whose allow rule takes an
// argument, and the agentos tools each names: a Bash rule binds every
// tool that runs a command line (test.run and lint.run run the
// repository's configured command), as the deny rules do.
var allowFamilies = map[string]struct {
	fam   string
	tools []string
}{
	"Bash":      {"Bash", []string{"process.run", "test.run", "lint.run"}},
	"Read":      {"Read", []string{"repo.read", "repo.search"}},
	"Edit":      {"Edit", []string{"repo.patch", "repo.write"}},
	"Write":     {"Edit", []string{"repo.patch", "repo.write"}},
	"MultiEdit": {"Edit", []string{"repo.patch", "repo.write"}},
}

// parseAllow reads one allow entry; problem says why it can pre-approve
// nothing.
func parseAllow(file, raw string) (r AllowRule, problem string) {
	r = AllowRule{Raw: raw, Source: file}
	name, spec, hasSpec := raw, "", false
	if i := strings.IndexByte(raw, '('); i >= 0 {
		if i == 0 || !strings.HasSuffix(raw, ")") {
			return r, "not a rule: write Tool or Tool(argument)"
		}
		name, spec, hasSpec = strings.TrimSpace(raw[:i]), strings.TrimSpace(raw[i+1:len(raw)-1]), true
		if spec == "" {
			return r, "an empty argument; write the name alone for every use"
		}
	} else if strings.ContainsAny(raw, ") \t") {
		return r, "not a rule: write Tool or Tool(argument)"
	}
	if f, ok := allowFamilies[name]; ok {
		set, err := toolrule.Parse([]string{raw}, nil)
		if err != nil {
			return r, err.Error()
		}
		r.set, r.fam, r.tools = set, f.fam, f.tools
		return r, ""
	}
	if hasSpec {
		return r, fmt.Sprintf("an argument is matched only for Bash (a command), Read and Edit/Write/MultiEdit (a path); a %s rule with one pre-approves nothing", name)
	}
	tools, known := resolvePermissionName(name)
	switch {
	case !known:
		return r, "not a tool name agentos knows (Claude Code's Bash, Read, Edit, Write, MultiEdit, Grep, Glob, mcp__server__tool)"
	case len(tools) == 0:
		return r, "agentos has no such tool"
	}
	r.tools = tools
	return r, ""
}

// names reports whether the rule names the agentos tool.
func (r AllowRule) names(tool string) bool { return toolrule.MatchTool(r.tools, tool) }

// Matches reports whether the rule allows the call: its tool, and for
// Bash, Read and Edit rules its command (process.run's arguments, the
// configured command of test.run and lint.run) or paths (the read path,
// the paths a write changes, which must be known). risk is the kernel's
// assessment of the call.
func (r AllowRule) Matches(tool string, args json.RawMessage, risk kernel.Risk) bool {
	if !r.names(tool) {
		return false
	}
	switch r.fam {
	case "":
		return true
	case "Bash":
		if tool == "process.run" {
			return r.set.CheckArgs(tool, args) == nil
		}
		// test.run, lint.run: the command the kernel assessed.
		return r.set.Empty() || (risk.Command != "" && r.set.CheckCommand(tool, risk.Command, "") == nil)
	case "Read":
		return r.set.CheckArgs(tool, args) == nil
	case "Edit":
		return len(risk.Paths) > 0 && r.set.CheckWrite(tool, risk.Paths) == nil
	}
	return false
}

// honoured returns the operator's claudeCode.honorAllow entries that
// overlap the tools the rule names (an entry covers one of them, or one
// of them, an mcp.server.* glob, covers the entry).
func (r AllowRule) honoured(honorAllow []string) []string {
	var out []string
	for _, e := range honorAllow {
		for _, t := range r.tools {
			if coversName(e, t) || coversName(t, e) {
				out = append(out, e)
				break
			}
		}
	}
	return out
}

// coversName: a is b, or a is prefix.* and b is under prefix.
func coversName(a, b string) bool {
	if a == b {
		return true
	}
	prefix, ok := strings.CutSuffix(a, "*")
	return ok && strings.HasSuffix(prefix, ".") && len(prefix) > 1 && strings.HasPrefix(b, prefix)
}

// Honour is what the operator lets the allow rules do: the capabilities
// of claudeCode.honorAllow (HonorsAllow), and whether the working tree
// holds untrusted code (a fork's pull request), whose rules loosen
// nothing.
type Honour struct {
	HonorAllow  []string
	HonorsAllow func(capability string) (entry string, ok bool)
	Untrusted   bool
}

// Preapprover returns the kernel's Preapprove for these rules under the
// Honour given to Under (nil when nothing may be pre-approved): the first allow rule, in the files'
// order, that matches a call whose capability the operator lists. The
// kernel consults it only for an approval the policy's level asks for,
// after the deny and ask rules (kernel.Kernel.Preapprove).
func (p *Permissions) Preapprover() func(tool string, args json.RawMessage, risk kernel.Risk) *kernel.Preapproval {
	if p == nil {
		return nil
	}
	h := p.honour
	if h.Untrusted || len(p.Allow) == 0 || len(h.HonorAllow) == 0 || h.HonorsAllow == nil {
		return nil
	}
	rules := append([]AllowRule(nil), p.Allow...)
	return func(tool string, args json.RawMessage, risk kernel.Risk) *kernel.Preapproval {
		entry, ok := h.HonorsAllow(tool)
		if !ok {
			return nil
		}
		for _, r := range rules {
			if r.Matches(tool, args, risk) {
				return &kernel.Preapproval{Rule: r.Raw, Source: r.Source + " permissions.allow", Policy: "claudeCode.honorAllow " + entry}
			}
		}
		return nil
	}
}

// allowWarnings are the warnings about a file's allow rules under h:
// every rule when nothing may be pre-approved (the default, or untrusted
// code), else each rule that cannot be matched and the rules that name
// no capability the operator lists.
func (s section) allowWarnings(h Honour) []Warning {
	if len(s.allow) == 0 {
		return nil
	}
	var raws, idle []string
	var out []Warning
	for _, e := range s.allow {
		raws = append(raws, e.rule.Raw)
		if e.problem != "" {
			out = append(out, Warning{Source: s.file, Setting: "permissions.allow", Rule: e.rule.Raw, Effect: EffectIgnored, Message: "pre-approves nothing: " + e.problem})
		} else if len(e.rule.honoured(h.HonorAllow)) == 0 {
			idle = append(idle, e.rule.Raw)
		}
	}
	w := Warning{Source: s.file, Setting: "permissions.allow", Rule: strings.Join(raws, ", "), Effect: EffectIgnored}
	switch {
	case h.Untrusted:
		w.Message = fmt.Sprintf("%d allow rule(s) not honoured: the working tree holds untrusted code (a fork's pull request), whose settings only tighten", len(raws))
		return []Warning{w}
	case len(h.HonorAllow) == 0:
		w.Message = fmt.Sprintf("%d allow rule(s) not honoured: a repository's settings only tighten unless the operator's policy.yaml lists capabilities in claudeCode.honorAllow; approvals follow policy.yaml", len(raws))
		return []Warning{w}
	}
	if len(idle) > 0 {
		w.Rule = strings.Join(idle, ", ")
		w.Message = fmt.Sprintf("%d allow rule(s) pre-approve nothing: the operator's policy.yaml claudeCode.honorAllow lists only %s", len(idle), strings.Join(h.HonorAllow, ", "))
		out = append(out, w)
	}
	return out
}

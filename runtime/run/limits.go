package run

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/toolrule"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
)

// ToolLimits narrow every run of an engine from outside the repository
// (the Action's allowed_tools and disallowed_tools), in agentos names; an
// entry may be "prefix.*" (kernel.InScope). Allow, when not nil, is the
// most a run may use: it replaces the default tools (the default skill,
// a skill without allowed-tools, and the mounted MCP servers' tools) and
// is intersected with a skill's own allowed-tools. Deny is removed from
// every scope, a skill's or a workflow persona's. Neither bypasses policy:
// an allowed tool still needs the approval policy asks for.
//
// Rules are the lists' permission rules with an argument (Bash(go
// test:*), Read(docs/**), Edit(src/**)): the kernel refuses a call whose
// command or path they do not allow (kernel.Call.Rules).
type ToolLimits struct {
	Allow []string
	Deny  []string
	Rules *toolrule.Set
}

// Empty reports whether the limits narrow nothing.
func (l ToolLimits) Empty() bool { return l.Allow == nil && len(l.Deny) == 0 && l.Rules.Empty() }

// Permits reports whether the limits let a run use the tool at all.
func (l ToolLimits) Permits(name string) bool {
	return (l.Allow == nil || kernel.InScope(l.Allow, name)) && !kernel.InScope(l.Deny, name)
}

// Narrow applies the limits to a scope: its entries within Allow (an
// entry "p.*" meeting a narrower allowed "p.x" becomes "p.x"), less every
// entry a denied one covers. A nil scope (no restriction) becomes Allow,
// or stays nil when there is no Allow.
// A "p.*" entry under which only some tools are denied stays; Limit's
// Dispatch refuses those tools call by call.
func (l ToolLimits) Narrow(scope []string) []string {
	if l.Empty() {
		return scope
	}
	base := scope
	if base == nil {
		if l.Allow == nil {
			// Unscoped (a run recorded before every run had a scope): it
			// stays unrestricted but for Deny, which forCall enforces.
			return nil
		}
		base = l.Allow
	}
	out := []string{}
	seen := map[string]bool{}
	add := func(e string) {
		if !seen[e] && !kernel.InScope(l.Deny, e) {
			seen[e] = true
			out = append(out, e)
		}
	}
	for _, e := range base {
		if l.Allow == nil {
			add(e)
			continue
		}
		for _, a := range l.Allow {
			switch {
			case kernel.InScope([]string{a}, e):
				add(e)
			case kernel.InScope([]string{e}, a):
				add(a)
			}
		}
	}
	return out
}

// forCall is the scope the kernel checks a call against: the narrowed
// scope, and when the limits do not permit the call's tool, without the
// entries that would let it through, so that the kernel refuses it at
// its scope step (tool.rejected, TOOL_NOT_ALLOWED) before tool.invoke.
func (l ToolLimits) forCall(scope []string, name string) []string {
	n := l.Narrow(scope)
	if l.Permits(name) {
		return n
	}
	out := []string{}
	for _, e := range n {
		if !kernel.InScope([]string{e}, name) {
			out = append(out, e)
		}
	}
	return out
}

// record is the limits as skill.invoke records them ("tool_limits").
func (l ToolLimits) record() map[string]any {
	m := map[string]any{}
	if l.Allow != nil {
		m["allowed"] = l.Allow
	}
	if len(l.Deny) > 0 {
		m["disallowed"] = l.Deny
	}
	if !l.Rules.Empty() {
		r := map[string]any{}
		if len(l.Rules.AllowRaw) > 0 {
			r["allowed"] = l.Rules.AllowRaw
		}
		if len(l.Rules.DenyRaw) > 0 {
			r["disallowed"] = l.Rules.DenyRaw
		}
		m["rules"] = r
	}
	return m
}

// sameAsRecorded checks a skill.invoke against the limits: a run resumed
// (another Actions job) under other limits than it recorded would act on
// a scope its log does not show, so it stops instead.
func (l ToolLimits) sameAsRecorded(ev event.Event) error {
	var p struct {
		Limits *struct {
			Allowed    []string `json:"allowed"`
			Disallowed []string `json:"disallowed"`
			Rules      *struct {
				Allowed    []string `json:"allowed"`
				Disallowed []string `json:"disallowed"`
			} `json:"rules"`
		} `json:"tool_limits"`
	}
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return &NonDeterminismError{Seq: ev.Seq, Want: "a skill.invoke payload", Got: err.Error()}
	}
	var rec ToolLimits
	if p.Limits != nil {
		rec = ToolLimits{Allow: p.Limits.Allowed, Deny: p.Limits.Disallowed}
		if r := p.Limits.Rules; r != nil {
			// Parsed again only to be shown; compared as written.
			rec.Rules = &toolrule.Set{AllowRaw: r.Allowed, DenyRaw: r.Disallowed}
		}
	}
	var recAllow, recDeny, allow, deny []string
	if rec.Rules != nil {
		recAllow, recDeny = rec.Rules.AllowRaw, rec.Rules.DenyRaw
	}
	if !l.Rules.Empty() {
		allow, deny = l.Rules.AllowRaw, l.Rules.DenyRaw
	}
	if reflect.DeepEqual(rec.Allow, l.Allow) && slices.Equal(rec.Deny, l.Deny) && slices.Equal(recAllow, allow) && slices.Equal(recDeny, deny) {
		return nil
	}
	return &NonDeterminismError{Seq: ev.Seq, Want: fmt.Sprintf("tool limits %s (this run's)", l.String()), Got: fmt.Sprintf("tool limits %s (recorded; resume with the allowed_tools and disallowed_tools the run started with)", rec.recordedString(recAllow, recDeny))}
}

// recordedString is String for limits read back from a log, whose rules
// are kept as written.
func (l ToolLimits) recordedString(allow, deny []string) string {
	if len(allow)+len(deny) == 0 {
		l.Rules = nil
		return l.String()
	}
	return fmt.Sprintf("allowed %v, disallowed %v, rules allowed %q, disallowed %q", l.Allow, l.Deny, allow, deny)
}

// String is the limits for messages.
func (l ToolLimits) String() string {
	if l.Empty() {
		return "none"
	}
	if l.Rules.Empty() {
		return fmt.Sprintf("allowed %v, disallowed %v", l.Allow, l.Deny)
	}
	return fmt.Sprintf("allowed %v, disallowed %v, rules allowed %q, disallowed %q", l.Allow, l.Deny, l.Rules.AllowRaw, l.Rules.DenyRaw)
}

// rules is the argument rules a call carries (nil when there are none).
func (l ToolLimits) rules() *toolrule.Set {
	if l.Rules.Empty() {
		return nil
	}
	return l.Rules
}

// Limit narrows every run of the engine: its tools see each call with
// the narrowed scope, and skill.invoke records the limits.
func (e *Engine) Limit(l ToolLimits) {
	if l.Empty() {
		return
	}
	e.Limits = l
	e.Tools = limitedTools{in: e.Tools, l: l}
}

// limitedTools applies ToolLimits to every call the engine makes.
type limitedTools struct {
	in Tools
	l  ToolLimits
}

// Specs implements Tools: the model is offered only the tools the limits
// permit.
func (t limitedTools) Specs(scope []string) []provider.ToolSpec {
	var out []provider.ToolSpec
	for _, s := range t.in.Specs(t.l.Narrow(scope)) {
		if t.l.Permits(s.Name) {
			out = append(out, s)
		}
	}
	return out
}

// Dispatch implements Tools.
func (t limitedTools) Dispatch(ctx context.Context, rec kernel.Recorder, c Call) error {
	c.AllowedTools = t.l.forCall(c.AllowedTools, c.Name)
	c.Rules = t.l.rules()
	return t.in.Dispatch(ctx, rec, c)
}

// ExecuteApproved implements Tools: an approval granted before the
// limits changed does not let a now-disallowed tool run.
func (t limitedTools) ExecuteApproved(ctx context.Context, rec kernel.Recorder, c Call, p Pending, by string) error {
	c.AllowedTools = t.l.forCall(c.AllowedTools, c.Name)
	c.Rules = t.l.rules()
	return t.in.ExecuteApproved(ctx, rec, c, p, by)
}

// Seed implements HistorySeeder when the wrapped tools do.
func (t limitedTools) Seed(history []event.Event) error {
	if sd, ok := t.in.(HistorySeeder); ok {
		return sd.Seed(history)
	}
	return nil
}

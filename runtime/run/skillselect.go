package run

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentos/agentos/kernel/toolrule"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/hooks"
	"github.com/agentos/agentos/runtime/skills"
)

// Skills are selected as Claude Code selects them: by description. The
// Planner sees every skill's name and description (skillCatalog) and
// names the ones whose instructions the work needs in plan_v1's "skills";
// their bodies are then loaded into the context of the roles after it
// (Worker, Reviewer) and their allowed-tools scope the Worker's tools.
// A skill whose triggers: match the request is loaded at intake, before
// the Lead; triggers are an optional hint, and
// a skill in the Agent Skills format (name and description only) is
// selected by the Planner alone.

// maxPlannerSkills bounds how many skills one plan may load: each body
// goes into every later role's context, and the plan is model output.
const maxPlannerSkills = 4

// maxNamesRead and maxSkillName bound what of the plan's (model-written)
// skills member is read and recorded: skill_frontmatter_v1 allows names
// of up to 64 characters.
const (
	maxNamesRead = 20
	maxSkillName = 64
)

// catalogCap bounds the catalog's length in the Planner's input.
const catalogCap = 16 << 10

// invokeSkill loads sk: skill.invoke (by says who chose it: "" for the
// triggers at intake, "planner"), then the SkillStart hooks, which may
// deny the run. The skill's allowed-tools narrow the Worker's tools.
func (s *state) invokeSkill(ctx context.Context, sk *skills.Skill, by, scopeKind string) error {
	p := map[string]any{"skill": sk.Name, "source": sk.Root}
	if sk.AllowedTools != nil {
		p["allowed_tools"] = sk.AllowedTools
	}
	if by != "" {
		p["selected_by"] = by
	}
	if scopeKind != "" {
		p["scope"] = scopeKind
	}
	defaultTools := scopeKind == "default" || scopeKind == "default_tools"
	// The mounted MCP servers' tools join a scope of the default tools or
	// of a built-in skill, which cannot name them; a repository skill's
	// allowed-tools name exactly what it gets, and the servers it leaves
	// out are recorded (docs/claude-code.md).
	extra := s.e.DefaultScopeExtra
	if s.e.Limits.Allow != nil {
		extra = nil
	}
	if len(extra) > 0 && (defaultTools || sk.TakesMounted()) {
		p["scope_extra"] = extra
	} else if out := skills.Unnamed(sk.AllowedTools, extra); len(out) > 0 {
		p["mcp_excluded"] = out
	}
	// A skill the Planner loads by description replaces the built-in
	// default scope loaded at intake, which only stood for "no skill": the
	// Worker gets the skill's tools, not the default ones besides.
	if by == "planner" && len(s.skills) == 1 && s.skills[0].Name == skills.DefaultName {
		p["replaces"] = skills.DefaultName
	}
	// The engine's limits (the Action's allowed_tools / disallowed_tools):
	// an allowed list takes the place of the default tools and their MCP
	// extra, and narrows a skill's own list; the scope that results is
	// recorded as "limited_scope" beside the limits.
	lim := s.e.Limits
	if lim.Allow != nil && (defaultTools || sk.AllowedTools == nil) {
		c := *sk
		c.AllowedTools, c.ToolEntries = lim.Allow, nil
		sk = &c
	}
	// What the scope is made of is read back from the skill.invoke (the
	// recorded one when re-executing), so that a log keeps the scope it
	// was run with.
	compose := func(payload []byte) (loaded []*skills.Skill, extraScoped bool, allowed []string) {
		loaded = append(append([]*skills.Skill(nil), s.skills...), sk)
		extraScoped = s.defaultScoped || event.Field(payload, "scope_extra") != nil
		if event.FieldString(payload, "replaces") == skills.DefaultName && len(s.skills) == 1 {
			loaded = []*skills.Skill{sk}
			extraScoped = event.Field(payload, "scope_extra") != nil
		}
		allowed = scope(loaded)
		if extraScoped && lim.Allow == nil {
			allowed = append(allowed, s.e.DefaultScopeExtra...)
		}
		if !lim.Empty() {
			allowed = lim.Narrow(allowed)
		}
		return loaded, extraScoped, allowed
	}
	planned, err := json.Marshal(p)
	if err != nil {
		return err
	}
	loaded, _, allowed := compose(planned)
	if !lim.Empty() {
		p["tool_limits"] = lim.record()
		p["limited_scope"] = allowed
	}
	rules, err := toolrule.ForScope(scopeEntries(loaded))
	if err != nil {
		// Skills keep only the entries ForScope reads (skills.Discover).
		return fmt.Errorf("skill %s: %w", sk.Name, err)
	}
	if rules.Empty() {
		rules = nil
	} else {
		p["tool_rules"] = rules.AllowRaw
	}
	ev, err := s.f.emit(ctx, event.SkillInvoke, "runtime", p, "")
	if err != nil {
		return err
	}
	if got := event.FieldString(ev.Payload, "skill"); got != sk.Name {
		// A recorded run loaded another skill: another scope.
		return &NonDeterminismError{Seq: ev.Seq, Want: "skill.invoke " + sk.Name, Got: "skill.invoke " + got}
	}
	if err := lim.sameAsRecorded(ev); err != nil {
		return err
	}
	loaded, extraScoped, allowed := compose(ev.Payload)
	if rules, err = toolrule.ForScope(scopeEntries(loaded)); err != nil {
		return fmt.Errorf("skill %s: %w", sk.Name, err)
	}
	if rules.Empty() {
		rules = nil
	}
	if len(loaded) == 1 && len(s.skills) == 1 {
		// The default scope was replaced: its invocation ends here.
		if _, err := s.f.emit(ctx, event.SkillComplete, "runtime", map[string]any{"skill": s.skills[0].Name, "ok": true, "reason": "replaced by skill " + sk.Name}, ""); err != nil {
			return err
		}
	}
	s.skills, s.defaultScoped, s.allowed, s.skillRules = loaded, extraScoped, allowed, rules
	d, err := s.f.hook(ctx, s.e.Hooks, hooks.Input{Event: hooks.SkillStart, SessionID: s.f.j.SessionID(), Cwd: s.in.Cwd, Skill: sk.Name})
	if err != nil {
		return err
	}
	if d.Decision == hooks.Deny {
		return &Failure{Status: StatusDenied, Class: ClassPolicyDenied, Code: "GATE_DENIED", Reason: "SkillStart hook: " + d.Reason, NextAction: "change the hook configuration"}
	}
	return nil
}

// scope is the Worker's tool scope for the loaded skills: the union of
// their allowed-tools, a skill that declares none counting with the
// default skill's tools (skills.DefaultTools), so that no run is unscoped.
func scope(loaded []*skills.Skill) []string {
	if len(loaded) == 0 {
		return nil
	}
	out := []string{}
	seen := map[string]bool{}
	for _, sk := range loaded {
		tools := sk.AllowedTools
		if tools == nil {
			tools = skills.DefaultTools
		}
		for _, t := range tools {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	return out
}

// scopeEntries are the loaded skills' allowed-tools as toolrule.ForScope
// reads them: each skill's enforceable entries as written (Bash(git
// diff:*) keeps its argument), else its agentos tools, else the default
// skill's tools. Their argument rules add up, as the scope does.
func scopeEntries(loaded []*skills.Skill) []string {
	var out []string
	for _, sk := range loaded {
		switch {
		case sk.ToolEntries != nil:
			out = append(out, sk.ToolEntries...)
		case sk.AllowedTools != nil:
			out = append(out, sk.AllowedTools...)
		default:
			out = append(out, skills.DefaultTools...)
		}
	}
	return out
}

func (s *state) loaded(name string) bool {
	for _, sk := range s.skills {
		if sk.Name == name {
			return true
		}
	}
	return false
}

// skillCatalog lists every skill's name and description for the Planner.
func (s *state) skillCatalog() string {
	if s.e.Skills == nil {
		return ""
	}
	list := s.e.Skills.List()
	n := 0
	for _, sk := range list {
		if sk.ModelInvocable {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n\n## Skills\nSkills are instructions for kinds of work. To have the Worker follow one, put its name in the plan's \"skills\" array (at most %d); its full text is then loaded for the Worker and the Reviewer. Choose by the descriptions; omit \"skills\" or leave it empty when none fits.\n", maxPlannerSkills)
	for _, sk := range list {
		if !sk.ModelInvocable {
			continue
		}
		line := fmt.Sprintf("- %s: %s", sk.Name, oneLine(sk.Description))
		if s.loaded(sk.Name) {
			line += " [already loaded]"
		}
		if b.Len()+len(line) > catalogCap {
			b.WriteString("- … (more skills not listed: the catalog is capped)\n")
			break
		}
		b.WriteString(line + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// selectSkills loads the skills the plan names. The choice is recorded as
// skill.selected, with what was offered and what could not be loaded (a
// name that is no skill, one over the limit); a plan without "skills"
// made no choice and records nothing, so logs of runs before this step
// re-execute unchanged.
func (s *state) selectSkills(ctx context.Context, plan json.RawMessage) error {
	var p struct {
		Skills json.RawMessage `json:"skills"`
	}
	if err := json.Unmarshal(plan, &p); err != nil || len(p.Skills) == 0 || s.e.Skills == nil {
		return nil
	}
	offered := []string{}
	for _, sk := range s.e.Skills.List() {
		if sk.ModelInvocable {
			offered = append(offered, sk.Name)
		}
	}
	var names []string
	if err := json.Unmarshal(p.Skills, &names); err != nil && string(p.Skills) != "null" {
		// Model output: a malformed choice loads nothing, and says so.
		_, err := s.f.emit(ctx, event.SkillSelected, "planner", map[string]any{"by": "planner", "offered": offered, "chosen": []string{}, "invalid": "skills is not an array of skill names"}, s.f.lastResponse)
		return err
	}
	chosen, unknown, already, over := []string{}, []string{}, []string{}, []string{}
	var load []*skills.Skill
	seen := map[string]bool{}
	for i, name := range names {
		if i >= maxNamesRead {
			over = append(over, fmt.Sprintf("(%d more names not read)", len(names)-i))
			break
		}
		name = strings.TrimSpace(name)
		if len(name) > maxSkillName {
			// No skill has such a name; the log keeps a bounded copy.
			unknown = append(unknown, name[:maxSkillName]+"…")
			continue
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		sk, ok := s.e.Skills.Get(name)
		switch {
		case !ok || !sk.ModelInvocable:
			// Not offered: a name that is no skill, or a skill its author
			// reserved for people (disable-model-invocation).
			unknown = append(unknown, name)
		case s.loaded(name):
			chosen = append(chosen, name)
			already = append(already, name)
		case len(load) >= maxPlannerSkills:
			over = append(over, name)
		default:
			chosen = append(chosen, name)
			load = append(load, sk)
		}
	}
	payload := map[string]any{"by": "planner", "offered": offered, "chosen": chosen}
	if len(unknown) > 0 {
		payload["unknown"] = unknown
	}
	if len(already) > 0 {
		payload["already_loaded"] = already
	}
	if len(over) > 0 {
		payload["over_limit"] = over
	}
	if _, err := s.f.emit(ctx, event.SkillSelected, "planner", payload, s.f.lastResponse); err != nil {
		return err
	}
	for _, sk := range load {
		kind := "selected"
		if sk.AllowedTools == nil {
			kind = "default_tools"
		}
		if err := s.invokeSkill(ctx, sk, "planner", kind); err != nil {
			return err
		}
	}
	return nil
}

// skillsProperty is the plan's "skills" member. plan_v1 (frozen) allows
// members it does not name; the structured-output schema the Planner is
// asked for names this one, so that a provider's strict mode lets the
// model write it.
var skillsProperty = map[string]any{
	"description": "names of skills from the catalog whose instructions the worker should follow",
	"type":        "array",
	"items":       map[string]any{"type": "string"},
}

// planSchema is plan_v1 with the skills member, when there is a catalog.
func (s *state) planSchema(src json.RawMessage) json.RawMessage {
	if s.skillCatalog() == "" {
		return src
	}
	var doc map[string]any
	if err := json.Unmarshal(src, &doc); err != nil {
		return src
	}
	props, ok := doc["properties"].(map[string]any)
	if !ok {
		return src
	}
	props["skills"] = skillsProperty
	out, err := json.Marshal(doc)
	if err != nil {
		return src
	}
	return out
}

package run

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/skills"
	"github.com/agentos/agentos/schemas"
	builtin "github.com/agentos/agentos/skills"
)

// capturingProvider keeps every request it passes on.
type capturingProvider struct {
	p    provider.Provider
	mu   sync.Mutex
	reqs []provider.CompletionRequest
}

func (c *capturingProvider) Name() string { return c.p.Name() }
func (c *capturingProvider) Complete(ctx context.Context, r provider.CompletionRequest) (provider.CompletionResponse, error) {
	c.mu.Lock()
	c.reqs = append(c.reqs, r)
	c.mu.Unlock()
	return c.p.Complete(ctx, r)
}

func (c *capturingProvider) role(role string) []provider.CompletionRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []provider.CompletionRequest
	for _, r := range c.reqs {
		if r.Role == role {
			out = append(out, r)
		}
	}
	return out
}

// agentSkill is a skill in the Agent Skills format: name and description
// only, no triggers.
const agentSkill = "---\nname: release-notes\ndescription: Writes release notes from the changes since the last tag, in the project's CHANGELOG style.\nallowed-tools: echo\n---\n# Release notes\n\nEcho the notes with the echo tool.\n"

func selectionFixture(t *testing.T, plan string) (*fixture, *capturingProvider) {
	t.Helper()
	sc := `
roles:
  lead: [{text: '` + leadOK + `'}]
  planner: [{text: '` + plan + `'}]
  worker:
` + echoCall + "\n" + finalReport + `
  reviewer: [{text: '` + reviewPass + `'}]
`
	f := newFixture(t, sc, nil)
	repo := fstest.MapFS{
		".claude/skills/release-notes/SKILL.md": {Data: []byte(agentSkill)},
		// Claude Code's field for a skill only a person starts.
		".claude/skills/deploy/SKILL.md": {Data: []byte("---\nname: deploy\ndescription: Deploys the release to production.\ndisable-model-invocation: true\n---\nDeploy.\n")},
	}
	sk, problems := skills.Discover(schemas.MustDefault(), skills.Root{Name: "builtin", FS: builtin.FS}, skills.Root{Name: ".claude/skills", FS: repo, Dir: ".claude/skills"})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	f.eng.Skills = sk
	cp := &capturingProvider{p: f.eng.Provider}
	f.eng.Provider = cp
	return f, cp
}

func TestPlannerSelectsSkillByDescription(t *testing.T) {
	plan := `{"steps":[{"id":"s1","description":"echo the notes"}],"risks":[],"needs_advisor":false,"skills":["release-notes","no-such-skill","release-notes","deploy"],"schema_version":"v1"}`
	f, cp := selectionFixture(t, plan)
	ctx := context.Background()
	out, err := f.mgr.Start(ctx, f.eng, StartRequest{SessionID: "sel", Prompt: "write the release notes for v2.3"})
	if err != nil || out.Status != "completed" {
		t.Fatalf("%+v %v", out, err)
	}
	evs := f.events(t, "sel")
	verify(t, evs)

	// The Planner saw the catalog, and was asked for the skills member.
	pl := cp.role("planner")
	if len(pl) != 1 {
		t.Fatalf("%d planner calls", len(pl))
	}
	in := pl[0].Messages[len(pl[0].Messages)-1].Content
	for _, want := range []string{"## Skills", "- release-notes: Writes release notes from the changes since the last tag", "- fix: Finds the cause of a bug", "- greet: "} {
		if !strings.Contains(in, want) {
			t.Errorf("planner input lacks %q:\n%s", want, in)
		}
	}
	if rs := pl[0].ResponseSchema; rs == nil || !strings.Contains(string(rs.Schema), `"skills"`) {
		t.Errorf("the plan schema sent does not name skills: %s", rs.Schema)
	}
	if strings.Contains(in, "- deploy:") {
		t.Error("a skill with disable-model-invocation was offered to the planner")
	}
	// No skill before the plan: the request matches no trigger.
	if strings.Contains(pl[0].Messages[0].Content, "# Release notes") {
		t.Error("the skill body reached the planner before it was chosen")
	}

	// The choice is an event; the chosen skill is invoked, scoped and closed.
	var sel, inv *event.Event
	for i := range evs {
		switch evs[i].Type {
		case event.SkillSelected:
			sel = &evs[i]
		case event.SkillInvoke:
			inv = &evs[i]
		}
	}
	if sel == nil || inv == nil {
		t.Fatalf("no skill.selected / skill.invoke: %s", types(evs))
	}
	if got := string(sel.Payload); !strings.Contains(got, `"chosen":["release-notes"]`) || !strings.Contains(got, `"unknown":["no-such-skill","deploy"]`) || !strings.Contains(got, `"offered":["fix","greet","release-notes"]`) {
		t.Errorf("skill.selected %s", got)
	}
	if event.FieldString(inv.Payload, "skill") != "release-notes" || event.FieldString(inv.Payload, "selected_by") != "planner" || inv.Seq < sel.Seq {
		t.Errorf("skill.invoke %s", inv.Payload)
	}
	if !strings.Contains(types(evs), "skill.complete") {
		t.Errorf("skill not completed: %s", types(evs))
	}
	// The Worker got the body and only the skill's tools.
	wk := cp.role("worker")
	if !strings.Contains(wk[0].Messages[0].Content, "# Release notes") {
		t.Errorf("worker system prompt lacks the skill body:\n%s", wk[0].Messages[0].Content)
	}
	if len(wk[0].Tools) != 1 || wk[0].Tools[0].Name != "echo" {
		t.Errorf("worker tools %v, want the skill's [echo]", wk[0].Tools)
	}

	// Re-execution decides the same from the recorded plan.
	history, prompt, _, _ := runHistory(evs, evs[1].RunID)
	again, _ := selectionFixture(t, plan)
	if _, err := Reexecute(ctx, again.eng, prompt, history); err != nil {
		t.Fatalf("re-execution diverged: %v", err)
	}
}

func TestPlannerSkillChoiceEdges(t *testing.T) {
	cases := []struct {
		name, plan, prompt string
		selected           string // substring of skill.selected's payload; "" = no event
		invokes            int
	}{
		{"no skills member: no choice recorded", planOK, "write the release notes", "", 0},
		{"empty choice is recorded", strings.Replace(planOK, `"risks"`, `"skills":[],"risks"`, 1), "write the release notes", `"chosen":[]`, 0},
		{"malformed choice loads nothing", strings.Replace(planOK, `"risks"`, `"skills":"release-notes","risks"`, 1), "write the release notes", `"invalid":"skills is not an array of skill names"`, 0},
		{"over-long and too many names are bounded", strings.Replace(planOK, `"risks"`, `"skills":["`+strings.Repeat("x", 100)+`","a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q","r","s","t","u"],"risks"`, 1), "write the release notes", `"over_limit":["(2 more names not read)"]`, 0},
		{"trigger-loaded skill is not loaded twice", strings.Replace(planOK, `"risks"`, `"skills":["greet"],"risks"`, 1), "greet the world", `"already_loaded":["greet"]`, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, _ := selectionFixture(t, c.plan)
			out, err := f.mgr.Start(context.Background(), f.eng, StartRequest{SessionID: "e", Prompt: c.prompt})
			if err != nil || out.Status != "completed" {
				t.Fatalf("%+v %v", out, err)
			}
			evs := f.events(t, "e")
			verify(t, evs)
			var sel string
			invokes := 0
			for _, e := range evs {
				switch e.Type {
				case event.SkillSelected:
					sel = string(e.Payload)
				case event.SkillInvoke:
					// The default skill, loaded at intake when no trigger
					// matches, is not the Planner's choice.
					if event.FieldString(e.Payload, "skill") != "default" {
						invokes++
					}
				}
			}
			if (c.selected == "") != (sel == "") || !strings.Contains(sel, c.selected) || invokes != c.invokes {
				t.Errorf("skill.selected %q (want %q), %d invokes (want %d)", sel, c.selected, invokes, c.invokes)
			}
		})
	}
}

// TestSkillArgumentRulesReachTheKernel: a skill's allowed-tools rule with
// an argument (Bash(git diff:*)) is recorded in skill.invoke and carried
// on every Worker call while the skill is loaded (Call.SkillRules), where
// the kernel enforces it; a skill of bare names carries none.
func TestSkillArgumentRulesReachTheKernel(t *testing.T) {
	for _, c := range []struct {
		tools string
		rules string // the recorded tool_rules; "" = none
	}{
		// The chosen skill replaces the default skill loaded at intake:
		// only its own rule binds the Worker (no bare Read, Edit from
		// the default tools).
		{"echo Bash(git diff:*)", `["Bash(git diff:*)"]`},
		{"echo", ""},
	} {
		plan := `{"steps":[{"id":"s1","description":"echo the notes"}],"risks":[],"needs_advisor":false,"skills":["diff-notes"],"schema_version":"v1"}`
		f, _ := selectionFixture(t, plan)
		repo := fstest.MapFS{".claude/skills/diff-notes/SKILL.md": {Data: []byte("---\nname: diff-notes\ndescription: Writes notes from the diff.\nallowed-tools: " + c.tools + "\n---\nEcho the notes.\n")}}
		sk, problems := skills.Discover(schemas.MustDefault(), skills.Root{Name: "builtin", FS: builtin.FS}, skills.Root{Name: ".claude/skills", FS: repo, Dir: ".claude/skills"})
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		f.eng.Skills = sk
		out, err := f.mgr.Start(context.Background(), f.eng, StartRequest{SessionID: "rules", Prompt: "write notes from the diff"})
		if err != nil || out.Status != "completed" {
			t.Fatalf("%s: %+v %v", c.tools, out, err)
		}
		evs := f.events(t, "rules")
		verify(t, evs)
		var recorded string
		for _, e := range evs {
			if e.Type == event.SkillInvoke && event.FieldString(e.Payload, "skill") == "diff-notes" {
				recorded = string(event.Field(e.Payload, "tool_rules"))
			}
		}
		if recorded != c.rules {
			t.Errorf("%s: skill.invoke tool_rules %s, want %s", c.tools, recorded, c.rules)
		}
		f.kernel.mu.Lock()
		calls := f.kernel.calls
		f.kernel.mu.Unlock()
		if len(calls) == 0 {
			t.Fatalf("%s: no call reached the kernel", c.tools)
		}
		for _, call := range calls {
			if got := call.SkillRules; (c.rules == "") != got.Empty() || (got != nil && strings.Join(got.AllowRaw, ",") != "Bash(git diff:*)") {
				t.Errorf("%s: call %s carries skill rules %v", c.tools, call.Name, got)
			}
		}
	}
}

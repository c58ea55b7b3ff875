package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/agentos/agentos/kernel/toolrule"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/hooks"
	"github.com/agentos/agentos/runtime/journal"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/skills"
	"github.com/agentos/agentos/runtime/untrusted"
	"github.com/agentos/agentos/schemas"
	"github.com/agentos/agentos/workflows"
)

// Engine is the Plan-Work-Review loop: INTAKE → LEAD →
// (ADVISOR) → PLAN → WORK → REVIEW → DONE, with REVIEW fail → REWORK →
// WORK bounded by the profile's max_rework. It is re-executable: every
// effect goes through the run's effects, which replay the recorded log
// before acting live, so the same code resumes a paused run in any process.
type Engine struct {
	Provider provider.Provider
	Tools    Tools
	Hooks    *hooks.Registry
	Skills   *skills.Registry
	Schemas  *schemas.Registry
	Profile  provider.Profile
	// Repo reads repository configuration (role prompt overrides, memory).
	// It must be jailed to the workspace (os.Root.FS); nil means none.
	Repo fs.FS
	// PolicyNoRepair is the kernel policy's guard.repair: false. Guard
	// repair is on when neither it nor the profile's guard_repair turns
	// it off (GuardRepair).
	PolicyNoRepair bool
	// DefaultScopeExtra widens a scope built from the default tools (the
	// built-in default skill, or a loaded skill without allowed-tools)
	// with tools configured for the repository rather than built in: the
	// mounted MCP servers' tools, as "mcp.<server>.*". They stay gated by
	// policy (approval unless allowed by name).
	DefaultScopeExtra []string
	// Notices are recorded by a run before its next event (notices.go);
	// nil: none.
	Notices *Notices
	// Limits narrow every run's tools from outside the repository (set
	// with Limit, which also wraps Tools so that the kernel enforces them).
	Limits ToolLimits
	// Plane runs workflow-plane cycles: a run whose Input.Workflow is
	// set is executed by the cycle Plane.Open returns, over the same
	// effects as any run (so it pauses and resumes the same way). Nil
	// refuses workflow runs.
	Plane Plane
}

// GuardRepair reports whether new runs of this engine let the tool guard
// repair calls (the repair switch). A run records the setting in
// its session.start and a resumed run keeps what it recorded.
func (e *Engine) GuardRepair() bool { return e.Profile.Repair() && !e.PolicyNoRepair }

// Input is one run's request.
type Input struct {
	Prompt      string
	Cwd         string // workspace root, for hook commands
	Transcript  string // path of events.jsonl, for hook commands
	PrevSummary string // the previous run's outcome, if any
	RoleTurns   map[string]int
	Source      string // startup | resume
	// NoRepair turns guard repair off for the run (recorded in
	// session.start).
	NoRepair bool
	// Workflow is a workflow-plane request (recorded in run.started as
	// "workflow"): the run executes it through Engine.Plane instead of one
	// Plan-Work-Review pass.
	Workflow json.RawMessage

	ctl *control // the manager's cancel handle; nil when not cancellable
	// rawPrompt is the request as the user wrote it, before the RunManager
	// redacted it for the log (Prompt): only the UserPromptSubmit hooks of
	// a live start see it, and what they record is redacted
	// (hooks.RedactPrompt). Empty: Prompt is all there is.
	rawPrompt string
}

// Result is how Execute ended when it did not fail.
type Result struct {
	Paused  bool
	Pending []Pending
	Output  string
	Report  json.RawMessage
	Usage   provider.Usage
}

// Resolution is a maintainer's answer to a pending approval.
type Resolution struct {
	Decision string // approve | deny | stale | cancelled
	By       string
	Reason   string
}

type state struct {
	e       *Engine
	f       *effects
	in      Input
	prompt  string
	skills  []*skills.Skill // loaded skills, in the order they were invoked
	allowed []string
	// skillRules are the argument rules of the loaded skills'
	// allowed-tools (nil: none), for the Worker's calls.
	skillRules *toolrule.Set
	// defaultScoped: a loaded skill's scope came from the default tools,
	// so Engine.DefaultScopeExtra applies.
	defaultScoped bool
	// writePaths is the Worker's write scope for the current pass (a
	// workflow persona's role-permissions); nil: unrestricted.
	writePaths []string
	turns      map[string]int
	calls      int
	usage      provider.Usage
	approvals  map[string]Resolution
	// evidenceReworked: a report the log did not support was sent back to
	// the Worker (once per run).
	evidenceReworked bool
}

// Execute runs (or re-runs over its recorded history) one run.
func (e *Engine) Execute(ctx context.Context, j *journal.Journal, in Input, history []event.Event) (Result, error) {
	if sd, ok := e.Tools.(HistorySeeder); ok && len(history) > 0 {
		if err := sd.Seed(history); err != nil {
			return Result{}, err
		}
	}
	s := newState(e, j, in, history)
	s.f.j = stopGate{eventLog: s.f.j, ctx: ctx, ctl: in.ctl}
	res, err := s.run(ctx)
	res.Usage = s.usage
	if err != nil && len(s.skills) > 0 && !res.Paused {
		var nd *NonDeterminismError
		if !errors.As(err, &nd) {
			// Recorded even when a deadline ended the run: the skills'
			// invocations must be closed in the log either way.
			for _, sk := range s.skills {
				if _, cerr := s.f.emit(context.WithoutCancel(ctx), event.SkillComplete, "runtime", map[string]any{"skill": sk.Name, "ok": false, "reason": err.Error()}, ""); cerr != nil {
					err = errors.Join(err, cerr)
					break
				}
			}
		}
	}
	return res, err
}

func newState(e *Engine, j *journal.Journal, in Input, history []event.Event) *state {
	s := &state{e: e, f: &effects{j: j, history: history, stream: e.Profile.Stream, notices: e.Notices}, in: in, prompt: in.Prompt, turns: map[string]int{}, approvals: map[string]Resolution{}}
	for k, v := range in.RoleTurns {
		s.turns[k] = v
	}
	for _, ev := range history {
		if ev.Type == event.ApprovalResolved {
			s.approvals[event.FieldString(ev.Payload, "approval_id")] = Resolution{Decision: event.FieldString(ev.Payload, "decision"), By: event.FieldString(ev.Payload, "by"), Reason: event.FieldString(ev.Payload, "reason")}
		}
	}
	return s
}

func (s *state) run(ctx context.Context) (Result, error) {
	d, err := s.f.hook(ctx, s.e.Hooks, hooks.Input{Event: hooks.SessionStart, SessionID: s.f.j.SessionID(), Cwd: s.in.Cwd, Transcript: s.in.Transcript, Source: s.in.Source})
	if err != nil {
		return Result{}, err
	}
	if d.Decision == hooks.Deny {
		return Result{}, &Failure{Status: StatusDenied, Class: ClassPolicyDenied, Code: "GATE_DENIED", Reason: "SessionStart hook: " + d.Reason, NextAction: "change the hook configuration or ask a maintainer"}
	}
	submitted := s.prompt
	if s.in.rawPrompt != "" {
		submitted = s.in.rawPrompt
	}
	d, err = s.f.hook(ctx, s.e.Hooks, hooks.Input{Event: hooks.UserPromptSubmit, SessionID: s.f.j.SessionID(), Cwd: s.in.Cwd, Transcript: s.in.Transcript, Prompt: submitted})
	if err != nil {
		return Result{}, err
	}
	switch d.Decision {
	case hooks.Deny:
		return Result{}, &Failure{Status: StatusDenied, Class: ClassPolicyDenied, Code: "PROMPT_DENIED", Reason: "UserPromptSubmit hook: " + d.Reason, NextAction: "rephrase the request"}
	case hooks.Transform:
		var p struct{ Prompt string }
		if err := json.Unmarshal(d.Output, &p); err == nil {
			// Whatever a hook wrote, the model and the log get no card
			// number.
			s.prompt = hooks.RedactPrompt(p.Prompt)
		}
	}
	// Every run has a tool scope (the fail-closed table): the skill
	// whose triggers match the request, loaded at intake, or
	// the built-in default skill; the Planner may load others by
	// description (selectSkills), which widen it to their tools.
	if sk, scope := s.selectSkill(); sk != nil {
		if err := s.invokeSkill(ctx, sk, "", scope); err != nil {
			return Result{}, err
		}
	}
	// The setup phase, before the agent phase (setupphase.go).
	if err := s.setup(ctx); err != nil {
		return Result{}, err
	}

	var res Result
	if s.in.Workflow != nil {
		res, err = s.cycle(ctx)
	} else {
		res, err = s.pass(ctx)
	}
	if err != nil || res.Paused {
		return res, err
	}
	for _, sk := range s.skills {
		if _, err := s.f.emit(ctx, event.SkillComplete, "runtime", map[string]any{"skill": sk.Name, "ok": true}, ""); err != nil {
			return Result{}, err
		}
	}
	if _, err := s.f.emit(ctx, event.OutputMessage, "worker", map[string]any{"text": res.Output, "role": "worker"}, ""); err != nil {
		return Result{}, err
	}
	return res, nil
}

// pass is one Plan-Work-Review pass over s.prompt: LEAD → (ADVISOR) →
// PLAN → WORK → REVIEW → DONE, with rework. It returns the last worker
// report and its output, or a paused Result.
func (s *state) pass(ctx context.Context) (Result, error) {
	if err := s.transition(ctx, "INTAKE", "LEAD", "lead", ""); err != nil {
		return Result{}, err
	}
	directive, err := s.roleJSON(ctx, "lead", "lead_directive_v1", []provider.Message{
		{Role: provider.RoleSystem, Content: s.system("lead")},
		{Role: provider.RoleUser, Content: s.leadInput()},
	})
	if err != nil {
		return Result{}, err
	}
	from := "LEAD"
	if event.FieldBool(directive, "needs_advisor") {
		if err := s.transition(ctx, "LEAD", "ADVISOR", "advisor", "lead asked for outside advice"); err != nil {
			return Result{}, err
		}
		directive, err = s.roleJSON(ctx, "advisor", "lead_directive_v1", []provider.Message{
			{Role: provider.RoleSystem, Content: s.system("advisor")},
			{Role: provider.RoleUser, Content: "User request:\n" + s.prompt + "\n\nLead directive:\n" + string(directive)},
		})
		if err != nil {
			return Result{}, err
		}
		from = "ADVISOR"
	}
	if err := s.transition(ctx, from, "PLAN", "planner", ""); err != nil {
		return Result{}, err
	}
	plan, err := s.roleJSON(ctx, "planner", "plan_v1", []provider.Message{
		{Role: provider.RoleSystem, Content: s.system("planner")},
		{Role: provider.RoleUser, Content: s.plannerInput(directive)},
	})
	if err != nil {
		return Result{}, err
	}
	if _, err := s.f.emit(ctx, event.ArtifactEmitted, "planner", artifact("plan", "plan.json", plan), ""); err != nil {
		return Result{}, err
	}
	if err := s.selectSkills(ctx, plan); err != nil {
		return Result{}, err
	}

	maxRework := s.e.Profile.Limits.MaxRework
	feedback := ""
	from = "PLAN"
	for round := 0; ; round++ {
		if err := s.transition(ctx, from, "WORK", "worker", ""); err != nil {
			return Result{}, err
		}
		report, ev, res, err := s.checkedWork(ctx, directive, plan, feedback)
		if err != nil || res.Paused {
			return res, err
		}
		if err := s.transition(ctx, "WORK", "REVIEW", "reviewer", ""); err != nil {
			return Result{}, err
		}
		input := "Intent:\n" + event.FieldString(directive, "intent") + "\n\nplan_v1:\n" + string(plan) + "\n\nworker_report_v1 (written by the worker, not by you):\n" + string(report)
		if ev != nil {
			input += "\n\nEvidence (produced by agentos from this run's event log, not by the worker): every tool call with its outcome, the commands' exit codes, the changed files, the tests:\n" + ev.reviewerText()
		}
		review, err := s.roleJSON(ctx, "reviewer", "review_result_v1", []provider.Message{
			{Role: provider.RoleSystem, Content: s.system("reviewer")},
			{Role: provider.RoleUser, Content: input},
		})
		if err != nil {
			return Result{}, err
		}
		if _, err := s.f.emit(ctx, event.ArtifactEmitted, "reviewer", artifact("review", "review.json", review), ""); err != nil {
			return Result{}, err
		}
		pass := event.FieldString(review, "verdict") == "pass"
		feedback = event.FieldString(review, "feedback")
		if pass {
			d, err := s.f.hook(ctx, s.e.Hooks, hooks.Input{Event: hooks.Stop, SessionID: s.f.j.SessionID(), Cwd: s.in.Cwd, StopActive: round > 0})
			if err != nil {
				return Result{}, err
			}
			// A Stop hook that blocks stopping sends the work back once more,
			// within the rework budget (Claude Code's "decision: block").
			if d.Decision != hooks.Deny || round >= maxRework {
				if err := s.transition(ctx, "REVIEW", "DONE", "reviewer", ""); err != nil {
					return Result{}, err
				}
				break
			}
			pass, feedback = false, "Stop hook: "+d.Reason
		}
		if !pass {
			if round >= maxRework {
				if err := s.transition(ctx, "REVIEW", "ESCALATED", "reviewer", "rework budget spent"); err != nil {
					return Result{}, err
				}
				return Result{}, &Failure{Status: StatusDenied, Class: ClassPolicyDenied, Code: "REVIEW_FAILED",
					Reason:     fmt.Sprintf("the reviewer rejected the work after %d rework round(s): %s", round, feedback),
					NextAction: "a maintainer should review the feedback and the partial work, then re-run with clearer instructions"}
			}
			if err := s.transition(ctx, "REVIEW", "REWORK", "reviewer", feedback); err != nil {
				return Result{}, err
			}
			from = "REWORK"
		}
	}
	rep := s.lastReport()
	return Result{Output: event.FieldString(rep, "output"), Report: rep}, nil
}

// checkedWork is WORK under the evidence contract (evidence.go): the
// Worker's report is recorded, then checked against the run's log. A
// command the environment could not run ends the run; an unsupported
// report goes back to the Worker once with the discrepancy quoted, and a
// second one ends the run. ev is nil for a run recorded before the
// contract.
func (s *state) checkedWork(ctx context.Context, directive, plan json.RawMessage, feedback string) (json.RawMessage, *evidence, Result, error) {
	for {
		report, res, err := s.work(ctx, directive, plan, feedback)
		if err != nil || res.Paused {
			return nil, nil, res, err
		}
		if _, err := s.f.emit(ctx, event.WorkerReport, "worker", report, ""); err != nil {
			return nil, nil, Result{}, err
		}
		ev, legacy, err := s.checkReport(ctx, report, plan)
		if err != nil || legacy {
			return report, nil, Result{}, err
		}
		if f := ev.failure(s.evidenceReworked); f != nil {
			return nil, nil, Result{}, f
		}
		if len(ev.Problems) == 0 {
			return report, ev, Result{}, nil
		}
		s.evidenceReworked = true
		if err := s.transition(ctx, "WORK", "REWORK", "runtime", "evidence: "+clip(strings.Join(ev.Problems, "; "), 500)); err != nil {
			return nil, nil, Result{}, err
		}
		if err := s.transition(ctx, "REWORK", "WORK", "worker", ""); err != nil {
			return nil, nil, Result{}, err
		}
		if feedback != "" {
			feedback += "\n\n"
		}
		feedback += ev.feedback()
	}
}

// selectSkill is the run's skill and why: the skill the prompt selects
// ("selected"), else the default skill ("default"). Every run has a tool
// scope: a selected skill without allowed-tools gets the default tools
// ("default_tools"). A run recorded before every run had a scope (its log
// has no skill.invoke where one would be) re-executes unscoped, as it ran.
func (s *state) selectSkill() (*skills.Skill, string) {
	var sk *skills.Skill
	if s.e.Skills != nil {
		sk = s.e.Skills.Select(s.prompt)
	}
	if sk != nil {
		if sk.AllowedTools != nil {
			return sk, "selected"
		}
		c := *sk
		c.AllowedTools = skills.DefaultTools
		return &c, "default_tools"
	}
	if next, ok := s.f.next(); ok && next.Type != event.SkillInvoke {
		return nil, ""
	}
	return s.e.Skills.Default(), "default"
}

func (s *state) lastReport() json.RawMessage {
	for i := len(s.f.history) - 1; i >= 0; i-- {
		if s.f.history[i].Type == event.WorkerReport {
			return s.f.history[i].Payload
		}
	}
	evs, err := s.f.j.Events(context.Background())
	if err != nil {
		return nil
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == event.WorkerReport {
			return evs[i].Payload
		}
	}
	return nil
}

func artifact(kind, name string, content []byte) map[string]any {
	return map[string]any{"kind": kind, "name": name, "digest": digestOf(content), "size": len(content), "media_type": "application/json", "content": string(content)}
}

func (s *state) transition(ctx context.Context, from, to, actor, reason string) error {
	p := map[string]any{"from": from, "to": to, "role": actor}
	if reason != "" {
		p["reason"] = reason
	}
	_, err := s.f.emit(ctx, event.AgentTransition, actor, p, "")
	return err
}

// rolePrompt returns .agent/roles/<role>.md from the repository, else the
// built-in canonical prompt.
func (s *state) rolePrompt(role string) string {
	if s.e.Repo != nil {
		if b, err := fs.ReadFile(s.e.Repo, ".agent/roles/"+role+".md"); err == nil && len(b) > 0 {
			return string(b)
		}
	}
	b, err := fs.ReadFile(workflows.FS, "roles/"+role+".md")
	if err != nil {
		return "# " + role + " role\n\nOutput JSON only."
	}
	return string(b)
}

const memoryCap = 8 << 10

func (s *state) memory() string {
	if s.e.Repo == nil {
		return ""
	}
	b, err := fs.ReadFile(s.e.Repo, ".agent/memory.md")
	if err != nil {
		return ""
	}
	if len(b) > memoryCap {
		b = append(b[:memoryCap], "\n[memory truncated]"...)
	}
	return string(b)
}

// system is a role's system message. The part every role shares (the
// selected skill, the repository's memory) comes first and the role's own
// prompt after it, so that consecutive calls of different roles, and runs
// on the same repository, share one prompt prefix that providers cache
// (OpenAI-compatible servers automatically, Anthropic at the cache_control
// mark the adapter sets at the end of the system prompt). What changes per
// run (the request, the previous run) goes in the user message.
func (s *state) system(role string) string {
	// The data rule ends every role's prompt, a repository's own role
	// prompt included.
	shared := s.sharedContext()
	if shared == "" {
		return s.rolePrompt(role) + "\n\n" + untrusted.Rule
	}
	return shared + "\n\n" + s.rolePrompt(role) + "\n\n" + untrusted.Rule
}

func (s *state) sharedContext() string {
	var b strings.Builder
	for i, sk := range s.skills {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "# Skill: %s\n\n%s\n", sk.Name, sk.Description)
		if body, err := sk.Body(); err == nil && strings.TrimSpace(body) != "" {
			b.WriteString("\n" + strings.TrimSpace(body) + "\n")
		}
	}
	if m := s.memory(); m != "" {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString("# Repository memory (.agent/memory.md)\n\n" + m)
	}
	return strings.TrimRight(b.String(), "\n")
}

// previousRun is the changing context of a session's earlier run.
func (s *state) previousRun() string {
	if s.in.PrevSummary == "" {
		return ""
	}
	return "\n\n## Previous run\n" + s.in.PrevSummary
}

func (s *state) leadInput() string {
	in := "User request:\n" + s.prompt
	if len(s.skills) > 0 {
		in += fmt.Sprintf("\n\nSelected skill: %s", s.skills[0].Name)
	}
	return in + s.previousRun()
}

func (s *state) plannerInput(directive json.RawMessage) string {
	return "lead_directive_v1:\n" + string(directive) + s.skillCatalog() + s.previousRun()
}

// checkBudget ends the run before a model call that the limits forbid.
func (s *state) checkBudget() error {
	l := s.e.Profile.Limits
	switch {
	case l.MaxTurns > 0 && s.calls >= l.MaxTurns:
		return &Failure{Status: StatusFailed, Class: ClassPolicyDenied, Code: "BUDGET_EXCEEDED", Reason: fmt.Sprintf("max_turns %d reached", l.MaxTurns), NextAction: "raise max_turns or narrow the request; the work so far is kept"}
	case l.MaxTokens > 0 && s.usage.InputTokens+s.usage.OutputTokens >= l.MaxTokens:
		return &Failure{Status: StatusFailed, Class: ClassPolicyDenied, Code: "BUDGET_EXCEEDED", Reason: fmt.Sprintf("max_tokens %d reached", l.MaxTokens), NextAction: "raise max_tokens or narrow the request; the work so far is kept"}
	case l.MaxCostUSD > 0 && s.usage.CostUSD >= l.MaxCostUSD:
		return &Failure{Status: StatusFailed, Class: ClassPolicyDenied, Code: "BUDGET_EXCEEDED", Reason: fmt.Sprintf("max_cost_usd %.2f reached ($%.4f spent)", l.MaxCostUSD, s.usage.CostUSD), NextAction: "raise max_cost_usd or narrow the request; the work so far is kept"}
	}
	return nil
}

// call makes one model call for a role; schema, if not nil, asks for a
// schema-bound answer (provider.ResponseSchema).
func (s *state) call(ctx context.Context, role string, msgs []provider.Message, tools []provider.ToolSpec, schema *provider.ResponseSchema) (provider.CompletionResponse, error) {
	if s.in.ctl.stopped() {
		return provider.CompletionResponse{}, s.in.ctl.failure()
	}
	if err := s.halt(); err != nil {
		return provider.CompletionResponse{}, err
	}
	if !s.f.replaying() {
		if err := s.checkBudget(); err != nil {
			return provider.CompletionResponse{}, err
		}
	}
	p := s.e.Profile
	req := provider.CompletionRequest{Role: role, Turn: s.turns[role], ResponseSchema: schema, Messages: msgs, Model: p.Model, Tools: tools, MaxTokens: p.MaxTokens, Temperature: p.Temperature, SchemaVersion: "v1"}
	cctx := ctx
	if idle := p.Limits.IdleTimeout.D(); idle > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, idle)
		defer cancel()
	}
	resp, err := s.f.complete(cctx, s.e.Provider, req)
	s.turns[role]++
	s.calls++
	if err != nil {
		var nd *NonDeterminismError
		if errors.As(err, &nd) {
			return resp, err
		}
		if ctx.Err() != nil || cctx.Err() != nil {
			return resp, &Failure{Status: StatusFailed, Class: ClassTimeout, Code: "TIMEOUT", Reason: role + " model call timed out", NextAction: "retry later or raise the time limits", Err: err}
		}
		var pe *provider.Error
		if errors.As(err, &pe) {
			class := ClassProviderError
			if pe.Status == 401 || pe.Status == 403 {
				class = ClassAuthError
			}
			return resp, &Failure{Status: StatusFailed, Class: class, Code: provider.CodeProviderError, Reason: fmt.Sprintf("%s call failed: %s", role, pe.Message), NextAction: "check the provider configuration and retry", Err: err}
		}
		return resp, err
	}
	s.usage = s.usage.Add(resp.Usage)
	return resp, nil
}

// responseSchema is the structured-output request for schemaID, or nil
// when the profile turns structured output off.
func (s *state) responseSchema(schemaID string) *provider.ResponseSchema {
	if !s.e.Profile.Structured() {
		return nil
	}
	src, ok := s.e.Schemas.Source(schemaID)
	if !ok {
		return nil
	}
	if schemaID == "plan_v1" {
		src = s.planSchema(src)
	}
	return &provider.ResponseSchema{Name: schemaID, Schema: src}
}

// repairRequest is the message of a repair turn; it quotes the validation
// error.
func repairRequest(schemaID string, final bool, verr error) string {
	what := "Your reply"
	if final {
		what = "Your final reply"
	}
	return fmt.Sprintf("%s is not valid %s: %v\nReply again with the corrected JSON object only.", what, schemaID, verr)
}

// roleJSON asks a role for JSON matching schemaID (with the provider's
// structured output), repairs what the local steps can, and otherwise
// spends one repair turn.
func (s *state) roleJSON(ctx context.Context, role, schemaID string, msgs []provider.Message) (json.RawMessage, error) {
	schema := s.responseSchema(schemaID)
	var problem error
	for attempt := 0; attempt < 2; attempt++ {
		resp, err := s.call(ctx, role, msgs, nil, schema)
		if err != nil {
			return nil, err
		}
		doc, verr := s.settle(ctx, role, schemaID, resp.Text, problem)
		if verr == nil {
			return doc, nil
		}
		if resp.FinishReason == provider.FinishSafety {
			return nil, refused(role, resp)
		}
		if problem != nil {
			problem = verr
			break
		}
		problem = verr
		if err := s.violation(ctx, role, schemaID, verr); err != nil {
			return nil, err
		}
		msgs = append(msgs,
			provider.Message{Role: provider.RoleAssistant, Content: resp.Text},
			provider.Message{Role: provider.RoleUser, Content: repairRequest(schemaID, false, verr)})
	}
	if err := s.violation(ctx, role, schemaID, problem); err != nil {
		return nil, err
	}
	return nil, malformed(role, schemaID, problem)
}

// CodeModelRefused: a role's model refused the request (finish reason
// safety: the API's refusal, a content filter) instead of answering.
const CodeModelRefused = "MODEL_REFUSED"

// refused ends a run whose model refused: the report quotes the refusal,
// which a repair turn would only ask again, and which "not valid JSON"
// would hide.
func refused(role string, resp provider.CompletionResponse) *Failure {
	what := strings.TrimSpace(resp.Text)
	if what == "" {
		what = "(no text)"
	}
	return &Failure{Status: StatusFailed, Class: ClassProviderError, Code: CodeModelRefused,
		Reason:     fmt.Sprintf("the %s model refused the request (finish reason safety): %q", role, clip(what, 300)),
		NextAction: "read the refusal, then rephrase the request or use another model for this role"}
}

func malformed(role, schemaID string, err error) *Failure {
	return &Failure{Status: StatusFailed, Class: ClassProviderError, Code: "MALFORMED_AGENT_MESSAGE", Reason: fmt.Sprintf("%s output is not valid %s after one repair turn: %v", role, schemaID, err), NextAction: "retry, or use a stronger model for this role"}
}

// settle parses a role's reply. A reply that needed a local repair, or
// came from a repair turn (afterRepair is the error that asked for it), is
// recorded as role.output_repaired, whose parent is the llm.response.
func (s *state) settle(ctx context.Context, role, schemaID, text string, afterRepair error) (json.RawMessage, error) {
	doc, step, problem, err := parseReply(text, schemaID, s.e.Schemas)
	if err != nil {
		return nil, err
	}
	p := map[string]any{"role": role, "schema_id": schemaID}
	switch {
	case afterRepair != nil:
		p["step"], p["problem"] = "repair_turn", afterRepair.Error()
		if step != "" {
			p["reply_step"] = step
		}
	case step != "":
		p["step"], p["problem"] = step, problem
	default:
		return doc, nil
	}
	if _, err := s.f.emit(ctx, event.RoleOutputRepaired, role, p, s.f.lastResponse); err != nil {
		return nil, err
	}
	return doc, nil
}

func (s *state) violation(ctx context.Context, role, schemaID string, verr error) error {
	p := map[string]any{"schema_id": schemaID, "message": verr.Error(), "boundary": "role_output:" + role}
	var ve *schemas.ValidationError
	if errors.As(verr, &ve) {
		p["pointer"], p["message"] = ve.Pointer, ve.Message
	}
	_, err := s.f.emit(ctx, event.SchemaViolation, role, p, "")
	return err
}

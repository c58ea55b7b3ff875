package run

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/runtime/event"
)

// The evidence contract: the Worker's report is checked against the run's
// log before the Reviewer sees it. A
// claim the log does not support goes back to the Worker once, with the
// discrepancy quoted; a second unsupported report ends the run failed
// (EVIDENCE_MISMATCH). A command the environment could not run (no
// sandbox, a missing toolchain) ends the run failed (ENVIRONMENT) whatever
// the report says. The check is a pure function of the recorded events,
// so replay and re-execution decide the same way, and it is recorded as
// an artifact.emitted of kind "evidence" by the runtime.

// Codes of the contract's failures (the terminal report's reason starts
// with them).
const (
	CodeEvidenceMismatch = "EVIDENCE_MISMATCH"
	CodeEnvironment      = "ENVIRONMENT"
	// CodeAuditIncomplete: the run would be completed, but its log lacks
	// an event type strict verify requires of a successful session
	// (replay.AuditMissing).
	CodeAuditIncomplete = "AUDIT_INCOMPLETE"
)

// evidenceKind is the artifact kind of a recorded evidence check.
const evidenceKind = "evidence"

// maxEvidenceCalls bounds the calls listed in the Reviewer's input (the
// latest ones); the check itself reads every call.
const maxEvidenceCalls = 60

// callRecord is one tool dispatch as the log shows it.
type callRecord struct {
	CallID   string   `json:"call_id"`
	Tool     string   `json:"tool"`
	OK       bool     `json:"ok"`
	Code     string   `json:"error_code,omitempty"`
	Error    string   `json:"error,omitempty"`
	Command  string   `json:"command,omitempty"`
	ExitCode *int     `json:"exit_code,omitempty"`
	Passed   *bool    `json:"passed,omitempty"`
	Files    []string `json:"changed_files,omitempty"`
	// Environment says why the command could not run at all (the
	// sandbox, a missing toolchain), when that is the outcome.
	Environment string `json:"environment,omitempty"`

	seq      int64
	stderr   string
	approval string
	finished bool
	fix      string
}

// isExec: a tool that runs a command in the sandbox.
func isExec(tool string) bool {
	return tool == "test.run" || tool == "lint.run" || tool == "process.run"
}

func isChange(tool string) bool { return tool == "repo.write" || tool == "repo.patch" }

// evidence is what agentos read from the log about the Worker's work.
type evidence struct {
	ProducedBy string       `json:"produced_by"`
	Calls      []callRecord `json:"calls"`
	Omitted    int          `json:"calls_omitted,omitempty"`
	Changed    []string     `json:"changed_files"`
	Tests      string       `json:"tests"`
	Problems   []string     `json:"problems,omitempty"`
	// EnvCause and EnvFix are set when a command could not run for an
	// environmental reason and nothing ran it since.
	EnvCause string `json:"environment_failure,omitempty"`
	EnvFix   string `json:"environment_fix,omitempty"`

	all        []callRecord
	lastChange int64
}

// collectCalls reads the tool dispatches of events, in order.
func collectCalls(evs []event.Event) []callRecord {
	var recs []callRecord
	open := map[string]int{} // call id → its unfinished record
	last := -1               // the record the latest tool.result finished
	at := func(e event.Event) int {
		id := event.FieldString(e.Payload, "call_id")
		if i, ok := open[id]; ok && !recs[i].finished {
			return i
		}
		recs = append(recs, callRecord{CallID: id, Tool: event.FieldString(e.Payload, "tool"), seq: e.Seq})
		open[id] = len(recs) - 1
		return len(recs) - 1
	}
	for _, e := range evs {
		switch e.Type {
		case event.ToolInvoke:
			i := at(e)
			if c := event.FieldString(event.Field(e.Payload, "args"), "command"); c != "" {
				recs[i].Command = c
			}
			last = -1
		case event.ApprovalRequested:
			i := at(e)
			recs[i].approval = event.FieldString(e.Payload, "approval_id")
			recs[i].Code, recs[i].Error = string(kernel.CodeApprovalRequired), "waiting for approval"
			last = -1
		case event.ApprovalResolved:
			id := event.FieldString(e.Payload, "approval_id")
			for i := range recs {
				if recs[i].approval == id && !recs[i].finished && event.FieldString(e.Payload, "decision") != "approve" && event.FieldString(e.Payload, "decision") != "stale" {
					recs[i].finished = true
					recs[i].Code = "APPROVAL_DENIED"
					recs[i].Error = "approval " + event.FieldString(e.Payload, "decision") + " by " + event.FieldString(e.Payload, "by")
				}
			}
		case event.ToolRejected:
			i := at(e)
			r := &recs[i]
			r.finished, r.OK, r.seq = true, false, e.Seq
			r.Code, r.Error = event.FieldString(e.Payload, "code"), event.FieldString(e.Payload, "message")
			last = -1
		case event.ToolResult:
			i := at(e)
			r := &recs[i]
			r.finished, r.seq = true, e.Seq
			r.OK = event.FieldBool(e.Payload, "ok")
			if r.OK {
				r.Code, r.Error = "", ""
				readResult(r, event.Field(e.Payload, "result"))
			} else {
				errObj := event.Field(e.Payload, "error")
				r.Code, r.Error = event.FieldString(errObj, "code"), event.FieldString(errObj, "message")
				readResult(r, event.Field(errObj, "details"))
				r.Files = nil
			}
			last = i
		case event.HookFired:
			if last >= 0 && event.FieldString(e.Payload, "hook") == "PostToolUse" && event.FieldString(e.Payload, "decision") == "deny" && recs[last].OK {
				recs[last].OK, recs[last].Files = false, nil
				recs[last].Code, recs[last].Error = string(kernel.CodeGateDenied), event.FieldString(e.Payload, "reason")
			}
		case event.SchemaViolation:
			if last >= 0 && strings.HasPrefix(event.FieldString(e.Payload, "boundary"), "tool_result:") && recs[last].OK {
				recs[last].OK, recs[last].Files = false, nil
				recs[last].Code, recs[last].Error = string(kernel.CodeSchemaViolation), event.FieldString(e.Payload, "message")
			}
		}
	}
	for i := range recs {
		if !recs[i].finished && recs[i].Code == "" {
			recs[i].Code, recs[i].Error = string(kernel.CodeToolRuntimeError), "the call recorded no result"
		}
		recs[i].Environment, recs[i].fix = environmental(recs[i])
		recs[i].Error = clip(recs[i].Error, 500)
	}
	return recs
}

// readResult reads what a command's or a change's result says.
func readResult(r *callRecord, res json.RawMessage) {
	if len(res) == 0 || res[0] != '{' {
		return
	}
	var p struct {
		Command  string `json:"command"`
		ExitCode *int   `json:"exit_code"`
		Passed   *bool  `json:"passed"`
		Stderr   string `json:"stderr"`
		Stdout   string `json:"stdout"`
		Path     string `json:"path"`
		Files    []struct {
			Path    string `json:"path"`
			OldPath string `json:"old_path"`
		} `json:"files"`
	}
	if json.Unmarshal(res, &p) != nil {
		return
	}
	if p.Command != "" {
		r.Command = p.Command
	}
	if p.ExitCode != nil && (isExec(r.Tool) || r.Command != "") {
		r.ExitCode = p.ExitCode
		passed := *p.ExitCode == 0
		if p.Passed != nil {
			passed = *p.Passed
		}
		r.Passed = &passed
		r.stderr = clip(p.Stderr+"\n"+p.Stdout, 2000)
	}
	if isChange(r.Tool) {
		if p.Path != "" {
			r.Files = append(r.Files, p.Path)
		}
		for _, f := range p.Files {
			if f.OldPath != "" && f.OldPath != f.Path {
				r.Files = append(r.Files, f.OldPath)
			}
			r.Files = append(r.Files, f.Path)
		}
	}
}

// environmental says why a command could not run for a reason outside the
// model's control, and what fixes it ("" when it ran, or failed on its
// own). The causes are the kernel's: SANDBOX_UNAVAILABLE (no sandbox, or
// it could not start the command), a sandbox that cannot be prepared (a
// path that must be hidden from commands, under Landlock), a command that
// could not be started, and the shell's 127 (not found) and 126 (not
// executable).
func environmental(r callRecord) (cause, fix string) {
	if !isExec(r.Tool) {
		return "", ""
	}
	what := r.Tool
	if r.Command != "" {
		what = fmt.Sprintf("%s (%s)", r.Tool, r.Command)
	}
	msg := strings.TrimSpace(r.Error)
	lower := strings.ToLower(msg + "\n" + r.stderr)
	// A command that exited 0 ran, whatever its output says.
	failed := r.ExitCode == nil || *r.ExitCode != 0
	toolchain := "install the toolchain the command needs on the host, or make it visible to the sandbox (AGENTOS_SANDBOX_READONLY=/path/to/toolchain); agentos doctor shows what commands can see"
	switch {
	case strings.Contains(lower, "must be hidden"):
		return fmt.Sprintf("%s could not run: the sandbox must hide a path inside the repository: %s", what, clip(msg, 400)),
			"move agentos's data directory out of the repository (--data, AGENTOS_DATA) and files policy.yaml workspace.denyPatterns names out of the worktree, or install bubblewrap (apt-get install bubblewrap)"
	case r.Code == string(kernel.CodeSandboxUnavailable):
		return fmt.Sprintf("%s could not run: the sandbox is unavailable: %s", what, clip(msg, 400)),
			"make a sandbox available: install bubblewrap (apt-get install bubblewrap) or run where Landlock is enabled; agentos doctor names what is missing"
	case r.Code == string(kernel.CodeToolRuntimeError) && (strings.Contains(lower, "cannot prepare the sandbox") || strings.Contains(lower, "sandbox:")):
		return fmt.Sprintf("%s could not run: the sandbox could not be set up: %s", what, clip(msg, 400)),
			"fix the sandbox setup (agentos doctor), e.g. install bubblewrap (apt-get install bubblewrap)"
	case r.Code == string(kernel.CodeToolRuntimeError) && strings.HasPrefix(lower, "cannot start "):
		return fmt.Sprintf("%s could not run: %s", what, clip(msg, 400)), toolchain
	case r.ExitCode != nil && *r.ExitCode == 127,
		failed && (strings.Contains(lower, "command not found") || strings.Contains(lower, "executable file not found") ||
			strings.Contains(lower, "execvp") && strings.Contains(lower, "no such file")):
		return fmt.Sprintf("%s could not run: command not found (exit %s)", what, exitText(r.ExitCode)), toolchain
	case r.ExitCode != nil && *r.ExitCode == 126:
		return fmt.Sprintf("%s could not run: the command is not executable (exit 126)", what),
			"make the command executable (chmod +x, a valid #! interpreter), or make its interpreter visible to the sandbox (AGENTOS_SANDBOX_READONLY)"
	}
	return "", ""
}

func exitText(c *int) string {
	if c == nil {
		return "unknown"
	}
	return fmt.Sprint(*c)
}

// testClaim finds a claim that tests pass in the Worker's words: "tests
// pass", "all tests passed", "the test suite is green", "tests are
// passing". A negation ("tests do not pass") does not match.
var testClaim = regexp.MustCompile(`(?i)\b(?:tests?|test suite|specs?)\s+(?:now\s+|all\s+|still\s+)?(?:pass(?:es|ed|ing)?|succeed(?:s|ed)?|(?:are|is)\s+(?:now\s+|all\s+)?(?:passing|green|ok))\b|\btests?:\s*(?:pass(?:ed)?|ok|green)\b`)

// testStep: a plan step about running or writing tests; one about
// reproducing a failure (testStepRed) does not claim they pass.
var (
	testStep    = regexp.MustCompile(`(?i)\btest(?:s|ing)?\b`)
	testStepRed = regexp.MustCompile(`(?i)\b(?:reproduc\w*|fail\w*|red)\b`)
)

type workerReport struct {
	Output    string   `json:"output"`
	Steps     []string `json:"steps_completed"`
	ToolCalls []string `json:"tool_calls_made"`
}

// checkEvidence checks a Worker report against the run's events up to it.
// plan is the run's plan_v1; testsOffered says the Worker could run
// test.run, so a completed plan step about tests claims they pass.
func checkEvidence(evs []event.Event, report, plan json.RawMessage, testsOffered bool) *evidence {
	ev := &evidence{ProducedBy: "agentos (read from this run's event log; not written by the worker)", Changed: []string{}}
	ev.all = collectCalls(evs)
	changed := map[string]bool{}
	for _, r := range ev.all {
		if r.OK && isChange(r.Tool) {
			ev.lastChange = r.seq
			for _, f := range r.Files {
				if !changed[f] {
					changed[f] = true
					ev.Changed = append(ev.Changed, f)
				}
			}
		}
	}
	sort.Strings(ev.Changed)
	ev.Calls = ev.all
	if n := len(ev.all); n > maxEvidenceCalls {
		ev.Calls, ev.Omitted = ev.all[n-maxEvidenceCalls:], n-maxEvidenceCalls
	}

	// Environmental failures: the last test.run or lint.run, or (when the
	// Worker ran neither) the last process.run, could not run at all.
	lastOf := map[string]*callRecord{}
	for i := range ev.all {
		if isExec(ev.all[i].Tool) && ev.all[i].finished {
			lastOf[ev.all[i].Tool] = &ev.all[i]
		}
	}
	for _, tool := range []string{"test.run", "lint.run", "process.run"} {
		r := lastOf[tool]
		if tool == "process.run" && (lastOf["test.run"] != nil || lastOf["lint.run"] != nil) {
			break
		}
		if r != nil && r.Environment != "" && ev.EnvCause == "" {
			ev.EnvCause, ev.EnvFix = r.Environment, r.fix
		}
	}

	// The tests: the last test.run, and whether one passed after the
	// last successful change.
	var lastTest, passAfter *callRecord
	for i := range ev.all {
		r := &ev.all[i]
		if r.Tool != "test.run" || !r.finished {
			continue
		}
		lastTest = r
		if r.OK && r.Passed != nil && *r.Passed && r.seq > ev.lastChange {
			passAfter = r
		}
	}
	ev.Tests = describeTest(lastTest, passAfter)

	var rep workerReport
	_ = json.Unmarshal(report, &rep)
	for _, c := range rep.ToolCalls {
		if why := ev.unsupported(c); why != "" {
			ev.Problems = append(ev.Problems, fmt.Sprintf("tool_calls_made claims %q, but %s", c, why))
		}
	}
	claim := ""
	for _, text := range append([]string{rep.Output}, rep.Steps...) {
		if testClaim.MatchString(text) {
			claim = fmt.Sprintf("the report says %q", clip(strings.TrimSpace(text), 200))
			break
		}
	}
	if claim == "" && testsOffered {
		claim = testStepClaim(rep.Steps, plan)
	}
	if claim != "" && passAfter == nil {
		ev.Problems = append(ev.Problems, fmt.Sprintf("%s, but no test.run passed (exit 0) after the last change: %s", claim, ev.Tests))
	} else if len(ev.Changed) > 0 && lastTest != nil && passAfter == nil {
		ev.Problems = append(ev.Problems, fmt.Sprintf("the run changed %s, but no test.run passed after the last change: %s", strings.Join(ev.Changed, ", "), ev.Tests))
	}
	return ev
}

// testStepClaim: steps_completed names a plan step about tests.
func testStepClaim(steps []string, plan json.RawMessage) string {
	var p struct {
		Steps []struct {
			ID          string `json:"id"`
			Description string `json:"description"`
		} `json:"steps"`
	}
	if json.Unmarshal(plan, &p) != nil {
		return ""
	}
	done := map[string]bool{}
	for _, s := range steps {
		done[strings.TrimSpace(s)] = true
	}
	for _, s := range p.Steps {
		if done[s.ID] && testStep.MatchString(s.Description) && !testStepRed.MatchString(s.Description) {
			return fmt.Sprintf("steps_completed includes plan step %s (%q)", s.ID, clip(s.Description, 120))
		}
	}
	return ""
}

func describeTest(last, passAfter *callRecord) string {
	switch {
	case passAfter != nil:
		return fmt.Sprintf("test.run %s passed (exit 0)", passAfter.CallID)
	case last == nil:
		return "test.run was never called"
	case last.Environment != "":
		return last.Environment
	case !last.OK:
		return fmt.Sprintf("the last test.run (%s) failed: %s %s", last.CallID, last.Code, clip(last.Error, 300))
	case last.Passed != nil && !*last.Passed:
		return fmt.Sprintf("the last test.run (%s) exited %s", last.CallID, exitText(last.ExitCode))
	}
	return fmt.Sprintf("the last test.run (%s) passed before the last change", last.CallID)
}

// unsupported says why a tool_calls_made entry has no successful call in
// the log ("" when it has one). An entry names a call as "tool:call_id",
// "call_id:tool", a call id, or a tool name, optionally followed by
// prose ("repo.write src/a.go").
func (ev *evidence) unsupported(claim string) string {
	c := strings.TrimSpace(claim)
	if i := strings.IndexAny(c, " \t(,"); i >= 0 {
		c = c[:i]
	}
	c = strings.TrimRight(c, ":")
	if c == "" {
		return "it names no call"
	}
	byID := func(id, tool string) (found bool, ok bool, last *callRecord) {
		for i := range ev.all {
			r := &ev.all[i]
			if r.CallID != id || (tool != "" && r.Tool != tool) {
				continue
			}
			found, last = true, r
			if r.OK {
				ok = true
			}
		}
		return
	}
	byTool := func(tool string) (found bool, ok bool, last *callRecord) {
		for i := range ev.all {
			r := &ev.all[i]
			if r.Tool != tool {
				continue
			}
			found, last = true, r
			if r.OK {
				ok = true
			}
		}
		return
	}
	verdict := func(found, ok bool, last *callRecord) (string, bool) {
		if !found {
			return "", false
		}
		if ok {
			return "", true
		}
		return fmt.Sprintf("the log has no successful tool.result for it (%s %s: %s)", last.Tool, last.Code, clip(last.Error, 200)), true
	}
	if i := strings.Index(c, ":"); i > 0 && i < len(c)-1 {
		a, b := c[:i], c[i+1:]
		if why, decided := verdict(byID(b, a)); decided {
			return why
		}
		if why, decided := verdict(byID(a, b)); decided {
			return why
		}
		if _, known, _ := byID(b, ""); known {
			return fmt.Sprintf("call %s was not a %s call", b, a)
		}
		if why, decided := verdict(byTool(a)); decided {
			return why
		}
		return "the log has no call " + b + " and no " + a + " call"
	}
	if why, decided := verdict(byID(c, "")); decided {
		return why
	}
	if why, decided := verdict(byTool(c)); decided {
		return why
	}
	return "the log has no call or tool by that name"
}

// feedback is the message that sends a mismatched report back to the
// Worker.
func (ev *evidence) feedback() string {
	var b strings.Builder
	b.WriteString("agentos checked your worker_report_v1 against this run's event log (this is not the reviewer's feedback). The log does not support it:\n")
	for _, p := range ev.Problems {
		b.WriteString("- " + p + "\n")
	}
	b.WriteString("Do the work the report claims (run the tools again and make them succeed), or report only what the log shows. This is the only round for it: a report the log does not support ends the run failed.")
	return b.String()
}

// reviewerText is the evidence as the Reviewer's input carries it.
func (ev *evidence) reviewerText() string {
	b, err := json.Marshal(ev)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// failure is the run's end when the evidence does not allow completed:
// an environmental failure, or (final) an unsupported report.
func (ev *evidence) failure(final bool) *Failure {
	if ev.EnvCause != "" {
		return &Failure{Status: StatusFailed, Class: ClassToolRuntimeError, Code: CodeEnvironment,
			Reason:     ev.EnvCause + "; the run's work was not checked by its tests",
			NextAction: ev.EnvFix + "; then run the request again"}
	}
	if len(ev.Problems) == 0 || !final {
		return nil
	}
	return &Failure{Status: StatusFailed, Class: ClassProviderError, Code: CodeEvidenceMismatch,
		Reason:     "the worker's report is not supported by the run's log after one rework round: " + strings.Join(ev.Problems, "; "),
		NextAction: "read the evidence artifact and the failing calls (agentos replay), fix what failed (the tests, the rejected call) or narrow the request, then re-run; a stronger worker model may help"}
}

// runEvents are the events of the run so far: the replayed history up to
// the cursor, else the journal's events of this run.
func (s *state) runEvents(ctx context.Context) ([]event.Event, error) {
	if s.f.pos < len(s.f.history) {
		return s.f.history[:s.f.pos], nil
	}
	all, err := s.f.j.Events(ctx)
	if err != nil {
		return nil, err
	}
	run := s.f.j.RunID()
	out := make([]event.Event, 0, len(all))
	for _, e := range all {
		if run == "" || e.RunID == run {
			out = append(out, e)
		}
	}
	return out, nil
}

// testsOffered: test.run is among the Worker's tools.
func (s *state) testsOffered() bool {
	if s.e.Tools == nil {
		return false
	}
	for _, sp := range s.e.Tools.Specs(s.allowed) {
		if sp.Name == "test.run" {
			return true
		}
	}
	return false
}

// checkReport runs the evidence check on the Worker's latest report and
// records it. legacy is true for a run recorded before the contract
// existed (its log has no evidence artifact after the worker.report): it
// re-executes as it ran, unchecked.
func (s *state) checkReport(ctx context.Context, report, plan json.RawMessage) (ev *evidence, legacy bool, err error) {
	if next, ok := s.f.next(); ok && !(next.Type == event.ArtifactEmitted && next.Actor == "runtime" && event.FieldString(next.Payload, "kind") == evidenceKind) {
		return nil, true, nil
	}
	evs, err := s.runEvents(ctx)
	if err != nil {
		return nil, false, err
	}
	ev = checkEvidence(evs, report, plan, s.testsOffered())
	content := []byte(ev.reviewerText())
	p := map[string]any{"kind": evidenceKind, "name": "evidence.json", "digest": digestOf(content), "size": len(content), "media_type": "application/json", "content": string(content)}
	if _, err := s.f.emit(ctx, event.ArtifactEmitted, "runtime", p, ""); err != nil {
		return nil, false, err
	}
	return ev, false, nil
}

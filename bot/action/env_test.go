package action

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func envFrom(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func baseEnv() map[string]string {
	return map[string]string{
		"GITHUB_EVENT_NAME":  "issue_comment",
		"GITHUB_EVENT_PATH":  "/tmp/event.json",
		"GITHUB_REPOSITORY":  "octo/repo",
		"RUNNER_TEMP":        "/tmp",
		"INPUT_GITHUB_TOKEN": "ghs_token",
	}
}

func TestFromEnvDefaultsAndInputs(t *testing.T) {
	m := baseEnv()
	m["INPUT_MAX_TURNS"] = "12"
	m["INPUT_MAX_COST_USD"] = "0.5"
	m["INPUT_TIMEOUT_MINUTES"] = "7"
	m["INPUT_ALLOWED_USERS"] = "alice, bob"
	m["INPUT_PROVIDER"] = "openai"
	m["INPUT_OPENAI_API_KEY"] = "sk-x"
	e, err := FromEnv(envFrom(m))
	if err != nil {
		t.Fatal(err)
	}
	if e.Inputs.Trigger != "/agent" || e.Inputs.ArtifactBranch != "agent-sessions" || e.APIURL != "https://api.github.com" {
		t.Errorf("defaults: %+v", e)
	}
	if e.Inputs.MaxTurns != 12 || e.Inputs.MaxCostUSD != 0.5 || e.Inputs.Timeout != 7*time.Minute {
		t.Errorf("budgets: %+v", e.Inputs)
	}
	if got := strings.Join(e.Inputs.AllowedUsers, "|"); got != "alice|bob" {
		t.Errorf("allowed users = %q", got)
	}
	if k, err := e.APIKey(); err != nil || k != "sk-x" {
		t.Errorf("APIKey = %q, %v", k, err)
	}
	if got := e.Secrets(); len(got) != 2 {
		t.Errorf("secrets = %v", got)
	}
}

func TestFromEnvTokenFallsBackToGITHUB_TOKEN(t *testing.T) {
	m := baseEnv()
	delete(m, "INPUT_GITHUB_TOKEN")
	m["GITHUB_TOKEN"] = "ghs_fallback"
	e, err := FromEnv(envFrom(m))
	if err != nil || e.Token != "ghs_fallback" {
		t.Fatalf("token = %q, %v", e.Token, err)
	}
}

func TestFromEnvReportsEveryProblem(t *testing.T) {
	m := map[string]string{"GITHUB_REPOSITORY": "no-slash", "INPUT_MAX_TURNS": "-1", "INPUT_MAX_COST_USD": "lots", "INPUT_ARTIFACT_BRANCH": "bad branch", "INPUT_LOG_ON_SESSION_BRANCH": "maybe", "INPUT_ALLOW_PULL_REQUEST_TARGET": "yes"}
	_, err := FromEnv(envFrom(m))
	var ee *EnvError
	if !errors.As(err, &ee) {
		t.Fatalf("err = %v, want *EnvError", err)
	}
	for _, want := range []string{"GITHUB_EVENT_NAME", "GITHUB_EVENT_PATH", "RUNNER_TEMP", "github_token", "not owner/name", "max_turns", "max_cost_usd", "artifact_branch", "log_on_session_branch", `allow_pull_request_target "yes" is not true or false`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestWorkflowCommandsEscape(t *testing.T) {
	var b bytes.Buffer
	Mask(&b, "a%b\nc")
	Errorf(&b, "line1\nline2")
	end := Group(&b, "x")
	end()
	want := "::add-mask::a%25b%0Ac\n::error::line1%0Aline2\n::group::x\n::endgroup::\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestWriteOutputs(t *testing.T) {
	p := filepath.Join(t.TempDir(), "out")
	o := Outputs{SessionID: "7-abc", Status: "paused", PRNumber: 3, Branch: "agent/7-abc", InputTokens: 10, OutputTokens: 5, CostUSD: 0.25}
	pairs := append(o.Pairs(), [2]string{"multi", "a\nstatus=forged"})
	if err := WriteOutputs(p, pairs); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	got := string(b)
	for _, want := range []string{"session_id=7-abc\n", "status=paused\n", "pr_number=3\n", "branch=agent/7-abc\n", "input_tokens=10\n", "output_tokens=5\n", "cost_usd=0.250000\n", "multi<<ghadelimiter_"} {
		if !strings.Contains(got, want) {
			t.Errorf("outputs file lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\nstatus=forged\nmulti") {
		t.Errorf("multi-line value not fenced:\n%s", got)
	}
}

func TestSummary(t *testing.T) {
	s := Summary(SummaryInput{
		Outputs:   Outputs{SessionID: "7-abc", Status: "completed", PRNumber: 3, Branch: "agent/7-abc", InputTokens: 100, OutputTokens: 20, CostUSD: 0.01},
		Event:     "pull_request_review",
		Plan:      []string{"find the bug", "fix it"},
		Tools:     map[string]int{"repo.patch": 1, "test.run": 2},
		Approvals: []string{"`ap-1` repo.patch: approve by alice"},
		Tests:     []string{"test.run: pass"},
		LogURL:    "https://example.test/log",
	})
	for _, want := range []string{"## agentos: completed", "`7-abc`", "#3", "1. find the bug", "| `test.run` | 2 |", "approve by alice", "test.run: pass", "[events.jsonl](https://example.test/log)", "$0.0100"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}

func TestFromEnvToolLists(t *testing.T) {
	m := baseEnv()
	// Commas and newlines both separate; a comma inside a rule's
	// parentheses does not; Claude Code's and agentos's names both work.
	m["INPUT_ALLOWED_TOOLS"] = "Read,Edit\nBash(go test ./...)\n  mcp__docs__search , Bash(git add:*, git commit:*)\ntest.run"
	m["INPUT_DISALLOWED_TOOLS"] = "Write\nmcp__github\nWebFetch,Bash(rm:*)"
	e, err := FromEnv(envFrom(m))
	if err != nil {
		t.Fatal(err)
	}
	in := e.Inputs
	if got := strings.Join(in.AllowedTools, " "); got != "repo.read repo.patch repo.write process.run mcp.docs.search test.run" {
		t.Errorf("allowed = %q", got)
	}
	// Bash(rm:*) refuses the commands it matches, not process.run.
	if got := strings.Join(in.DisallowedTools, " "); got != "repo.write repo.patch mcp.github.*" {
		t.Errorf("disallowed = %q", got)
	}
	notes := strings.Join(in.ToolNotes, "\n")
	if !strings.Contains(notes, "disallowed_tools: WebFetch: agentos has no such tool") || strings.Contains(notes, "with any arguments") {
		t.Errorf("notes:\n%s", notes)
	}
	// The rules with an argument are enforced by the kernel.
	if in.ToolRules == nil {
		t.Fatal("no ToolRules")
	}
	if got := strings.Join(in.ToolRules.AllowRaw, " | "); got != "Read | Edit | Bash(go test ./...) | Bash(git add:*, git commit:*)" {
		t.Errorf("allowed rules = %q", got)
	}
	if got := strings.Join(in.ToolRules.DenyRaw, " | "); got != "Write | Bash(rm:*)" {
		t.Errorf("disallowed rules = %q", got)
	}
	for cmd, ok := range map[string]bool{"go test ./...": true, "git commit -m x": true, "go test ./... -v": false, "rm -rf x": false} {
		if ref := in.ToolRules.CheckCommand("process.run", cmd, ""); (ref == nil) != ok {
			t.Errorf("%q: refusal %v, want allowed=%v", cmd, ref, ok)
		}
	}
	// A rule the kernel cannot enforce fails the Action.
	for _, bad := range []struct{ key, value, want string }{
		{"INPUT_DISALLOWED_TOOLS", "WebFetch(domain:evil.example)", "WebFetch rules (domain:…) are not supported"},
		{"INPUT_ALLOWED_TOOLS", "Read(~/.ssh/**)", "home-directory"},
		{"INPUT_ALLOWED_TOOLS", "Bash(git:* push)", "only at the end"},
	} {
		m := baseEnv()
		m[bad.key] = bad.value
		if _, err := FromEnv(envFrom(m)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s=%s: %v, want an error saying %q", bad.key, bad.value, err, bad.want)
		}
	}
	// Unset inputs limit nothing.
	e, err = FromEnv(envFrom(baseEnv()))
	if err != nil || e.Inputs.AllowedTools != nil || e.Inputs.DisallowedTools != nil || e.Inputs.ToolRules != nil {
		t.Errorf("unset: %v %v %v %v", e.Inputs.AllowedTools, e.Inputs.DisallowedTools, e.Inputs.ToolRules, err)
	}
}

// review and triage have nothing to work on in a schedule or
// workflow_dispatch run: the inputs are refused like any other bad input
// (the step fails before anything runs, exit code 2); GITHUB_RUN_ATTEMPT
// and GITHUB_ACTOR are read.
func TestScheduledEventInputs(t *testing.T) {
	for _, c := range []struct{ event, cycle, want string }{
		{"schedule", "review", `cycle "review" on schedule: the event has no pull request to review`},
		{"workflow_dispatch", "triage", `cycle "triage" on workflow_dispatch: the event has no issue to triage`},
		{"schedule", "fix", ""},
		{"schedule", "", ""},
		{"pull_request", "review", ""},
	} {
		m := baseEnv()
		m["GITHUB_EVENT_NAME"], m["INPUT_CYCLE"], m["INPUT_PROMPT"] = c.event, c.cycle, "nightly chores"
		_, err := FromEnv(envFrom(m))
		var ee *EnvError
		if c.want == "" && err != nil || c.want != "" && (!errors.As(err, &ee) || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s with cycle %q: %v, want %q", c.event, c.cycle, err, c.want)
		}
	}
	m := baseEnv()
	m["GITHUB_RUN_ATTEMPT"], m["GITHUB_ACTOR"] = "3", "alice"
	e, err := FromEnv(envFrom(m))
	if err != nil || e.RunAttempt != 3 || e.Actor != "alice" {
		t.Errorf("attempt %d actor %q: %v", e.RunAttempt, e.Actor, err)
	}
	if e, _ := FromEnv(envFrom(baseEnv())); e.RunAttempt != 1 {
		t.Errorf("default attempt = %d, want 1", e.RunAttempt)
	}
	m["GITHUB_RUN_ATTEMPT"] = "0"
	if _, err := FromEnv(envFrom(m)); err == nil || !strings.Contains(err.Error(), `GITHUB_RUN_ATTEMPT "0"`) {
		t.Errorf("attempt 0: %v", err)
	}
}

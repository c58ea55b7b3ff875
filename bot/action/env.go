// Package action is agentos's GitHub Actions mode: it reads the Actions
// environment and the action's inputs, turns the triggering event into the
// same Trigger the webhook server builds, and reports back through the
// Actions conventions (outputs, step summary, workflow commands, masks).
//
// In Actions every job is a fresh machine, so the session's event log on
// the artifact branch is the only state between the run that asks for an
// approval and the run that the maintainer's review triggers.
package action

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentos/agentos/kernel/toolrule"
	"github.com/agentos/agentos/kernel/worktree"
	"github.com/agentos/agentos/runtime/claudecode"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/skills"
)

// Env is the Actions environment and the action's inputs.
type Env struct {
	EventName  string // GITHUB_EVENT_NAME
	EventPath  string // GITHUB_EVENT_PATH
	Repository string // GITHUB_REPOSITORY, owner/name
	APIURL     string // GITHUB_API_URL
	ServerURL  string // GITHUB_SERVER_URL
	RunID      string // GITHUB_RUN_ID
	// RunAttempt is GITHUB_RUN_ATTEMPT: 1, and more for each re-run of
	// the same workflow run (which keeps its GITHUB_RUN_ID).
	RunAttempt int
	Actor      string // GITHUB_ACTOR
	RunnerTemp string // RUNNER_TEMP
	OutputPath string // GITHUB_OUTPUT
	Summary    string // GITHUB_STEP_SUMMARY
	Workspace  string // GITHUB_WORKSPACE
	Token      string // input github_token, else GITHUB_TOKEN

	Inputs Inputs
}

// Inputs are action.yml's inputs (INPUT_<NAME> in a container action).
type Inputs struct {
	Trigger      string
	Provider     string
	Model        string
	BaseURL      string
	OpenAIKey    string
	AnthropicKey string
	GeminiKey    string
	PolicyFile   string
	MaxTurns     int
	MaxCostUSD   float64
	Timeout      time.Duration
	AllowedUsers []string
	// AllowedNonWriteUsers may start the review and triage cycles without
	// write access ("*": anyone); AllowedBots are the bot accounts that may
	// ("*": every bot). Fix runs and commands always need write access.
	AllowedNonWriteUsers, AllowedBots []string
	ArtifactBranch                    string
	// LogOnSessionBranch commits the log under .agent/sessions/ on the
	// session branch instead of the artifact branch.
	LogOnSessionBranch bool
	// AllowPullRequestTarget opts in to the pull_request_target event
	// (allow_pull_request_target): off, the event is refused. On, a fork's
	// pull request gets the review cycle only, with its head untrusted
	// (CheckTrust).
	AllowPullRequestTarget bool
	// BotLogin, when set, must equal the login GitHub reports for the
	// credentials (github.Client.TokenLogin); empty, it is learned.
	BotLogin string

	// Automation (no comment needed), as claude-code-action's inputs:
	// Prompt is the request for a run started by label_trigger or
	// assignee_trigger (default: the title and body), and on
	// schedule or workflow_dispatch the request of the fix run the Action
	// opens a home issue for.
	Prompt string
	// Cycle is the cycle an event without a command runs: review on
	// pull_request opened/reopened/ready_for_review, triage on issues
	// opened (the defaults), or "none" to run none.
	Cycle string
	// LabelTrigger starts a run when an issue gets this label;
	// AssigneeTrigger when this account is assigned to an issue.
	LabelTrigger, AssigneeTrigger string
	// BaseBranch is the branch an issue's run starts from (default: the
	// repository's default branch).
	BaseBranch string
	// BranchPrefix starts the branches of new sessions (default agent/),
	// checked with worktree.CheckBranchPrefix; a session begun under an
	// earlier prefix keeps its branch (its link records it).
	BranchPrefix string
	// CustomInstructions are passed to every cycle and appended to a
	// run's request.
	CustomInstructions string
	// MCPServers come from mcp_config (.mcp.json's shape) and are mounted
	// in every run beside the profile's.
	MCPServers map[string]provider.MCPServer
	// AppID and AppPrivateKey make the Action act as a GitHub App: it
	// mints installation tokens (its commits and comments are the app's)
	// and revokes them when it ends.
	AppID         int64
	AppPrivateKey string
	// AllowedTools and DisallowedTools are allowed_tools and
	// disallowed_tools in agentos's names (an entry may be
	// "mcp.server.*"); AllowedTools is nil when the input is empty.
	// ToolNotes say what of them the scope cannot express (a permission
	// rule's argument, a tool agentos does not have), for the job's log.
	AllowedTools, DisallowedTools []string
	ToolNotes                     []string
	// ToolRules are the lists' permission rules with an argument
	// (Bash(go test:*), Read(docs/**), Edit(src/**)), which the kernel
	// enforces call by call; nil when the lists have none.
	ToolRules *toolrule.Set
}

// Cycles an event may run without a command.
const (
	CycleReview = "review"
	CycleTriage = "triage"
	CycleFix    = "fix"
	CycleNone   = "none"
)

// EnvError lists what is wrong with the environment, all at once.
type EnvError struct{ Problems []string }

func (e *EnvError) Error() string {
	return "actions environment: " + strings.Join(e.Problems, "; ")
}

// input reads an action input the way the runner passes it to a container
// action: INPUT_ + the name upper-cased with spaces as underscores.
func input(getenv func(string) string, name string) string {
	return strings.TrimSpace(getenv("INPUT_" + strings.ToUpper(strings.ReplaceAll(name, " ", "_"))))
}

// FromEnv reads and validates the environment.
func FromEnv(getenv func(string) string) (Env, error) {
	e := Env{
		EventName:  getenv("GITHUB_EVENT_NAME"),
		EventPath:  getenv("GITHUB_EVENT_PATH"),
		Repository: getenv("GITHUB_REPOSITORY"),
		APIURL:     orDefault(getenv("GITHUB_API_URL"), "https://api.github.com"),
		ServerURL:  orDefault(getenv("GITHUB_SERVER_URL"), "https://github.com"),
		RunID:      getenv("GITHUB_RUN_ID"),
		RunAttempt: 1,
		Actor:      getenv("GITHUB_ACTOR"),
		RunnerTemp: getenv("RUNNER_TEMP"),
		OutputPath: getenv("GITHUB_OUTPUT"),
		Summary:    getenv("GITHUB_STEP_SUMMARY"),
		Workspace:  getenv("GITHUB_WORKSPACE"),
		Token:      orDefault(input(getenv, "github_token"), getenv("GITHUB_TOKEN")),
	}
	var problems []string
	need := func(name, v string) {
		if v == "" {
			problems = append(problems, name+" is not set")
		}
	}
	need("GITHUB_EVENT_NAME", e.EventName)
	need("GITHUB_EVENT_PATH", e.EventPath)
	need("GITHUB_REPOSITORY", e.Repository)
	need("RUNNER_TEMP", e.RunnerTemp)
	if input(getenv, "app_id") == "" {
		need("github_token (or GITHUB_TOKEN)", e.Token)
	}
	if v := getenv("GITHUB_RUN_ATTEMPT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			problems = append(problems, fmt.Sprintf("GITHUB_RUN_ATTEMPT %q is not a positive whole number", v))
		}
		e.RunAttempt = n
	}
	if e.Repository != "" && strings.Count(e.Repository, "/") != 1 {
		problems = append(problems, fmt.Sprintf("GITHUB_REPOSITORY %q is not owner/name", e.Repository))
	}
	in := Inputs{
		Trigger:        orDefault(input(getenv, "trigger_phrase"), "/agent"),
		Provider:       orDefault(input(getenv, "provider"), "anthropic"),
		Model:          input(getenv, "model"),
		BaseURL:        input(getenv, "base_url"),
		OpenAIKey:      input(getenv, "openai_api_key"),
		AnthropicKey:   input(getenv, "anthropic_api_key"),
		GeminiKey:      input(getenv, "gemini_api_key"),
		PolicyFile:     orDefault(input(getenv, "policy_file"), ".agent/policy.yaml"),
		ArtifactBranch: orDefault(input(getenv, "artifact_branch"), "agent-sessions"),
		BotLogin:       input(getenv, "bot_login"),
	}
	switch v := input(getenv, "log_on_session_branch"); v {
	case "", "false":
	case "true":
		in.LogOnSessionBranch = true
	default:
		problems = append(problems, fmt.Sprintf("log_on_session_branch %q is not true or false", v))
	}
	switch v := input(getenv, "allow_pull_request_target"); v {
	case "", "false":
	case "true":
		in.AllowPullRequestTarget = true
	default:
		problems = append(problems, fmt.Sprintf("allow_pull_request_target %q is not true or false", v))
	}
	if v := input(getenv, "max_turns"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			problems = append(problems, fmt.Sprintf("max_turns %q is not a positive whole number", v))
		}
		in.MaxTurns = n
	}
	if v := input(getenv, "max_cost_usd"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			problems = append(problems, fmt.Sprintf("max_cost_usd %q is not a positive number", v))
		}
		in.MaxCostUSD = f
	}
	if v := input(getenv, "timeout_minutes"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			problems = append(problems, fmt.Sprintf("timeout_minutes %q is not a positive whole number", v))
		}
		in.Timeout = time.Duration(n) * time.Minute
	}
	in.AllowedUsers = loginList(input(getenv, "allowed_users"))
	in.AllowedNonWriteUsers = loginList(input(getenv, "allowed_non_write_users"))
	in.AllowedBots = loginList(input(getenv, "allowed_bots"))
	for _, l := range in.AllowedUsers {
		if l == "*" {
			problems = append(problems, "allowed_users cannot be *: it narrows who may use the bot (allowed_non_write_users widens)")
		}
	}
	problems = append(problems, automationInputs(getenv, &in)...)
	if err := scheduledCycle(e.EventName, in.Cycle); err != nil {
		problems = append(problems, err.Error())
	}
	if strings.ContainsAny(in.ArtifactBranch, " ~^:?*[\\") || strings.HasPrefix(in.ArtifactBranch, "-") {
		problems = append(problems, fmt.Sprintf("artifact_branch %q is not a valid branch name", in.ArtifactBranch))
	}
	e.Inputs = in
	if len(problems) > 0 {
		return e, &EnvError{Problems: problems}
	}
	return e, nil
}

// Secrets are the values to mask in the job's log.
func (e Env) Secrets() []string {
	var s []string
	for _, v := range []string{e.Token, e.Inputs.OpenAIKey, e.Inputs.AnthropicKey, e.Inputs.GeminiKey, e.Inputs.AppPrivateKey} {
		if v != "" {
			s = append(s, v)
		}
	}
	return s
}

// APIKey is the key for the chosen provider.
func (e Env) APIKey() (string, error) {
	switch e.Inputs.Provider {
	case "openai":
		return e.Inputs.OpenAIKey, nil
	case "anthropic":
		return e.Inputs.AnthropicKey, nil
	case "gemini":
		return e.Inputs.GeminiKey, nil
	case "scripted":
		return "", nil
	}
	return "", errors.New("provider must be scripted, openai, anthropic or gemini, not " + strconv.Quote(e.Inputs.Provider))
}

// loginList splits a list of logins on commas, spaces and newlines.
func loginList(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func badBranch(b string) bool {
	return strings.ContainsAny(b, " ~^:?*[\\") || strings.HasPrefix(b, "-") || strings.Contains(b, "..") || strings.HasSuffix(b, "/") || strings.HasSuffix(b, ".lock")
}

// automationInputs reads the inputs of automation mode and the App
// credentials, and says what is wrong with them.
func automationInputs(getenv func(string) string, in *Inputs) []string {
	var problems []string
	in.Prompt = input(getenv, "prompt")
	in.Cycle = input(getenv, "cycle")
	switch in.Cycle {
	case "", CycleReview, CycleTriage, CycleFix, CycleNone:
	default:
		problems = append(problems, fmt.Sprintf("cycle %q is not review, triage, fix or none", in.Cycle))
	}
	in.LabelTrigger = input(getenv, "label_trigger")
	in.AssigneeTrigger = strings.TrimPrefix(input(getenv, "assignee_trigger"), "@")
	in.BaseBranch = input(getenv, "base_branch")
	if in.BaseBranch != "" && badBranch(in.BaseBranch) {
		problems = append(problems, fmt.Sprintf("base_branch %q is not a valid branch name", in.BaseBranch))
	}
	in.BranchPrefix = orDefault(input(getenv, "branch_prefix"), worktree.DefaultBranchPrefix)
	if err := worktree.CheckBranchPrefix(in.BranchPrefix); err != nil {
		problems = append(problems, fmt.Sprintf("branch_prefix: %v", err))
	}
	in.CustomInstructions = input(getenv, "custom_instructions")
	// allowed_tools and disallowed_tools narrow every run's tool scope
	// (run.ToolLimits); a name that cannot be read fails the Action
	// rather than being skipped.
	// An entry with an argument (Bash(go test:*), Read(docs/**)) is also
	// a permission rule the kernel enforces on every call.
	var err error
	if in.AllowedTools, err = toolList("allowed_tools", input(getenv, "allowed_tools"), false, &in.ToolNotes); err != nil {
		problems = append(problems, err.Error())
	}
	if in.DisallowedTools, err = toolList("disallowed_tools", input(getenv, "disallowed_tools"), true, &in.ToolNotes); err != nil {
		problems = append(problems, err.Error())
	}
	if in.ToolRules, err = toolRules(input(getenv, "allowed_tools"), input(getenv, "disallowed_tools")); err != nil {
		problems = append(problems, err.Error())
	}
	if raw := input(getenv, "mcp_config"); raw != "" {
		servers, err := parseMCPConfig(raw)
		if err != nil {
			problems = append(problems, "mcp_config: "+err.Error())
		}
		in.MCPServers = servers
	}
	if v := input(getenv, "app_id"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			problems = append(problems, fmt.Sprintf("app_id %q is not a positive whole number", v))
		}
		in.AppID = id
		in.AppPrivateKey = input(getenv, "app_private_key")
		if in.AppPrivateKey == "" {
			problems = append(problems, "app_id is set but app_private_key is empty")
		}
	} else if input(getenv, "app_private_key") != "" {
		problems = append(problems, "app_private_key is set but app_id is empty")
	}
	return problems
}

// parseMCPConfig reads mcp_config: .mcp.json's shape, {"mcpServers":
// {"name": {"command", "args", "env"} or {"type", "url", "headers"}}}.
// Unknown fields are errors.
func parseMCPConfig(raw string) (map[string]provider.MCPServer, error) {
	var doc struct {
		MCPServers map[string]struct {
			Type    string            `json:"type"`
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		} `json:"mcpServers"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("not .mcp.json's shape: %v", err)
	}
	if len(doc.MCPServers) == 0 {
		return nil, errors.New(`no servers under "mcpServers"`)
	}
	out := map[string]provider.MCPServer{}
	for name, s := range doc.MCPServers {
		if name == "" || strings.ContainsAny(name, " ./*") {
			return nil, fmt.Errorf("server name %q: letters, digits, - and _ only", name)
		}
		if (s.Command == "") == (s.URL == "") {
			return nil, fmt.Errorf("server %s: give either command or url", name)
		}
		out[name] = provider.MCPServer{Type: s.Type, Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers}
	}
	return out, nil
}

// toolList reads allowed_tools or disallowed_tools: Claude Code's names
// (claudecode.ResolveList), separated by commas or newlines. A tool
// agentos does not have cannot be allowed (the run could not use it);
// disallowing one is honoured by there being none, and said.
// toolRules parses the permission rules of both lists (toolrule.Parse):
// an argument the kernel cannot enforce (WebFetch(domain:…), a path
// outside the repository) fails the Action rather than being dropped.
func toolRules(allowRaw, denyRaw string) (*toolrule.Set, error) {
	// SplitList's errors are toolList's to report.
	allow, _ := claudecode.SplitList(allowRaw)
	deny, _ := claudecode.SplitList(denyRaw)
	set, err := toolrule.Parse(allow, deny)
	if err != nil {
		return nil, fmt.Errorf("allowed_tools/disallowed_tools: %v", err)
	}
	if set.Empty() {
		return nil, nil
	}
	return set, nil
}

func toolList(name, raw string, deny bool, notes *[]string) ([]string, error) {
	if raw == "" {
		return nil, nil
	}
	names, err := claudecode.SplitList(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s names no tool (leave it unset for no limit)", name)
	}
	rs, err := claudecode.ResolveList(names, skills.DefaultTools)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	out := []string{}
	seen := map[string]bool{}
	for _, r := range rs {
		switch {
		case r.Absent && !deny:
			return nil, fmt.Errorf("%s: %q is a Claude Code tool agentos does not have, so a run cannot be allowed it", name, r.Name)
		case r.Absent:
			*notes = append(*notes, fmt.Sprintf("%s: %s: agentos has no such tool", name, r.Name))
		case r.Argument != "" && deny:
			// A disallowed rule with an argument refuses the calls
			// it matches (toolRules), not the tool.
			continue
		}
		for _, o := range r.Ours {
			if !seen[o] {
				seen[o] = true
				out = append(out, o)
			}
		}
	}
	return out, nil
}

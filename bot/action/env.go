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
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Env is the Actions environment and the action's inputs.
type Env struct {
	EventName  string // GITHUB_EVENT_NAME
	EventPath  string // GITHUB_EVENT_PATH
	Repository string // GITHUB_REPOSITORY, owner/name
	APIURL     string // GITHUB_API_URL
	ServerURL  string // GITHUB_SERVER_URL
	RunID      string // GITHUB_RUN_ID
	RunnerTemp string // RUNNER_TEMP
	OutputPath string // GITHUB_OUTPUT
	Summary    string // GITHUB_STEP_SUMMARY
	Workspace  string // GITHUB_WORKSPACE
	Token      string // input github_token, else GITHUB_TOKEN

	Inputs Inputs
}

// Inputs are action.yml's inputs (INPUT_<NAME> in a container action).
type Inputs struct {
	Trigger        string
	Provider       string
	Model          string
	BaseURL        string
	OpenAIKey      string
	AnthropicKey   string
	GeminiKey      string
	PolicyFile     string
	MaxTurns       int
	MaxCostUSD     float64
	Timeout        time.Duration
	AllowedUsers   []string
	ArtifactBranch string
	// LogOnSessionBranch commits the log under .agent/sessions/ on the
	// session branch instead of the artifact branch.
	LogOnSessionBranch bool
	BotLogin           string
}

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
	need("github_token (or GITHUB_TOKEN)", e.Token)
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
		BotLogin:       orDefault(input(getenv, "bot_login"), "github-actions[bot]"),
	}
	switch v := input(getenv, "log_on_session_branch"); v {
	case "", "false":
	case "true":
		in.LogOnSessionBranch = true
	default:
		problems = append(problems, fmt.Sprintf("log_on_session_branch %q is not true or false", v))
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
	in.AllowedUsers = strings.FieldsFunc(input(getenv, "allowed_users"), func(r rune) bool { return r == ',' || r == ' ' || r == '\n' })
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
	for _, v := range []string{e.Token, e.Inputs.OpenAIKey, e.Inputs.AnthropicKey, e.Inputs.GeminiKey} {
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

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

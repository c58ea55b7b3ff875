package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentos/agentos/kernel/guard"
	"gopkg.in/yaml.v3"
)

// Profile is the RuntimeProfile: which provider and model, and the run's
// limits. Changing provider is a profile change only.
type Profile struct {
	Provider string `yaml:"provider"`
	Model    string `yaml:"model"`
	BaseURL  string `yaml:"base_url,omitempty"`
	APIKey   string `yaml:"-"` // from env only, never from a file
	// BearerToken says APIKey is an Anthropic auth token
	// (ANTHROPIC_AUTH_TOKEN), sent as "Authorization: Bearer", not x-api-key.
	BearerToken bool `yaml:"-"`
	// Organization and Project are sent as OpenAI-Organization and
	// OpenAI-Project (OPENAI_ORG_ID, OPENAI_PROJECT_ID).
	Organization string `yaml:"organization,omitempty"`
	Project      string `yaml:"project,omitempty"`
	// StructuredOutput (default on) sends role output schemas with the
	// provider's structured-output feature; turn it off for a compatible
	// server that rejects response_format.
	StructuredOutput *bool    `yaml:"structured_output,omitempty"`
	Script           string   `yaml:"script,omitempty"`
	MaxTokens        int      `yaml:"max_tokens,omitempty"` // per model call
	Temperature      *float64 `yaml:"temperature,omitempty"`
	Stream           bool     `yaml:"stream,omitempty"` // use the provider's streaming API
	// GuardRepair (default on) lets the tool guard repair a blocked call:
	// trivially broken argument JSON is fixed locally and the model gets
	// one round to correct a call the guard blocked (the "repair
	// on"). Off, a blocked call ends the run. The kernel policy's
	// guard.repair can turn it off too.
	GuardRepair *bool    `yaml:"guard_repair,omitempty"`
	Retries     int      `yaml:"retries,omitempty"`
	Timeout     Duration `yaml:"timeout,omitempty"` // per model call
	Pricing     Pricing  `yaml:"pricing,omitempty"`
	Limits      Limits   `yaml:"limits,omitempty"`
	// MCPServers are MCP servers mounted in every run, in .mcp.json's
	// mcpServers shape (the repository's .mcp.json adds its own; on a
	// name both use, the profile's wins).
	MCPServers map[string]MCPServer `yaml:"mcp_servers,omitempty"`
	// Origin says where the model, endpoint and key came from (variable
	// names, "profile" or "default"), for messages that tell the user what
	// to change. ApplyEnv fills it.
	Origin Origin `yaml:"-"`
}

// MCPServer is one MCP server of a profile (see runtime/mcp): a command
// for stdio, or an http url.
type MCPServer struct {
	Type    string            `yaml:"type,omitempty"`
	Command string            `yaml:"command,omitempty"`
	Args    []string          `yaml:"args,omitempty"`
	Env     map[string]string `yaml:"env,omitempty"`
	URL     string            `yaml:"url,omitempty"`
	Headers map[string]string `yaml:"headers,omitempty"`
}

// Origin names the source of a profile's resolved settings.
type Origin struct {
	Model, BaseURL, APIKey string
	// KeysSeen are the providers' key variables set in the environment
	// (OPENAI_API_KEY…) while the provider is the scripted default, for
	// the message that says how to use one.
	KeysSeen []string
}

// Repair reports whether the profile lets the tool guard repair calls.
func (p Profile) Repair() bool { return p.GuardRepair == nil || *p.GuardRepair }

// Structured reports whether role outputs use structured output.
func (p Profile) Structured() bool { return p.StructuredOutput == nil || *p.StructuredOutput }

// DefaultModels are the models used when a profile names none: current,
// generally available models from the SDKs' model constants, chosen for
// cost and tool use (see the README's provider section).
var DefaultModels = map[string]string{
	"openai":    "gpt-5.4-mini",
	"anthropic": "claude-sonnet-4-6",
	"gemini":    "gemini-2.5-flash",
}

// DefaultBaseURLs are the providers' own endpoints (each adapter's
// DefaultBaseURL).
var DefaultBaseURLs = map[string]string{
	"openai":    "https://api.openai.com/v1/",
	"anthropic": "https://api.anthropic.com/",
	"gemini":    "https://generativelanguage.googleapis.com/",
}

// Standard variables per provider, as each SDK documents them. The first
// key variable that is set wins (genai: GOOGLE_API_KEY before
// GEMINI_API_KEY; Anthropic: ANTHROPIC_API_KEY before ANTHROPIC_AUTH_TOKEN).
var (
	keyVars = map[string][]string{
		"openai":    {"OPENAI_API_KEY"},
		"anthropic": {"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"},
		"gemini":    {"GOOGLE_API_KEY", "GEMINI_API_KEY"},
	}
	baseURLVars = map[string]string{
		"openai":    "OPENAI_BASE_URL",
		"anthropic": "ANTHROPIC_BASE_URL",
		"gemini":    "GOOGLE_GEMINI_BASE_URL",
	}
)

// Limits bound a run. Exceeding one ends the run with a terminal report and
// keeps the work done so far.
type Limits struct {
	MaxTurns      int      `yaml:"max_turns,omitempty"`      // model calls per run
	MaxTokens     int64    `yaml:"max_tokens,omitempty"`     // input+output tokens per run
	MaxCostUSD    float64  `yaml:"max_cost_usd,omitempty"`   // per run
	WallClock     Duration `yaml:"wall_clock,omitempty"`     // per run
	IdleTimeout   Duration `yaml:"idle_timeout,omitempty"`   // longest wait for one model call or tool
	MaxRework     int      `yaml:"max_rework,omitempty"`     // REVIEW fail → REWORK rounds
	ContextTokens int      `yaml:"context_tokens,omitempty"` // context budget before compaction
	MaxToolTurns  int      `yaml:"max_tool_turns,omitempty"` // worker loop iterations per WORK phase
}

// Duration is a time.Duration written as "300s", "5m".
type Duration time.Duration

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (like 30s or 5m)", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// DefaultProfile is the embedded default: the scripted provider, so a fresh
// checkout runs without keys or network.
func DefaultProfile() Profile {
	return Profile{
		Provider: "scripted",
		Model:    "scripted",
		Retries:  3,
		Timeout:  Duration(2 * time.Minute),
		Limits: Limits{
			MaxTurns:      60,
			MaxTokens:     2_000_000,
			MaxCostUSD:    5,
			WallClock:     Duration(30 * time.Minute),
			IdleTimeout:   Duration(10 * time.Minute),
			MaxRework:     2,
			ContextTokens: 100_000,
			MaxToolTurns:  30,
		},
	}
}

// ParseProfile reads a YAML profile over the defaults. Unknown keys are
// errors.
func ParseProfile(r io.Reader) (Profile, error) {
	p := DefaultProfile()
	b, err := io.ReadAll(r)
	if err != nil {
		return p, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil && !errors.Is(err, io.EOF) {
		return p, fmt.Errorf("profile: %w", err)
	}
	return p, nil
}

// LoadProfile reads a profile file ("" means the defaults), then applies
// the environment.
func LoadProfile(path string, env func(string) string) (Profile, error) {
	p := DefaultProfile()
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return p, fmt.Errorf("profile: %w", err)
		}
		defer f.Close()
		if p, err = ParseProfile(f); err != nil {
			return p, fmt.Errorf("%s: %w", path, err)
		}
	}
	if err := p.ApplyEnv(env); err != nil {
		return p, err
	}
	return p, p.Validate()
}

// ApplyEnv overlays the environment. The AGENTOS_* variables win; then the
// profile file; then each SDK's own variables (OPENAI_BASE_URL,
// ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL; OPENAI_ORG_ID,
// OPENAI_PROJECT_ID); then the provider's defaults (DefaultModels,
// DefaultBaseURLs). The key comes from AGENTOS_API_KEY, else the SDK's key
// variables (OPENAI_API_KEY; ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN;
// GOOGLE_API_KEY or GEMINI_API_KEY), never from a file. Also read:
// AGENTOS_SCRIPT, AGENTOS_MAX_TURNS, AGENTOS_MAX_COST_USD and
// AGENTOS_TIMEOUT_MINUTES.
func (p *Profile) ApplyEnv(env func(string) string) error {
	if env == nil {
		env = os.Getenv
	}
	// What the profile (file or defaults) already says.
	if p.Origin.Model == "" && p.Model != "" && p.Model != "scripted" {
		p.Origin.Model = "profile"
	}
	if p.Origin.BaseURL == "" && p.BaseURL != "" {
		p.Origin.BaseURL = "profile"
	}
	set := func(name string, dst, origin *string) {
		if v := env(name); v != "" {
			*dst = v
			if origin != nil {
				*origin = name
			}
		}
	}
	set("AGENTOS_PROVIDER", &p.Provider, nil)
	p.Origin.KeysSeen = nil
	if p.Provider == "scripted" {
		// Left on the test double with a model's key in the environment:
		// the message names the key (Validate).
		for _, prov := range []string{"openai", "anthropic", "gemini"} {
			for _, name := range keyVars[prov] {
				if env(name) != "" {
					p.Origin.KeysSeen = append(p.Origin.KeysSeen, name)
				}
			}
		}
	}
	set("AGENTOS_MODEL", &p.Model, &p.Origin.Model)
	set("AGENTOS_BASE_URL", &p.BaseURL, &p.Origin.BaseURL)
	set("AGENTOS_SCRIPT", &p.Script, nil)
	if v := env("AGENTOS_MAX_TURNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("profile: AGENTOS_MAX_TURNS=%q is not a positive integer", v)
		}
		p.Limits.MaxTurns = n
	}
	if v := env("AGENTOS_MAX_COST_USD"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			return fmt.Errorf("profile: AGENTOS_MAX_COST_USD=%q is not a positive number", v)
		}
		p.Limits.MaxCostUSD = f
	}
	if v := env("AGENTOS_TIMEOUT_MINUTES"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			return fmt.Errorf("profile: AGENTOS_TIMEOUT_MINUTES=%q is not a positive number", v)
		}
		p.Limits.WallClock = Duration(time.Duration(f * float64(time.Minute)))
	}
	if p.Provider == "scripted" {
		return nil
	}
	if p.BaseURL == "" {
		if name := baseURLVars[p.Provider]; name != "" {
			set(name, &p.BaseURL, &p.Origin.BaseURL)
		}
	}
	if p.BaseURL == "" {
		p.Origin.BaseURL = "default"
	}
	if p.Provider == "openai" {
		if p.Organization == "" {
			p.Organization = env("OPENAI_ORG_ID")
		}
		if p.Project == "" {
			p.Project = env("OPENAI_PROJECT_ID")
		}
	}
	p.APIKey, p.BearerToken, p.Origin.APIKey = "", false, ""
	for _, name := range append([]string{"AGENTOS_API_KEY"}, keyVars[p.Provider]...) {
		if v := env(name); v != "" {
			p.APIKey, p.Origin.APIKey = v, name
			p.BearerToken = name == "ANTHROPIC_AUTH_TOKEN"
			break
		}
	}
	if p.Model == "" || p.Model == "scripted" {
		// "scripted" is the scripted provider's model, never another's.
		p.Model, p.Origin.Model = DefaultModels[p.Provider], ""
		if p.Model != "" {
			p.Origin.Model = "default"
		}
	}
	return nil
}

// Endpoint is the base URL requests go to: the profile's, else the
// provider's default ("" for providers without one).
func (p Profile) Endpoint() string {
	if p.BaseURL != "" {
		return p.BaseURL
	}
	return DefaultBaseURLs[p.Provider]
}

// EndpointHost is the host (and port) of Endpoint, or "" when there is
// none or it does not parse.
func (p Profile) EndpointHost() string {
	u, err := url.Parse(strings.TrimSpace(p.Endpoint()))
	if err != nil {
		return ""
	}
	return u.Host
}

// Describe is the resolved provider, model and endpoint host for the
// start-up line, with where each came from. It never shows the key, only
// the variable it came from.
func (p Profile) Describe() string {
	if p.Provider == "scripted" {
		return fmt.Sprintf("provider scripted, script %s (no model is called)", p.Script)
	}
	from := func(o string) string {
		if o == "" {
			return ""
		}
		return " (" + o + ")"
	}
	key := "no key"
	if p.APIKey != "" {
		key = "key from " + p.Origin.APIKey
	}
	host := p.EndpointHost()
	if host == "" {
		host = "none"
	}
	price := "no pricing: cost is not tracked and max_cost_usd cannot stop a run"
	if pr := PricingFor(p); !pr.IsZero() {
		price = fmt.Sprintf("$%g/$%g per MTok in/out, $%g cached", pr.InputPerMTok, pr.OutputPerMTok, pr.CachedInputPerMTok)
		if pr.CachedInputPerMTok == 0 {
			price = fmt.Sprintf("$%g/$%g per MTok in/out", pr.InputPerMTok, pr.OutputPerMTok)
		}
	}
	return fmt.Sprintf("provider %s, model %s%s, endpoint %s%s, %s, %s", p.Provider, p.Model, from(p.Origin.Model), host, from(p.Origin.BaseURL), key, price)
}

// KeyHint names the variables that set the key for p's provider.
func (p Profile) KeyHint() string {
	if p.Origin.APIKey != "" {
		return p.Origin.APIKey
	}
	names := keyVars[p.Provider]
	if len(names) == 0 {
		return "AGENTOS_API_KEY"
	}
	return strings.Join(names, " or ") + " (or AGENTOS_API_KEY)"
}

// EndpointHint names the variables that set the endpoint.
func (p Profile) EndpointHint() string {
	switch o := p.Origin.BaseURL; o {
	case "", "default":
		if v := baseURLVars[p.Provider]; v != "" {
			return v + " (or AGENTOS_BASE_URL)"
		}
		return "AGENTOS_BASE_URL"
	case "profile":
		return "base_url in the profile"
	default:
		return o
	}
}

// ModelHint names where to set the model.
func (p Profile) ModelHint() string {
	if p.Origin.Model == "profile" {
		return "model in the profile (or AGENTOS_MODEL)"
	}
	return "AGENTOS_MODEL (or model in the profile)"
}

// Validate checks the profile.
func (p Profile) Validate() error {
	var errs []string
	if p.Provider == "" {
		errs = append(errs, "provider is required")
	}
	if _, known := keyVars[p.Provider]; !known && p.Provider != "" && p.Provider != "scripted" {
		// A near-miss of a built-in provider is a typo, not a provider
		// without a model (a program may register others: Registry.New
		// refuses what it does not know).
		known := []string{"openai", "anthropic", "gemini", "scripted"}
		if s := guard.SuggestName(p.Provider, known); s != "" {
			return fmt.Errorf("profile: unknown provider %q (did you mean %q?): set AGENTOS_PROVIDER (or provider in the profile) to one of %s", p.Provider, s, strings.Join(known, ", "))
		}
	}
	if p.Provider == "scripted" && p.Script == "" {
		msg := "no model provider is configured: the default, scripted, is a test double that replays a script (AGENTOS_SCRIPT or the profile's script:); to use a model set AGENTOS_PROVIDER (openai, anthropic or gemini), its API key and AGENTOS_MODEL"
		if len(p.Origin.KeysSeen) > 0 {
			prov := map[string]string{"OPENAI_API_KEY": "openai", "ANTHROPIC_API_KEY": "anthropic", "ANTHROPIC_AUTH_TOKEN": "anthropic", "GOOGLE_API_KEY": "gemini", "GEMINI_API_KEY": "gemini"}[p.Origin.KeysSeen[0]]
			msg += fmt.Sprintf(" — %s is set: AGENTOS_PROVIDER=%s uses it", p.Origin.KeysSeen[0], prov)
		}
		errs = append(errs, msg)
	}
	// Only OpenAI-compatible servers (Ollama, vLLM, llama.cpp) run without
	// a key; a proxy for Anthropic or Gemini still forwards one.
	if _, known := keyVars[p.Provider]; known && p.APIKey == "" && (p.Provider != "openai" || p.BaseURL == "") {
		hint := ""
		if p.Provider == "openai" {
			hint = " (or OPENAI_BASE_URL for a keyless compatible server)"
		}
		errs = append(errs, fmt.Sprintf("provider %s needs an API key: set %s%s", p.Provider, p.KeyHint(), hint))
	}
	if p.Provider != "scripted" && p.Model == "" {
		errs = append(errs, fmt.Sprintf("provider %s needs a model: set %s", p.Provider, p.ModelHint()))
	}
	l := p.Limits
	if l.MaxTurns <= 0 || l.MaxTokens <= 0 || l.MaxCostUSD <= 0 || l.WallClock <= 0 || l.MaxToolTurns <= 0 {
		errs = append(errs, "limits max_turns, max_tokens, max_cost_usd, wall_clock and max_tool_turns must be positive")
	}
	if l.MaxRework < 0 {
		errs = append(errs, "limits.max_rework must not be negative")
	}
	if len(errs) > 0 {
		return fmt.Errorf("profile: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Factory builds a provider from a profile.
type Factory func(ctx context.Context, p Profile) (Provider, error)

// Registry maps provider names to factories. It is built explicitly by the
// program (cmd), never from init().
type Registry map[string]Factory

// New builds the profile's provider, wrapped with pricing and schema checks
// by the caller as needed.
func (r Registry) New(ctx context.Context, p Profile) (Provider, error) {
	f, ok := r[p.Provider]
	if !ok {
		names := make([]string, 0, len(r))
		for n := range r {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("profile: unknown provider %q (have %s)", p.Provider, strings.Join(names, ", "))
	}
	return f(ctx, p)
}

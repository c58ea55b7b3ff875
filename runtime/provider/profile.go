package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Profile is the RuntimeProfile: which provider and model, and the run's
// limits. Changing provider is a profile change only (I-2).
type Profile struct {
	Provider    string   `yaml:"provider"`
	Model       string   `yaml:"model"`
	BaseURL     string   `yaml:"base_url,omitempty"`
	APIKey      string   `yaml:"-"` // from env only, never from a file
	Script      string   `yaml:"script,omitempty"`
	MaxTokens   int      `yaml:"max_tokens,omitempty"` // per model call
	Temperature *float64 `yaml:"temperature,omitempty"`
	Stream      bool     `yaml:"stream,omitempty"` // use the provider's streaming API
	Retries     int      `yaml:"retries,omitempty"`
	Timeout     Duration `yaml:"timeout,omitempty"` // per model call
	Pricing     Pricing  `yaml:"pricing,omitempty"`
	Limits      Limits   `yaml:"limits,omitempty"`
}

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

// ApplyEnv overlays AGENTOS_PROVIDER, AGENTOS_MODEL, AGENTOS_BASE_URL,
// AGENTOS_SCRIPT, AGENTOS_MAX_TURNS, AGENTOS_MAX_COST_USD,
// AGENTOS_TIMEOUT_MINUTES and the provider's API key variable.
func (p *Profile) ApplyEnv(env func(string) string) error {
	if env == nil {
		env = os.Getenv
	}
	set := func(name string, dst *string) {
		if v := env(name); v != "" {
			*dst = v
		}
	}
	set("AGENTOS_PROVIDER", &p.Provider)
	set("AGENTOS_MODEL", &p.Model)
	set("AGENTOS_BASE_URL", &p.BaseURL)
	set("AGENTOS_SCRIPT", &p.Script)
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
	if k := keyEnv[p.Provider]; k != "" {
		p.APIKey = env(k)
	}
	return nil
}

var keyEnv = map[string]string{"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY"}

// Validate checks the profile.
func (p Profile) Validate() error {
	var errs []string
	if p.Provider == "" {
		errs = append(errs, "provider is required")
	}
	if p.Provider == "scripted" && p.Script == "" {
		errs = append(errs, "the scripted provider needs a script (profile script: or AGENTOS_SCRIPT)")
	}
	// Only OpenAI-compatible servers (Ollama, vLLM, llama.cpp) run without
	// a key; a proxy for Anthropic or Gemini still forwards one.
	if k := keyEnv[p.Provider]; k != "" && p.APIKey == "" && (p.Provider != "openai" || p.BaseURL == "") {
		hint := ""
		if p.Provider == "openai" {
			hint = " (or base_url for a keyless compatible server)"
		}
		errs = append(errs, fmt.Sprintf("provider %s needs %s%s", p.Provider, k, hint))
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

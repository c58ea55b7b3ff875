package provider_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/provider"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// TestStandardVariables: each SDK's documented variables configure the
// profile; AGENTOS_* wins over them, and a profile file over the SDK
// variables; a provider without a model gets its default.
func TestStandardVariables(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		env     map[string]string
		want    provider.Profile // Provider, Model, BaseURL, APIKey, BearerToken, Organization, Project, Origin
		wantErr string
	}{
		{
			name: "openai from its SDK's variables",
			env:  map[string]string{"AGENTOS_PROVIDER": "openai", "OPENAI_API_KEY": "sk-1", "OPENAI_BASE_URL": "http://127.0.0.1:8080/v1", "OPENAI_ORG_ID": "org-1", "OPENAI_PROJECT_ID": "proj-1"},
			want: provider.Profile{Provider: "openai", Model: "gpt-5.4-mini", BaseURL: "http://127.0.0.1:8080/v1", APIKey: "sk-1", Organization: "org-1", Project: "proj-1", Origin: provider.Origin{Model: "default", BaseURL: "OPENAI_BASE_URL", APIKey: "OPENAI_API_KEY"}},
		},
		{
			name: "AGENTOS variables win",
			env:  map[string]string{"AGENTOS_PROVIDER": "openai", "AGENTOS_MODEL": "m", "AGENTOS_BASE_URL": "http://a/v1", "AGENTOS_API_KEY": "sk-a", "OPENAI_API_KEY": "sk-1", "OPENAI_BASE_URL": "http://o/v1"},
			want: provider.Profile{Provider: "openai", Model: "m", BaseURL: "http://a/v1", APIKey: "sk-a", Origin: provider.Origin{Model: "AGENTOS_MODEL", BaseURL: "AGENTOS_BASE_URL", APIKey: "AGENTOS_API_KEY"}},
		},
		{
			name: "the profile file wins over the SDK variables",
			file: "provider: openai\nmodel: qwen2.5-coder:7b\nbase_url: http://127.0.0.1:11434/v1\n",
			env:  map[string]string{"OPENAI_BASE_URL": "http://o/v1"},
			want: provider.Profile{Provider: "openai", Model: "qwen2.5-coder:7b", BaseURL: "http://127.0.0.1:11434/v1", Origin: provider.Origin{Model: "profile", BaseURL: "profile"}},
		},
		{
			name: "anthropic with an auth token",
			env:  map[string]string{"AGENTOS_PROVIDER": "anthropic", "ANTHROPIC_AUTH_TOKEN": "tok", "ANTHROPIC_BASE_URL": "https://proxy.example/anthropic"},
			want: provider.Profile{Provider: "anthropic", Model: "claude-sonnet-4-6", BaseURL: "https://proxy.example/anthropic", APIKey: "tok", BearerToken: true, Origin: provider.Origin{Model: "default", BaseURL: "ANTHROPIC_BASE_URL", APIKey: "ANTHROPIC_AUTH_TOKEN"}},
		},
		{
			name: "anthropic key before auth token",
			env:  map[string]string{"AGENTOS_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": "key", "ANTHROPIC_AUTH_TOKEN": "tok"},
			want: provider.Profile{Provider: "anthropic", Model: "claude-sonnet-4-6", APIKey: "key", Origin: provider.Origin{Model: "default", BaseURL: "default", APIKey: "ANTHROPIC_API_KEY"}},
		},
		{
			name: "gemini: GOOGLE_API_KEY before GEMINI_API_KEY, as genai does",
			env:  map[string]string{"AGENTOS_PROVIDER": "gemini", "GEMINI_API_KEY": "g1", "GOOGLE_API_KEY": "g2", "GOOGLE_GEMINI_BASE_URL": "https://gw.example/"},
			want: provider.Profile{Provider: "gemini", Model: "gemini-2.5-flash", BaseURL: "https://gw.example/", APIKey: "g2", Origin: provider.Origin{Model: "default", BaseURL: "GOOGLE_GEMINI_BASE_URL", APIKey: "GOOGLE_API_KEY"}},
		},
		{
			name:    "anthropic without a key",
			env:     map[string]string{"AGENTOS_PROVIDER": "anthropic"},
			wantErr: "needs an API key: set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN (or AGENTOS_API_KEY)",
		},
		{
			name:    "openai without key or endpoint",
			env:     map[string]string{"AGENTOS_PROVIDER": "openai"},
			wantErr: "set OPENAI_API_KEY (or AGENTOS_API_KEY) (or OPENAI_BASE_URL for a keyless compatible server)",
		},
		{
			name:    "a provider without a default model",
			env:     map[string]string{"AGENTOS_PROVIDER": "other"},
			wantErr: "needs a model: set AGENTOS_MODEL",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.file != "" {
				path = filepath.Join(t.TempDir(), "profile.yaml")
				if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			p, err := provider.LoadProfile(path, envOf(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to say %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := provider.Profile{Provider: p.Provider, Model: p.Model, BaseURL: p.BaseURL, APIKey: p.APIKey, BearerToken: p.BearerToken, Organization: p.Organization, Project: p.Project, Origin: p.Origin}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestDescribeNeverShowsTheKey: the start-up line names the provider, the
// model, the endpoint host and where each came from, and the key's
// variable, never the key.
func TestDescribeNeverShowsTheKey(t *testing.T) {
	p, err := provider.LoadProfile("", envOf(map[string]string{"AGENTOS_PROVIDER": "openai", "OPENAI_API_KEY": "sk-secret-123", "OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"}))
	if err != nil {
		t.Fatal(err)
	}
	got := p.Describe()
	for _, want := range []string{"provider openai", "model gpt-5.4-mini (default)", "endpoint 127.0.0.1:8080 (OPENAI_BASE_URL)", "key from OPENAI_API_KEY", "$0.75/$4.5 per MTok in/out, $0.075 cached"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "sk-secret-123") {
		t.Errorf("the key is shown: %q", got)
	}
	p.Model = "local-model"
	if got := p.Describe(); !strings.Contains(got, "no pricing") {
		t.Errorf("an unpriced model: %q", got)
	}
	def, _ := provider.LoadProfile("", envOf(map[string]string{"AGENTOS_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": "k"}))
	if got := def.Describe(); !strings.Contains(got, "endpoint api.anthropic.com (default)") {
		t.Errorf("default endpoint: %q", got)
	}
}

func TestPricing(t *testing.T) {
	sonnet, _ := provider.ListPrice("claude-sonnet-4-6")
	tests := []struct {
		name string
		p    provider.Pricing
		u    provider.Usage
		want float64
	}{
		{"plain", provider.Pricing{InputPerMTok: 1, OutputPerMTok: 2}, provider.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}, 3},
		{"cached input at its rate", provider.Pricing{InputPerMTok: 1, CachedInputPerMTok: 0.1}, provider.Usage{InputTokens: 1_000_000, CachedInputTokens: 600_000}, 0.4 + 0.06},
		{"no cached rate: full price", provider.Pricing{InputPerMTok: 1}, provider.Usage{InputTokens: 1_000_000, CachedInputTokens: 600_000}, 1},
		{"anthropic cache read and write", sonnet, provider.Usage{InputTokens: 3000, CachedInputTokens: 1000, CacheWriteTokens: 1000, OutputTokens: 100}, (1000*3 + 1000*0.30 + 1000*3.75 + 100*15) / 1e6},
		{"counts beyond the input are capped", provider.Pricing{InputPerMTok: 1, CachedInputPerMTok: 0.5}, provider.Usage{InputTokens: 10, CachedInputTokens: 50}, 10 * 0.5 / 1e6},
	}
	for _, tt := range tests {
		if got := tt.p.Cost(tt.u); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("%s: cost %v, want %v", tt.name, got, tt.want)
		}
	}
	for model, want := range map[string]bool{"gpt-5.4-mini": true, "gpt-5.4-mini-2026-03-17": true, "claude-haiku-4-5-20251001": true, "gpt-5.4-nano": false, "gpt-5.4-minix": false} {
		if _, ok := provider.ListPrice(model); ok != want {
			t.Errorf("ListPrice(%q) found %v, want %v", model, ok, want)
		}
	}
	own := provider.Profile{Model: "gpt-5.4-mini", Pricing: provider.Pricing{InputPerMTok: 9}}
	if got := provider.PricingFor(own); got.InputPerMTok != 9 {
		t.Errorf("the profile's pricing was not used: %+v", got)
	}
}

type plain struct{}

func (plain) Name() string { return "plain" }
func (plain) Complete(context.Context, provider.CompletionRequest) (provider.CompletionResponse, error) {
	return provider.CompletionResponse{}, nil
}

type checking struct {
	plain
	err   error
	calls *int
}

func (c checking) Check(context.Context) error { *c.calls++; return c.err }

func TestPreflightLooksThroughWrappers(t *testing.T) {
	if err := provider.Preflight(context.Background(), plain{}); err != nil {
		t.Errorf("a provider that cannot be checked: %v", err)
	}
	n := 0
	want := &provider.PreflightError{Kind: provider.ErrUnknownModel, Provider: "x", Endpoint: "h", Model: "m", Status: 404, Fix: "AGENTOS_MODEL"}
	wrapped := provider.Checked{P: provider.Priced{P: checking{err: want, calls: &n}}}
	for i := 0; i < 2; i++ {
		err := provider.Preflight(context.Background(), wrapped)
		if !errors.Is(err, provider.ErrUnknownModel) || !provider.Fatal(err) {
			t.Fatalf("err = %v", err)
		}
	}
	if n != 2 {
		t.Errorf("checked %d times, want 2 (a checker without CacheKey is not cached)", n)
	}
	if got := want.Error(); got != `provider x at h: the endpoint does not serve model "m" (HTTP 404); set AGENTOS_MODEL` {
		t.Errorf("message %q", got)
	}
	if provider.Fatal(&provider.PreflightError{Kind: provider.ErrUnavailable}) {
		t.Error("unavailable is fatal")
	}
}

// TestFirstContactMessages: what a new user meets with nothing set, with
// only a provider's key set, and with a typo in the provider.
func TestFirstContactMessages(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{}, []string{"no model provider is configured", "AGENTOS_PROVIDER", "AGENTOS_MODEL"}},
		{map[string]string{"OPENAI_API_KEY": "sk-x"}, []string{"OPENAI_API_KEY is set: AGENTOS_PROVIDER=openai uses it"}},
		{map[string]string{"AGENTOS_PROVIDER": "opneai", "OPENAI_API_KEY": "sk-x"}, []string{`unknown provider "opneai" (did you mean "openai"?)`}},
	} {
		p := provider.DefaultProfile()
		if err := p.ApplyEnv(func(k string) string { return c.env[k] }); err != nil {
			t.Fatal(err)
		}
		err := p.Validate()
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v, want it to say %q", c.env, err, w)
			}
		}
	}
}

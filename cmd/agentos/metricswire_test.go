package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/api"
	"github.com/agentos/agentos/runtime/provider"
)

type fixedModel struct{ err error }

func (fixedModel) Name() string { return "openai" }
func (f fixedModel) Complete(context.Context, provider.CompletionRequest) (provider.CompletionResponse, error) {
	if f.err != nil {
		return provider.CompletionResponse{}, f.err
	}
	return provider.CompletionResponse{Text: "ok", Model: "gpt-test", Usage: provider.Usage{InputTokens: 7, OutputTokens: 3}}, nil
}

// The server's registry reports every model call, successful or not, to
// the metrics /metrics serves; a registry built without metrics is the
// plain one.
func TestObservedRegistryFeedsModelMetrics(t *testing.T) {
	m := api.NewMetrics()
	reg := observed(provider.Registry{
		"openai": func(context.Context, provider.Profile) (provider.Provider, error) { return fixedModel{}, nil },
		"broken": func(context.Context, provider.Profile) (provider.Provider, error) {
			return fixedModel{err: errors.New("401 unauthorized")}, nil
		},
		"absent": func(context.Context, provider.Profile) (provider.Provider, error) { return nil, errors.New("no key") },
	}, m)
	ctx := context.Background()
	for _, name := range []string{"openai", "broken"} {
		p, err := reg[name](ctx, provider.Profile{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := p.(provider.Observed); !ok {
			t.Fatalf("%s: provider %T is not observed", name, p)
		}
		_, _ = p.Complete(ctx, provider.CompletionRequest{Model: "gpt-test"})
	}
	if _, err := reg["absent"](ctx, provider.Profile{}); err == nil {
		t.Fatal("a factory's error was lost")
	}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	requests := 0
	var b strings.Builder
	for _, mf := range mfs {
		switch mf.GetName() {
		case "agentos_model_requests_total":
			requests = len(mf.Metric)
		case "agentos_model_tokens_total":
			for _, mm := range mf.Metric {
				b.WriteString(mm.String())
			}
		}
	}
	if requests < 2 {
		t.Fatalf("agentos_model_requests_total has %d series after a success and a failure, want 2", requests)
	}
	if !strings.Contains(b.String(), "value:7") {
		t.Fatalf("input tokens not counted: %s", b.String())
	}
	plain := observed(provider.Registry{"openai": reg["openai"]}, nil)
	if len(plain) != 1 {
		t.Fatal("a registry without metrics changed")
	}
}

package main

import (
	"context"
	"testing"

	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/fakemodel"
	agentrun "github.com/agentos/agentos/runtime/run"
)

// fakeDemo runs the demo task with the openai adapter against a fake model
// server, approving the patch, and returns the outcome and the events.
func fakeDemo(t *testing.T, o fakemodel.Options) (*fakemodel.Server, agentrun.Outcome, []event.Event) {
	t.Helper()
	srv := fakemodel.Start(t, o)
	repo := t.TempDir()
	if err := demo.WriteSample(repo); err != nil {
		t.Fatal(err)
	}
	prof := provider.DefaultProfile()
	prof.Provider, prof.Model, prof.BaseURL, prof.APIKey = "openai", srv.Model(), srv.URL(), o.Key
	env, err := buildRuntime(context.Background(), envOptions{repo: repo, dataDir: t.TempDir(), profile: prof, sessionID: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	ctx := context.Background()
	out, err := env.mgr.Start(ctx, env.engine, agentrun.StartRequest{SessionID: "fake", Prompt: demo.Prompt, Cwd: env.ws.Root()})
	if err != nil {
		t.Fatal(err)
	}
	for out.Status == "paused" {
		if err := env.mgr.Resolve(ctx, "fake", out.Pending[0].ApprovalID, "approve", "octocat", ""); err != nil {
			t.Fatal(err)
		}
		if out, err = env.mgr.Resume(ctx, env.engine, "fake", env.ws.Root(), ""); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := env.store.Read(ctx, "fake", 1)
	if err != nil {
		t.Fatal(err)
	}
	return srv, out, evs
}

// TestPromptCacheFigures prints the demo flow's tokens and cost against the
// fake model server's prompt-cache model (go test ./cmd/agentos -run
// PromptCacheFigures -v).
func TestPromptCacheFigures(t *testing.T) {
	const in, cachedIn, out = 0.75, 0.075, 4.50 // gpt-5.4-mini list prices, $/MTok
	for _, ignore := range []bool{false, true} {
		srv, res, evs := fakeDemo(t, fakemodel.Options{Key: "sk-test", IgnoreResponseFormat: ignore})
		if res.Status != "completed" {
			t.Fatalf("the run ended %s: %+v", res.Status, res.Terminal)
		}
		var reported provider.Usage
		for _, e := range evs {
			if e.Type == event.LLMResponse {
				u := event.Field(event.Field(e.Payload, "response"), "usage")
				reported.InputTokens += event.FieldInt(u, "input_tokens")
				reported.OutputTokens += event.FieldInt(u, "output_tokens")
				reported.CostUSD += event.FieldFloat(u, "cost_usd")
			}
		}
		st := srv.Stats()
		listCost := (float64(st.PromptTokens-st.CachedTokens)*in + float64(st.CachedTokens)*cachedIn + float64(st.CompletionTokens)*out) / 1e6
		t.Logf("ignore response_format %v: model calls %d; input tokens %d (server: %d), cached %d (%.0f%%), output %d; cost reported by agentos $%.6f, at list prices with the cache $%.6f",
			ignore, st.Completions, reported.InputTokens, st.PromptTokens, st.CachedTokens, 100*float64(st.CachedTokens)/float64(max(st.PromptTokens, 1)), st.CompletionTokens, reported.CostUSD, listCost)
		if reported.InputTokens != st.PromptTokens {
			t.Errorf("agentos counted %d input tokens, the server %d", reported.InputTokens, st.PromptTokens)
		}
	}
}

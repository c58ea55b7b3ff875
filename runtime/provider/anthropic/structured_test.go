package anthropic

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/internal/exchange"
	"github.com/agentos/agentos/schemas"
)

func responseSchema(t *testing.T, id string) *provider.ResponseSchema {
	t.Helper()
	b, ok := schemas.MustDefault().Source(id)
	if !ok {
		t.Fatalf("no schema %s", id)
	}
	return &provider.ResponseSchema{Name: id, Schema: b}
}

var planner = []provider.Message{
	{Role: provider.RoleSystem, Content: "You are the Planner."},
	{Role: provider.RoleUser, Content: "lead_directive_v1:\n{\"intent\":\"Fix auth.go\"}"},
}

// TestStructuredOutputForcedTool: the role schema is a forced tool; its
// tool_use input is the answer, which validates; cache reads and writes
// are counted and priced apart.
func TestStructuredOutputForcedTool(t *testing.T) {
	srv := exchange.Serve(t, "testdata/structured.json")
	p := profile(srv.URL)
	p.Model = "claude-sonnet-4-6"
	prov, _ := newProvider(t, p, Options{})
	pricing, _ := provider.ListPrice("claude-sonnet-4-6")
	checked := provider.Checked{P: provider.Priced{P: prov, Pricing: pricing}, Reg: schemas.MustDefault()}
	resp, err := checked.Complete(context.Background(), provider.CompletionRequest{Messages: planner, ResponseSchema: responseSchema(t, "plan_v1")})
	if err != nil {
		t.Fatal(err)
	}
	if err := schemas.MustDefault().ValidateJSON("plan_v1", []byte(resp.Text)); err != nil {
		t.Errorf("text %s: %v", resp.Text, err)
	}
	if len(resp.ToolCalls) != 0 || resp.FinishReason != provider.FinishStop {
		t.Errorf("tool calls %v finish %s, want the answer as text and stop", resp.ToolCalls, resp.FinishReason)
	}
	want := provider.Usage{InputTokens: 48 + 1310 + 2048, OutputTokens: 91, CachedInputTokens: 2048, CacheWriteTokens: 1310}
	want.CostUSD = (48*3 + 2048*0.30 + 1310*3.75 + 91*15) / 1e6
	if got := resp.Usage; got.InputTokens != want.InputTokens || got.CachedInputTokens != want.CachedInputTokens || got.CacheWriteTokens != want.CacheWriteTokens || got.OutputTokens != want.OutputTokens || abs(got.CostUSD-want.CostUSD) > 1e-12 {
		t.Errorf("usage %+v, want %+v", got, want)
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func TestStructuredOutputStreamed(t *testing.T) {
	srv := exchange.Serve(t, "testdata/stream_structured.json")
	prov, _ := newProvider(t, profile(srv.URL), Options{Stream: true})
	resp, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: planner, ResponseSchema: responseSchema(t, "review_result_v1")})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != `{"verdict": "pass", "feedback": "all steps done", "schema_version": "v1"}` || len(resp.ToolCalls) != 0 || resp.FinishReason != provider.FinishStop {
		t.Errorf("resp %+v", resp)
	}
	if resp.Usage.CachedInputTokens != 1792 || resp.Usage.InputTokens != 61+1792 {
		t.Errorf("usage %+v", resp.Usage)
	}
}

// TestStructuredOutputIgnored: a gateway that drops tool_choice answers
// in text; the adapter passes it on for the engine's repair path.
func TestStructuredOutputIgnored(t *testing.T) {
	srv := exchange.Serve(t, "testdata/structured_ignored.json")
	prov, _ := newProvider(t, profile(srv.URL), Options{})
	resp, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: planner, ResponseSchema: responseSchema(t, "plan_v1")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Text, "Here is the plan:\n```json") || resp.FinishReason != provider.FinishStop {
		t.Errorf("resp %+v", resp)
	}
}

func TestAnswerToolNameCollision(t *testing.T) {
	prov, _ := newProvider(t, profile("http://127.0.0.1:1"), Options{})
	rs := responseSchema(t, "plan_v1")
	rs.Name = "repo_read"
	_, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: planner, Tools: tools, ResponseSchema: rs})
	exchange.CheckRequestError(t, err, "same name")
}

func TestOverloadedIsRetried(t *testing.T) {
	srv := exchange.Serve(t, "testdata/overloaded.json")
	prov, w := newProvider(t, profile(srv.URL), Options{})
	if _, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead}); err != nil {
		t.Fatal(err)
	}
	w.Check(t, 500*time.Millisecond)
	srv.CheckRequests(t, 2)
}

func TestAuthTokenIsBearer(t *testing.T) {
	srv := exchange.Serve(t, "testdata/bearer.json")
	p := profile(srv.URL)
	p.APIKey, p.BearerToken = "sk-ant-oat-token", true
	prov, _ := newProvider(t, p, Options{})
	if _, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead}); err != nil {
		t.Fatal(err)
	}
}

func TestRejectedKey(t *testing.T) {
	srv := exchange.Serve(t, "testdata/unauthorized.json")
	p := profile(srv.URL)
	p.APIKey = "sk-ant-wrong"
	prov, w := newProvider(t, p, Options{})
	_, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead})
	exchange.CheckError(t, err, w, exchange.WantError{Provider: Name, Status: 401, Attempts: 1, Message: "not authorized"})
}

func TestCheck(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	tests := []struct {
		name, file, model, base string
		kind                    error
		fix                     string
	}{
		{"served", "testdata/model_get.json", "claude-sonnet-4-6", "", nil, ""},
		{"key rejected", "testdata/model_unauthorized.json", "claude-sonnet-4-6", "", provider.ErrKeyRejected, "ANTHROPIC_API_KEY"},
		{"unreachable", "", "claude-sonnet-4-6", closed, provider.ErrUnreachable, "ANTHROPIC_BASE_URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := tt.base
			if tt.file != "" {
				base = exchange.Serve(t, tt.file).URL
			}
			p := profile(base)
			p.Model = tt.model
			p.Origin.APIKey = "ANTHROPIC_API_KEY"
			prov, _ := newProvider(t, p, Options{})
			err := prov.Check(context.Background())
			if tt.kind == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.fix) {
				t.Fatalf("err = %v, want %v naming %s", err, tt.kind, tt.fix)
			}
		})
	}
}

func TestDefaultBaseURL(t *testing.T) {
	if provider.DefaultBaseURLs[Name] != DefaultBaseURL {
		t.Errorf("provider.DefaultBaseURLs[%q] = %q, the adapter uses %q", Name, provider.DefaultBaseURLs[Name], DefaultBaseURL)
	}
}

func TestUnknownModelIsNotRetried(t *testing.T) {
	srv := exchange.Serve(t, "testdata/unknown_model.json")
	p := profile(srv.URL)
	p.Model = "claude-sonnet-9"
	prov, w := newProvider(t, p, Options{})
	_, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead})
	exchange.CheckError(t, err, w, exchange.WantError{Provider: Name, Status: 404, Attempts: 1, Message: "request rejected"})
}

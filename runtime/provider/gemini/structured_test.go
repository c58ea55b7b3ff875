package gemini

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/internal/exchange"
	"github.com/agentos/agentos/schemas"
)

func roleSchema(t *testing.T, id string) *provider.ResponseSchema {
	t.Helper()
	b, ok := schemas.MustDefault().Source(id)
	if !ok {
		t.Fatalf("no schema %s", id)
	}
	return &provider.ResponseSchema{Name: id, Schema: b}
}

// TestStructuredOutput: the role schema goes out as responseMimeType +
// responseSchema in Gemini's OpenAPI subset; the cached tokens Gemini
// reports are counted and priced apart.
func TestStructuredOutput(t *testing.T) {
	srv := exchange.Serve(t, "testdata/structured.json")
	prov, _ := newProvider(t, profile(srv.URL), false)
	pricing, _ := provider.ListPrice("gemini-2.5-flash")
	p := provider.Checked{P: provider.Priced{P: prov, Pricing: pricing}, Reg: schemas.MustDefault()}
	resp, err := p.Complete(context.Background(), provider.CompletionRequest{
		Messages:       []provider.Message{{Role: provider.RoleSystem, Content: "You are the Reviewer."}, {Role: provider.RoleUser, Content: "plan_v1: ..."}},
		ResponseSchema: roleSchema(t, "review_result_v1"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := schemas.MustDefault().ValidateJSON("review_result_v1", []byte(resp.Text)); err != nil {
		t.Errorf("%s: %v", resp.Text, err)
	}
	u := resp.Usage
	want := (float64(2310-2048)*0.30 + 2048*0.03 + float64(24+76)*2.50) / 1e6
	if u.InputTokens != 2310 || u.CachedInputTokens != 2048 || u.OutputTokens != 100 || u.CostUSD < want-1e-12 || u.CostUSD > want+1e-12 {
		t.Errorf("usage %+v, want cost %v", u, want)
	}
}

// TestStructuredOutputWithTools: Gemini 2.x does not take a JSON response
// type with function declarations: the tools stay, function calling is
// off, no schema is sent.
func TestStructuredOutputWithTools(t *testing.T) {
	srv := exchange.Serve(t, "testdata/structured_tools.json")
	prov, _ := newProvider(t, profile(srv.URL), false)
	resp, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead, Tools: tools, ResponseSchema: roleSchema(t, "worker_report_v1")})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 0 || !strings.HasPrefix(resp.Text, `{"output"`) {
		t.Errorf("resp %+v", resp)
	}
}

func TestCheck(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/"
	l.Close()
	tests := []struct {
		name, file, model, base string
		kind                    error
		fix                     string
	}{
		{"served", "testdata/model_get.json", "gemini-2.5-flash", "", nil, ""},
		{"invalid key (400 API_KEY_INVALID)", "testdata/model_bad_key.json", "gemini-2.5-flash", "", provider.ErrKeyRejected, "GEMINI_API_KEY"},
		{"key without access (403)", "testdata/model_denied.json", "gemini-2.5-flash", "", provider.ErrKeyRejected, "GEMINI_API_KEY"},
		{"unreachable", "", "gemini-2.5-flash", closed, provider.ErrUnreachable, "GOOGLE_GEMINI_BASE_URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := tt.base
			if tt.file != "" {
				base = exchange.Serve(t, tt.file).URL
			}
			p := profile(base)
			p.Model = tt.model
			p.Origin.APIKey = "GEMINI_API_KEY"
			prov, _ := newProvider(t, p, false)
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
	p.Model = "gemini-9-flash"
	prov, w := newProvider(t, p, false)
	_, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead})
	exchange.CheckError(t, err, w, exchange.WantError{Provider: Name, Status: 404, Attempts: 1, Message: "request rejected"})
}

// TestStructuredOutputIgnored: a gateway that drops responseSchema
// answers in prose; the adapter passes the text on for the engine's repair.
func TestStructuredOutputIgnored(t *testing.T) {
	srv := exchange.Serve(t, "testdata/structured_ignored.json")
	prov, _ := newProvider(t, profile(srv.URL), false)
	resp, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead, ResponseSchema: roleSchema(t, "review_result_v1")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Text, "Sure! Here is my review:\n```json") {
		t.Errorf("text %q", resp.Text)
	}
}

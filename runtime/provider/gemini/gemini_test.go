package gemini

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/internal/exchange"
	"github.com/agentos/agentos/schemas"
	"google.golang.org/genai"
)

func profile(url string) provider.Profile {
	temp := 0.2
	return provider.Profile{Provider: Name, Model: "gemini-2.5-flash", BaseURL: url, APIKey: "test-key", MaxTokens: 512, Temperature: &temp, Retries: 3}
}

func newProvider(t *testing.T, p provider.Profile, stream bool) (*Provider, *exchange.Waits) {
	t.Helper()
	w := &exchange.Waits{}
	prov, err := New(context.Background(), p, Options{Stream: stream, Sleep: w.Sleep})
	if err != nil {
		t.Fatal(err)
	}
	return prov, w
}

var lead = []provider.Message{
	{Role: provider.RoleSystem, Content: "You are the lead. Answer in JSON."},
	{Role: provider.RoleUser, Content: "fix auth.ts"},
}

var tools = []provider.ToolSpec{
	{Name: "repo.read", Description: "Read a file of the repository.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
	{Name: "repo.patch", Description: "Apply a unified diff.", InputSchema: json.RawMessage(`{"type":"object","properties":{"diff":{"type":"string"}},"required":["diff"]}`)},
}

const leadText = `{"intent":"fix the token check in auth.ts","constraints":[],"schema_version":"v1"}`

func TestTextAnswerValidatesAgainstSchema(t *testing.T) {
	srv := exchange.Serve(t, "testdata/text.json")
	prov, _ := newProvider(t, profile(srv.URL), false)
	pricing := provider.Pricing{InputPerMTok: 0.3, OutputPerMTok: 2.5}
	p := provider.Checked{P: provider.Priced{P: prov, Pricing: pricing}, Reg: schemas.MustDefault()}
	resp, err := p.Complete(context.Background(), provider.CompletionRequest{Messages: lead, Model: "gemini-2.5-flash"})
	if err != nil {
		t.Fatal(err)
	}
	// Thinking tokens (66) are billed as output.
	usage := provider.Usage{InputTokens: 33, OutputTokens: 21 + 66}
	usage.CostUSD = pricing.Cost(usage)
	want := provider.CompletionResponse{Text: leadText, ToolCalls: []provider.ToolCall{}, FinishReason: provider.FinishStop, Usage: usage, Model: "gemini-2.5-flash", SchemaVersion: "v1"}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("got  %+v\nwant %+v", resp, want)
	}
}

func TestToolCallsAndFollowUp(t *testing.T) {
	srv := exchange.Serve(t, "testdata/tool.json")
	prov, _ := newProvider(t, profile(srv.URL), false)
	p := provider.Checked{P: prov, Reg: schemas.MustDefault()}
	history := []provider.Message{
		{Role: provider.RoleSystem, Content: "You are the worker."},
		{Role: provider.RoleUser, Content: "fix auth.ts"},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{
			{ID: "gemini_call_0011223344556677", Name: "repo.read", Args: json.RawMessage(`{"path":"auth.ts"}`)},
			{ID: "fc_7b2d", Name: "repo.read", Args: json.RawMessage(`{"path":"auth.test.ts"}`)},
		}},
		{Role: provider.RoleTool, ToolCallID: "gemini_call_0011223344556677", Content: "export function check(t) { return true }"},
		{Role: provider.RoleTool, ToolCallID: "fc_7b2d", Content: "test('rejects', () => expect(check('')).toBe(false))"},
	}
	req := provider.CompletionRequest{Messages: history, Model: "gemini-2.5-flash", Tools: tools}
	resp, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "The check accepts every token." || resp.FinishReason != provider.FinishToolUse || len(resp.ToolCalls) != 2 {
		t.Fatalf("resp = %+v", resp)
	}
	if resp.Usage != (provider.Usage{InputTokens: 214, OutputTokens: 71}) {
		t.Errorf("usage = %+v", resp.Usage)
	}
	for i, want := range []struct{ name, args string }{
		{"repo.patch", `{"diff":"--- a/auth.ts\n+++ b/auth.ts\n@@ -1 +1 @@\n-export function check(t) { return true }\n+export function check(t) { return verify(t) }\n"}`},
		{"repo.read", `{"path":"auth.test.ts"}`},
	} {
		c := resp.ToolCalls[i]
		if c.Name != want.name || string(c.Args) != want.args {
			t.Errorf("call %d = %s %s, want %s %s", i, c.Name, c.Args, want.name, want.args)
		}
		// Gemini sent no ids: synthesised, distinct, stable.
		if !strings.HasPrefix(c.ID, syntheticPrefix) || len(c.ID) != len(syntheticPrefix)+16 {
			t.Errorf("call %d id = %q, want a synthesised id", i, c.ID)
		}
	}
	if resp.ToolCalls[0].ID == resp.ToolCalls[1].ID {
		t.Errorf("two calls share id %q", resp.ToolCalls[0].ID)
	}
	again, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if again.ToolCalls[0].ID != resp.ToolCalls[0].ID || again.ToolCalls[1].ID != resp.ToolCalls[1].ID {
		t.Errorf("ids not stable across identical calls: %v then %v", resp.ToolCalls, again.ToolCalls)
	}

	// The next turn sends the calls back with Gemini's thought signature
	// and without the synthesised ids.
	next := exchange.Serve(t, "testdata/followup.json")
	prov.models = mustModels(t, next.URL)
	followUp := []provider.Message{
		{Role: provider.RoleUser, Content: "fix auth.ts"},
		{Role: provider.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls},
		{Role: provider.RoleTool, ToolCallID: resp.ToolCalls[0].ID, Content: "applied"},
		{Role: provider.RoleTool, ToolCallID: resp.ToolCalls[1].ID, Content: "test('rejects')"},
	}
	if _, err := p.Complete(context.Background(), provider.CompletionRequest{Messages: followUp, Model: "gemini-2.5-flash"}); err != nil {
		t.Fatal(err)
	}
}

// mustModels points an existing provider at another server, keeping its
// signature memory.
func mustModels(t *testing.T, url string) *genai.Models {
	t.Helper()
	p, err := New(context.Background(), profile(url), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p.models
}

func TestStreaming(t *testing.T) {
	tests := []struct {
		file  string
		tools []provider.ToolSpec
		want  provider.CompletionResponse
	}{
		{"testdata/stream.json", nil, provider.CompletionResponse{
			Text:          `{"intent":"fix auth","constraints":[],"schema_version":"v1"}`,
			ToolCalls:     []provider.ToolCall{},
			FinishReason:  provider.FinishStop,
			Usage:         provider.Usage{InputTokens: 12, OutputTokens: 16 + 12},
			Model:         "gemini-2.5-flash",
			SchemaVersion: "v1",
		}},
		{"testdata/stream_tool.json", tools, provider.CompletionResponse{
			Text:          "Reading the file first.",
			FinishReason:  provider.FinishToolUse,
			Usage:         provider.Usage{InputTokens: 61, OutputTokens: 19},
			Model:         "gemini-2.5-flash",
			SchemaVersion: "v1",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			srv := exchange.Serve(t, tt.file)
			prov, _ := newProvider(t, profile(srv.URL), true)
			p := provider.Checked{P: prov, Reg: schemas.MustDefault()}
			var deltas []string
			resp, err := p.Complete(context.Background(), provider.CompletionRequest{Messages: []provider.Message{{Role: provider.RoleUser, Content: "fix auth.ts"}}, Model: "gemini-2.5-flash", Tools: tt.tools, OnDelta: func(s string) { deltas = append(deltas, s) }})
			if err != nil {
				t.Fatal(err)
			}
			if tt.tools != nil {
				if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "repo.read" || string(resp.ToolCalls[0].Args) != `{"path":"auth.ts"}` || !strings.HasPrefix(resp.ToolCalls[0].ID, syntheticPrefix) {
					t.Errorf("tool calls = %+v", resp.ToolCalls)
				}
				resp.ToolCalls = nil
			}
			// The text arrives as deltas (output.delta).
			if strings.Join(deltas, "") != resp.Text || len(deltas) == 0 {
				t.Errorf("deltas %q do not make up the text %q", deltas, resp.Text)
			}
			if !reflect.DeepEqual(resp, tt.want) {
				t.Errorf("got  %+v\nwant %+v", resp, tt.want)
			}
		})
	}
}

func TestRetryWaits(t *testing.T) {
	tests := []struct {
		file string
		want time.Duration
	}{
		{"testdata/rate_limited.json", 7 * time.Second}, // Retry-After
		{"testdata/retry_info.json", 34 * time.Second},  // google.rpc.RetryInfo
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			srv := exchange.Serve(t, tt.file)
			prov, w := newProvider(t, profile(srv.URL), false)
			resp, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead, Model: "gemini-2.5-flash"})
			if err != nil || resp.Text != leadText {
				t.Fatalf("resp = %+v, err = %v", resp, err)
			}
			w.Check(t, tt.want)
			srv.CheckRequests(t, 2)
		})
	}
}

func TestMalformedFunctionCallIsResampled(t *testing.T) {
	srv := exchange.Serve(t, "testdata/malformed_call.json")
	prov, w := newProvider(t, profile(srv.URL), false)
	resp, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead, Model: "gemini-2.5-flash", Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 2 || len(w.Got()) != 1 {
		t.Errorf("resp = %+v, waits = %v; want the second answer after one retry", resp, w.Got())
	}
}

func TestBlockedPrompt(t *testing.T) {
	srv := exchange.Serve(t, "testdata/blocked.json")
	prov, _ := newProvider(t, profile(srv.URL), false)
	p := provider.Checked{P: prov, Reg: schemas.MustDefault()}
	resp, err := p.Complete(context.Background(), provider.CompletionRequest{Messages: lead, Model: "gemini-2.5-flash"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != provider.FinishSafety || resp.Text != "" || resp.Usage.InputTokens != 9 {
		t.Errorf("resp = %+v, want a safety stop", resp)
	}
}

func TestFailures(t *testing.T) {
	tests := []struct {
		file string
		want exchange.WantError // Provider is Name
	}{
		{"testdata/server_error.json", exchange.WantError{Status: 500, Attempts: 4, Retryable: true, Waits: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}, Message: "server error"}},
		{"testdata/bad_key.json", exchange.WantError{Status: 400, Attempts: 1, Message: "request rejected"}},
		{"testdata/malformed_html.json", exchange.WantError{Status: 200, Attempts: 1, Message: "malformed"}},
		{"testdata/malformed_shape.json", exchange.WantError{Status: 200, Attempts: 1, Message: "malformed"}},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tt.file, stream), func(t *testing.T) {
				f := exchange.Load(t, tt.file)
				if stream {
					f.Request.Path = strings.Replace(f.Request.Path, ":generateContent", ":streamGenerateContent", 1)
				}
				srv := exchange.ServeFile(t, f, tt.file)
				prov, w := newProvider(t, profile(srv.URL), stream)
				_, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead, Model: "gemini-2.5-flash"})
				want := tt.want
				want.Provider = Name
				exchange.CheckError(t, err, w, want)
				srv.CheckRequests(t, want.Attempts)
			})
		}
	}
}

func TestRequestErrors(t *testing.T) {
	if _, err := New(context.Background(), provider.Profile{Provider: Name, Model: "gemini-2.5-flash"}, Options{}); err == nil || !strings.Contains(err.Error(), "GEMINI_API_KEY") {
		t.Errorf("New without key: err = %v", err)
	}
	if _, err := New(context.Background(), provider.Profile{Provider: Name, APIKey: "k", BaseURL: "::"}, Options{}); err == nil || !strings.Contains(err.Error(), "not an http(s) URL") {
		t.Errorf("New with a bad base_url: err = %v", err)
	}
	prov, _ := newProvider(t, provider.Profile{Provider: Name, APIKey: "k"}, false)
	tests := []struct {
		name string
		req  provider.CompletionRequest
		want string
	}{
		{"no model", provider.CompletionRequest{Messages: lead}, "no model"},
		{"unknown role", provider.CompletionRequest{Model: "m", Messages: []provider.Message{{Role: "robot", Content: "x"}}}, `unknown role "robot"`},
		{"tool without id", provider.CompletionRequest{Model: "m", Messages: []provider.Message{{Role: provider.RoleTool, Content: "x"}}}, "tool_call_id"},
		{"tool answering nothing", provider.CompletionRequest{Model: "m", Messages: []provider.Message{{Role: provider.RoleTool, ToolCallID: "c9", Content: "x"}}}, "answers no earlier tool call"},
		{"schema not an object", provider.CompletionRequest{Model: "m", Messages: lead, Tools: []provider.ToolSpec{{Name: "x", InputSchema: json.RawMessage(`true`)}}}, "input_schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := prov.Complete(context.Background(), tt.req)
			exchange.CheckRequestError(t, err, tt.want)
		})
	}
}

func TestStreamErrorEventIsRetried(t *testing.T) {
	srv := exchange.Serve(t, "testdata/stream_error.json")
	prov, w := newProvider(t, profile(srv.URL), true)
	resp, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead, Model: "gemini-2.5-flash"})
	if err != nil {
		t.Fatal(err)
	}
	// Only the second stream's text: nothing of the broken one.
	if want := `{"intent":"fix auth","constraints":[],"schema_version":"v1"}`; resp.Text != want {
		t.Errorf("text = %q, want %q", resp.Text, want)
	}
	w.Check(t, 500*time.Millisecond)
}

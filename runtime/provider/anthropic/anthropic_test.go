package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/internal/exchange"
	"github.com/agentos/agentos/schemas"
)

func profile(url string) provider.Profile {
	return provider.Profile{Provider: Name, Model: "claude-sonnet-4-5", BaseURL: url, APIKey: "test-key", MaxTokens: 1024, Retries: 3}
}

func newProvider(t *testing.T, p provider.Profile, o Options) (*Provider, *exchange.Waits) {
	t.Helper()
	w := &exchange.Waits{}
	if o.Sleep == nil {
		o.Sleep = w.Sleep
	}
	prov, err := New(p, o)
	if err != nil {
		t.Fatal(err)
	}
	return prov, w
}

var lead = []provider.Message{
	{Role: provider.RoleSystem, Content: "You are the lead. Answer in JSON."},
	{Role: provider.RoleSystem, Content: "The repository is a TypeScript service."},
	{Role: provider.RoleUser, Content: "fix auth.ts"},
}

var workerHistory = []provider.Message{
	{Role: provider.RoleSystem, Content: "You are the worker."},
	{Role: provider.RoleUser, Content: "fix auth.ts"},
	{Role: provider.RoleAssistant, Content: "I'll read both files.", ToolCalls: []provider.ToolCall{
		{ID: "toolu_01A09q90qw90lq917835lq9", Name: "repo.read", Args: json.RawMessage(`{"path":"auth.ts"}`)},
		{ID: "toolu_01B19q90qw90lq917835lq8", Name: "repo.read", Args: json.RawMessage(`{"path":"auth.test.ts"}`)},
	}},
	{Role: provider.RoleTool, ToolCallID: "toolu_01A09q90qw90lq917835lq9", Content: "export function check(t) { return true }"},
	{Role: provider.RoleTool, ToolCallID: "toolu_01B19q90qw90lq917835lq8", Content: "test('rejects', () => expect(check('')).toBe(false))"},
	{Role: provider.RoleUser, Content: "Keep the public API."},
}

var tools = []provider.ToolSpec{
	{Name: "repo.read", Description: "Read a file of the repository.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`)},
	{Name: "repo.patch", Description: "Apply a unified diff.", InputSchema: json.RawMessage(`{"type":"object","properties":{"diff":{"type":"string"}},"required":["diff"]}`)},
}

var leadText = `{"intent":"fix the token check in auth.ts","constraints":[],"schema_version":"v1"}`

func TestTextAnswerValidatesAgainstSchema(t *testing.T) {
	srv := exchange.Serve(t, "testdata/text.json")
	prof := profile(srv.URL)
	temp := 0.2
	prof.Temperature = &temp
	prov, _ := newProvider(t, prof, Options{})
	pricing := provider.Pricing{InputPerMTok: 3, OutputPerMTok: 15}
	p := provider.Checked{P: provider.Priced{P: prov, Pricing: pricing}, Reg: schemas.MustDefault()}
	resp, err := p.Complete(context.Background(), provider.CompletionRequest{Messages: lead, Model: "claude-sonnet-4-5"})
	if err != nil {
		t.Fatal(err)
	}
	usage := provider.Usage{InputTokens: 41, OutputTokens: 24}
	usage.CostUSD = pricing.Cost(usage)
	want := provider.CompletionResponse{Text: leadText, ToolCalls: []provider.ToolCall{}, FinishReason: provider.FinishStop, Usage: usage, Model: "claude-sonnet-4-5-20250929", SchemaVersion: "v1"}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("got  %+v\nwant %+v", resp, want)
	}
}

func TestToolCallRoundTrip(t *testing.T) {
	srv := exchange.Serve(t, "testdata/tool.json")
	prov, _ := newProvider(t, profile(srv.URL), Options{})
	p := provider.Checked{P: prov, Reg: schemas.MustDefault()}
	resp, err := p.Complete(context.Background(), provider.CompletionRequest{Messages: workerHistory, Model: "claude-sonnet-4-5", Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	want := provider.CompletionResponse{
		Text: "The check accepts every token; I'll make it verify.",
		ToolCalls: []provider.ToolCall{{ID: "toolu_01D7FLrfh4GYq7yT1ULFeyMV", Name: "repo.patch",
			Args: json.RawMessage(`{"diff": "--- a/auth.ts\n+++ b/auth.ts\n@@ -1 +1 @@\n-export function check(t) { return true }\n+export function check(t) { return verify(t) }\n"}`)}},
		FinishReason: provider.FinishToolUse,
		// Cached input tokens count: they fill the context all the same.
		Usage:         provider.Usage{InputTokens: 380 + 1200, OutputTokens: 96, CachedInputTokens: 1200},
		Model:         "claude-sonnet-4-5-20250929",
		SchemaVersion: "v1",
	}
	var gotArgs, wantArgs any
	_ = json.Unmarshal(resp.ToolCalls[0].Args, &gotArgs)
	_ = json.Unmarshal(want.ToolCalls[0].Args, &wantArgs)
	if !reflect.DeepEqual(gotArgs, wantArgs) {
		t.Errorf("args = %s, want %s", resp.ToolCalls[0].Args, want.ToolCalls[0].Args)
	}
	resp.ToolCalls[0].Args, want.ToolCalls[0].Args = nil, nil
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("got  %+v\nwant %+v", resp, want)
	}
}

func TestStreaming(t *testing.T) {
	tests := []struct {
		file      string
		maxTokens int
		want      provider.CompletionResponse
	}{
		{"testdata/stream.json", 0, provider.CompletionResponse{
			Text:          "Okay, let me read the file.",
			ToolCalls:     []provider.ToolCall{{ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "repo.read", Args: json.RawMessage(`{"path": "auth.ts"}`)}},
			FinishReason:  provider.FinishToolUse,
			Usage:         provider.Usage{InputTokens: 472, OutputTokens: 89},
			Model:         "claude-sonnet-4-5-20250929",
			SchemaVersion: "v1",
		}},
		// Cut by max_tokens inside a tool call: the partial input is kept
		// verbatim for the kernel's guard to classify, not dropped.
		{"testdata/stream_cut.json", 16, provider.CompletionResponse{
			Text:          "",
			ToolCalls:     []provider.ToolCall{{ID: "toolu_01CutCutCut", Name: "repo.patch", Args: json.RawMessage(`{"diff": "--- a/au`)}},
			FinishReason:  provider.FinishMaxTokens,
			Usage:         provider.Usage{InputTokens: 300, OutputTokens: 16},
			Model:         "claude-sonnet-4-5-20250929",
			SchemaVersion: "v1",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			srv := exchange.Serve(t, tt.file)
			prov, _ := newProvider(t, profile(srv.URL), Options{Stream: true})
			var deltas []string
			resp, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: []provider.Message{{Role: provider.RoleUser, Content: "fix auth.ts"}}, Model: "claude-sonnet-4-5", MaxTokens: tt.maxTokens, Tools: tools, OnDelta: func(s string) { deltas = append(deltas, s) }})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(resp, tt.want) {
				t.Errorf("got  %+v\nwant %+v", resp, tt.want)
			}
			// The text arrives as deltas (output.delta).
			if strings.Join(deltas, "") != resp.Text {
				t.Errorf("deltas %q do not make up the text %q", deltas, resp.Text)
			}
		})
	}
}

func TestStreamErrorEventIsRetried(t *testing.T) {
	srv := exchange.Serve(t, "testdata/stream_overloaded.json")
	prov, w := newProvider(t, profile(srv.URL), Options{Stream: true})
	p := provider.Checked{P: prov, Reg: schemas.MustDefault()}
	resp, err := p.Complete(context.Background(), provider.CompletionRequest{Messages: lead, Model: "claude-sonnet-4-5"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"intent":"fix auth","constraints":[],"schema_version":"v1"}`; resp.Text != want || resp.Usage != (provider.Usage{InputTokens: 41, OutputTokens: 22}) {
		t.Errorf("resp = %+v", resp)
	}
	w.Check(t, 500*time.Millisecond)
	srv.CheckRequests(t, 2)
}

func TestRetryHonoursRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 22, 19, 30, 0, 0, time.UTC)
	tests := []struct {
		file string
		want time.Duration
	}{
		{"testdata/rate_limited.json", 7 * time.Second},
		{"testdata/rate_limited_date.json", 12 * time.Second}, // HTTP date, 12 s after now
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tt.file, stream), func(t *testing.T) {
				srv := exchange.Serve(t, tt.file)
				prov, w := newProvider(t, profile(srv.URL), Options{Now: func() time.Time { return now }})
				prov.stream = stream
				resp, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead, Model: "claude-sonnet-4-5"})
				if stream {
					// The second recorded answer is JSON, not a stream: the
					// retry happened, the stream then fails as malformed.
					var pe *provider.Error
					if !errors.As(err, &pe) || pe.Attempts != 2 {
						t.Fatalf("err = %v, want a failure on attempt 2", err)
					}
				} else if err != nil || resp.Text != leadText {
					t.Fatalf("resp = %+v, err = %v", resp, err)
				}
				w.Check(t, tt.want)
			})
		}
	}
}

func TestFailures(t *testing.T) {
	tests := []struct {
		file    string
		retries int
		want    exchange.WantError // Provider is Name
	}{
		{"testdata/server_error.json", 3, exchange.WantError{Status: 500, Attempts: 4, Retryable: true, Waits: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}, Message: "server error"}},
		{"testdata/bad_request.json", 3, exchange.WantError{Status: 400, Attempts: 1, Message: "request rejected"}},
		{"testdata/malformed_html.json", 3, exchange.WantError{Status: 200, Attempts: 1, Message: "malformed"}},
		{"testdata/malformed_shape.json", 3, exchange.WantError{Status: 200, Attempts: 1, Message: "malformed"}},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tt.file, stream), func(t *testing.T) {
				srv := exchange.Serve(t, tt.file)
				p := profile(srv.URL)
				p.Retries = tt.retries
				prov, w := newProvider(t, p, Options{Stream: stream})
				_, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead, Model: "claude-sonnet-4-5"})
				want := tt.want
				want.Provider = Name
				exchange.CheckError(t, err, w, want)
				srv.CheckRequests(t, want.Attempts)
			})
		}
	}
}

func TestIgnoresAmbientEnvironment(t *testing.T) {
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "token-from-the-environment")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	// text.json requires no Authorization header and x-api-key: test-key.
	srv := exchange.Serve(t, "testdata/text.json")
	prof := profile(srv.URL)
	temp := 0.2
	prof.Temperature = &temp
	prov, _ := newProvider(t, prof, Options{})
	if _, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead}); err != nil {
		t.Fatal(err)
	}
}

func TestRequestErrors(t *testing.T) {
	if _, err := New(provider.Profile{Provider: Name, Model: "claude-sonnet-4-5", BaseURL: "http://localhost:8080"}, Options{}); err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Errorf("New without key: err = %v", err)
	}
	if _, err := New(provider.Profile{Provider: Name, APIKey: "k", BaseURL: "api.anthropic.com"}, Options{}); err == nil || !strings.Contains(err.Error(), "not an http(s) URL") {
		t.Errorf("New with a bad base_url: err = %v", err)
	}
	prov, _ := newProvider(t, provider.Profile{Provider: Name, APIKey: "k"}, Options{})
	tests := []struct {
		name string
		req  provider.CompletionRequest
		want string
	}{
		{"no model", provider.CompletionRequest{Messages: lead}, "no model"},
		{"unknown role", provider.CompletionRequest{Model: "m", Messages: []provider.Message{{Role: "robot", Content: "x"}}}, `unknown role "robot"`},
		{"tool without id", provider.CompletionRequest{Model: "m", Messages: []provider.Message{{Role: provider.RoleTool, Content: "x"}}}, "tool_call_id"},
		{"schema not an object", provider.CompletionRequest{Model: "m", Messages: lead, Tools: []provider.ToolSpec{{Name: "x", InputSchema: json.RawMessage(`"s"`)}}}, "input_schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := prov.Complete(context.Background(), tt.req)
			exchange.CheckRequestError(t, err, tt.want)
		})
	}
}

func TestParamsDefaultsAndBrokenHistoryArgs(t *testing.T) {
	prov, _ := newProvider(t, provider.Profile{Provider: Name, Model: "claude-haiku-4-5", APIKey: "k"}, Options{})
	params, _, err := prov.params(provider.CompletionRequest{Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "go"},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "toolu_1", Name: "repo.read", Args: json.RawMessage(`{'path': 'a'}`)}}},
		{Role: provider.RoleTool, ToolCallID: "toolu_1", Content: ""},
	}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(params)
	var got map[string]any
	_ = json.Unmarshal(b, &got)
	want := map[string]any{
		"model":      "claude-haiku-4-5",
		"max_tokens": float64(DefaultMaxTokens),
		"system":     nil,
		"messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "go"}}},
			// Arguments that were never an object reach the API as one,
			// with the model's text preserved.
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": "repo_read", "input": map[string]any{"_raw": "{'path': 'a'}"}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1"}}},
		},
	}
	if problems := exchange.Match(want, got, "params"); len(problems) > 0 {
		t.Error(strings.Join(problems, "\n"))
	}
}

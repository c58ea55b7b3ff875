package openai

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
	temp := 0.2
	return provider.Profile{Provider: Name, Model: "gpt-4o-mini", BaseURL: url + "/v1", APIKey: "test-key", MaxTokens: 512, Temperature: &temp, Retries: 3}
}

func newProvider(t *testing.T, p provider.Profile, stream bool) (*Provider, *exchange.Waits) {
	t.Helper()
	w := &exchange.Waits{}
	prov, err := New(p, Options{Stream: stream, Sleep: w.Sleep})
	if err != nil {
		t.Fatal(err)
	}
	return prov, w
}

var lead = []provider.Message{
	{Role: provider.RoleSystem, Content: "You are the lead. Answer in JSON."},
	{Role: provider.RoleUser, Content: "fix auth.ts"},
}

var workerHistory = []provider.Message{
	{Role: provider.RoleSystem, Content: "You are the worker."},
	{Role: provider.RoleUser, Content: "fix auth.ts"},
	{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "call_8SzGxXJRW5Ugz6PGP9wSArPd", Name: "repo.read", Args: json.RawMessage(`{"path":"auth.ts"}`)}}},
	{Role: provider.RoleTool, ToolCallID: "call_8SzGxXJRW5Ugz6PGP9wSArPd", Content: "export function check(t) { return true }"},
}

var tools = []provider.ToolSpec{
	{Name: "repo.read", Description: "Read a file of the repository.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
	{Name: "repo.patch", Description: "Apply a unified diff.", InputSchema: json.RawMessage(`{"type":"object","properties":{"diff":{"type":"string"}},"required":["diff"]}`)},
}

func TestTextAnswerValidatesAgainstSchema(t *testing.T) {
	srv := exchange.Serve(t, "testdata/text.json")
	prov, _ := newProvider(t, profile(srv.URL), false)
	p := provider.Checked{P: provider.Priced{P: prov, Pricing: provider.Pricing{InputPerMTok: 0.15, OutputPerMTok: 0.6}}, Reg: schemas.MustDefault()}
	resp, err := p.Complete(context.Background(), provider.CompletionRequest{Messages: lead, Model: "gpt-4o-mini"})
	if err != nil {
		t.Fatal(err)
	}
	want := provider.CompletionResponse{
		Text:          `{"intent":"fix the token check in auth.ts","constraints":[],"schema_version":"v1"}`,
		ToolCalls:     []provider.ToolCall{},
		FinishReason:  provider.FinishStop,
		Usage:         provider.Usage{InputTokens: 27, OutputTokens: 21, CostUSD: provider.Pricing{InputPerMTok: 0.15, OutputPerMTok: 0.6}.Cost(provider.Usage{InputTokens: 27, OutputTokens: 21})},
		Model:         "gpt-4o-mini-2024-07-18",
		SchemaVersion: "v1",
	}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("got  %+v\nwant %+v", resp, want)
	}
	srv.CheckRequests(t, 1)
}

func TestToolCallRoundTrip(t *testing.T) {
	srv := exchange.Serve(t, "testdata/tool.json")
	prov, _ := newProvider(t, profile(srv.URL), false)
	p := provider.Checked{P: prov, Reg: schemas.MustDefault()}
	resp, err := p.Complete(context.Background(), provider.CompletionRequest{Messages: workerHistory, Model: "gpt-4o-mini", Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	want := []provider.ToolCall{
		{ID: "call_Qk3ZT0aW1b0vXoR5mE2nL7pD", Name: "repo.patch", Args: json.RawMessage(`{"diff":"--- a/auth.ts\n+++ b/auth.ts\n@@ -1 +1 @@\n-export function check(t) { return true }\n+export function check(t) { return verify(t) }\n"}`)},
		{ID: "call_Vb9wLs2KqP4xN8cR1tYe6HjU", Name: "repo.read", Args: json.RawMessage(`{"path":"auth.test.ts"}`)},
	}
	if !reflect.DeepEqual(resp.ToolCalls, want) {
		t.Errorf("tool calls:\ngot  %s\nwant %s", show(resp.ToolCalls), show(want))
	}
	if resp.FinishReason != provider.FinishToolUse || resp.Text != "" {
		t.Errorf("finish %q text %q, want tool_use and no text", resp.FinishReason, resp.Text)
	}
	if resp.Usage != (provider.Usage{InputTokens: 212, OutputTokens: 88}) {
		t.Errorf("usage = %+v", resp.Usage)
	}
}

func TestArgumentsKeptVerbatim(t *testing.T) {
	srv := exchange.Serve(t, "testdata/bad_args.json")
	prov, _ := newProvider(t, profile(srv.URL), false)
	req := provider.CompletionRequest{Messages: lead, Model: "qwen2.5-coder:7b"}
	resp, err := prov.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 3 {
		t.Fatalf("got %d tool calls, want 3", len(resp.ToolCalls))
	}
	for i, want := range []string{`["auth.ts"]`, `{'path': 'auth.ts',}`, `{}`} {
		if got := string(resp.ToolCalls[i].Args); got != want {
			t.Errorf("call %d args = %s, want %s", i, got, want)
		}
	}
	// A compatible server that sends no id gets a synthesised, stable one.
	id := resp.ToolCalls[2].ID
	if !strings.HasPrefix(id, "call_") || id == "call_" {
		t.Errorf("synthesised id = %q", id)
	}
	again, err := prov.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if again.ToolCalls[2].ID != id {
		t.Errorf("id not stable: %q then %q", id, again.ToolCalls[2].ID)
	}
	// "stop" with tool calls (Ollama's habit) still means tool use.
	if resp.FinishReason != provider.FinishToolUse {
		t.Errorf("finish = %q, want tool_use", resp.FinishReason)
	}
}

func TestStreaming(t *testing.T) {
	tests := []struct {
		file string
		msgs []provider.Message
		want provider.CompletionResponse
	}{
		{
			file: "testdata/stream.json",
			msgs: []provider.Message{{Role: provider.RoleUser, Content: "fix auth.ts"}},
			want: provider.CompletionResponse{
				Text:          "Reading the file first.",
				ToolCalls:     []provider.ToolCall{{ID: "call_DdmO9pD3xa9XTPNJ32zg2hcA", Name: "repo.read", Args: json.RawMessage(`{"path": "auth.ts"}`)}},
				FinishReason:  provider.FinishToolUse,
				Usage:         provider.Usage{InputTokens: 61, OutputTokens: 24},
				Model:         "gpt-4o-mini-2024-07-18",
				SchemaVersion: "v1",
			},
		},
		{
			file: "testdata/stream_text.json",
			msgs: lead,
			want: provider.CompletionResponse{
				Text:          `{"intent":"fix auth","constraints":[],"schema_version":"v1"}`,
				ToolCalls:     []provider.ToolCall{},
				FinishReason:  provider.FinishMaxTokens,
				Usage:         provider.Usage{InputTokens: 12, OutputTokens: 16},
				Model:         "gpt-4o-mini-2024-07-18",
				SchemaVersion: "v1",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			srv := exchange.Serve(t, tt.file)
			prov, _ := newProvider(t, profile(srv.URL), true)
			p := provider.Checked{P: prov, Reg: schemas.MustDefault()}
			var deltas []string
			resp, err := p.Complete(context.Background(), provider.CompletionRequest{Messages: tt.msgs, Model: "gpt-4o-mini", Tools: tools, OnDelta: func(s string) { deltas = append(deltas, s) }})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(resp, tt.want) {
				t.Errorf("got  %s\nwant %s", show(resp), show(tt.want))
			}
			// The text arrives as deltas (output.delta), in pieces.
			if strings.Join(deltas, "") != resp.Text || len(deltas) < 2 {
				t.Errorf("deltas %q do not make up the text %q", deltas, resp.Text)
			}
		})
	}
}

func TestRetryHonoursRetryAfter(t *testing.T) {
	srv := exchange.Serve(t, "testdata/rate_limited.json")
	prov, w := newProvider(t, profile(srv.URL), false)
	resp, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead, Model: "gpt-4o-mini"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != provider.FinishStop || resp.Usage.InputTokens != 27 {
		t.Errorf("resp = %+v", resp)
	}
	w.Check(t, 7*time.Second) // the Retry-After
	srv.CheckRequests(t, 2)
}

func TestFailures(t *testing.T) {
	tests := []struct {
		file    string
		retries int
		want    exchange.WantError // Provider is Name
	}{
		{"testdata/server_error.json", 2, exchange.WantError{Status: 500, Attempts: 3, Retryable: true, Waits: []time.Duration{500 * time.Millisecond, time.Second}, Message: "server error"}},
		{"testdata/unauthorized.json", 3, exchange.WantError{Status: 401, Attempts: 1, Message: "not authorized"}},
		{"testdata/malformed_html.json", 3, exchange.WantError{Status: 200, Attempts: 1, Message: "malformed response"}},
		// A cut JSON body looks like a dropped connection: retried.
		{"testdata/malformed_truncated.json", 1, exchange.WantError{Status: 200, Attempts: 2, Retryable: true, Waits: []time.Duration{500 * time.Millisecond}, Message: "cut short"}},
		{"testdata/malformed_shape.json", 3, exchange.WantError{Status: 200, Attempts: 1, Message: "no choices"}},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			if stream && strings.Contains(tt.file, "malformed_") && !strings.Contains(tt.file, "html") {
				continue // JSON is not an event stream; the stream case is malformed_html
			}
			t.Run(fmt.Sprintf("%s/stream=%v", tt.file, stream), func(t *testing.T) {
				srv := exchange.Serve(t, tt.file)
				p := profile(srv.URL)
				p.Retries = tt.retries
				prov, w := newProvider(t, p, stream)
				_, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead, Model: "gpt-4o-mini"})
				want := tt.want
				want.Provider = Name
				if stream && strings.Contains(tt.file, "malformed_html") {
					want.Message = "malformed" // a stream that is not SSE carries no chunks
				}
				exchange.CheckError(t, err, w, want)
				srv.CheckRequests(t, want.Attempts)
			})
		}
	}
}

func TestKeylessCompatibleServer(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-the-environment")
	t.Setenv("OPENAI_BASE_URL", "https://api.openai.com/v1")
	srv := exchange.Serve(t, "testdata/keyless.json")
	prov, _ := newProvider(t, provider.Profile{Provider: Name, Model: "qwen2.5-coder:7b", BaseURL: srv.URL + "/v1", MaxTokens: 256}, false)
	resp, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Hello from Ollama." || resp.Model != "qwen2.5-coder:7b" {
		t.Errorf("resp = %+v", resp)
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		p    provider.Profile
		want string
	}{
		{"no key for the OpenAI API", provider.Profile{Model: "gpt-4o-mini"}, "OPENAI_API_KEY"},
		{"base_url without scheme", provider.Profile{Model: "m", BaseURL: "localhost:11434/v1"}, "not an http(s) URL"},
		{"base_url of another scheme", provider.Profile{Model: "m", BaseURL: "ftp://models.local/v1"}, "not an http(s) URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.p, Options{}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestParams(t *testing.T) {
	// The OpenAI API itself gets max_completion_tokens (reasoning models
	// reject max_tokens); compatible servers get max_tokens.
	// Only the OpenAI API gets a prompt_cache_key (per role).
	for base, want := range map[string]map[string]any{
		"":                           {"model": "gpt-4o", "max_completion_tokens": float64(100), "max_tokens": nil, "prompt_cache_key": "agentos-lead"},
		"https://api.openai.com/v1":  {"model": "gpt-4o", "max_completion_tokens": float64(100), "max_tokens": nil, "prompt_cache_key": "agentos-lead"},
		"http://localhost:11434/v1/": {"model": "gpt-4o", "max_tokens": float64(100), "max_completion_tokens": nil, "prompt_cache_key": nil},
	} {
		prov, err := New(provider.Profile{Provider: Name, Model: "gpt-4o", APIKey: "k", BaseURL: base, MaxTokens: 100}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		params, _, err := prov.params(provider.CompletionRequest{Role: "lead", Messages: lead})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(params)
		var got map[string]any
		_ = json.Unmarshal(b, &got)
		if problems := exchange.Match(want, got, "params"); len(problems) > 0 {
			t.Errorf("base_url %q: %v", base, problems)
		}
	}
	prov, err := New(provider.Profile{Provider: Name, Model: "gpt-4o", APIKey: "k"}, Options{})
	if err != nil {
		t.Fatal(err)
	}

	bad := []struct {
		name string
		req  provider.CompletionRequest
		want string
	}{
		{"unknown role", provider.CompletionRequest{Messages: []provider.Message{{Role: "robot", Content: "x"}}}, `unknown role "robot"`},
		{"tool without id", provider.CompletionRequest{Messages: []provider.Message{{Role: provider.RoleTool, Content: "x"}}}, "tool_call_id"},
		{"schema not an object", provider.CompletionRequest{Messages: lead, Tools: []provider.ToolSpec{{Name: "x", InputSchema: json.RawMessage(`[1]`)}}}, "input_schema"},
		{"response schema not an object schema", provider.CompletionRequest{Messages: lead, ResponseSchema: &provider.ResponseSchema{Name: "x", Schema: json.RawMessage(`{"type":"array"}`)}}, "response schema x"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := prov.Complete(context.Background(), tt.req)
			exchange.CheckRequestError(t, err, tt.want)
		})
	}
}

func TestCancelledWhileWaiting(t *testing.T) {
	srv := exchange.Serve(t, "testdata/server_error.json")
	ctx, cancel := context.WithCancel(context.Background())
	prov, err := New(profile(srv.URL), Options{Sleep: func(ctx context.Context, d time.Duration) error {
		cancel()
		return ctx.Err()
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = prov.Complete(ctx, provider.CompletionRequest{Messages: lead})
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Retryable || pe.Attempts != 1 || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a non-retryable error wrapping context.Canceled after 1 attempt", err)
	}
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestStreamErrorEventIsRetried(t *testing.T) {
	srv := exchange.Serve(t, "testdata/stream_error.json")
	prov, w := newProvider(t, profile(srv.URL), true)
	resp, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead, Model: "gpt-4o-mini"})
	if err != nil {
		t.Fatal(err)
	}
	// The text is the second stream's alone: nothing of the broken one.
	if want := `{"intent":"fix auth","constraints":[],"schema_version":"v1"}`; resp.Text != want {
		t.Errorf("text = %q, want %q", resp.Text, want)
	}
	w.Check(t, 500*time.Millisecond)
}

// TestDroppedStreamIsRetried: a stream that ends mid-answer (the
// connection dropped: no finish_reason, no [DONE]) is a retryable provider
// error, not a truncated answer; the retry's answer is the response. The
// deltas of the dropped attempt were already handed out, the retry's
// follow them.
func TestDroppedStreamIsRetried(t *testing.T) {
	srv := exchange.Serve(t, "testdata/stream_dropped.json")
	prov, w := newProvider(t, profile(srv.URL), true)
	var deltas []string
	resp, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead, Model: "gpt-4o-mini", OnDelta: func(s string) { deltas = append(deltas, s) }})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"intent":"fix auth","constraints":[],"schema_version":"v1"}`
	if resp.Text != want || resp.FinishReason == "" {
		t.Errorf("response %+v, want the retry's whole answer %q", resp, want)
	}
	if got := strings.Join(deltas, ""); !strings.HasSuffix(got, want) || got == want {
		t.Errorf("deltas %q: want the dropped attempt's part, then the whole retry", got)
	}
	w.Check(t, 500*time.Millisecond)
}

// Package anthropic is the Anthropic Messages API adapter (seed 000 L2). It
// maps completion_request_v1 to the Messages API through the official SDK
// (github.com/anthropics/anthropic-sdk-go): system messages become the
// separate system prompt, tool calls become tool_use blocks and tool
// results tool_result blocks in the following user turn; the answer's
// content blocks map back to text and normalised tool calls.
//
// Retries are the adapter's (runtime/provider/internal/retry), not the
// SDK's, so Retry-After is honoured and every failure is a *provider.Error.
package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/internal/args"
	"github.com/agentos/agentos/runtime/provider/internal/retry"
	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

// Name is the provider's name in profiles and errors.
const Name = "anthropic"

// DefaultBaseURL is the Anthropic API.
const DefaultBaseURL = "https://api.anthropic.com/"

// DefaultMaxTokens is sent when neither the request nor the profile sets
// max_tokens, which the Messages API requires.
const DefaultMaxTokens = 4096

// Options are the adapter's settings beyond the profile: streaming, the
// HTTP client, and the retry clock and sleep (tests).
type Options = retry.Options

// Provider completes requests through the Messages API.
type Provider struct {
	svc         sdk.MessageService
	model       string
	maxTokens   int
	temperature *float64
	timeout     time.Duration
	stream      bool
	policy      retry.Policy
}

// New builds the adapter from a profile; the API key is required.
func New(p provider.Profile, o Options) (*Provider, error) {
	if p.APIKey == "" {
		return nil, fmt.Errorf("anthropic: ANTHROPIC_API_KEY is not set")
	}
	base := strings.TrimSpace(p.BaseURL)
	if base == "" {
		base = DefaultBaseURL
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("anthropic: base_url %q is not an http(s) URL", p.BaseURL)
	}
	client := sdk.NewClient(
		// No ANTHROPIC_* variables, profile files or ambient credentials:
		// the profile is the only configuration.
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(base),
		option.WithAPIKey(p.APIKey),
		option.WithHTTPClient(retry.Client(o.HTTPClient)),
		option.WithMaxRetries(0),
	)
	return &Provider{
		svc:         client.Messages,
		model:       p.Model,
		maxTokens:   p.MaxTokens,
		temperature: p.Temperature,
		timeout:     p.Timeout.D(),
		stream:      o.Stream,
		policy:      o.Policy(Name, p),
	}, nil
}

// Name implements provider.Provider.
func (p *Provider) Name() string { return Name }

// Complete implements provider.Provider.
func (p *Provider) Complete(ctx context.Context, req provider.CompletionRequest) (provider.CompletionResponse, error) {
	params, names, err := p.params(req)
	if err != nil {
		return provider.CompletionResponse{}, &provider.Error{Code: provider.CodeProviderError, Provider: Name, Message: "request: " + err.Error(), Err: err}
	}
	var opts []option.RequestOption
	if p.timeout > 0 {
		// Also keeps the SDK from refusing a large max_tokens without
		// streaming: the profile's timeout is the caller's decision.
		opts = append(opts, option.WithRequestTimeout(p.timeout))
	}
	return retry.Do(ctx, p.policy, func(ctx context.Context) (provider.CompletionResponse, error) {
		if p.stream {
			return p.completeStream(ctx, params, names, opts)
		}
		m, err := p.svc.New(ctx, params, opts...)
		if err != nil {
			return provider.CompletionResponse{}, err
		}
		return fromMessage(m, string(params.Model), names)
	})
}

// params builds the native request, and the tool-name mapping its answer
// is read with.
func (p *Provider) params(req provider.CompletionRequest) (sdk.MessageNewParams, *args.Names, error) {
	model := req.Model
	if model == "" {
		model = p.model
	}
	if model == "" {
		return sdk.MessageNewParams{}, nil, errors.New("no model (set model in the profile)")
	}
	offered := make([]string, len(req.Tools))
	for i, t := range req.Tools {
		offered[i] = t.Name
	}
	names := args.NewNames(offered)
	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = p.maxTokens
	}
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	params := sdk.MessageNewParams{Model: sdk.Model(model), MaxTokens: int64(maxTokens)}
	temp := req.Temperature
	if temp == nil {
		temp = p.temperature
	}
	if temp != nil {
		params.Temperature = sdk.Float(*temp)
	}
	// add appends blocks to the conversation, merging into the previous
	// message when the role repeats: the API wants alternating turns and
	// all tool results of one assistant turn in the next user message.
	add := func(role sdk.MessageParamRole, blocks ...sdk.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(params.Messages); n > 0 && params.Messages[n-1].Role == role {
			params.Messages[n-1].Content = append(params.Messages[n-1].Content, blocks...)
			return
		}
		params.Messages = append(params.Messages, sdk.MessageParam{Role: role, Content: blocks})
	}
	for i, m := range req.Messages {
		switch m.Role {
		case provider.RoleSystem:
			if m.Content != "" {
				params.System = append(params.System, sdk.TextBlockParam{Text: m.Content})
			}
		case provider.RoleUser:
			if m.Content != "" {
				add(sdk.MessageParamRoleUser, sdk.NewTextBlock(m.Content))
			}
		case provider.RoleAssistant:
			var blocks []sdk.ContentBlockParamUnion
			if m.Content != "" {
				blocks = append(blocks, sdk.NewTextBlock(m.Content))
			}
			for _, c := range m.ToolCalls {
				blocks = append(blocks, sdk.NewToolUseBlock(c.ID, args.Object(c.Args), names.Wire(c.Name)))
			}
			add(sdk.MessageParamRoleAssistant, blocks...)
		case provider.RoleTool:
			if m.ToolCallID == "" {
				return params, nil, fmt.Errorf("messages[%d]: a tool message needs tool_call_id", i)
			}
			block := sdk.ToolResultBlockParam{ToolUseID: m.ToolCallID}
			if m.Content != "" {
				block.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: m.Content}}}
			}
			add(sdk.MessageParamRoleUser, sdk.ContentBlockParamUnion{OfToolResult: &block})
		default:
			return params, nil, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	for i, t := range req.Tools {
		schema, err := args.Schema(t.InputSchema)
		if err != nil {
			return params, nil, fmt.Errorf("tools[%d] %s: %w", i, t.Name, err)
		}
		in := sdk.ToolInputSchemaParam{Properties: schema["properties"], ExtraFields: map[string]any{}}
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				if s, ok := r.(string); ok {
					in.Required = append(in.Required, s)
				}
			}
		}
		for k, v := range schema {
			if k != "type" && k != "properties" && k != "required" {
				in.ExtraFields[k] = v
			}
		}
		tool := sdk.ToolParam{Name: names.Wire(t.Name), InputSchema: in}
		if t.Description != "" {
			tool.Description = sdk.String(t.Description)
		}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: &tool})
	}
	return params, names, nil
}

func fromMessage(m *sdk.Message, model string, names *args.Names) (provider.CompletionResponse, error) {
	if m == nil || !m.JSON.Content.Valid() {
		return provider.CompletionResponse{}, retry.Malformed("the message has no content", nil)
	}
	a := assembly{model: model, stop: string(m.StopReason)}
	if m.Model != "" {
		a.model = string(m.Model)
	}
	a.usage = usage(m.Usage.InputTokens, m.Usage.CacheCreationInputTokens, m.Usage.CacheReadInputTokens, m.Usage.OutputTokens)
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			a.blocks = append(a.blocks, &block{kind: "text", text: b.Text})
		case "tool_use":
			a.blocks = append(a.blocks, &block{kind: "tool_use", id: b.ID, name: b.Name, input: string(b.Input)})
		}
	}
	return a.response(names)
}

// usage counts every input token the model read, cached or not, so run
// budgets see the real context size.
func usage(input, cacheWrite, cacheRead, output int64) provider.Usage {
	return provider.Usage{InputTokens: input + cacheWrite + cacheRead, OutputTokens: output}
}

// completeStream sends the request with stream=true and assembles the
// answer from message_start, content_block_* and message_delta events.
func (p *Provider) completeStream(ctx context.Context, params sdk.MessageNewParams, names *args.Names, opts []option.RequestOption) (provider.CompletionResponse, error) {
	stream := p.svc.NewStreaming(ctx, params, opts...)
	defer stream.Close()
	a := assembly{model: string(params.Model)}
	byIndex := map[int64]*block{}
	var in, cacheWrite, cacheRead, out int64
	started, stopped := false, false
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "message_start":
			started = true
			if ev.Message.Model != "" {
				a.model = string(ev.Message.Model)
			}
			u := ev.Message.Usage
			in, cacheWrite, cacheRead, out = u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens, u.OutputTokens
		case "content_block_start":
			b := &block{kind: ev.ContentBlock.Type, id: ev.ContentBlock.ID, name: ev.ContentBlock.Name, text: ev.ContentBlock.Text}
			byIndex[ev.Index] = b
			a.blocks = append(a.blocks, b)
		case "content_block_delta":
			b := byIndex[ev.Index]
			if b == nil {
				return provider.CompletionResponse{}, retry.Malformed(fmt.Sprintf("content_block_delta for block %d before its start", ev.Index), nil)
			}
			switch ev.Delta.Type {
			case "text_delta":
				b.text += ev.Delta.Text
			case "input_json_delta":
				b.input += ev.Delta.PartialJSON
			}
		case "message_delta":
			if ev.Delta.StopReason != "" {
				a.stop = string(ev.Delta.StopReason)
			}
			// message_delta usage is cumulative.
			if ev.Usage.OutputTokens > 0 {
				out = ev.Usage.OutputTokens
			}
			if ev.Usage.InputTokens > 0 {
				in = ev.Usage.InputTokens
			}
		case "message_stop":
			stopped = true
		}
	}
	if err := stream.Err(); err != nil {
		var ae *sdk.Error
		if errors.As(err, &ae) && ae.StatusCode < 300 {
			// An error event inside a 200 stream (overloaded_error).
			return provider.CompletionResponse{}, retry.Transient(err)
		}
		return provider.CompletionResponse{}, err
	}
	if !started {
		return provider.CompletionResponse{}, retry.Malformed("the stream has no message_start event", nil)
	}
	if !stopped {
		return provider.CompletionResponse{}, retry.Transient(errors.New("the stream ended before message_stop"))
	}
	a.usage = usage(in, cacheWrite, cacheRead, out)
	return a.response(names)
}

// block is one content block of an answer.
type block struct {
	kind, id, name, text string
	input                string // tool_use input JSON as sent
}

type assembly struct {
	model, stop string
	blocks      []*block
	usage       provider.Usage
}

func (a assembly) response(names *args.Names) (provider.CompletionResponse, error) {
	resp := provider.CompletionResponse{ToolCalls: []provider.ToolCall{}, Model: a.model, Usage: a.usage, SchemaVersion: "v1"}
	var text strings.Builder
	for _, b := range a.blocks {
		switch b.kind {
		case "text":
			text.WriteString(b.text)
		case "tool_use":
			if b.id == "" || b.name == "" {
				return provider.CompletionResponse{}, retry.Malformed("a tool_use block without id or name", nil)
			}
			resp.ToolCalls = append(resp.ToolCalls, provider.ToolCall{ID: b.id, Name: names.Original(b.name), Args: args.Raw(b.input)})
		}
		// thinking, redacted_thinking and server-tool blocks carry nothing
		// the runtime uses.
	}
	resp.Text = text.String()
	switch a.stop {
	case "tool_use":
		resp.FinishReason = provider.FinishToolUse
	case "max_tokens", "model_context_window_exceeded":
		resp.FinishReason = provider.FinishMaxTokens
	case "refusal":
		resp.FinishReason = provider.FinishSafety
	default: // end_turn, stop_sequence, pause_turn
		resp.FinishReason = provider.FinishStop
	}
	if len(resp.ToolCalls) > 0 && resp.FinishReason == provider.FinishStop {
		resp.FinishReason = provider.FinishToolUse
	}
	return resp, nil
}

// Package openai is the OpenAI Chat Completions adapter (seed 000 L2). It
// maps completion_request_v1 to the Chat Completions API with function
// tools and back, through the official SDK (github.com/openai/openai-go/v3),
// against api.openai.com or any OpenAI-compatible server named by the
// profile's base_url (Ollama, vLLM, llama.cpp), which may need no key.
//
// Retries are the adapter's (runtime/provider/internal/retry), not the
// SDK's, so Retry-After is honoured and every failure is a *provider.Error.
package openai

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/internal/args"
	"github.com/agentos/agentos/runtime/provider/internal/retry"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"
)

// Name is the provider's name in profiles and errors.
const Name = "openai"

// DefaultBaseURL is the OpenAI API.
const DefaultBaseURL = "https://api.openai.com/v1/"

// Options are the adapter's settings beyond the profile: streaming, the
// HTTP client, and the retry clock and sleep (tests).
type Options = retry.Options

// Provider completes requests through the Chat Completions API.
type Provider struct {
	svc         oai.ChatCompletionService
	model       string
	maxTokens   int
	temperature *float64
	legacyMax   bool // send max_tokens (compatible servers) instead of max_completion_tokens
	stream      bool
	policy      retry.Policy
}

// New builds the adapter from a profile. A key is required for the OpenAI
// API; a custom base_url (a local compatible server) may go without.
func New(p provider.Profile, o Options) (*Provider, error) {
	base := strings.TrimSpace(p.BaseURL)
	if base == "" && p.APIKey == "" {
		return nil, fmt.Errorf("openai: OPENAI_API_KEY is not set (set it, or set base_url to a keyless OpenAI-compatible server)")
	}
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: base_url %q is not an http(s) URL", p.BaseURL)
	}
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		// Set even when empty: an explicit key keeps OPENAI_API_KEY from the
		// ambient environment away from a custom server.
		option.WithAPIKey(p.APIKey),
		option.WithHTTPClient(retry.Client(o.HTTPClient)),
		option.WithMaxRetries(0),
	}
	return &Provider{
		svc:         oai.NewChatCompletionService(opts...),
		model:       p.Model,
		maxTokens:   p.MaxTokens,
		temperature: p.Temperature,
		legacyMax:   u.Hostname() != "api.openai.com",
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
	salt := args.Salt(req.Messages)
	return retry.Do(ctx, p.policy, func(ctx context.Context) (provider.CompletionResponse, error) {
		if p.stream {
			return p.completeStream(ctx, params, names, salt)
		}
		cc, err := p.svc.New(ctx, params)
		if err != nil {
			return provider.CompletionResponse{}, err
		}
		return fromCompletion(cc, params.Model, names, salt)
	})
}

// params builds the native request, and the tool-name mapping its answer
// is read with.
func (p *Provider) params(req provider.CompletionRequest) (oai.ChatCompletionNewParams, *args.Names, error) {
	model := req.Model
	if model == "" {
		model = p.model
	}
	if model == "" {
		return oai.ChatCompletionNewParams{}, nil, errors.New("no model (set model in the profile)")
	}
	offered := make([]string, len(req.Tools))
	for i, t := range req.Tools {
		offered[i] = t.Name
	}
	names := args.NewNames(offered)
	params := oai.ChatCompletionNewParams{Model: shared.ChatModel(model)}
	for i, m := range req.Messages {
		msg, err := message(m, names)
		if err != nil {
			return params, nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		params.Messages = append(params.Messages, msg)
	}
	for i, t := range req.Tools {
		schema, err := args.Schema(t.InputSchema)
		if err != nil {
			return params, nil, fmt.Errorf("tools[%d] %s: %w", i, t.Name, err)
		}
		fn := shared.FunctionDefinitionParam{Name: names.Wire(t.Name), Parameters: shared.FunctionParameters(schema)}
		if t.Description != "" {
			fn.Description = oai.String(t.Description)
		}
		params.Tools = append(params.Tools, oai.ChatCompletionFunctionTool(fn))
	}
	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = p.maxTokens
	}
	if maxTokens > 0 {
		// OpenAI's reasoning models accept only max_completion_tokens;
		// compatible servers have long known only max_tokens.
		if p.legacyMax {
			params.MaxTokens = oai.Int(int64(maxTokens))
		} else {
			params.MaxCompletionTokens = oai.Int(int64(maxTokens))
		}
	}
	temp := req.Temperature
	if temp == nil {
		temp = p.temperature
	}
	if temp != nil {
		params.Temperature = oai.Float(*temp)
	}
	return params, names, nil
}

func message(m provider.Message, names *args.Names) (oai.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case provider.RoleSystem:
		return oai.SystemMessage(m.Content), nil
	case provider.RoleUser:
		return oai.UserMessage(m.Content), nil
	case provider.RoleAssistant:
		var a oai.ChatCompletionAssistantMessageParam
		if m.Content != "" || len(m.ToolCalls) == 0 {
			a.Content.OfString = oai.String(m.Content)
		}
		for _, c := range m.ToolCalls {
			a.ToolCalls = append(a.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
					ID:       c.ID,
					Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: names.Wire(c.Name), Arguments: string(c.Args)},
				},
			})
		}
		return oai.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	case provider.RoleTool:
		if m.ToolCallID == "" {
			return oai.ChatCompletionMessageParamUnion{}, errors.New("a tool message needs tool_call_id")
		}
		return oai.ToolMessage(m.Content, m.ToolCallID), nil
	default:
		return oai.ChatCompletionMessageParamUnion{}, fmt.Errorf("unknown role %q", m.Role)
	}
}

func fromCompletion(cc *oai.ChatCompletion, model string, names *args.Names, salt string) (provider.CompletionResponse, error) {
	if cc == nil || len(cc.Choices) == 0 {
		return provider.CompletionResponse{}, retry.Malformed("the completion has no choices", nil)
	}
	ch := cc.Choices[0]
	if !ch.JSON.Message.Valid() && !ch.JSON.FinishReason.Valid() {
		return provider.CompletionResponse{}, retry.Malformed("the choice has neither message nor finish_reason", nil)
	}
	a := assembly{text: ch.Message.Content, refusal: ch.Message.Refusal, finish: ch.FinishReason}
	for _, tc := range ch.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			return provider.CompletionResponse{}, retry.Malformed(fmt.Sprintf("tool call of type %q", tc.Type), nil)
		}
		a.calls = append(a.calls, &call{id: tc.ID, name: tc.Function.Name, args: tc.Function.Arguments})
	}
	if cc.Model != "" {
		model = cc.Model
	}
	a.model = model
	a.usage = provider.Usage{InputTokens: cc.Usage.PromptTokens, OutputTokens: cc.Usage.CompletionTokens}
	return a.response(names, salt)
}

// completeStream sends the request with stream=true (usage included) and
// assembles the answer from the chunks.
func (p *Provider) completeStream(ctx context.Context, params oai.ChatCompletionNewParams, names *args.Names, salt string) (provider.CompletionResponse, error) {
	params.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
	stream := p.svc.NewStreaming(ctx, params)
	defer stream.Close()
	a := assembly{model: string(params.Model)}
	byIndex := map[int64]*call{}
	chunks := 0
	for stream.Next() {
		ch := stream.Current()
		chunks++
		if ch.Model != "" {
			a.model = ch.Model
		}
		if ch.JSON.Usage.Valid() {
			a.usage = provider.Usage{InputTokens: ch.Usage.PromptTokens, OutputTokens: ch.Usage.CompletionTokens}
		}
		for _, c := range ch.Choices {
			if c.Index != 0 {
				continue
			}
			a.text += c.Delta.Content
			a.refusal += c.Delta.Refusal
			for _, d := range c.Delta.ToolCalls {
				tc := byIndex[d.Index]
				if tc == nil {
					tc = &call{}
					byIndex[d.Index] = tc
					a.calls = append(a.calls, tc)
				}
				if d.ID != "" {
					tc.id = d.ID
				}
				if tc.name == "" {
					tc.name = d.Function.Name
				}
				tc.args += d.Function.Arguments
			}
			if c.FinishReason != "" {
				a.finish = c.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		var se *ssestream.StreamError
		if errors.As(err, &se) {
			return provider.CompletionResponse{}, retry.Transient(err)
		}
		return provider.CompletionResponse{}, err
	}
	if chunks == 0 {
		return provider.CompletionResponse{}, retry.Malformed("the stream carried no chunks", nil)
	}
	if a.finish == "" {
		return provider.CompletionResponse{}, retry.Transient(errors.New("the stream ended before a finish_reason"))
	}
	return a.response(names, salt)
}

type call struct{ id, name, args string }

// assembly is an answer gathered from a response or a stream.
type assembly struct {
	text, refusal, finish, model string
	calls                        []*call
	usage                        provider.Usage
}

func (a assembly) response(names *args.Names, salt string) (provider.CompletionResponse, error) {
	resp := provider.CompletionResponse{Text: a.text, ToolCalls: []provider.ToolCall{}, Model: a.model, Usage: a.usage, SchemaVersion: "v1"}
	for i, c := range a.calls {
		if c.name == "" {
			return provider.CompletionResponse{}, retry.Malformed(fmt.Sprintf("tool call %d has no function name", i), nil)
		}
		raw := args.Raw(c.args)
		name := names.Original(c.name)
		id := c.id
		if id == "" {
			id = args.CallID("call_", salt, i, name, raw)
		}
		resp.ToolCalls = append(resp.ToolCalls, provider.ToolCall{ID: id, Name: name, Args: raw})
	}
	switch a.finish {
	case "length":
		resp.FinishReason = provider.FinishMaxTokens
	case "content_filter":
		resp.FinishReason = provider.FinishSafety
	case "tool_calls", "function_call":
		resp.FinishReason = provider.FinishToolUse
	default: // "stop", and whatever a compatible server invents
		resp.FinishReason = provider.FinishStop
	}
	// Some compatible servers (Ollama) answer tool calls with "stop".
	if len(resp.ToolCalls) > 0 && resp.FinishReason == provider.FinishStop {
		resp.FinishReason = provider.FinishToolUse
	}
	if resp.Text == "" && a.refusal != "" {
		resp.Text = a.refusal
		resp.FinishReason = provider.FinishSafety
	}
	return resp, nil
}

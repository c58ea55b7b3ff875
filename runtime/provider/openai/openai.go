// Package openai is the OpenAI Chat Completions adapter. It
// maps completion_request_v1 to the Chat Completions API with function
// tools and back, through the official SDK (github.com/openai/openai-go/v3),
// against api.openai.com or any OpenAI-compatible server named by the
// profile's base_url (Ollama, vLLM, llama.cpp), which may need no key.
//
// The profile carries everything the SDK would read from its environment
// (OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_ORG_ID, OPENAI_PROJECT_ID: see
// provider.Profile.ApplyEnv, where AGENTOS_* variables win); the client is
// built from it alone, so what the start-up line prints is what is used.
//
// A request's ResponseSchema becomes response_format json_schema, strict
// when the schema allows (internal/outschema), with tool_choice "none" when
// tools are offered too; api.openai.com also gets a prompt_cache_key per
// role, which keeps a role's requests on the same prompt cache. Usage
// reports cached prompt tokens (prompt_tokens_details.cached_tokens).
//
// Retries are the adapter's (runtime/provider/internal/retry), not the
// SDK's, so Retry-After is honoured and every failure is a *provider.Error.
package openai

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/internal/args"
	"github.com/agentos/agentos/runtime/provider/internal/outschema"
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
	models      oai.ModelService
	model       string
	maxTokens   int
	temperature *float64
	legacyMax   bool // send max_tokens (compatible servers) instead of max_completion_tokens
	official    bool // api.openai.com: prompt_cache_key is understood
	stream      bool
	policy      retry.Policy
	probe       retry.Probe
	cacheKey    string
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
	if p.Organization != "" {
		opts = append(opts, option.WithOrganization(p.Organization))
	}
	if p.Project != "" {
		opts = append(opts, option.WithProject(p.Project))
	}
	p.BaseURL = base
	official := u.Hostname() == "api.openai.com"
	keySum := sha256.Sum256([]byte(p.APIKey))
	return &Provider{
		svc:         oai.NewChatCompletionService(opts...),
		models:      oai.NewModelService(opts...),
		model:       p.Model,
		maxTokens:   p.MaxTokens,
		temperature: p.Temperature,
		legacyMax:   !official,
		official:    official,
		stream:      o.Stream,
		policy:      o.Policy(Name, p),
		probe:       retry.Probe{Provider: Name, Profile: p},
		cacheKey:    strings.Join([]string{Name, base, p.Model, hex.EncodeToString(keySum[:8])}, "|"),
	}, nil
}

// CacheKey identifies the endpoint, model and key for provider.Preflight.
func (p *Provider) CacheKey() string { return p.cacheKey }

// Check implements provider.Checker: GET /models answers (else the
// endpoint is unreachable, or is no OpenAI-compatible API), accepts the key
// (401/403), and lists the model, or GET /models/{model} finds it (many
// compatible servers list only what they serve).
func (p *Provider) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, retry.ProbeTimeout)
	defer cancel()
	lctx, status := retry.Observing(ctx)
	page, err := p.models.List(lctx)
	if err != nil {
		return p.probe.Failed(ctx, status(), err, provider.ErrUnreachable, apiMessage(err))
	}
	if len(page.Data) == 0 {
		return nil // an empty list says nothing about the model
	}
	for _, m := range page.Data {
		if m.ID == p.model || m.ID == p.model+":latest" {
			return nil
		}
	}
	gctx, status := retry.Observing(ctx)
	if _, err := p.models.Get(gctx, p.model); err != nil {
		detail := apiMessage(err)
		if detail == "" {
			detail = fmt.Sprintf("not among the %d models the endpoint lists", len(page.Data))
		}
		ids := make([]string, 0, len(page.Data))
		for _, m := range page.Data {
			ids = append(ids, m.ID)
		}
		return provider.WithAvailable(p.probe.Failed(ctx, status(), err, provider.ErrUnknownModel, detail), ids)
	}
	return nil
}

// apiMessage is the message of an API error body, "" for other errors.
func apiMessage(err error) string {
	var ae *oai.Error
	if errors.As(err, &ae) && ae.Message != "" {
		return ae.Message
	}
	return ""
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
			return p.completeStream(ctx, params, names, salt, req.OnDelta)
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
	if rs := req.ResponseSchema; rs != nil {
		schema, strict, err := outschema.OpenAI(rs.Schema)
		if err != nil {
			return params, nil, fmt.Errorf("response schema %s: %w", rs.Name, err)
		}
		params.ResponseFormat = oai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: rs.Name, Schema: schema, Strict: oai.Bool(strict)},
		}}
		if len(params.Tools) > 0 {
			// The tools stay for the prompt's sake; the answer is the document.
			params.ToolChoice = oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oai.String("none")}
		}
	}
	if p.official && req.Role != "" {
		params.PromptCacheKey = oai.String("agentos-" + req.Role)
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
	a.usage = usage(cc.Usage)
	return a.response(names, salt)
}

// completeStream sends the request with stream=true (usage included) and
// assembles the answer from the chunks.
func (p *Provider) completeStream(ctx context.Context, params oai.ChatCompletionNewParams, names *args.Names, salt string, onDelta func(string)) (provider.CompletionResponse, error) {
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
			a.usage = usage(ch.Usage)
		}
		for _, c := range ch.Choices {
			if c.Index != 0 {
				continue
			}
			a.text += c.Delta.Content
			if onDelta != nil && c.Delta.Content != "" {
				onDelta(c.Delta.Content)
			}
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

// usage reads token counts; prompt_tokens includes the cached ones.
func usage(u oai.CompletionUsage) provider.Usage {
	d := u.PromptTokensDetails
	return provider.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, CachedInputTokens: d.CachedTokens, CacheWriteTokens: d.CacheWriteTokens}
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

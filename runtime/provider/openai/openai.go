// Package openai is the OpenAI Chat Completions adapter. It
// maps completion_request_v1 to the Chat Completions API with function
// tools and back, against api.openai.com or any OpenAI-compatible server
// named by the profile's base_url (Ollama, vLLM, llama.cpp), which may need
// no key. It speaks the API's documented JSON and server-sent events over
// net/http itself (wire.go), not through the official SDK: the SDK's
// package initialisers make every type of the whole OpenAI API reachable,
// 19.5 MB of the stripped binary for the two endpoints used here
// (ADR 32 in docs/decisions.md).
//
// The profile carries the endpoint, key, organisation and project
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
// Retries are the adapter's (runtime/provider/internal/retry), so
// Retry-After is honoured and every failure is a *provider.Error.
package openai

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/internal/args"
	"github.com/agentos/agentos/runtime/provider/internal/outschema"
	"github.com/agentos/agentos/runtime/provider/internal/retry"
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
	api         *client
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
	// Paths are resolved against the base, which must end in "/" for
	// "chat/completions" to land under /v1 rather than replace it.
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	official := u.Hostname() == "api.openai.com"
	keySum := sha256.Sum256([]byte(p.APIKey))
	return &Provider{
		// The key is the profile's alone, possibly none: OPENAI_API_KEY of
		// the ambient environment never reaches a custom server.
		api:         &client{base: u, key: p.APIKey, org: p.Organization, project: p.Project, http: retry.Client(o.HTTPClient)},
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
	var page modelList
	if err := p.api.call(lctx, http.MethodGet, "models", nil, &page); err != nil {
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
	var one modelObject
	if err := p.api.call(gctx, http.MethodGet, "models/"+pathParam(p.model), nil, &one); err != nil {
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
	var ae *apiError
	if errors.As(err, &ae) {
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
		var cc completion
		if err := p.api.call(ctx, http.MethodPost, "chat/completions", params, &cc); err != nil {
			return provider.CompletionResponse{}, err
		}
		return fromCompletion(&cc, params.Model, names, salt)
	})
}

// params builds the native request, and the tool-name mapping its answer
// is read with.
func (p *Provider) params(req provider.CompletionRequest) (chatRequest, *args.Names, error) {
	model := req.Model
	if model == "" {
		model = p.model
	}
	if model == "" {
		return chatRequest{}, nil, errors.New("no model (set model in the profile)")
	}
	offered := make([]string, len(req.Tools))
	for i, t := range req.Tools {
		offered[i] = t.Name
	}
	names := args.NewNames(offered)
	params := chatRequest{Model: model, Messages: make([]chatMessage, 0, len(req.Messages))}
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
		params.Tools = append(params.Tools, chatTool{Type: "function", Function: functionDef{Name: names.Wire(t.Name), Description: t.Description, Parameters: schema}})
	}
	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = p.maxTokens
	}
	if maxTokens > 0 {
		n := int64(maxTokens)
		// OpenAI's reasoning models accept only max_completion_tokens;
		// compatible servers have long known only max_tokens.
		if p.legacyMax {
			params.MaxTokens = &n
		} else {
			params.MaxCompletionTokens = &n
		}
	}
	temp := req.Temperature
	if temp == nil {
		temp = p.temperature
	}
	if temp != nil {
		t := *temp
		params.Temperature = &t
	}
	if rs := req.ResponseSchema; rs != nil {
		schema, strict, err := outschema.OpenAI(rs.Schema)
		if err != nil {
			return params, nil, fmt.Errorf("response schema %s: %w", rs.Name, err)
		}
		params.ResponseFormat = &responseFormat{Type: "json_schema", JSONSchema: jsonSchemaFormat{Name: rs.Name, Schema: schema, Strict: strict}}
		if len(params.Tools) > 0 {
			// The tools stay for the prompt's sake; the answer is the document.
			params.ToolChoice = "none"
		}
	}
	if p.official && req.Role != "" {
		params.PromptCacheKey = "agentos-" + req.Role
	}
	return params, names, nil
}

func message(m provider.Message, names *args.Names) (chatMessage, error) {
	switch m.Role {
	case provider.RoleSystem, provider.RoleUser:
		return chatMessage{Role: m.Role, Content: text(m.Content)}, nil
	case provider.RoleAssistant:
		a := chatMessage{Role: m.Role}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			a.Content = text(m.Content)
		}
		for _, c := range m.ToolCalls {
			a.ToolCalls = append(a.ToolCalls, wireCall{ID: c.ID, Type: "function", Function: wireFunction{Name: names.Wire(c.Name), Arguments: string(c.Args)}})
		}
		return a, nil
	case provider.RoleTool:
		if m.ToolCallID == "" {
			return chatMessage{}, errors.New("a tool message needs tool_call_id")
		}
		return chatMessage{Role: m.Role, Content: text(m.Content), ToolCallID: m.ToolCallID}, nil
	default:
		return chatMessage{}, fmt.Errorf("unknown role %q", m.Role)
	}
}

func text(s string) *string { return &s }

func fromCompletion(cc *completion, model string, names *args.Names, salt string) (provider.CompletionResponse, error) {
	if cc == nil || len(cc.Choices) == 0 {
		return provider.CompletionResponse{}, retry.Malformed("the completion has no choices", nil)
	}
	ch := cc.Choices[0]
	if ch.Message == nil && ch.FinishReason == nil {
		return provider.CompletionResponse{}, retry.Malformed("the choice has neither message nor finish_reason", nil)
	}
	a := assembly{}
	if ch.FinishReason != nil {
		a.finish = *ch.FinishReason
	}
	if msg := ch.Message; msg != nil {
		a.text, a.refusal = msg.Content, msg.Refusal
		for _, tc := range msg.ToolCalls {
			if tc.Type != "" && tc.Type != "function" {
				return provider.CompletionResponse{}, retry.Malformed(fmt.Sprintf("tool call of type %q", tc.Type), nil)
			}
			a.calls = append(a.calls, &call{id: tc.ID, name: tc.Function.Name, args: tc.Function.Arguments})
		}
	}
	if cc.Model != "" {
		model = cc.Model
	}
	a.model = model
	if cc.Usage != nil {
		a.usage = cc.Usage.usage()
	}
	return a.response(names, salt)
}

// completeStream sends the request with stream=true (usage included) and
// assembles the answer from the chunks.
func (p *Provider) completeStream(ctx context.Context, params chatRequest, names *args.Names, salt string, onDelta func(string)) (provider.CompletionResponse, error) {
	params.Stream = true
	params.StreamOptions = &streamOptions{IncludeUsage: true}
	a := assembly{model: params.Model}
	byIndex := map[int64]*call{}
	chunks := 0
	err := p.api.stream(ctx, "chat/completions", params, func(ch *completion) {
		chunks++
		if ch.Model != "" {
			a.model = ch.Model
		}
		if ch.Usage != nil {
			a.usage = ch.Usage.usage()
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
			if c.FinishReason != nil && *c.FinishReason != "" {
				a.finish = *c.FinishReason
			}
		}
	})
	if err != nil {
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

// Package anthropic is the Anthropic Messages API adapter. It
// maps completion_request_v1 to the Messages API through the official SDK
// (github.com/anthropics/anthropic-sdk-go): system messages become the
// separate system prompt, tool calls become tool_use blocks and tool
// results tool_result blocks in the following user turn; the answer's
// content blocks map back to text and normalised tool calls.
//
// The profile carries ANTHROPIC_BASE_URL and the key (ANTHROPIC_API_KEY,
// sent as x-api-key, or ANTHROPIC_AUTH_TOKEN, sent as a Bearer token; see
// provider.Profile.ApplyEnv); nothing else comes from the environment.
//
// A request's ResponseSchema becomes a forced tool (tool_choice {type:
// tool}) named after the schema, whose input_schema is the role schema; its
// tool_use input is the answer's text. The stable prompt prefix is marked
// for Anthropic's prompt cache: a cache_control breakpoint on the last
// system block (covering the tools and the system prompt) and, in a
// conversation that goes on (tools offered, or more than one turn), on the
// last block of the last message. Usage counts cache reads and writes.
//
// Retries are the adapter's (runtime/provider/internal/retry), not the
// SDK's, so Retry-After is honoured and every failure is a *provider.Error.
package anthropic

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/internal/args"
	"github.com/agentos/agentos/runtime/provider/internal/outschema"
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
	models      sdk.ModelService
	model       string
	maxTokens   int
	temperature *float64
	timeout     time.Duration
	stream      bool
	policy      retry.Policy
	probe       retry.Probe
	cacheKey    string
}

// New builds the adapter from a profile; the API key (or auth token) is
// required.
func New(p provider.Profile, o Options) (*Provider, error) {
	if p.APIKey == "" {
		return nil, fmt.Errorf("anthropic: ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) is not set")
	}
	base := strings.TrimSpace(p.BaseURL)
	if base == "" {
		base = DefaultBaseURL
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("anthropic: base_url %q is not an http(s) URL", p.BaseURL)
	}
	auth := option.WithAPIKey(p.APIKey)
	if p.BearerToken {
		auth = option.WithAuthToken(p.APIKey)
	}
	client := sdk.NewClient(
		// No ANTHROPIC_* variables, profile files or ambient credentials:
		// the profile (which read the standard variables) is the only
		// configuration.
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(base),
		auth,
		option.WithHTTPClient(retry.Client(o.HTTPClient)),
		option.WithMaxRetries(0),
	)
	p.BaseURL = base
	keySum := sha256.Sum256([]byte(p.APIKey))
	return &Provider{
		svc:         client.Messages,
		models:      client.Models,
		model:       p.Model,
		maxTokens:   p.MaxTokens,
		temperature: p.Temperature,
		timeout:     p.Timeout.D(),
		stream:      o.Stream,
		policy:      o.Policy(Name, p),
		probe:       retry.Probe{Provider: Name, Profile: p},
		cacheKey:    strings.Join([]string{Name, base, p.Model, hex.EncodeToString(keySum[:8])}, "|"),
	}, nil
}

// CacheKey identifies the endpoint, model and key for provider.Preflight.
func (p *Provider) CacheKey() string { return p.cacheKey }

// Check implements provider.Checker with GET /v1/models/{model}: 401/403
// is a rejected key, 404 an unknown model (aliases such as
// claude-sonnet-4-6 resolve there too).
func (p *Provider) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, retry.ProbeTimeout)
	defer cancel()
	gctx, status := retry.Observing(ctx)
	if _, err := p.models.Get(gctx, p.model, sdk.ModelGetParams{}); err != nil {
		detail := ""
		var ae *sdk.Error
		if errors.As(err, &ae) {
			detail = apiMessage(ae)
		}
		ferr := p.probe.Failed(ctx, status(), err, provider.ErrUnknownModel, detail)
		if errors.Is(ferr, provider.ErrUnknownModel) {
			ferr = provider.WithAvailable(ferr, p.listModels(ctx))
		}
		return ferr
	}
	return nil
}

// listModels is the first page of GET /v1/models, for an unknown model's
// error (nil when it cannot be read).
func (p *Provider) listModels(ctx context.Context) []string {
	page, err := p.models.List(ctx, sdk.ModelListParams{})
	if err != nil || page == nil {
		return nil
	}
	ids := make([]string, 0, len(page.Data))
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	return ids
}

// apiMessage reads {"type":"error","error":{"type","message"}}.
func apiMessage(e *sdk.Error) string {
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(e.RawJSON()), &body) != nil || body.Error.Message == "" {
		return ""
	}
	return body.Error.Type + ": " + body.Error.Message
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
	answer := ""
	if req.ResponseSchema != nil {
		answer = req.ResponseSchema.Name
	}
	return retry.Do(ctx, p.policy, func(ctx context.Context) (provider.CompletionResponse, error) {
		if p.stream {
			return p.completeStream(ctx, params, names, answer, req.OnDelta, opts)
		}
		m, err := p.svc.New(ctx, params, opts...)
		if err != nil {
			return provider.CompletionResponse{}, err
		}
		return fromMessage(m, string(params.Model), names, answer)
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
	if rs := req.ResponseSchema; rs != nil {
		tool, err := answerTool(rs)
		if err != nil {
			return params, nil, err
		}
		for _, t := range params.Tools {
			if t.OfTool != nil && t.OfTool.Name == rs.Name {
				return params, nil, fmt.Errorf("response schema %s: an offered tool has the same name", rs.Name)
			}
		}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: &tool})
		params.ToolChoice = sdk.ToolChoiceParamOfTool(rs.Name)
	}
	markCache(&params, len(req.Tools) > 0)
	return params, names, nil
}

// answerTool is the forced tool that carries a schema-bound answer.
func answerTool(rs *provider.ResponseSchema) (sdk.ToolParam, error) {
	schema, err := outschema.Anthropic(rs.Schema)
	if err != nil {
		return sdk.ToolParam{}, fmt.Errorf("response schema %s: %w", rs.Name, err)
	}
	in := sdk.ToolInputSchemaParam{ExtraFields: map[string]any{}}
	for _, k := range schema.Keys {
		v := schema.Vals[k]
		switch k {
		case "type":
		case "properties":
			in.Properties = v
		case "required":
			list, _ := v.([]any)
			for _, r := range list {
				if s, ok := r.(string); ok {
					in.Required = append(in.Required, s)
				}
			}
		default:
			in.ExtraFields[k] = v
		}
	}
	return sdk.ToolParam{
		Name:        rs.Name,
		Description: sdk.String("Give your answer: a " + rs.Name + " document, as this tool's input."),
		InputSchema: in,
	}, nil
}

// markCache sets Anthropic's cache_control breakpoints: the end of the
// system prompt (the cache holds the tools and the system prompt), else the
// last tool; and, when the conversation goes on, the last block of the
// last message, so that the next turn reads everything before it from the
// cache. Two of the four breakpoints a request may carry.
func markCache(params *sdk.MessageNewParams, agentic bool) {
	switch {
	case len(params.System) > 0:
		params.System[len(params.System)-1].CacheControl = sdk.NewCacheControlEphemeralParam()
	case len(params.Tools) > 0 && params.Tools[len(params.Tools)-1].OfTool != nil:
		params.Tools[len(params.Tools)-1].OfTool.CacheControl = sdk.NewCacheControlEphemeralParam()
	}
	if n := len(params.Messages); n > 0 && (agentic || n > 1) {
		blocks := params.Messages[n-1].Content
		if len(blocks) > 0 {
			if cc := blocks[len(blocks)-1].GetCacheControl(); cc != nil {
				*cc = sdk.NewCacheControlEphemeralParam()
			}
		}
	}
}

func fromMessage(m *sdk.Message, model string, names *args.Names, answer string) (provider.CompletionResponse, error) {
	if m == nil || !m.JSON.Content.Valid() {
		return provider.CompletionResponse{}, retry.Malformed("the message has no content", nil)
	}
	a := assembly{model: model, stop: string(m.StopReason), answer: answer}
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
// budgets see the real context size; the cache reads and writes are priced
// apart (provider.Pricing).
func usage(input, cacheWrite, cacheRead, output int64) provider.Usage {
	return provider.Usage{InputTokens: input + cacheWrite + cacheRead, OutputTokens: output, CachedInputTokens: cacheRead, CacheWriteTokens: cacheWrite}
}

// completeStream sends the request with stream=true and assembles the
// answer from message_start, content_block_* and message_delta events.
func (p *Provider) completeStream(ctx context.Context, params sdk.MessageNewParams, names *args.Names, answer string, onDelta func(string), opts []option.RequestOption) (provider.CompletionResponse, error) {
	stream := p.svc.NewStreaming(ctx, params, opts...)
	defer stream.Close()
	a := assembly{model: string(params.Model), answer: answer}
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
				if onDelta != nil && ev.Delta.Text != "" {
					onDelta(ev.Delta.Text)
				}
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
			if ev.Usage.CacheReadInputTokens > 0 {
				cacheRead = ev.Usage.CacheReadInputTokens
			}
			if ev.Usage.CacheCreationInputTokens > 0 {
				cacheWrite = ev.Usage.CacheCreationInputTokens
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
	answer      string // the forced answer tool's name, "" for none
	blocks      []*block
	usage       provider.Usage
}

func (a assembly) response(names *args.Names) (provider.CompletionResponse, error) {
	resp := provider.CompletionResponse{ToolCalls: []provider.ToolCall{}, Model: a.model, Usage: a.usage, SchemaVersion: "v1"}
	var text strings.Builder
	answered := false
	for _, b := range a.blocks {
		switch b.kind {
		case "text":
			text.WriteString(b.text)
		case "tool_use":
			if b.id == "" || b.name == "" {
				return provider.CompletionResponse{}, retry.Malformed("a tool_use block without id or name", nil)
			}
			if a.answer != "" && b.name == a.answer && !answered {
				// The forced answer tool: its input is the document.
				answered = true
				continue
			}
			resp.ToolCalls = append(resp.ToolCalls, provider.ToolCall{ID: b.id, Name: names.Original(b.name), Args: args.Raw(b.input)})
		}
		// thinking, redacted_thinking and server-tool blocks carry nothing
		// the runtime uses.
	}
	resp.Text = text.String()
	if answered {
		for _, b := range a.blocks {
			if b.kind == "tool_use" && b.name == a.answer {
				// Only the document: a preamble the model wrote before the
				// call would make it invalid JSON.
				resp.Text = strings.TrimSpace(b.input)
				if resp.Text == "" {
					resp.Text = "{}"
				}
				break
			}
		}
		if len(resp.ToolCalls) == 0 && a.stop == "tool_use" {
			a.stop = "end_turn"
		}
	}
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

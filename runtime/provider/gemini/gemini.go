// Package gemini is the Gemini API adapter. It maps
// completion_request_v1 to GenerateContent with function declarations
// through the official SDK (google.golang.org/genai): system messages
// become the system instruction, assistant tool calls functionCall parts of
// a "model" turn, and tool results functionResponse parts of a "user" turn.
//
// Gemini may leave function-call ids empty; the adapter then synthesises
// stable ids (same request and answer, same id) and leaves them out when
// the history goes back to Gemini, which matches responses by name and
// order. Gemini's thought signatures on function calls are kept in memory
// and sent back with their call, as the API asks.
//
// The profile carries the key (GOOGLE_API_KEY or GEMINI_API_KEY, genai's
// order) and GOOGLE_GEMINI_BASE_URL (see provider.Profile.ApplyEnv); the
// client gets both explicitly, so no other GOOGLE_* variable or ambient
// credential applies.
//
// A request's ResponseSchema becomes responseMimeType application/json with
// a responseSchema in the OpenAPI subset Gemini accepts
// (internal/outschema). Gemini 2.x does not combine function declarations
// with a JSON response type, so when tools are offered in the same request
// they stay declared with function calling mode NONE and the answer's
// shape is left to the prompt and the runtime's local repair. Usage reports
// implicitly cached tokens (cachedContentTokenCount).
//
// Retries are the adapter's (runtime/provider/internal/retry): the SDK's
// own retry options stay off, so Retry-After and Gemini's RetryInfo are
// honoured and every failure is a *provider.Error.
package gemini

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/internal/args"
	"github.com/agentos/agentos/runtime/provider/internal/outschema"
	"github.com/agentos/agentos/runtime/provider/internal/retry"
	"google.golang.org/genai"
)

// Name is the provider's name in profiles and errors.
const Name = "gemini"

// DefaultBaseURL is the Gemini API.
const DefaultBaseURL = "https://generativelanguage.googleapis.com/"

// syntheticPrefix starts the ids this adapter invents.
const syntheticPrefix = "gemini_call_"

// maxSignatures bounds the in-memory thought-signature cache.
const maxSignatures = 4096

// Options are the adapter's settings beyond the profile: streaming, the
// HTTP client, and the retry clock and sleep (tests).
type Options = retry.Options

// Provider completes requests through GenerateContent.
type Provider struct {
	models      *genai.Models
	model       string
	maxTokens   int
	temperature *float64
	stream      bool
	policy      retry.Policy
	probe       retry.Probe
	cacheKey    string

	mu    sync.Mutex
	sigs  map[string][]byte // call id → thought signature
	order []string
}

// New builds the adapter from a profile; the API key is required.
func New(ctx context.Context, p provider.Profile, o Options) (*Provider, error) {
	if p.APIKey == "" {
		return nil, fmt.Errorf("gemini: GEMINI_API_KEY (or GOOGLE_API_KEY) is not set")
	}
	base := strings.TrimSpace(p.BaseURL)
	if base == "" {
		base = DefaultBaseURL
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("gemini: base_url %q is not an http(s) URL", p.BaseURL)
	}
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	client, err := genai.NewClient(ctx, &genai.ClientConfig{
		// Explicit backend, key and base URL: nothing comes from
		// GOOGLE_* variables or application default credentials.
		Backend:    genai.BackendGeminiAPI,
		APIKey:     p.APIKey,
		HTTPClient: retry.Client(o.HTTPClient),
		// No RetryOptions: the SDK makes one request per attempt.
		HTTPOptions: genai.HTTPOptions{BaseURL: base},
	})
	if err != nil {
		return nil, fmt.Errorf("gemini: %w", err)
	}
	policy := o.Policy(Name, p)
	policy.Hint = retryInfo
	p.BaseURL = base
	keySum := sha256.Sum256([]byte(p.APIKey))
	return &Provider{
		models:      client.Models,
		model:       p.Model,
		maxTokens:   p.MaxTokens,
		temperature: p.Temperature,
		stream:      o.Stream,
		policy:      policy,
		probe:       retry.Probe{Provider: Name, Profile: p},
		cacheKey:    strings.Join([]string{Name, base, p.Model, hex.EncodeToString(keySum[:8])}, "|"),
		sigs:        map[string][]byte{},
	}, nil
}

// CacheKey identifies the endpoint, model and key for provider.Preflight.
func (p *Provider) CacheKey() string { return p.cacheKey }

// Check implements provider.Checker with models.get. Gemini answers a bad
// key with 400 INVALID_ARGUMENT (reason API_KEY_INVALID), a key without
// access with 403, and an unknown model with 404.
func (p *Provider) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, retry.ProbeTimeout)
	defer cancel()
	gctx, status := retry.Observing(ctx)
	_, err := p.models.Get(gctx, p.model, nil)
	if err == nil {
		return nil
	}
	var ae genai.APIError
	if !errors.As(err, &ae) {
		return p.probe.Failed(ctx, status(), err, provider.ErrUnknownModel, "")
	}
	code := status()
	if code == 0 {
		code = ae.Code
	}
	if code == 400 && keyInvalid(ae) {
		return p.probe.Error(provider.ErrKeyRejected, code, ae.Message, err)
	}
	ferr := p.probe.Failed(ctx, code, err, provider.ErrUnknownModel, ae.Message)
	if errors.Is(ferr, provider.ErrUnknownModel) {
		ferr = provider.WithAvailable(ferr, p.listModels(ctx))
	}
	return ferr
}

// listModels is the first page of the models list, for an unknown
// model's error (nil when it cannot be read).
func (p *Provider) listModels(ctx context.Context) []string {
	page, err := p.models.List(ctx, nil)
	if err != nil {
		return nil
	}
	ids := make([]string, 0, len(page.Items))
	for _, m := range page.Items {
		ids = append(ids, strings.TrimPrefix(m.Name, "models/"))
	}
	return ids
}

// keyInvalid reports google.rpc.ErrorInfo reason API_KEY_INVALID.
func keyInvalid(ae genai.APIError) bool {
	for _, d := range ae.Details {
		if r, _ := d["reason"].(string); r == "API_KEY_INVALID" {
			return true
		}
	}
	return strings.Contains(ae.Message, "API key not valid")
}

// Name implements provider.Provider.
func (p *Provider) Name() string { return Name }

// Complete implements provider.Provider.
func (p *Provider) Complete(ctx context.Context, req provider.CompletionRequest) (provider.CompletionResponse, error) {
	model, contents, cfg, err := p.request(req)
	if err != nil {
		return provider.CompletionResponse{}, &provider.Error{Code: provider.CodeProviderError, Provider: Name, Message: "request: " + err.Error(), Err: err}
	}
	salt := args.Salt(req.Messages)
	res, err := retry.Do(ctx, p.policy, func(ctx context.Context) (result, error) {
		var a assembly
		if p.stream {
			a.onDelta = req.OnDelta
			for chunk, err := range p.models.GenerateContentStream(ctx, model, contents, cfg) {
				if err != nil {
					var ae genai.APIError
					if errors.As(err, &ae) {
						// An error event in the stream ("UNAVAILABLE"); an
						// error status still decides on its own.
						return result{}, retry.Transient(err)
					}
					return result{}, err
				}
				if err := a.add(chunk); err != nil {
					return result{}, err
				}
			}
			if a.chunks == 0 {
				return result{}, retry.Malformed("the stream carried no chunks", nil)
			}
			if a.finish == "" && !a.blocked {
				return result{}, retry.Transient(errors.New("the stream ended before a finish reason"))
			}
		} else {
			r, err := p.models.GenerateContent(ctx, model, contents, cfg)
			if err != nil {
				return result{}, err
			}
			if err := a.add(r); err != nil {
				return result{}, err
			}
		}
		return a.result(model, salt)
	})
	if err != nil {
		return provider.CompletionResponse{}, err
	}
	p.remember(res.sigs)
	return res.resp, nil
}

func (p *Provider) request(req provider.CompletionRequest) (string, []*genai.Content, *genai.GenerateContentConfig, error) {
	model := req.Model
	if model == "" {
		model = p.model
	}
	if model == "" {
		return "", nil, nil, errors.New("no model (set model in the profile)")
	}
	cfg := &genai.GenerateContentConfig{AutomaticContinuation: genai.Ptr(false)}
	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = p.maxTokens
	}
	if maxTokens > 0 {
		cfg.MaxOutputTokens = int32(min(maxTokens, 1<<31-1))
	}
	temp := req.Temperature
	if temp == nil {
		temp = p.temperature
	}
	if temp != nil {
		cfg.Temperature = genai.Ptr(float32(*temp))
	}
	var contents []*genai.Content
	add := func(role string, parts ...*genai.Part) {
		if len(parts) == 0 {
			return
		}
		if n := len(contents); n > 0 && contents[n-1].Role == role {
			contents[n-1].Parts = append(contents[n-1].Parts, parts...)
			return
		}
		contents = append(contents, &genai.Content{Role: role, Parts: parts})
	}
	names := map[string]string{} // call id → function name, for responses
	for i, m := range req.Messages {
		switch m.Role {
		case provider.RoleSystem:
			if m.Content == "" {
				continue
			}
			if cfg.SystemInstruction == nil {
				cfg.SystemInstruction = &genai.Content{}
			}
			cfg.SystemInstruction.Parts = append(cfg.SystemInstruction.Parts, &genai.Part{Text: m.Content})
		case provider.RoleUser:
			if m.Content != "" {
				add(genai.RoleUser, &genai.Part{Text: m.Content})
			}
		case provider.RoleAssistant:
			var parts []*genai.Part
			if m.Content != "" {
				parts = append(parts, &genai.Part{Text: m.Content})
			}
			for _, c := range m.ToolCalls {
				names[c.ID] = c.Name
				parts = append(parts, &genai.Part{
					FunctionCall:     &genai.FunctionCall{ID: nativeID(c.ID), Name: c.Name, Args: args.Object(c.Args)},
					ThoughtSignature: p.signature(c.ID),
				})
			}
			add(genai.RoleModel, parts...)
		case provider.RoleTool:
			if m.ToolCallID == "" {
				return "", nil, nil, fmt.Errorf("messages[%d]: a tool message needs tool_call_id", i)
			}
			name := names[m.ToolCallID]
			if name == "" {
				name = m.Name
			}
			if name == "" {
				return "", nil, nil, fmt.Errorf("messages[%d]: tool_call_id %q answers no earlier tool call (Gemini needs the function name)", i, m.ToolCallID)
			}
			add(genai.RoleUser, &genai.Part{FunctionResponse: &genai.FunctionResponse{ID: nativeID(m.ToolCallID), Name: name, Response: map[string]any{"output": m.Content}}})
		default:
			return "", nil, nil, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	if len(req.Tools) > 0 {
		tool := &genai.Tool{}
		for i, t := range req.Tools {
			schema, err := args.Schema(t.InputSchema)
			if err != nil {
				return "", nil, nil, fmt.Errorf("tools[%d] %s: %w", i, t.Name, err)
			}
			tool.FunctionDeclarations = append(tool.FunctionDeclarations, &genai.FunctionDeclaration{Name: t.Name, Description: t.Description, ParametersJsonSchema: schema})
		}
		cfg.Tools = []*genai.Tool{tool}
	}
	if rs := req.ResponseSchema; rs != nil {
		if len(req.Tools) > 0 {
			cfg.ToolConfig = &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeNone}}
		} else {
			schema, err := responseSchema(rs)
			if err != nil {
				return "", nil, nil, err
			}
			cfg.ResponseMIMEType, cfg.ResponseSchema = "application/json", schema
		}
	}
	return model, contents, cfg, nil
}

// responseSchema converts a role schema to Gemini's Schema.
func responseSchema(rs *provider.ResponseSchema) (*genai.Schema, error) {
	o, err := outschema.Gemini(rs.Schema)
	if err != nil {
		return nil, fmt.Errorf("response schema %s: %w", rs.Name, err)
	}
	b, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("response schema %s: %w", rs.Name, err)
	}
	var s genai.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("response schema %s: %w", rs.Name, err)
	}
	return &s, nil
}

// nativeID is the id to send back to Gemini: its own, never one of ours.
func nativeID(id string) string {
	if strings.HasPrefix(id, syntheticPrefix) {
		return ""
	}
	return id
}

// remember keeps thought signatures by call id, oldest dropped first.
func (p *Provider) remember(sigs map[string][]byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, sig := range sigs {
		if _, ok := p.sigs[id]; !ok {
			p.order = append(p.order, id)
		}
		p.sigs[id] = sig
	}
	for len(p.order) > maxSignatures {
		delete(p.sigs, p.order[0])
		p.order = p.order[1:]
	}
}

func (p *Provider) signature(id string) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sigs[id]
}

// retryInfo reads google.rpc.RetryInfo from a Gemini error, which is how
// Gemini says when to come back after a 429.
func retryInfo(err error) (time.Duration, bool) {
	var ae genai.APIError
	if !errors.As(err, &ae) {
		return 0, false
	}
	for _, d := range ae.Details {
		if t, _ := d["@type"].(string); t != "type.googleapis.com/google.rpc.RetryInfo" {
			continue
		}
		s, _ := d["retryDelay"].(string)
		if v, err := time.ParseDuration(s); err == nil && v >= 0 {
			return v, true
		}
	}
	return 0, false
}

type call struct {
	id, name string
	args     json.RawMessage
	sig      []byte
}

// assembly gathers an answer from one response or a stream of chunks.
type assembly struct {
	chunks  int
	onDelta func(string) // streamed text, as it arrives
	text    strings.Builder
	calls   []call
	finish  genai.FinishReason
	message string
	blocked bool
	model   string
	usage   provider.Usage
}

func (a *assembly) add(r *genai.GenerateContentResponse) error {
	if r == nil {
		return retry.Malformed("an empty response", nil)
	}
	a.chunks++
	if r.ModelVersion != "" {
		a.model = r.ModelVersion
	}
	if u := r.UsageMetadata; u != nil {
		// Thinking tokens are billed as output; promptTokenCount includes
		// the cached tokens.
		a.usage = provider.Usage{InputTokens: int64(u.PromptTokenCount), OutputTokens: int64(u.CandidatesTokenCount) + int64(u.ThoughtsTokenCount), CachedInputTokens: int64(u.CachedContentTokenCount)}
	}
	if len(r.Candidates) == 0 {
		if r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" {
			a.blocked = true
			return nil
		}
		if r.UsageMetadata != nil && a.chunks > 1 {
			return nil // a trailing usage-only chunk
		}
		return retry.Malformed("the response has no candidates", nil)
	}
	c := r.Candidates[0]
	if c == nil {
		return retry.Malformed("a null candidate", nil)
	}
	if c.Content != nil {
		for _, part := range c.Content.Parts {
			switch {
			case part == nil || part.Thought:
			case part.FunctionCall != nil:
				raw, err := json.Marshal(part.FunctionCall.Args)
				if err != nil {
					return retry.Malformed("function call args", err)
				}
				if part.FunctionCall.Args == nil {
					raw = json.RawMessage(`{}`)
				}
				a.calls = append(a.calls, call{id: part.FunctionCall.ID, name: part.FunctionCall.Name, args: raw, sig: part.ThoughtSignature})
			default:
				a.text.WriteString(part.Text)
				if a.onDelta != nil && part.Text != "" {
					a.onDelta(part.Text)
				}
			}
		}
	}
	if c.FinishReason != "" {
		a.finish = c.FinishReason
		a.message = c.FinishMessage
	}
	return nil
}

// result is one successful attempt: the answer and the thought
// signatures of its calls.
type result struct {
	resp provider.CompletionResponse
	sigs map[string][]byte
}

func (a *assembly) result(model string, salt string) (result, error) {
	if a.model != "" {
		model = a.model
	}
	resp := provider.CompletionResponse{Text: a.text.String(), ToolCalls: []provider.ToolCall{}, Model: model, Usage: a.usage, SchemaVersion: "v1"}
	var sigs map[string][]byte
	switch a.finish {
	case genai.FinishReasonMalformedFunctionCall, genai.FinishReasonUnexpectedToolCall:
		// The model's call could not be parsed on Gemini's side and is not
		// in the answer; a new sample usually succeeds.
		return result{}, retry.Transient(fmt.Errorf("gemini finished with %s: %s", a.finish, a.message))
	}
	for i, c := range a.calls {
		if c.name == "" {
			return result{}, retry.Malformed(fmt.Sprintf("function call %d has no name", i), nil)
		}
		id := c.id
		if id == "" {
			id = args.CallID(syntheticPrefix, salt, i, c.name, c.args)
		}
		resp.ToolCalls = append(resp.ToolCalls, provider.ToolCall{ID: id, Name: c.name, Args: c.args})
		if len(c.sig) > 0 {
			if sigs == nil {
				sigs = map[string][]byte{}
			}
			sigs[id] = c.sig
		}
	}
	switch {
	case a.blocked:
		resp.FinishReason = provider.FinishSafety
	case len(resp.ToolCalls) > 0:
		resp.FinishReason = provider.FinishToolUse
	default:
		switch a.finish {
		case genai.FinishReasonMaxTokens:
			resp.FinishReason = provider.FinishMaxTokens
		case genai.FinishReasonSafety, genai.FinishReasonRecitation, genai.FinishReasonBlocklist, genai.FinishReasonProhibitedContent,
			genai.FinishReasonSPII, genai.FinishReasonLanguage, genai.FinishReasonImageSafety, genai.FinishReasonImageProhibitedContent, genai.FinishReasonImageRecitation:
			resp.FinishReason = provider.FinishSafety
		default: // STOP, OTHER, unspecified
			resp.FinishReason = provider.FinishStop
		}
	}
	return result{resp: resp, sigs: sigs}, nil
}

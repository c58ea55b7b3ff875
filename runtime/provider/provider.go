// Package provider is the provider-agnostic completion layer:
// one request and response shape (completion_request_v1 /
// completion_response_v1) for every model provider. SDK types stay inside
// the adapter sub-packages; changing provider is a RuntimeProfile change.
package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentos/agentos/schemas"
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one conversation message. Assistant messages may carry tool
// calls; tool messages answer one call by id.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// ToolSpec offers a tool to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// ToolCall is a tool call normalised to {id, name, args}; Args is a raw
// JSON object whatever the provider's native shape.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// Usage is the token count and cost of one call. InputTokens counts every
// input token the model read, including those read from or written to a
// prompt cache; CachedInputTokens and CacheWriteTokens say how many of them
// were (completion_response_v1's usage allows these extra members).
type Usage struct {
	InputTokens       int64   `json:"input_tokens" yaml:"input_tokens"`
	OutputTokens      int64   `json:"output_tokens" yaml:"output_tokens"`
	CachedInputTokens int64   `json:"cached_input_tokens,omitempty" yaml:"cached_input_tokens,omitempty"`
	CacheWriteTokens  int64   `json:"cache_write_tokens,omitempty" yaml:"cache_write_tokens,omitempty"`
	CostUSD           float64 `json:"cost_usd,omitempty" yaml:"cost_usd,omitempty"`
}

// Add sums u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens,
		CachedInputTokens: u.CachedInputTokens + v.CachedInputTokens, CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
		CostUSD: u.CostUSD + v.CostUSD,
	}
}

// ResponseSchema asks for an answer that is one JSON document matching a
// schema (a role output), instead of free text or tool calls. Adapters send
// it with their provider's structured-output feature: OpenAI
// response_format json_schema, an Anthropic forced tool, Gemini
// responseSchema. Tools offered in the same request stay in it (so the
// prompt prefix stays the same for caching) but the answer must not call
// them.
type ResponseSchema struct {
	// Name is the schema id ("plan_v1"); it names the format or tool on the
	// wire, so it matches ^[a-zA-Z0-9_-]{1,64}$.
	Name string
	// Schema is the JSON Schema (draft 2020-12) from schemas/.
	Schema json.RawMessage
}

// CompletionRequest is completion_request_v1. Role, Turn and
// ResponseSchema are for the runtime, the scripted provider and the
// adapters; they are not part of the schema, and the adapters translate
// ResponseSchema into their provider's own field.
type CompletionRequest struct {
	Role           string          `json:"-"`
	Turn           int             `json:"-"` // calls this role made earlier in the session
	ResponseSchema *ResponseSchema `json:"-"`
	Messages       []Message       `json:"messages"`
	Model          string          `json:"model"`
	Tools          []ToolSpec      `json:"tools,omitempty"`
	MaxTokens      int             `json:"max_tokens,omitempty"`
	Temperature    *float64        `json:"temperature,omitempty"`
	SchemaVersion  string          `json:"schema_version"`
	// OnDelta, when set and the adapter streams, receives each piece of
	// the answer's text as it arrives (output.delta). The
	// response still carries the whole text; a retried attempt starts
	// its deltas again.
	OnDelta func(text string) `json:"-"`
}

// Finish reasons.
const (
	FinishStop      = "stop"
	FinishToolUse   = "tool_use"
	FinishMaxTokens = "max_tokens"
	FinishSafety    = "safety"
)

// CompletionResponse is completion_response_v1.
type CompletionResponse struct {
	Text          string     `json:"text"`
	ToolCalls     []ToolCall `json:"tool_calls"`
	FinishReason  string     `json:"finish_reason"`
	Usage         Usage      `json:"usage"`
	Model         string     `json:"model"`
	SchemaVersion string     `json:"schema_version"`
}

// Provider completes requests. Adapters retry inside Complete and return
// *Error when they give up.
type Provider interface {
	Name() string
	Complete(ctx context.Context, req CompletionRequest) (CompletionResponse, error)
}

// CodeProviderError is the fail-closed code for a provider that failed.
const CodeProviderError = "PROVIDER_ERROR"

// Error is a provider failure the runtime can branch on.
type Error struct {
	Code      string // PROVIDER_ERROR, or SCHEMA_VIOLATION for an invalid request/response
	Provider  string
	Status    int  // HTTP status, 0 if none
	Retryable bool // a later attempt might succeed (the adapter already retried)
	Attempts  int
	Message   string
	Err       error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s: %s", e.Code, e.Provider, e.Message)
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Attempts > 1 {
		s += fmt.Sprintf(" after %d attempts", e.Attempts)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Checked wraps a provider with schema validation of every request before
// it is sent and every response after it arrives.
type Checked struct {
	P   Provider
	Reg *schemas.Registry
}

// Name implements Provider.
func (c Checked) Name() string { return c.P.Name() }

// Unwrap returns the wrapped provider.
func (c Checked) Unwrap() Provider { return c.P }

// Complete implements Provider.
func (c Checked) Complete(ctx context.Context, req CompletionRequest) (CompletionResponse, error) {
	if req.SchemaVersion == "" {
		req.SchemaVersion = "v1"
	}
	if err := c.Reg.Validate("completion_request_v1", req); err != nil {
		return CompletionResponse{}, &Error{Code: "SCHEMA_VIOLATION", Provider: c.P.Name(), Message: "request", Err: err}
	}
	resp, err := c.P.Complete(ctx, req)
	if err != nil {
		var pe *Error
		if !errors.As(err, &pe) {
			err = &Error{Code: CodeProviderError, Provider: c.P.Name(), Message: "call failed", Err: err}
		}
		return CompletionResponse{}, err
	}
	if resp.ToolCalls == nil {
		resp.ToolCalls = []ToolCall{}
	}
	for i := range resp.ToolCalls {
		resp.ToolCalls[i].Args = NormalizeArgs(resp.ToolCalls[i].Args)
	}
	if resp.SchemaVersion == "" {
		resp.SchemaVersion = "v1"
	}
	if err := c.Reg.Validate("completion_response_v1", resp); err != nil {
		return CompletionResponse{}, &Error{Code: "SCHEMA_VIOLATION", Provider: c.P.Name(), Message: "response", Err: err}
	}
	return resp, nil
}

// Pricing turns token counts into a cost when the provider reports none,
// in US dollars per million tokens. Cached input (read from a prompt
// cache) is priced at CachedInputPerMTok and input written to a cache
// (Anthropic) at CacheWritePerMTok; where those are 0, such tokens cost
// InputPerMTok, so a missing rate never under-reports.
type Pricing struct {
	InputPerMTok       float64 `yaml:"input_per_mtok" json:"input_per_mtok"`
	OutputPerMTok      float64 `yaml:"output_per_mtok" json:"output_per_mtok"`
	CachedInputPerMTok float64 `yaml:"cached_input_per_mtok,omitempty" json:"cached_input_per_mtok,omitempty"`
	CacheWritePerMTok  float64 `yaml:"cache_write_per_mtok,omitempty" json:"cache_write_per_mtok,omitempty"`
}

// IsZero reports whether no rate is set.
func (p Pricing) IsZero() bool { return p == Pricing{} }

// Cost returns the price of u.
func (p Pricing) Cost(u Usage) float64 {
	cachedRate, writeRate := p.CachedInputPerMTok, p.CacheWritePerMTok
	if cachedRate == 0 {
		cachedRate = p.InputPerMTok
	}
	if writeRate == 0 {
		writeRate = p.InputPerMTok
	}
	cached := min(max(u.CachedInputTokens, 0), u.InputTokens)
	written := min(max(u.CacheWriteTokens, 0), u.InputTokens-cached)
	plain := u.InputTokens - cached - written
	return (float64(plain)*p.InputPerMTok + float64(cached)*cachedRate + float64(written)*writeRate + float64(u.OutputTokens)*p.OutputPerMTok) / 1e6
}

// Priced fills Usage.CostUSD from a price table when the adapter left it 0.
type Priced struct {
	P       Provider
	Pricing Pricing
}

// Name implements Provider.
func (p Priced) Name() string { return p.P.Name() }

// Unwrap returns the wrapped provider.
func (p Priced) Unwrap() Provider { return p.P }

// Complete implements Provider.
func (p Priced) Complete(ctx context.Context, req CompletionRequest) (CompletionResponse, error) {
	resp, err := p.P.Complete(ctx, req)
	if err == nil && resp.Usage.CostUSD == 0 {
		resp.Usage.CostUSD = p.Pricing.Cost(resp.Usage)
	}
	return resp, err
}

// NormalizeArgs makes a tool call's arguments a JSON object whatever the
// model sent: an object passes unchanged, empty text is {}, and anything
// else (invalid JSON, an array, a string) becomes {"_raw": "<text>"}, so it
// can be validated and logged, while the kernel's argument guard still
// judges — and may repair — the model's own text.
func NormalizeArgs(raw json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return json.RawMessage(`{}`)
	}
	if t[0] == '{' && json.Valid(t) {
		return raw
	}
	b, err := json.Marshal(map[string]string{"_raw": string(raw)})
	if err != nil { // cannot happen for a map of strings
		return json.RawMessage(`{}`)
	}
	return b
}

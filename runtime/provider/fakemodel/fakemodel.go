// Package fakemodel is test support: an OpenAI-compatible HTTP server that
// behaves like a model working on the demo task (runtime/demo: fix
// CheckToken in auth.go), so the real openai adapter, the engine and the
// bot can be tested end to end over HTTP without a real model.
//
// It is not a stub that replays fixed turns. Each answer is decided from the
// request, as a model would: the role comes from the system prompt ("You are
// the Planner") or the requested response_format; the worker reads its tool
// results (a failing test.run, the content repo.read returned, the patch's
// outcome) and chooses the next tool call from them, and writes the patch
// from the file it read.
//
// It enforces what the OpenAI API enforces: a Bearer key when one is
// configured (401 invalid_api_key), a known model (404 model_not_found), a
// well-formed request (400 for unknown parameters, tool names outside
// ^[a-zA-Z0-9_-]{1,64}$, tool messages that answer no call, a strict
// response_format schema that breaks strict mode's rules). It counts
// requests per endpoint, reports prompt-cache hits the way OpenAI does
// (prompts of 1024 tokens or more, in 128-token increments of the longest
// prefix shared with a recent request), streams server-sent events when
// asked, and can be told to answer the next requests with 429 (and
// retry-after) or a 5xx.
//
// With IgnoreResponseFormat the server behaves like a compatible server
// that drops response_format: each role's JSON comes plain, in a ```json
// fence, wrapped in a sentence, or drifting from the schema (a required
// field missing), chosen by Seed and the role, so every seed exercises every
// repair path of the runtime across one flow.
package fakemodel

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options configure a server.
type Options struct {
	// Key is the API key requests must carry as "Authorization: Bearer
	// <Key>"; empty accepts requests with or without a key (a keyless local
	// server).
	Key string
	// Model is the model served (listed by /v1/models); empty is
	// DefaultModel.
	Model string
	// OtherModels are listed and served too.
	OtherModels []string
	// IgnoreResponseFormat makes the server drop response_format, like
	// compatible servers that do not implement it; see the package doc.
	IgnoreResponseFormat bool
	// Seed picks the shape of each role's reply when IgnoreResponseFormat
	// is set.
	Seed int64
	// CacheWindow is how many recent prompts count for prompt caching
	// (default 64).
	CacheWindow int
}

// DefaultModel is the model a server serves when Options.Model is empty.
const DefaultModel = "fake-model"

// Cache model constants: OpenAI caches prompts of CacheMinTokens or more,
// in CacheIncrement-token steps beyond that.
const (
	CacheMinTokens = 1024
	CacheIncrement = 128
)

// Stats are the server's counters.
type Stats struct {
	// Requests counts requests by "METHOD /path" (model ids in paths are
	// kept).
	Requests map[string]int
	// Completions counts chat completion requests answered with 200.
	Completions int
	// PromptTokens, CachedTokens and CompletionTokens sum the usage the
	// server reported.
	PromptTokens     int64
	CachedTokens     int64
	CompletionTokens int64
	// ByRole counts answered completions by the role the server read.
	ByRole map[string]int
	// ResponseFormats counts completions that asked for a response_format,
	// by schema name.
	ResponseFormats map[string]int
}

// Server is a running fake model.
type Server struct {
	o   Options
	srv *httptest.Server

	mu      sync.Mutex
	stats   Stats
	recent  [][]byte // rendered prompts, newest last
	inject  []injected
	lastReq []byte
}

type injected struct {
	status int
	header http.Header
}

// Start starts a server on a loopback port; it stops when the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s := New(o)
	s.srv = httptest.NewServer(s)
	t.Cleanup(s.srv.Close)
	return s
}

// New returns a server that is not listening: an http.Handler for callers
// that serve it themselves.
func New(o Options) *Server {
	if o.Model == "" {
		o.Model = DefaultModel
	}
	if o.CacheWindow <= 0 {
		o.CacheWindow = 64
	}
	return &Server{o: o, stats: Stats{Requests: map[string]int{}, ByRole: map[string]int{}, ResponseFormats: map[string]int{}}}
}

// URL is the base URL to configure (OPENAI_BASE_URL): it ends in /v1.
func (s *Server) URL() string {
	if s.srv == nil {
		return ""
	}
	return s.srv.URL + "/v1"
}

// Model is the model the server serves.
func (s *Server) Model() string { return s.o.Model }

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.stats
	out.Requests = copyMap(s.stats.Requests)
	out.ByRole = copyMap(s.stats.ByRole)
	out.ResponseFormats = copyMap(s.stats.ResponseFormats)
	return out
}

// Requests returns how many requests reached "METHOD /path".
func (s *Server) Requests(methodPath string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats.Requests[methodPath]
}

// LastRequest returns the body of the last chat completion request.
func (s *Server) LastRequest() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.lastReq...)
}

// Fail answers the next n chat completion requests with status (429, 500,
// 503, 529 ...) and the given headers (such as Retry-After) instead of a
// completion.
func (s *Server) Fail(n, status int, header http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < n; i++ {
		s.inject = append(s.inject, injected{status: status, header: header.Clone()})
	}
}

// ResetCache forgets the recent prompts (a cache that expired).
func (s *Server) ResetCache() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recent = nil
}

func copyMap(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// apiError is an OpenAI error body.
type apiError struct {
	status  int
	message string
	typ     string
	code    string
	param   string
}

func (e *apiError) write(w http.ResponseWriter) {
	body := map[string]any{"error": map[string]any{"message": e.message, "type": e.typ, "param": nullable(e.param), "code": nullable(e.code)}}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(body)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(format, args...), typ: "invalid_request_error"}
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.stats.Requests[r.Method+" "+r.URL.Path]++
	s.mu.Unlock()
	if err := s.authorize(r); err != nil {
		err.write(w)
		return
	}
	switch {
	case r.URL.Path == "/v1/models" && r.Method == http.MethodGet:
		s.listModels(w)
	case strings.HasPrefix(r.URL.Path, "/v1/models/") && r.Method == http.MethodGet:
		s.getModel(w, strings.TrimPrefix(r.URL.Path, "/v1/models/"))
	case r.URL.Path == "/v1/chat/completions" && r.Method == http.MethodPost:
		s.chat(w, r)
	case r.URL.Path == "/v1/chat/completions" || r.URL.Path == "/v1/models":
		(&apiError{status: http.StatusMethodNotAllowed, message: "Method " + r.Method + " not allowed", typ: "invalid_request_error"}).write(w)
	default:
		(&apiError{status: http.StatusNotFound, message: "Invalid URL (" + r.Method + " " + r.URL.Path + ")", typ: "invalid_request_error"}).write(w)
	}
}

func (s *Server) authorize(r *http.Request) *apiError {
	if s.o.Key == "" {
		return nil
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return &apiError{status: http.StatusUnauthorized, message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).", typ: "invalid_request_error"}
	}
	key, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || key != s.o.Key {
		shown := key
		if len(shown) > 8 {
			shown = shown[:3] + "*****" + shown[len(shown)-4:]
		}
		return &apiError{status: http.StatusUnauthorized, message: "Incorrect API key provided: " + shown + ". You can find your API key at https://platform.openai.com/account/api-keys.", typ: "invalid_request_error", code: "invalid_api_key"}
	}
	return nil
}

func (s *Server) models() []string {
	return append([]string{s.o.Model}, s.o.OtherModels...)
}

func (s *Server) served(model string) bool {
	for _, m := range s.models() {
		if m == model {
			return true
		}
	}
	return false
}

func modelObject(id string) map[string]any {
	return map[string]any{"id": id, "object": "model", "created": 1715367049, "owned_by": "fakemodel"}
}

func (s *Server) listModels(w http.ResponseWriter) {
	var data []any
	for _, m := range s.models() {
		data = append(data, modelObject(m))
	}
	writeJSON(w, map[string]any{"object": "list", "data": data})
}

func (s *Server) getModel(w http.ResponseWriter, id string) {
	if !s.served(id) {
		notFound(id).write(w)
		return
	}
	writeJSON(w, modelObject(id))
}

func notFound(model string) *apiError {
	return &apiError{status: http.StatusNotFound, message: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model), typ: "invalid_request_error", code: "model_not_found"}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// chatRequest is the Chat Completions request; unknown members are a 400,
// as the API answers "Unrecognized request argument supplied".
type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Tools               []chatTool      `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	ResponseFormat      *responseFormat `json:"response_format,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *streamOptions  `json:"stream_options,omitempty"`
	MaxTokens           *int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	Seed                *int64          `json:"seed,omitempty"`
	User                string          `json:"user,omitempty"`
	PromptCacheKey      string          `json:"prompt_cache_key,omitempty"`
	N                   *int            `json:"n,omitempty"`
	Stop                json.RawMessage `json:"stop,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []chatToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Refusal    *string         `json:"refusal,omitempty"`

	text string // Content as text
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		Strict      *bool           `json:"strict,omitempty"`
	} `json:"function"`
}

type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict,omitempty"`
	} `json:"json_schema,omitempty"`
}

var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// parse decodes and checks a request as the API does.
func parse(body []byte) (*chatRequest, *apiError) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req chatRequest
	if err := dec.Decode(&req); err != nil {
		if strings.Contains(err.Error(), "unknown field") {
			return nil, badRequest("Unrecognized request argument supplied: %s", strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`))
		}
		return nil, badRequest("We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly.)")
	}
	if req.Model == "" {
		return nil, &apiError{status: 400, message: "you must provide a model parameter", typ: "invalid_request_error", param: "model"}
	}
	if len(req.Messages) == 0 {
		return nil, &apiError{status: 400, message: "[] is too short - 'messages'", typ: "invalid_request_error", param: "messages", code: "empty_array"}
	}
	if req.MaxTokens != nil && req.MaxCompletionTokens != nil {
		return nil, badRequest("max_tokens and max_completion_tokens cannot both be set")
	}
	for i, t := range req.Tools {
		if t.Type != "function" {
			return nil, badRequest("Invalid value for 'tools[%d].type': expected 'function'", i)
		}
		if !toolNamePattern.MatchString(t.Function.Name) {
			return nil, &apiError{status: 400, message: fmt.Sprintf("Invalid 'tools[%d].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", i), typ: "invalid_request_error", param: fmt.Sprintf("tools[%d].function.name", i), code: "invalid_value"}
		}
	}
	if f := req.ResponseFormat; f != nil {
		switch f.Type {
		case "text", "json_object":
		case "json_schema":
			if f.JSONSchema == nil || f.JSONSchema.Name == "" || !toolNamePattern.MatchString(f.JSONSchema.Name) {
				return nil, badRequest("Missing or invalid 'response_format.json_schema.name'")
			}
			if f.JSONSchema.Strict != nil && *f.JSONSchema.Strict {
				var doc any
				if err := json.Unmarshal(f.JSONSchema.Schema, &doc); err != nil {
					return nil, badRequest("Invalid schema for response_format '%s': not JSON", f.JSONSchema.Name)
				}
				if msg := strictProblem(doc, "()"); msg != "" {
					return nil, &apiError{status: 400, message: fmt.Sprintf("Invalid schema for response_format '%s': %s", f.JSONSchema.Name, msg), typ: "invalid_request_error", param: "response_format", code: "invalid_json_schema"}
				}
			}
		default:
			return nil, badRequest("Invalid value: '%s'. Supported values are: 'json_object', 'json_schema', and 'text'.", f.Type)
		}
	}
	// Roles, contents, and the pairing of tool calls and tool messages.
	open := map[string]bool{} // tool_call ids not yet answered
	for i := range req.Messages {
		m := &req.Messages[i]
		text, err := contentText(m.Content)
		if err != nil {
			return nil, badRequest("Invalid 'messages[%d].content': %v", i, err)
		}
		m.text = text
		switch m.Role {
		case "system", "developer", "user":
			if len(open) > 0 {
				return nil, badRequest("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(keys(open), ", "))
			}
		case "assistant":
			if len(open) > 0 {
				return nil, badRequest("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(keys(open), ", "))
			}
			for _, c := range m.ToolCalls {
				if c.ID == "" || c.Function.Name == "" {
					return nil, badRequest("Missing required parameter: 'messages[%d].tool_calls[0].id'.", i)
				}
				open[c.ID] = true
			}
		case "tool":
			if !open[m.ToolCallID] {
				return nil, badRequest("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
			}
			delete(open, m.ToolCallID)
		default:
			return nil, badRequest("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", m.Role)
		}
	}
	if len(open) > 0 {
		return nil, badRequest("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(keys(open), ", "))
	}
	return &req, nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// contentText reads a message content: a string, null, or an array of
// text parts.
func contentText(raw json.RawMessage) (string, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return "", nil
	}
	if t[0] == '"' {
		var s string
		err := json.Unmarshal(t, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(t, &parts); err != nil {
		return "", fmt.Errorf("expected a string or an array of content parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content part of type %q is not supported here", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// strictProblem checks strict mode's rules for a response_format schema:
// every object lists all its properties as required and sets
// additionalProperties false, and only supported keywords appear.
func strictProblem(doc any, at string) string {
	m, ok := doc.(map[string]any)
	if !ok {
		return fmt.Sprintf("In context=%s, schema must be a JSON Schema object", at)
	}
	for k := range m {
		if !strictKeywords[k] {
			return fmt.Sprintf("In context=%s, '%s' is not permitted.", at, k)
		}
	}
	if props, ok := m["properties"].(map[string]any); ok || m["type"] == "object" {
		if m["additionalProperties"] != false {
			return fmt.Sprintf("In context=%s, 'additionalProperties' is required to be supplied and to be false.", at)
		}
		req, _ := m["required"].([]any)
		have := map[string]bool{}
		for _, r := range req {
			if s, ok := r.(string); ok {
				have[s] = true
			}
		}
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if !have[n] {
				return fmt.Sprintf("In context=%s, 'required' is required to be supplied and to be an array including every key in properties. Missing '%s'.", at, n)
			}
			if p := strictProblem(props[n], at+", 'properties', '"+n+"'"); p != "" {
				return p
			}
		}
	}
	if items, ok := m["items"]; ok {
		if p := strictProblem(items, at+", 'items'"); p != "" {
			return p
		}
	}
	if any, ok := m["anyOf"].([]any); ok {
		for i, a := range any {
			if p := strictProblem(a, fmt.Sprintf("%s, 'anyOf', %d", at, i)); p != "" {
				return p
			}
		}
	}
	if _, hasType := m["type"]; !hasType {
		if _, hasAny := m["anyOf"]; !hasAny {
			if _, hasRef := m["$ref"]; !hasRef {
				return fmt.Sprintf("In context=%s, schema must have a 'type' key.", at)
			}
		}
	}
	return ""
}

// strictKeywords are the schema keywords strict mode accepts.
var strictKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true, "items": true,
	"enum": true, "const": true, "anyOf": true, "description": true, "title": true, "$defs": true, "$ref": true,
	"minItems": true, "maxItems": true, "pattern": true, "format": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil {
		badRequest("could not read the body").write(w)
		return
	}
	s.mu.Lock()
	s.lastReq = body
	var inj *injected
	if len(s.inject) > 0 {
		inj = &s.inject[0]
		s.inject = s.inject[1:]
	}
	s.mu.Unlock()
	if inj != nil {
		for k, v := range inj.header {
			w.Header()[k] = v
		}
		e := &apiError{status: inj.status, message: "The server had an error while processing your request. Sorry about that!", typ: "server_error"}
		if inj.status == http.StatusTooManyRequests {
			e.message, e.typ, e.code = "Rate limit reached for requests. Please try again later.", "requests", "rate_limit_exceeded"
		}
		e.write(w)
		return
	}
	req, apiErr := parse(body)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	if !s.served(req.Model) {
		notFound(req.Model).write(w)
		return
	}
	ans := s.answer(req)
	prompt := render(req)
	promptTokens := tokens(len(prompt))
	completionTokens := tokens(len(ans.content) + argsLen(ans.calls))
	s.mu.Lock()
	cached := s.cachedTokens(prompt)
	s.stats.Completions++
	s.stats.PromptTokens += int64(promptTokens)
	s.stats.CachedTokens += int64(cached)
	s.stats.CompletionTokens += int64(completionTokens)
	s.stats.ByRole[ans.role]++
	if f := req.ResponseFormat; f != nil && f.JSONSchema != nil {
		s.stats.ResponseFormats[f.JSONSchema.Name]++
	}
	s.mu.Unlock()
	u := usage{PromptTokens: promptTokens, CompletionTokens: completionTokens, TotalTokens: promptTokens + completionTokens}
	u.PromptTokensDetails.CachedTokens = cached
	id := "chatcmpl-" + digest(body)[:24]
	if req.Stream {
		s.stream(w, req, ans, id, u)
		return
	}
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil, "annotations": []any{}}
	if ans.content != "" || len(ans.calls) == 0 {
		msg["content"] = ans.content
	}
	if len(ans.calls) > 0 {
		msg["tool_calls"] = ans.calls
	}
	writeJSON(w, map[string]any{
		"id": id, "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
		"choices":            []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": ans.finish}},
		"usage":              u,
		"service_tier":       "default",
		"system_fingerprint": "fp_fakemodel",
	})
}

type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
		AudioTokens  int `json:"audio_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// stream writes the answer as chat.completion.chunk server-sent events.
func (s *Server) stream(w http.ResponseWriter, req *chatRequest, ans answer, id string, u usage) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	created := time.Now().Unix()
	send := func(choices []any, withUsage bool) {
		chunk := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model, "system_fingerprint": "fp_fakemodel", "choices": choices}
		if withUsage {
			chunk["usage"] = u
		}
		b, _ := json.Marshal(chunk)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	send([]any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": "", "refusal": nil}, "logprobs": nil, "finish_reason": nil}}, false)
	for _, piece := range split(ans.content, 24) {
		send([]any{map[string]any{"index": 0, "delta": map[string]any{"content": piece}, "logprobs": nil, "finish_reason": nil}}, false)
	}
	for i, c := range ans.calls {
		send([]any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Function.Name, "arguments": ""}}}}, "logprobs": nil, "finish_reason": nil}}, false)
		for _, piece := range split(c.Function.Arguments, 32) {
			send([]any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": piece}}}}, "logprobs": nil, "finish_reason": nil}}, false)
		}
	}
	send([]any{map[string]any{"index": 0, "delta": map[string]any{}, "logprobs": nil, "finish_reason": ans.finish}}, false)
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		send([]any{}, true)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func split(s string, n int) []string {
	var out []string
	for len(s) > n {
		// Keep UTF-8 sequences whole.
		cut := n
		for cut < len(s) && s[cut]&0xC0 == 0x80 {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// render is the prompt as the cache sees it, laid out the way chat
// templates lay it out: the leading system (or developer) messages, then the
// tool definitions (as the templates of Qwen, Llama 3.1 and Hermes models
// and OpenAI's harmony format put them, after the system text), then the
// response_format schema (harmony's "# Response Formats"), then the rest of
// the conversation.
func render(req *chatRequest) []byte {
	var b bytes.Buffer
	msg := func(m chatMessage) {
		fmt.Fprintf(&b, "<|%s|>%s", m.Role, m.text)
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, "<call %s>%s(%s)", c.ID, c.Function.Name, c.Function.Arguments)
		}
		if m.ToolCallID != "" {
			fmt.Fprintf(&b, "<result %s>", m.ToolCallID)
		}
		b.WriteString("<|end|>\n")
	}
	i := 0
	for ; i < len(req.Messages) && (req.Messages[i].Role == "system" || req.Messages[i].Role == "developer"); i++ {
		msg(req.Messages[i])
	}
	for _, t := range req.Tools {
		fmt.Fprintf(&b, "<tool>%s\n%s\n%s\n", t.Function.Name, t.Function.Description, t.Function.Parameters)
	}
	if f := req.ResponseFormat; f != nil && f.JSONSchema != nil {
		fmt.Fprintf(&b, "<schema>%s\n%s\n", f.JSONSchema.Name, f.JSONSchema.Schema)
	}
	for _, m := range req.Messages[i:] {
		msg(m)
	}
	return b.Bytes()
}

// tokens is the fake tokenizer's count for n bytes: four bytes a token,
// which keeps a shared byte prefix a shared token prefix.
func tokens(n int) int { return (n + 3) / 4 }

func argsLen(calls []chatToolCall) int {
	n := 0
	for _, c := range calls {
		n += len(c.Function.Name) + len(c.Function.Arguments)
	}
	return n
}

// cachedTokens applies OpenAI's prompt-caching rule against the recent
// prompts and remembers this one. s.mu must be held.
func (s *Server) cachedTokens(prompt []byte) int {
	best := 0
	for _, p := range s.recent {
		if n := commonPrefix(p, prompt); n > best {
			best = n
		}
	}
	s.recent = append(s.recent, prompt)
	if len(s.recent) > s.o.CacheWindow {
		s.recent = s.recent[len(s.recent)-s.o.CacheWindow:]
	}
	return CachedFor(best/4, tokens(len(prompt)))
}

// CachedFor is OpenAI's cached-token count for a prompt of promptTokens
// whose longest prefix shared with a recent request is sharedTokens: 0
// below CacheMinTokens, otherwise CacheMinTokens plus whole
// CacheIncrement-token steps of the rest.
func CachedFor(sharedTokens, promptTokens int) int {
	if promptTokens < CacheMinTokens || sharedTokens < CacheMinTokens {
		return 0
	}
	shared := min(sharedTokens, promptTokens)
	return CacheMinTokens + (shared-CacheMinTokens)/CacheIncrement*CacheIncrement
}

func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

package simulator

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// ModelPrefix starts every model the server serves: "sim-" followed by a
// behaviour's name.
const ModelPrefix = "sim-"

// Server is a running simulator: an OpenAI-compatible Chat Completions
// endpoint whose model name picks the behaviour.
type Server struct {
	srv *httptest.Server

	mu    sync.Mutex
	calls map[string]int // completions answered, by model
}

// Start starts a server on a loopback port; it stops when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{calls: map[string]int{}}
	s.srv = httptest.NewServer(s)
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the base URL to configure (OPENAI_BASE_URL): it ends in /v1.
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Completions returns how many completions the server answered for model.
func (s *Server) Completions(model string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[model]
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/v1/models" && r.Method == http.MethodGet:
		var data []any
		for _, b := range Behaviours() {
			data = append(data, modelObject(ModelPrefix+b.Name))
		}
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
	case strings.HasPrefix(r.URL.Path, "/v1/models/") && r.Method == http.MethodGet:
		id := strings.TrimPrefix(r.URL.Path, "/v1/models/")
		if _, ok := Lookup(id); !ok {
			writeError(w, http.StatusNotFound, "invalid_request_error", "model_not_found", fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", id))
			return
		}
		writeJSON(w, http.StatusOK, modelObject(id))
	case r.URL.Path == "/v1/chat/completions" && r.Method == http.MethodPost:
		s.chat(w, r)
	default:
		writeError(w, http.StatusNotFound, "invalid_request_error", "", "Invalid URL ("+r.Method+" "+r.URL.Path+")")
	}
}

func modelObject(id string) map[string]any {
	return map[string]any{"id": id, "object": "model", "created": 1715367049, "owned_by": "simulator"}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	var c any
	if code != "" {
		c = code
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}})
}

// chatRequest is the part of a Chat Completions request the simulator
// reads; the real API's validation is fakemodel's job.
type chatRequest struct {
	Model          string        `json:"model"`
	Messages       []chatMessage `json:"messages"`
	Tools          []chatTool    `json:"tools"`
	Stream         bool          `json:"stream"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name string `json:"name"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []chatToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`

	text string
}

type chatTool struct {
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// reply is what the simulated model answers: text, a refusal, tool calls.
type reply struct {
	content string
	refusal string
	calls   []chatToolCall
	finish  string
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "could not read the body")
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request.")
		return
	}
	if req.Stream {
		// The matrix runs without streaming; say so instead of answering
		// in a shape the client did not ask for.
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "the simulator does not stream")
		return
	}
	b, ok := Lookup(req.Model)
	if !ok {
		writeError(w, http.StatusNotFound, "invalid_request_error", "model_not_found", fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", req.Model))
		return
	}
	for i := range req.Messages {
		req.Messages[i].text = contentText(req.Messages[i].Content)
	}
	ans := decide(b, &req)
	s.mu.Lock()
	s.calls[req.Model]++
	s.mu.Unlock()
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if ans.refusal != "" {
		msg["refusal"] = ans.refusal
	} else if ans.content != "" || len(ans.calls) == 0 {
		msg["content"] = ans.content
	}
	if len(ans.calls) > 0 {
		msg["tool_calls"] = ans.calls
	}
	prompt, completion := (len(body)+3)/4, (len(ans.content)+len(ans.refusal)+argsLen(ans.calls)+3)/4
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "chatcmpl-sim-" + digest(body)[:20], "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": ans.finish}},
		"usage":   map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	})
}

func argsLen(calls []chatToolCall) int {
	n := 0
	for _, c := range calls {
		n += len(c.Function.Name) + len(c.Function.Arguments)
	}
	return n
}

// contentText reads a message content: a string, null, or text parts.
func contentText(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(t, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(t, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

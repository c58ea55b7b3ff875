package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/internal/outschema"
	"github.com/agentos/agentos/runtime/provider/internal/retry"
)

// The Chat Completions wire format, as far as this adapter uses it
// (https://platform.openai.com/docs/api-reference/chat). Optional members
// are omitted when unset, as the API and compatible servers expect.

// chatRequest is the body of POST /chat/completions.
type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Tools               []chatTool      `json:"tools,omitempty"`
	ToolChoice          string          `json:"tool_choice,omitempty"`
	MaxTokens           *int64          `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	ResponseFormat      *responseFormat `json:"response_format,omitempty"`
	PromptCacheKey      string          `json:"prompt_cache_key,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *streamOptions  `json:"stream_options,omitempty"`
}

// chatMessage is one message of the request. Content is omitted only for
// an assistant turn made of tool calls alone.
type chatMessage struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content,omitempty"`
	ToolCalls  []wireCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type wireCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string      `json:"type"`
	Function functionDef `json:"function"`
}

type functionDef struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters"`
}

type responseFormat struct {
	Type       string           `json:"type"`
	JSONSchema jsonSchemaFormat `json:"json_schema"`
}

type jsonSchemaFormat struct {
	Name   string            `json:"name"`
	Schema *outschema.Object `json:"schema"`
	Strict bool              `json:"strict"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// completion is a chat.completion answer, or one chat.completion.chunk of
// a stream (whose choices carry a delta instead of a message). A null
// message or finish_reason stays nil.
type completion struct {
	Model   string     `json:"model"`
	Choices []choice   `json:"choices"`
	Usage   *wireUsage `json:"usage"`
}

type choice struct {
	Index        int64        `json:"index"`
	Message      *respMessage `json:"message"`
	Delta        respMessage  `json:"delta"`
	FinishReason *string      `json:"finish_reason"`
}

type respMessage struct {
	Content   string     `json:"content"`
	Refusal   string     `json:"refusal"`
	ToolCalls []respCall `json:"tool_calls"`
}

// respCall is a tool call of an answer; in a stream, Index says which call
// a fragment continues.
type respCall struct {
	Index    int64        `json:"index"`
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

// wireUsage counts tokens; prompt_tokens includes the cached ones.
type wireUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *wireUsage) usage() provider.Usage {
	d := u.PromptTokensDetails
	return provider.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, CachedInputTokens: d.CachedTokens, CacheWriteTokens: d.CacheWriteTokens}
}

// modelList is GET /models; modelObject one model (GET /models/{model}).
type modelList struct {
	Data []modelObject `json:"data"`
}

type modelObject struct {
	ID string `json:"id"`
}

// apiError is an answer with an error status. Its text names the status
// only: the body's message (which may quote the key it rejected) is kept
// in Message for the preflight, which redacts the key before showing it.
type apiError struct {
	Status  int
	Message string
}

func (e *apiError) Error() string {
	if text := http.StatusText(e.Status); text != "" {
		return fmt.Sprintf("OpenAI API error: %d %s", e.Status, text)
	}
	return fmt.Sprintf("OpenAI API error: %d", e.Status)
}

// streamError is an error event inside a stream that began with a success
// status ({"error": {...}} in place of a chunk).
type streamError struct{ detail string }

func (e *streamError) Error() string { return "received error while streaming: " + e.detail }

// Limits on what is read of an answer.
const (
	maxErrorBody = 1 << 20  // an error status's body
	maxEvent     = 32 << 20 // one server-sent-event line
)

// client sends the adapter's requests: the base URL (ending in "/"), the
// credentials, and the HTTP client whose transport retry.Do observes.
type client struct {
	base              *url.URL
	key, org, project string
	http              *http.Client
}

// send sends one request and returns a response of a success status; an
// error status is read into an *apiError (retry.Do classifies it by the
// status its transport saw).
func (c *client) send(ctx context.Context, method, path string, body any, accept string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encoding the request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	u := *c.base
	u.RawQuery, u.Fragment = "", ""
	req, err := http.NewRequestWithContext(ctx, method, u.String()+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "agentos")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if c.org != "" {
		req.Header.Set("OpenAI-Organization", c.org)
	}
	if c.project != "" {
		req.Header.Set("OpenAI-Project", c.project)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode >= 400 {
		defer res.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		return nil, &apiError{Status: res.StatusCode, Message: errorMessage(b)}
	}
	return res, nil
}

// errorMessage reads the message of an error body: the API's
// {"error": {"message": ...}}, or {"error": "..."} as some compatible
// servers (Ollama) answer; "" for anything else.
func errorMessage(b []byte) string {
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &body) != nil || len(body.Error) == 0 {
		return ""
	}
	var obj struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body.Error, &obj) == nil {
		return obj.Message
	}
	var s string
	if json.Unmarshal(body.Error, &s) == nil {
		return s
	}
	return ""
}

// call sends a request and decodes the JSON answer into out. A body cut
// short fails with io.ErrUnexpectedEOF (retried as a dropped connection);
// one that is no JSON, or not this shape, as a malformed answer.
func (c *client) call(ctx context.Context, method, path string, body, out any) error {
	res, err := c.send(ctx, method, path, body, "application/json")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		return fmt.Errorf("decoding the answer: %w", err)
	}
	// What follows the document (a newline) is read, so the connection
	// can serve the next request.
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4096))
	return nil
}

// stream sends a request for a server-sent-event stream and hands each
// chunk to each, until data: [DONE] or the end of the body. An event
// carrying an error member ends the stream with a retryable error; an
// event that is no chunk, with a malformed-answer error.
func (c *client) stream(ctx context.Context, path string, body any, each func(*completion)) error {
	res, err := c.send(ctx, http.MethodPost, path, body, "text/event-stream")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, maxEvent)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			// A blank line ends an event (one with no data is skipped).
			if len(data) == 0 {
				continue
			}
			if bytes.HasPrefix(data, []byte("[DONE]")) {
				return nil
			}
			var chunk struct {
				completion
				Error json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(data, &chunk); err != nil {
				return fmt.Errorf("decoding a stream event: %w", err)
			}
			if len(chunk.Error) > 0 {
				return retry.Transient(&streamError{detail: string(chunk.Error)})
			}
			each(&chunk.completion)
			data = data[:0]
			continue
		}
		// Field lines ("name: value"); comments (":...") and the
		// event, id and retry fields carry nothing the chunks need.
		name, value, _ := bytes.Cut(line, []byte(":"))
		if string(name) != "data" {
			continue
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		data = append(data, value...)
		data = append(data, '\n')
	}
	return sc.Err()
}

// pathParam escapes one path segment ("." and ".." included, which a URL
// would otherwise resolve).
func pathParam(s string) string {
	switch s {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(s)
}

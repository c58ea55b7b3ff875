package openai

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/provider"
)

// Tests of the adapter's own HTTP client (wire.go) beyond the recorded
// exchanges: the headers it sends, the event-stream framing it accepts,
// and what an error body may and may not reach.

const okAnswer = `{"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":2,"cache_write_tokens":1}}}`

func TestRequestHeadersAndPath(t *testing.T) {
	for _, base := range []string{"/v1", "/v1/"} {
		for _, stream := range []bool{false, true} {
			var got http.Header
			var path string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got, path = r.Header.Clone(), r.URL.Path
				if stream {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = io.WriteString(w, "data: "+strings.Replace(okAnswer, `"message"`, `"delta"`, 1)+"\n\ndata: [DONE]\n\n")
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, okAnswer)
			}))
			p := provider.Profile{Provider: Name, Model: "m", BaseURL: srv.URL + base, APIKey: "sk-k", Organization: "org-1", Project: "proj-1"}
			prov, err := New(p, Options{Stream: stream})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead})
			srv.Close()
			if err != nil {
				t.Fatalf("base %q stream=%v: %v", base, stream, err)
			}
			if resp.Text != "ok" || resp.Usage != (provider.Usage{InputTokens: 3, OutputTokens: 1, CachedInputTokens: 2, CacheWriteTokens: 1}) {
				t.Errorf("base %q stream=%v: resp %+v", base, stream, resp)
			}
			accept := "application/json"
			if stream {
				accept = "text/event-stream"
			}
			want := map[string]string{"Authorization": "Bearer sk-k", "Openai-Organization": "org-1", "Openai-Project": "proj-1", "Content-Type": "application/json", "Accept": accept}
			for k, v := range want {
				if got.Get(k) != v {
					t.Errorf("base %q stream=%v: header %s = %q, want %q", base, stream, k, got.Get(k), v)
				}
			}
			if path != "/v1/chat/completions" {
				t.Errorf("base %q: path %q", base, path)
			}
		}
	}
}

// TestStreamFraming: CRLF line ends, comments, event and id fields, and a
// chunk split over two data lines are read as the event-stream format
// defines them.
func TestStreamFraming(t *testing.T) {
	body := ": keep-alive\r\n\r\n" +
		"event: chunk\r\nid: 1\r\ndata: {\"model\":\"m\",\"choices\":[{\"index\":0,\r\ndata: \"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\r\n\r\n" +
		"data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"other choice\"}}]}\r\n\r\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}],\"usage\":null}\r\n\r\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\r\n\r\n" +
		"data: [DONE]\r\n\r\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" after done\"}}]}\r\n\r\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	prov, err := New(provider.Profile{Provider: Name, Model: "m", BaseURL: srv.URL + "/v1"}, Options{Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Hello" || resp.FinishReason != provider.FinishStop || resp.Model != "m" || resp.Usage != (provider.Usage{InputTokens: 5, OutputTokens: 2}) {
		t.Errorf("resp = %+v", resp)
	}
}

// TestErrorBodyStaysOut: an error status's body (which may quote the key)
// is not in the error's text; the preflight shows its message with the key
// redacted, whether the server answers OpenAI's {"error": {"message"}} or
// a plain {"error": "..."} (Ollama).
func TestErrorBodyStaysOut(t *testing.T) {
	for _, body := range []string{`{"error":{"message":"bad key sk-secret-1","type":"invalid_request_error"}}`, `{"error":"bad key sk-secret-1"}`} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, body)
		}))
		prov, err := New(provider.Profile{Provider: Name, Model: "m", BaseURL: srv.URL + "/v1", APIKey: "sk-secret-1"}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead})
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Status != http.StatusUnauthorized || strings.Contains(err.Error(), "sk-secret-1") || !strings.Contains(err.Error(), "401 Unauthorized") {
			t.Errorf("%s: Complete: %v", body, err)
		}
		err = prov.Check(context.Background())
		srv.Close()
		var fe *provider.PreflightError
		if !errors.As(err, &fe) || !errors.Is(err, provider.ErrKeyRejected) || !strings.Contains(fe.Detail, "bad key [redacted]") {
			t.Errorf("%s: Check: %v", body, err)
		}
	}
}

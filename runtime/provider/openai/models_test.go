package openai

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/provider"
)

// TestUnknownModelListsTheModels: Check of a model an OpenAI-compatible
// endpoint does not list (GET /models, then GET /models/{model} 404)
// names the models it lists, as a local server (Ollama, vLLM) would.
func TestUnknownModelListsTheModels(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.Method+" "+r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/models":
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"qwen2.5-coder:7b","object":"model","created":1,"owned_by":"library"},{"id":"llama3.1:8b","object":"model","created":1,"owned_by":"library"}]}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"message":"model \"qwen3\" not found","type":"api_error"}}`))
		}
	}))
	defer srv.Close()
	p := provider.Profile{Provider: Name, Model: "qwen3", BaseURL: srv.URL + "/v1", MaxTokens: 256, Retries: 1}
	prov, err := New(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = prov.Check(context.Background())
	var pe *provider.PreflightError
	if !errors.As(err, &pe) || !errors.Is(err, provider.ErrUnknownModel) {
		t.Fatalf("Check: %v, want an unknown model", err)
	}
	if !strings.Contains(err.Error(), "the endpoint serves qwen2.5-coder:7b, llama3.1:8b") {
		t.Errorf("Check: %v, want the listed models", err)
	}
	if strings.Join(paths, ",") != "GET /v1/models,GET /v1/models/qwen3" {
		t.Errorf("requests %v", paths)
	}
}

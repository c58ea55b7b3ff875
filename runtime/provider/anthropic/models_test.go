package anthropic

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/provider"
)

// TestUnknownModelListsTheModels: Check of a model the endpoint does not
// serve (GET /v1/models/{model} answers 404) names the models GET
// /v1/models lists, and AGENTOS_MODEL.
func TestUnknownModelListsTheModels(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.Method+" "+r.URL.Path)
		if r.Header.Get("X-Api-Key") != "test-key" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/models":
			_, _ = w.Write([]byte(`{"data":[{"type":"model","id":"claude-sonnet-4-5","display_name":"Claude Sonnet 4.5","created_at":"2025-09-29T00:00:00Z"},{"type":"model","id":"claude-haiku-4-5","display_name":"Claude Haiku 4.5","created_at":"2025-10-01T00:00:00Z"}],"has_more":false,"first_id":"claude-sonnet-4-5","last_id":"claude-haiku-4-5"}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"type":"error","error":{"type":"not_found_error","message":"model: claude-sonnet-9"}}`))
		}
	}))
	defer srv.Close()
	p := profile(srv.URL)
	p.Model = "claude-sonnet-9"
	p.Origin.Model = "AGENTOS_MODEL"
	prov, _ := newProvider(t, p, Options{})
	err := prov.Check(context.Background())
	var pe *provider.PreflightError
	if !errors.As(err, &pe) || !errors.Is(err, provider.ErrUnknownModel) {
		t.Fatalf("Check: %v, want an unknown model", err)
	}
	if strings.Join(pe.Available, ",") != "claude-sonnet-4-5,claude-haiku-4-5" || !strings.Contains(err.Error(), "the endpoint serves claude-sonnet-4-5, claude-haiku-4-5") {
		t.Errorf("Check: %v (available %v), want the listed models", err, pe.Available)
	}
	if strings.Join(paths, ",") != "GET /v1/models/claude-sonnet-9,GET /v1/models" {
		t.Errorf("requests %v", paths)
	}
}

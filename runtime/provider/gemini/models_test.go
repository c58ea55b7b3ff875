package gemini

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/provider"
)

// TestUnknownModelListsTheModels: Check of a model Gemini does not serve
// (models.get answers 404) names the models models.list returns.
func TestUnknownModelListsTheModels(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.Method+" "+r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1beta/models":
			_, _ = w.Write([]byte(`{"models":[{"name":"models/gemini-2.5-flash","displayName":"Gemini 2.5 Flash"},{"name":"models/gemini-2.5-pro","displayName":"Gemini 2.5 Pro"}]}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"code":404,"message":"models/gemini-9-flash is not found for API version v1beta","status":"NOT_FOUND"}}`))
		}
	}))
	defer srv.Close()
	p := profile(srv.URL)
	p.Model = "gemini-9-flash"
	prov, _ := newProvider(t, p, false)
	err := prov.Check(context.Background())
	var pe *provider.PreflightError
	if !errors.As(err, &pe) || !errors.Is(err, provider.ErrUnknownModel) {
		t.Fatalf("Check: %v, want an unknown model", err)
	}
	if strings.Join(pe.Available, ",") != "gemini-2.5-flash,gemini-2.5-pro" || !strings.Contains(err.Error(), "the endpoint serves gemini-2.5-flash, gemini-2.5-pro") {
		t.Errorf("Check: %v (available %v), want the listed models", err, pe.Available)
	}
	if strings.Join(paths, ",") != "GET /v1beta/models/gemini-9-flash,GET /v1beta/models" {
		t.Errorf("requests %v", paths)
	}
}

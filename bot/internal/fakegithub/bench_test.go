package fakegithub

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkValidatedRequest measures one request through spec matching,
// body validation and a handler (no network).
func BenchmarkValidatedRequest(b *testing.B) {
	f := NewWithSpec(testSpec(b))
	f.AddRepo(Repo{Owner: "octo", Name: "app"})
	f.AddToken("tok", "dev")
	f.AddIssue("octo/app", Issue{Title: "t", User: "dev"})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := httptest.NewRequest(http.MethodPost, "/repos/octo/app/issues/1/comments", strings.NewReader(`{"body":"hello"}`))
		req.Header.Set("Authorization", "token tok")
		w := httptest.NewRecorder()
		f.ServeHTTP(w, req)
		if w.Code != http.StatusCreated {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}

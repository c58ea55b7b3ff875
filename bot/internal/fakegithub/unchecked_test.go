package fakegithub

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestUncheckedServes runs requests through a fake built without the
// OpenAPI description: GitHub's rules still hold and unknown routes are
// still violations.
func TestUncheckedServes(t *testing.T) {
	f, err := NewUnchecked()
	if err != nil {
		t.Fatal(err)
	}
	f.AddRepo(Repo{Owner: "octo", Name: "app"})
	f.AddToken("tok-bot", "bot[bot]")
	f.AddToken("tok-alice", "alice")
	issue := f.AddIssue("octo/app", Issue{Title: "t", User: "alice"})
	f.SetRef("octo/app", "heads/feature", sha("feature"))
	pr := f.AddPullRequest("octo/app", PullRequest{Title: "p", User: "bot[bot]", Head: "feature", Base: "main"})

	tests := []struct {
		name, method, path, token, body string
		want                            int
		violation                       bool
	}{
		{"comment", http.MethodPost, "/repos/octo/app/issues/1/comments", "tok-alice", `{"body":"hello"}`, http.StatusCreated, false},
		{"comment by id route", http.MethodGet, "/repos/octo/app/issues/comments/999999", "tok-alice", "", http.StatusNotFound, false},
		{"no token", http.MethodPost, "/repos/octo/app/issues/1/comments", "", `{"body":"hello"}`, http.StatusUnauthorized, false},
		{"unknown token", http.MethodGet, "/repos/octo/app", "nope", "", http.StatusUnauthorized, false},
		{"self approval", http.MethodPost, "/repos/octo/app/pulls/2/reviews", "tok-bot", `{"event":"APPROVE"}`, http.StatusUnprocessableEntity, false},
		{"maintainer approval", http.MethodPost, "/repos/octo/app/pulls/2/reviews", "tok-alice", `{"event":"APPROVE"}`, http.StatusOK, false},
		{"route the fake lacks", http.MethodGet, "/repos/octo/app/hooks", "tok-alice", "", http.StatusNotFound, true},
		{"non-numeric issue", http.MethodGet, "/repos/octo/app/issues/abc", "tok-alice", "", http.StatusNotFound, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.Violations())
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			if tc.token != "" {
				req.Header.Set("Authorization", "token "+tc.token)
			}
			w := httptest.NewRecorder()
			f.ServeHTTP(w, req)
			if w.Code != tc.want {
				t.Errorf("status = %d, want %d: %s", w.Code, tc.want, w.Body)
			}
			if got := len(f.Violations()) > before; got != tc.violation {
				t.Errorf("violation recorded = %v, want %v (%v)", got, tc.violation, f.Violations())
			}
		})
	}
	if cs := f.Comments("octo/app", issue); len(cs) != 1 || cs[0].Body != "hello" || cs[0].User != "alice" {
		t.Errorf("comments = %+v", cs)
	}
	if rs := f.Reviews("octo/app", pr); len(rs) != 1 || rs[0].State != "APPROVED" || rs[0].User != "alice" {
		t.Errorf("reviews = %+v", rs)
	}
	if got := f.Spec().Path(); got != uncheckedPath {
		t.Errorf("Spec().Path() = %q", got)
	}
}

// TestUncheckedMatchesSpec checks that the route-table spec sends each
// request to the operation GitHub's description would.
func TestUncheckedMatchesSpec(t *testing.T) {
	real := testSpec(t)
	un, err := routeSpec()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range RouteKeys() {
		method, tmpl, _ := strings.Cut(k, " ")
		segs := splitPath(tmpl)
		for i, s := range segs {
			switch {
			case s == "{ref}":
				segs[i] = "heads/feature/x"
			case strings.HasSuffix(s, "_number}") || strings.HasSuffix(s, "_id}"):
				segs[i] = "7"
			case isParam(s):
				segs[i] = "octo"
			}
		}
		path := "/" + strings.Join(segs, "/")
		want, _, ok := real.Match(method, path)
		if !ok {
			t.Errorf("%s %s: no operation in %s", method, path, real.Path())
			continue
		}
		got, _, ok := un.Match(method, path)
		if !ok || got.Path != want.Path {
			t.Errorf("%s %s matched %v, want %s", method, path, got, want.Path)
		}
	}
}

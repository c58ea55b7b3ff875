package fakegithub

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agentos/agentos/bot/internal/corpus"
)

func testSpec(tb testing.TB) *Spec {
	tb.Helper()
	s, err := LoadSpec(corpus.OpenAPI(tb))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// TestRoutesExistInSpec walks the fake's route table: every route must be
// an operation of GitHub's OpenAPI description, so the fake cannot serve an
// endpoint GitHub does not have.
func TestRoutesExistInSpec(t *testing.T) {
	s := testSpec(t)
	for _, k := range RouteKeys() {
		method, tmpl, _ := strings.Cut(k, " ")
		if _, ok := s.Operation(method, tmpl); !ok {
			t.Errorf("fake route %q is not an operation in %s", k, s.Path())
		}
	}
}

// TestRequestSchemasCompile compiles the request schema of every routed
// operation, so a spec update that breaks compilation fails here and not in
// the middle of a client test.
func TestRequestSchemasCompile(t *testing.T) {
	s := testSpec(t)
	for _, k := range RouteKeys() {
		method, tmpl, _ := strings.Cut(k, " ")
		op, ok := s.Operation(method, tmpl)
		if !ok || op.bodyPointer == "" {
			continue
		}
		if _, err := s.schema(op); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
}

type client struct {
	t     *testing.T
	url   string
	token string
}

func (c client) do(method, path string, body any) (int, map[string]any, http.Header) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case string:
			rd = strings.NewReader(b)
		default:
			buf, _ := json.Marshal(body)
			rd = bytes.NewReader(buf)
		}
	}
	req, err := http.NewRequest(method, c.url+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "token "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m, resp.Header
}

const (
	ownerTok = "tok-owner"
	devTok   = "tok-dev"
	readTok  = "tok-reader"
)

// seeded returns a fake with repo octo/app (main at the seeded SHA, branch
// feature one commit ahead, branch same with no commits), a PR #1 by dev
// from feature, and issue #2.
func seeded(t *testing.T) (*Fake, string) {
	t.Helper()
	f := New(t)
	f.AddRepo(Repo{Owner: "octo", Name: "app"})
	f.AddToken(ownerTok, "octo")
	f.AddToken(devTok, "dev")
	f.AddToken(readTok, "reader")
	f.SetPermission("octo/app", "dev", PermWrite)
	f.SetPermission("octo/app", "reader", PermRead)
	f.SetPermission("octo/app", "maint", PermMaintain)
	f.AddUser("dev2", "User")
	main, _ := f.Ref("octo/app", "heads/main")
	f.SetRef("octo/app", "heads/feature", sha("feature"))
	f.SetRef("octo/app", "heads/same", main)
	f.AddPullRequest("octo/app", PullRequest{Title: "t", User: "dev", Head: "feature", Base: "main"})
	f.AddIssue("octo/app", Issue{Title: "bug", User: "reader"})
	return f, f.Serve(t)
}

func TestFidelity(t *testing.T) {
	long := strings.Repeat("x", MaxBodyChars+1)
	tests := []struct {
		name       string
		token      string
		method     string
		path       string
		body       any
		wantStatus int
		wantInBody string
	}{
		{"no auth", "", "GET", "/repos/octo/app", nil, 401, "Requires authentication"},
		{"unknown token", "nope", "GET", "/repos/octo/app", nil, 401, "Bad credentials"},
		{"user token reads /user", devTok, "GET", "/user", nil, 200, `"login":"dev"`},
		{"approve own PR", devTok, "POST", "/repos/octo/app/pulls/1/reviews", map[string]any{"event": "APPROVE"}, 422, "Can not approve your own pull request"},
		{"request changes on own PR", devTok, "POST", "/repos/octo/app/pulls/1/reviews", map[string]any{"event": "REQUEST_CHANGES", "body": "no"}, 422, "your own pull request"},
		{"others may approve", ownerTok, "POST", "/repos/octo/app/pulls/1/reviews", map[string]any{"event": "APPROVE"}, 200, `"state":"APPROVED"`},
		{"comment review needs body", ownerTok, "POST", "/repos/octo/app/pulls/1/reviews", map[string]any{"event": "COMMENT"}, 422, "Review body is required"},
		{"no commits between", devTok, "POST", "/repos/octo/app/pulls", map[string]any{"title": "x", "head": "same", "base": "main"}, 422, "No commits between main and same"},
		{"unknown head", devTok, "POST", "/repos/octo/app/pulls", map[string]any{"title": "x", "head": "ghost", "base": "main"}, 422, `"field":"head"`},
		{"duplicate PR", devTok, "POST", "/repos/octo/app/pulls", map[string]any{"title": "x", "head": "feature", "base": "main"}, 422, "already exists"},
		{"reader cannot open PR", readTok, "POST", "/repos/octo/app/pulls", map[string]any{"title": "x", "head": "feature", "base": "main"}, 403, "not accessible"},
		{"comment too long", devTok, "POST", "/repos/octo/app/issues/2/comments", map[string]any{"body": long}, 422, "too long"},
		{"comment at the limit", devTok, "POST", "/repos/octo/app/issues/2/comments", map[string]any{"body": long[1:]}, 201, `"login":"dev"`},
		{"permission maintain reads as write", devTok, "GET", "/repos/octo/app/collaborators/maint/permission", nil, 200, `"permission":"write","role_name":"maintain"`},
		{"permission of a user without access", devTok, "GET", "/repos/octo/app/collaborators/dev2/permission", nil, 200, `"permission":"none"`},
		{"permission none", devTok, "GET", "/repos/octo/app/collaborators/octo-stranger/permission", nil, 404, "Not Found"},
		{"missing issue", devTok, "GET", "/repos/octo/app/issues/99", nil, 404, "Not Found"},
		{"Enterprise prefix", devTok, "GET", "/api/v3/repos/octo/app/issues/2", nil, 200, `"number":2`},
		{"ref with slashes", devTok, "POST", "/repos/octo/app/git/refs", map[string]any{"ref": "refs/heads/agent/s-1", "sha": sha("x")}, 201, `"ref":"refs/heads/agent/s-1"`},
		{"ref exists", devTok, "POST", "/repos/octo/app/git/refs", map[string]any{"ref": "refs/heads/feature", "sha": sha("x")}, 422, "already exists"},
		{"get nested ref", devTok, "GET", "/repos/octo/app/git/ref/heads/feature", nil, 200, sha("feature")},
		{"app JWT endpoint with token", devTok, "GET", "/app", nil, 401, "JSON web token"},
	}
	f, url := seeded(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := client{t: t, url: url, token: tt.token}
			status, m, h := c.do(tt.method, tt.path, tt.body)
			raw, _ := json.Marshal(m)
			if status != tt.wantStatus || !strings.Contains(string(raw), tt.wantInBody) {
				t.Errorf("%s %s = %d %s, want %d containing %q", tt.method, tt.path, status, trunc(raw), tt.wantStatus, tt.wantInBody)
			}
			if tt.token != "" && tt.token != "nope" && h.Get("X-RateLimit-Remaining") == "" {
				t.Errorf("no X-RateLimit-Remaining header")
			}
		})
	}
	f.CheckNoViolations(t)
	if got := len(f.Comments("octo/app", 2)); got != 1 {
		t.Errorf("comments on #2 = %d, want 1 (only the one at the limit)", got)
	}
	if got := f.Reviews("octo/app", 1); len(got) != 1 || got[0].State != "APPROVED" || got[0].User != "octo" {
		t.Errorf("reviews on #1 = %+v, want one APPROVED by octo", got)
	}
	if s, ok := f.Ref("octo/app", "refs/heads/agent/s-1"); !ok || s != sha("x") {
		t.Errorf("ref agent/s-1 = %q %v, want %q", s, ok, sha("x"))
	}
}

func trunc(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

func TestViolationsAreRecorded(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		path       string
		body       any
		wantStatus int
		wantReason string
	}{
		{"route not in spec", "GET", "/repos/octo/app/not-a-thing", nil, 404, "no operation"},
		{"spec route the fake lacks", "GET", "/repos/octo/app/releases", nil, 404, "does not implement"},
		{"enum violation", "POST", "/repos/octo/app/pulls/1/reviews", map[string]any{"event": "BOGUS", "body": "x"}, 422, "does not match"},
		{"wrong type", "POST", "/repos/octo/app/issues/2/comments", map[string]any{"body": 5}, 422, "does not match"},
		{"missing required", "POST", "/repos/octo/app/git/refs", map[string]any{"ref": "refs/heads/x"}, 422, "does not match"},
		{"draft on REST PATCH", "PATCH", "/repos/octo/app/pulls/1", map[string]any{"draft": false}, 422, "draft"},
		{"not JSON", "POST", "/repos/octo/app/issues/2/comments", "{", 422, "not JSON"},
		{"integer param", "GET", "/repos/octo/app/issues/abc", nil, 404, "no operation"},
		{"GraphQL other query", "POST", "/graphql", map[string]any{"query": `query { repository(owner: "octo", name: "app") { id } }`}, 404, "only the viewer query and the markPullRequestReadyForReview"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, url := seeded(t)
			status, _, _ := client{t: t, url: url, token: ownerTok}.do(tt.method, tt.path, tt.body)
			if status != tt.wantStatus {
				t.Errorf("status = %d, want %d", status, tt.wantStatus)
			}
			v := f.Violations()
			if len(v) != 1 || !strings.Contains(v[0].Reason, tt.wantReason) || v[0].Status != tt.wantStatus {
				t.Fatalf("violations = %v, want one with %d containing %q", v, tt.wantStatus, tt.wantReason)
			}
			// CheckNoViolations must report it.
			rec := &recordingTB{TB: t}
			f.CheckNoViolations(rec)
			if len(rec.errors) != 1 {
				t.Errorf("CheckNoViolations reported %d errors, want 1", len(rec.errors))
			}
		})
	}
}

type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, format)
}

func (r *recordingTB) Helper() {}

func TestFailNext(t *testing.T) {
	f, url := seeded(t)
	f.FailNext(2, Failure{Status: 429, RetryAfter: "7"})
	c := client{t: t, url: url, token: devTok}
	for i := 0; i < 2; i++ {
		status, _, h := c.do("GET", "/repos/octo/app", nil)
		if status != 429 || h.Get("Retry-After") != "7" {
			t.Errorf("request %d = %d Retry-After %q, want 429 with 7", i, status, h.Get("Retry-After"))
		}
	}
	if status, _, _ := c.do("GET", "/repos/octo/app", nil); status != 200 {
		t.Errorf("third request = %d, want 200", status)
	}
	if got := len(f.Requests()); got != 3 {
		t.Errorf("requests = %d, want 3", got)
	}
	f.CheckNoViolations(t)
}

func TestMarkReadyForReview(t *testing.T) {
	f, url := seeded(t)
	c := client{t: t, url: url, token: devTok}
	if status, _, _ := c.do("POST", "/repos/octo/app/pulls", map[string]any{"title": "draft", "head": "agent/x", "base": "main", "draft": true}); status != 422 {
		t.Fatalf("create without head ref = %d, want 422", status)
	}
	f.SetRef("octo/app", "heads/agent/x", sha("agent"))
	status, m, _ := c.do("POST", "/repos/octo/app/pulls", map[string]any{"title": "draft", "head": "agent/x", "base": "main", "draft": true})
	if status != 201 || m["draft"] != true {
		t.Fatalf("create draft = %d %v", status, m)
	}
	n := int(m["number"].(float64))
	q := map[string]any{
		"query":     "mutation($input: MarkPullRequestReadyForReviewInput!) { markPullRequestReadyForReview(input: $input) { pullRequest { isDraft } } }",
		"variables": map[string]any{"input": map[string]any{"pullRequestId": m["node_id"]}},
	}
	reader := client{t: t, url: url, token: readTok}
	if _, m, _ := reader.do("POST", "/graphql", q); m["errors"] == nil {
		t.Errorf("reader marked ready: %v", m)
	}
	if pr, _ := f.PR("octo/app", n); !pr.Draft {
		t.Fatalf("PR not draft after a reader's attempt")
	}
	if status, m, _ := c.do("POST", "/graphql", q); status != 200 || m["errors"] != nil {
		t.Fatalf("mark ready = %d %v", status, m)
	}
	if pr, _ := f.PR("octo/app", n); pr.Draft {
		t.Errorf("PR still draft after markPullRequestReadyForReview")
	}
	f.CheckNoViolations(t)
}

func TestSpecLoadedOnce(t *testing.T) {
	a, b := testSpec(t), testSpec(t)
	if a != b {
		t.Errorf("LoadSpec returned two specs for one path; it must load the 10+ MB file once per process")
	}
}

func TestReviewsCommentsAndDeletes(t *testing.T) {
	f, url := seeded(t)
	owner := client{t: t, url: url, token: ownerTok}
	dev := client{t: t, url: url, token: devTok}

	status, m, _ := owner.do("POST", "/repos/octo/app/pulls/1/reviews", map[string]any{
		"event": "REQUEST_CHANGES", "body": "please fix",
		"comments": []any{map[string]any{"path": "a.go", "line": 3, "side": "RIGHT", "body": "here"}},
	})
	if status != 200 || m["state"] != "CHANGES_REQUESTED" {
		t.Fatalf("create review = %d %v", status, m)
	}
	rid := int64(m["id"].(float64))
	if status, m, _ := owner.do("POST", "/repos/octo/app/pulls/1/comments", map[string]any{"body": "nit", "commit_id": sha("feature"), "path": "b.go", "line": 7}); status != 201 || m["path"] != "b.go" {
		t.Fatalf("create review comment = %d %v", status, m)
	}
	if status, _, _ := dev.do("GET", fmt.Sprintf("/repos/octo/app/pulls/1/reviews/%d", rid), nil); status != 200 {
		t.Errorf("get review = %d", status)
	}
	if status, _, _ := dev.do("PUT", fmt.Sprintf("/repos/octo/app/pulls/1/reviews/%d/dismissals", rid), map[string]any{"message": "stale"}); status != 200 {
		t.Errorf("dismiss review = %d", status)
	}
	if got := f.Reviews("octo/app", 1); len(got) != 1 || got[0].State != "DISMISSED" || len(got[0].Comments) != 1 {
		t.Errorf("reviews = %+v, want one DISMISSED with one comment", got)
	}
	if got := f.ReviewComments("octo/app", 1); len(got) != 2 || got[0].Line != 3 || got[1].Path != "b.go" {
		t.Errorf("review comments = %+v", got)
	}

	id := f.AddComment("octo/app", 2, "dev", "first")
	reader := client{t: t, url: url, token: readTok}
	if status, _, _ := reader.do("DELETE", fmt.Sprintf("/repos/octo/app/issues/comments/%d", id), nil); status != 403 {
		t.Errorf("reader deletes someone else's comment = %d, want 403", status)
	}
	if status, _, _ := dev.do("DELETE", fmt.Sprintf("/repos/octo/app/issues/comments/%d", id), nil); status != 204 {
		t.Errorf("author deletes own comment = %d, want 204", status)
	}
	if got := f.Comments("octo/app", 2); len(got) != 0 {
		t.Errorf("comments after delete = %+v", got)
	}
	if status, _, _ := dev.do("GET", "/repos/octo/app/pulls?state=all", nil); status != 200 {
		t.Errorf("list PRs = %d", status)
	}
	f.CheckNoViolations(t)
}

func TestConcurrentClients(t *testing.T) {
	f, url := seeded(t)
	const workers, each = 8, 10
	errs := make(chan string, workers*each)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				req, _ := http.NewRequest("POST", url+"/repos/octo/app/issues/2/comments", strings.NewReader(`{"body":"x"}`))
				req.Header.Set("Authorization", "token "+devTok)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err.Error()
					continue
				}
				resp.Body.Close()
				if resp.StatusCode != 201 {
					errs <- resp.Status
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	cs := f.Comments("octo/app", 2)
	ids := map[int64]bool{}
	for _, c := range cs {
		ids[c.ID] = true
	}
	if len(cs) != workers*each || len(ids) != workers*each {
		t.Errorf("comments = %d with %d distinct ids, want %d", len(cs), len(ids), workers*each)
	}
	f.CheckNoViolations(t)
}

func TestReviewCommentsMustBeInTheDiff(t *testing.T) {
	f, url := seeded(t)
	f.SetRef("octo/app", "heads/diffed", sha("diffed"))
	n := f.AddPullRequest("octo/app", PullRequest{Title: "d", User: "dev", Head: "diffed", Base: "main", DiffLines: map[string][]int{"a.go": {10, 11}}})
	c := client{t: t, url: url, token: ownerTok}
	tests := []struct {
		name string
		path string
		line int
		want int
	}{
		{"line in the diff", "a.go", 11, 200},
		{"line outside the diff", "a.go", 3, 422},
		{"file outside the diff", "b.go", 10, 422},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, _ := c.do("POST", fmt.Sprintf("/repos/octo/app/pulls/%d/reviews", n), map[string]any{
				"event": "COMMENT", "body": "b", "comments": []any{map[string]any{"path": tt.path, "line": tt.line, "body": "x"}},
			})
			if status != tt.want {
				t.Errorf("status = %d, want %d", status, tt.want)
			}
		})
	}
	if got := len(f.Reviews("octo/app", n)); got != 1 {
		t.Errorf("reviews = %d, want 1 (refused reviews leave no state)", got)
	}
	f.CheckNoViolations(t)
}

// A fake's route table is built by its constructor from every file's
// table, with nothing registered behind its back: the delivery-log routes
// are in it as the core ones are, and two fakes do not share one map.
func TestRouteTableIsBuiltByTheConstructor(t *testing.T) {
	a, b := NewWithSpec(testSpec(t)), NewWithSpec(testSpec(t))
	for _, part := range []map[string]route{coreRoutes, appDeliveryRoutes} {
		for k := range part {
			if _, ok := a.routes[k]; !ok {
				t.Errorf("route %q is missing from the fake's table", k)
			}
		}
	}
	if len(a.routes) != len(coreRoutes)+len(appDeliveryRoutes) || len(RouteKeys()) != len(a.routes) {
		t.Errorf("the table has %d routes, RouteKeys %d; want %d", len(a.routes), len(RouteKeys()), len(coreRoutes)+len(appDeliveryRoutes))
	}
	delete(a.routes, "GET /user")
	if _, ok := b.routes["GET /user"]; !ok {
		t.Error("two fakes share one route table")
	}
}

package fakegithub

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel/testenv"
	"github.com/golang-jwt/jwt/v4"
)

// appWorld is seeded() plus app 77 ("agentos") installed on octo/app as
// installation 9001, and the app's signing key.
func appWorld(t *testing.T) (*Fake, string, func() string) {
	t.Helper()
	f, url := seeded(t)
	app, pemKey, err := NewApp(77, "agentos")
	if err != nil {
		t.Fatal(err)
	}
	f.AddApp(app)
	f.AddInstallation(9001, 77, "octo/app")
	key, err := jwt.ParseRSAPrivateKeyFromPEM(pemKey)
	if err != nil {
		t.Fatal(err)
	}
	sign := func() string {
		now := time.Now()
		tok, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
			Issuer: "77", IssuedAt: jwt.NewNumericDate(now.Add(-30 * time.Second)), ExpiresAt: jwt.NewNumericDate(now.Add(5 * time.Minute)),
		}).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	return f, url, sign
}

// concrete fills a route template with values the seeded world has.
func concrete(tmpl string) string {
	r := strings.NewReplacer("{owner}", "octo", "{repo}", "app", "{username}", "dev", "{issue_number}", "2",
		"{pull_number}", "1", "{comment_id}", "1", "{review_id}", "1", "{ref}", "heads/main", "{installation_id}", "9001", "{delivery_id}", "1")
	return r.Replace(tmpl)
}

// Every route outside /app refuses an app's JWT, and the /app routes
// refuse tokens: authentication is per endpoint, for every route the fake
// has, without the handler opting in.
func TestAuthenticationPerEndpoint(t *testing.T) {
	f, url, sign := appWorld(t)
	jwtTok := sign()
	for _, k := range RouteKeys() {
		method, tmpl, _ := strings.Cut(k, " ")
		appRoute := strings.HasPrefix(tmpl, "/app") || tmpl == "/repos/{owner}/{repo}/installation"
		t.Run(k, func(t *testing.T) {
			req, _ := http.NewRequest(method, url+concrete(tmpl), strings.NewReader(bodyFor(method, tmpl)))
			if appRoute {
				req.Header.Set("Authorization", "token "+devTok)
			} else {
				req.Header.Set("Authorization", "Bearer "+jwtTok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s with the wrong credential kind = %d %s, want 401", k, resp.StatusCode, raw)
			}
		})
	}
	// GraphQL takes tokens only.
	q := `{"query":"mutation($input: MarkPullRequestReadyForReviewInput!) { markPullRequestReadyForReview(input: $input) { pullRequest { isDraft } } }","variables":{"input":{"pullRequestId":"x"}}}`
	req, _ := http.NewRequest("POST", url+"/graphql", strings.NewReader(q))
	req.Header.Set("Authorization", "Bearer "+jwtTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GraphQL with a JWT = %d, want 401", resp.StatusCode)
	}
	f.CheckNoViolations(t)
}

// bodyFor is a body the spec accepts for each write route.
func bodyFor(method, tmpl string) string {
	switch method + " " + tmpl {
	case "POST /repos/{owner}/{repo}/issues":
		return `{"title":"t"}`
	case "POST /repos/{owner}/{repo}/issues/{issue_number}/comments", "PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}":
		return `{"body":"x"}`
	case "POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions":
		return `{"content":"eyes"}`
	case "POST /repos/{owner}/{repo}/pulls":
		return `{"title":"t","head":"feature","base":"main"}`
	case "PATCH /repos/{owner}/{repo}/pulls/{pull_number}":
		return `{"body":"x"}`
	case "POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews":
		return `{"event":"COMMENT","body":"x"}`
	case "PUT /repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}/dismissals":
		return `{"message":"x"}`
	case "POST /repos/{owner}/{repo}/pulls/{pull_number}/comments":
		return `{"body":"x","commit_id":"` + strings.Repeat("a", 40) + `","path":"a","line":1}`
	case "POST /repos/{owner}/{repo}/git/refs":
		return `{"ref":"refs/heads/x","sha":"` + strings.Repeat("a", 40) + `"}`
	case "PATCH /repos/{owner}/{repo}/git/refs/{ref}":
		return `{"sha":"` + strings.Repeat("a", 40) + `"}`
	case "POST /repos/{owner}/{repo}/git/blobs":
		return `{"content":"x"}`
	case "POST /repos/{owner}/{repo}/git/trees":
		return `{"tree":[{"path":"a","mode":"100644","type":"blob","content":"x"}]}`
	case "POST /repos/{owner}/{repo}/git/commits":
		return `{"message":"m","tree":"` + strings.Repeat("a", 40) + `"}`
	}
	return ""
}

func TestInstallationTokens(t *testing.T) {
	f, url, sign := appWorld(t)
	var now time.Time
	var mu sync.Mutex
	now = time.Now()
	f.SetClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	f.AddRepo(Repo{Owner: "octo", Name: "secret", Private: true})
	f.AddRepo(Repo{Owner: "octo", Name: "open"})
	f.AddIssue("octo/open", Issue{Title: "t", User: "dev"})

	// Mint a token the way ghinstallation does.
	req, _ := http.NewRequest("POST", url+"/app/installations/9001/access_tokens", nil)
	req.Header.Set("Authorization", "Bearer "+sign())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var minted struct {
		Token     string `json:"token"`
		ExpiresAt string `json:"expires_at"`
	}
	json.NewDecoder(resp.Body).Decode(&minted)
	resp.Body.Close()
	if resp.StatusCode != 201 || !strings.HasPrefix(minted.Token, "ghs_") {
		t.Fatalf("mint = %d %+v", resp.StatusCode, minted)
	}
	inst := client{t: t, url: url, token: minted.Token}
	tests := []struct {
		name, method, path string
		body               any
		want               int
	}{
		{"own repository", "GET", "/repos/octo/app", nil, 200},
		{"own repository write", "POST", "/repos/octo/app/issues/2/comments", map[string]any{"body": "hi"}, 201},
		{"permission check", "GET", "/repos/octo/app/collaborators/dev/permission", nil, 200},
		{"private repository of another installation", "GET", "/repos/octo/secret", nil, 404},
		{"public repository outside the installation: read", "GET", "/repos/octo/open", nil, 200},
		{"public repository outside the installation: write", "POST", "/repos/octo/open/issues/1/comments", map[string]any{"body": "hi"}, 403},
		{"GET /user", "GET", "/user", nil, 403},
		{"GET /users/{username}", "GET", "/users/dev", nil, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, m, _ := inst.do(tt.method, tt.path, tt.body); got != tt.want {
				t.Errorf("%s %s = %d %v, want %d", tt.method, tt.path, got, m, tt.want)
			}
		})
	}
	if cs := f.Comments("octo/app", 2); len(cs) != 1 || cs[0].User != "agentos[bot]" {
		t.Errorf("comments = %+v, want one by agentos[bot]", cs)
	}
	// An hour later the token is dead.
	mu.Lock()
	now = now.Add(InstallationTokenLifetime + time.Second)
	mu.Unlock()
	if got, m, _ := inst.do("GET", "/repos/octo/app", nil); got != 401 || m["message"] != "Bad credentials" {
		t.Errorf("expired token = %d %v, want 401 Bad credentials", got, m)
	}
	f.CheckNoViolations(t)
}

func TestResponseValidation(t *testing.T) {
	s := testSpec(t)
	f, _ := seeded(t)
	op, ok := s.Operation("GET", "/repos/{owner}/{repo}/pulls/{pull_number}")
	if !ok {
		t.Fatal("no GET pull operation")
	}
	good, _ := json.Marshal(f.prJSON(f.repos["octo/app"], f.repos["octo/app"].prs[1]))
	var noHead map[string]any
	json.Unmarshal(good, &noHead)
	delete(noHead, "head")
	bad, _ := json.Marshal(noHead)
	badState := strings.Replace(string(good), `"state":"open"`, `"state":"merged"`, 1)
	tests := []struct {
		name   string
		status int
		body   string
		ct     string
		want   string // "" for valid
	}{
		{"the fake's pull request", 200, string(good), "application/json", ""},
		{"missing required head", 200, string(bad), "application/json", "head"},
		{"state outside the enum", 200, badState, "application/json", "state"},
		{"undeclared success status", 201, string(good), "application/json", "not declared"},
		{"universal 401 with a basic-error", 401, `{"message":"Bad credentials","documentation_url":"x"}`, "application/json", ""},
		{"declared 404 with a non-object", 404, `"nope"`, "application/json", "does not match"},
		{"not JSON", 200, `{`, "application/json", "not JSON"},
		{"wrong content type", 200, string(good), "text/plain", "not application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.ValidateResponse(op, tt.status, tt.ct, []byte(tt.body))
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("ValidateResponse = %v, want %q", err, tt.want)
			}
		})
	}
	del, _ := s.Operation("DELETE", "/repos/{owner}/{repo}/issues/comments/{comment_id}")
	if err := s.ValidateResponse(del, 204, "", []byte(`{"x":1}`)); err == nil {
		t.Error("a 204 with a body was accepted")
	}
}

func TestCallsAndBudget(t *testing.T) {
	f, url := seeded(t)
	c := client{t: t, url: url, token: devTok}
	c.do("GET", "/repos/octo/app", nil)
	c.do("GET", "/api/v3/repos/octo/app", nil)
	c.do("GET", "/repos/octo/app/issues/2", nil)
	c.do("GET", "/repos/octo/app/issues/99", nil) // 404 counts too
	got := f.Calls()
	want := map[string]int{"GET /repos/{owner}/{repo}": 2, "GET /repos/{owner}/{repo}/issues/{issue_number}": 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Calls = %v, want %v", got, want)
	}
	rec := &recordingTB{TB: t}
	f.CheckBudget(rec, Budget{Total: 3, PerEndpoint: map[string]int{"GET /repos/{owner}/{repo}": 1, "GET /repos/{owner}/{repo}/issues/{issue_number}": 2}})
	if len(rec.errors) != 2 { // one endpoint over, and the total
		t.Errorf("CheckBudget reported %d problems, want 2: %v", len(rec.errors), rec.errors)
	}
	rec = &recordingTB{TB: t}
	f.CheckBudget(rec, Budget{Total: 4, PerEndpoint: want})
	if len(rec.errors) != 0 {
		t.Errorf("CheckBudget within budget reported %v", rec.errors)
	}
	if by, other := f.CallsBy("dev"), f.CallsBy("someone-else"); fmt.Sprint(by) != fmt.Sprint(want) || len(other) != 0 {
		t.Errorf("CallsBy(dev) = %v, CallsBy(someone-else) = %v", by, other)
	}
	f.ResetCalls()
	if len(f.Calls()) != 0 || len(f.CallsBy("dev")) != 0 {
		t.Error("ResetCalls kept counts")
	}
}

func TestGitOverHTTPAndWebhooks(t *testing.T) {
	testenv.LookPath(t, "git")
	f, err := NewUnchecked()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Start(f)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	ctx := context.Background()
	root := t.TempDir()
	if _, err := f.AddGitRepo(ctx, Repo{Owner: "octo", Name: "app", Private: true}, root, map[string]string{"README.md": "hi\n"}); err != nil {
		t.Fatal(err)
	}
	app, _, _ := NewApp(77, "agentos")
	f.AddApp(app)
	f.AddInstallation(9001, 77, "octo/app")
	f.AddInstallationToken("ghs_inst", 9001)
	f.AddToken("tok-reader", "reader")
	f.SetPermission("octo/app", "reader", PermRead)

	// Webhook receiver checking GitHub's signature.
	secret := []byte("s3cret")
	var mu sync.Mutex
	var got []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("X-Hub-Signature-256") != Sign(secret, body) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		got = append(got, r.Header.Get("X-GitHub-Event")+"."+Delivery{Body: body}.Action())
		mu.Unlock()
	}))
	defer hook.Close()
	f.DeliverTo(hook.URL, secret)

	work := t.TempDir()
	remote := func(tok string) string {
		return strings.Replace(srv.URL, "http://", "http://x-access-token:"+tok+"@", 1) + "/octo/app.git"
	}
	git := func(dir string, args ...string) error { return Git(ctx, work, dir, args...) }
	if err := git(work, "clone", "-q", remote("nope"), "bad"); err == nil {
		t.Error("clone with an unknown token worked")
	}
	if err := git(work, "clone", "-q", remote("tok-reader"), "r"); err != nil {
		t.Fatalf("reader clone: %v", err)
	}
	dir := filepath.Join(work, "r")
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a"), 0o644)
	git(dir, "add", "-A")
	git(dir, "commit", "-q", "-m", "a")
	if err := git(dir, "push", "-q", remote("tok-reader"), "HEAD:refs/heads/feature"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("reader push: %v, want a 403", err)
	}
	if err := git(dir, "push", "-q", remote("ghs_inst"), "HEAD:refs/heads/feature"); err != nil {
		t.Fatalf("installation push: %v", err)
	}
	// A pull request from the pushed branch, a comment, then a push to it.
	inst := client{t: t, url: srv.URL, token: "ghs_inst"}
	if st, m, _ := inst.do("POST", "/repos/octo/app/pulls", map[string]any{"title": "t", "head": "feature", "base": "main"}); st != 201 {
		t.Fatalf("create PR = %d %v", st, m)
	}
	if st, _, _ := inst.do("POST", "/repos/octo/app/issues/1/comments", map[string]any{"body": "hello"}); st != 201 {
		t.Fatalf("comment = %d", st)
	}
	os.WriteFile(filepath.Join(dir, "b.txt"), []byte("b"), 0o644)
	git(dir, "add", "-A")
	git(dir, "commit", "-q", "-m", "b")
	if err := git(dir, "push", "-q", remote("ghs_inst"), "HEAD:refs/heads/feature"); err != nil {
		t.Fatal(err)
	}
	ds := f.Deliveries()
	var kinds []string
	for _, d := range ds {
		kinds = append(kinds, d.Event+"."+d.Action())
		var p struct {
			Installation struct{ ID int64 } `json:"installation"`
		}
		json.Unmarshal(d.Body, &p)
		if p.Installation.ID != 9001 || d.Sender() != "agentos[bot]" {
			t.Errorf("delivery %s: installation %d sender %q", d.Event, p.Installation.ID, d.Sender())
		}
	}
	want := "pull_request.opened issue_comment.created pull_request.synchronize"
	if strings.Join(kinds, " ") != want {
		t.Errorf("deliveries = %v, want %s", kinds, want)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, " ") != want || len(f.DeliveryErrors()) != 0 {
		t.Errorf("posted = %v (errors %v), want %s", got, f.DeliveryErrors(), want)
	}
}

package github

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/internal/fakegithub"
	gh "github.com/google/go-github/v62/github"
)

const (
	botTok    = "tok-bot"
	readerTok = "tok-reader"
)

// seeded returns a fake with octo/app: issue #1 by alice, branch "work"
// one commit ahead of main, branch "empty" level with main.
func seeded(t *testing.T) (*fakegithub.Fake, string) {
	t.Helper()
	f := fakegithub.New(t)
	f.AddRepo(fakegithub.Repo{Owner: "octo", Name: "app"})
	f.AddToken(botTok, "agentos-bot")
	f.AddToken(readerTok, "reader")
	f.SetPermission("octo/app", "agentos-bot", fakegithub.PermWrite)
	f.SetPermission("octo/app", "reader", fakegithub.PermRead)
	f.AddIssue("octo/app", fakegithub.Issue{Title: "bug", Body: "it breaks", User: "alice"})
	main, _ := f.Ref("octo/app", "heads/main")
	f.SetRef("octo/app", "heads/work", strings.Repeat("a", 40))
	f.SetRef("octo/app", "heads/empty", main)
	return f, f.Serve(t)
}

func tokenClient(t *testing.T, base, token string, p RetryPolicy) *Client {
	t.Helper()
	c, err := New(Config{BaseURL: base, Token: token, Retry: p})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCommentsIssuesAndReactions(t *testing.T) {
	f, base := seeded(t)
	c := tokenClient(t, base, botTok, RetryPolicy{})
	ctx := context.Background()

	login, err := c.BotLogin(ctx)
	if err != nil || login != "agentos-bot" {
		t.Fatalf("BotLogin = %q, %v; want agentos-bot", login, err)
	}
	is, err := c.Issue(ctx, Repo{Owner: "octo", Name: "app"}, 1)
	if err != nil || is.Title != "bug" || is.Body != "it breaks" || is.State != "open" {
		t.Fatalf("Issue = %+v, %v", is, err)
	}
	cm, err := c.CreateComment(ctx, Repo{Owner: "octo", Name: "app"}, 1, "working on it")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EditComment(ctx, Repo{Owner: "octo", Name: "app"}, cm, "done"); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetComment(ctx, Repo{Owner: "octo", Name: "app"}, cm)
	if err != nil || got.Body != "done" || got.User != "agentos-bot" || got.ID != cm {
		t.Fatalf("GetComment = %+v, %v; want done by agentos-bot", got, err)
	}
	if err := c.AddReaction(ctx, Repo{Owner: "octo", Name: "app"}, cm, "eyes"); err != nil {
		t.Fatal(err)
	}
	if err := c.AddReaction(ctx, Repo{Owner: "octo", Name: "app"}, cm, "eyes"); err != nil {
		t.Fatalf("second identical reaction: %v", err)
	}
	list, err := c.ListComments(ctx, Repo{Owner: "octo", Name: "app"}, 1)
	if err != nil || len(list) != 1 {
		t.Fatalf("ListComments = %d, %v; want 1", len(list), err)
	}
	// Every page: 250 more comments are three pages of 100.
	for i := 0; i < 250; i++ {
		f.AddComment("octo/app", 1, "alice", fmt.Sprintf("c%d", i))
	}
	before := len(f.Requests())
	list, err = c.ListComments(ctx, Repo{Owner: "octo", Name: "app"}, 1)
	if err != nil || len(list) != 251 || list[250].Body != "c249" || list[250].User != "alice" {
		t.Fatalf("ListComments = %d, %v; want 251 ending with c249", len(list), err)
	}
	if pages := len(f.Requests()) - before; pages != 3 {
		t.Errorf("ListComments made %d requests, want 3 pages", pages)
	}

	state := f.Comments("octo/app", 1)
	if len(state) != 251 {
		t.Fatalf("fake has %d comments, want 251", len(state))
	}
	if s := state[0]; s.Body != "done" || s.User != "agentos-bot" || len(s.Reactions) != 1 || s.Reactions[0] != "agentos-bot:eyes" {
		t.Errorf("fake comment = %+v, want body done by agentos-bot with one eyes reaction", s)
	}
	f.CheckNoViolations(t)
}

func TestPullRequestFlow(t *testing.T) {
	f, base := seeded(t)
	c := tokenClient(t, base, botTok, RetryPolicy{})
	ctx := context.Background()

	_, err := c.CreateDraftPR(ctx, Repo{Owner: "octo", Name: "app"}, NewPR{Title: "t", Head: "empty", Base: "main"})
	var ae *APIError
	if !errors.Is(err, ErrValidation) || !errors.As(err, &ae) || !strings.Contains(strings.Join(ae.Details, ";"), "No commits between main and empty") {
		t.Fatalf("draft PR without commits: err = %v, want ErrValidation with No commits between", err)
	}
	if len(f.PRs("octo/app")) != 0 {
		t.Fatalf("a PR was created without commits")
	}

	pr, err := c.CreateDraftPR(ctx, Repo{Owner: "octo", Name: "app"}, NewPR{Title: "Fix auth", Body: "closes #1", Head: "work", Base: "main"})
	if err != nil {
		t.Fatal(err)
	}
	n := pr.Number
	if !pr.Draft || pr.HeadRef != "work" || pr.BaseRef != "main" || pr.NodeID == "" || pr.State != "open" || pr.HeadRepo != "octo/app" {
		t.Fatalf("CreateDraftPR = %+v", pr)
	}
	if st, _ := f.PR("octo/app", n); !st.Draft || st.User != "agentos-bot" || st.HeadSHA != strings.Repeat("a", 40) {
		t.Fatalf("fake PR = %+v, want a draft by agentos-bot at the work SHA", st)
	}
	got, err := c.PullRequest(ctx, Repo{Owner: "octo", Name: "app"}, n)
	if err != nil || got != pr {
		t.Fatalf("PullRequest = %+v, %v; want %+v", got, err, pr)
	}

	rv, err := c.CreateReview(ctx, Repo{Owner: "octo", Name: "app"}, n, got.HeadSHA, "approve `repo.patch` a1? <!-- m1 -->")
	if err != nil {
		t.Fatal(err)
	}
	reviews, err := c.ListReviews(ctx, Repo{Owner: "octo", Name: "app"}, n)
	if err != nil || len(reviews) != 1 || reviews[0].ID != rv || reviews[0].State != "COMMENTED" || reviews[0].User != "agentos-bot" || reviews[0].CommitID != got.HeadSHA {
		t.Fatalf("ListReviews = %+v, %v", reviews, err)
	}
	if sha, err := c.ReviewCommit(ctx, Repo{Owner: "octo", Name: "app"}, n, "AGENTOS-BOT", "<!-- m1 -->"); err != nil || sha != got.HeadSHA {
		t.Errorf("ReviewCommit = %q, %v; want %s", sha, err, got.HeadSHA)
	}
	if sha, err := c.ReviewCommit(ctx, Repo{Owner: "octo", Name: "app"}, n, "agentos-bot", "<!-- m2 -->"); err != nil || sha != "" {
		t.Errorf("ReviewCommit(other marker) = %q, %v; want none", sha, err)
	}
	for _, tc := range []struct {
		author string
		parts  []string
		want   bool
	}{
		{"agentos-bot", []string{"<!-- m1 -->", "a1?"}, true},
		{"", []string{"<!-- m1 -->"}, true},
		{"agentos-bot", []string{"<!-- m1 -->", "a2?"}, false},
		{"alice", []string{"<!-- m1 -->"}, false},
	} {
		if has, err := c.HasReview(ctx, Repo{Owner: "octo", Name: "app"}, n, tc.author, tc.parts...); err != nil || has != tc.want {
			t.Errorf("HasReview(%q, %q) = %v, %v; want %v", tc.author, tc.parts, has, err, tc.want)
		}
	}
	if st := f.Reviews("octo/app", n); len(st) != 1 || st[0].State != "COMMENTED" || st[0].User != "agentos-bot" || st[0].CommitID != strings.Repeat("a", 40) {
		t.Errorf("fake reviews = %+v", st)
	}

	if err := c.MarkReady(ctx, Repo{Owner: "octo", Name: "app"}, PullRequest{Number: n}); err != nil {
		t.Fatal(err)
	}
	if st, _ := f.PR("octo/app", n); st.Draft {
		t.Errorf("PR still a draft after MarkReady")
	}
	if err := c.EditPRBody(ctx, Repo{Owner: "octo", Name: "app"}, n, "closes #1\n\nupdated"); err != nil {
		t.Fatal(err)
	}
	if st, _ := f.PR("octo/app", n); st.Body != "closes #1\n\nupdated" {
		t.Errorf("fake PR body = %q after EditPRBody", st.Body)
	}
	if err := c.MarkReady(ctx, Repo{Owner: "octo", Name: "app"}, PullRequest{Number: n, NodeID: "PR_does_not_exist"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("MarkReady(unknown node) = %v, want ErrNotFound", err)
	}
	if b, err := c.DefaultBranch(ctx, Repo{Owner: "octo", Name: "app"}); err != nil || b != "main" {
		t.Errorf("DefaultBranch = %q, %v; want main", b, err)
	}
	// Already ready: no GraphQL call, no error.
	if err := c.MarkReady(ctx, Repo{Owner: "octo", Name: "app"}, PullRequest{Number: n}); err != nil {
		t.Errorf("second MarkReady: %v", err)
	}
	f.CheckNoViolations(t)
}

func TestRefs(t *testing.T) {
	f, base := seeded(t)
	c := tokenClient(t, base, botTok, RetryPolicy{})
	ctx := context.Background()
	sha1, sha2 := strings.Repeat("b", 40), strings.Repeat("c", 40)
	if err := c.CreateRef(ctx, "octo", "app", "refs/heads/agent/s-1", sha1); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateRef(ctx, "octo", "app", "heads/agent/s-1", sha1); !errors.Is(err, ErrValidation) {
		t.Errorf("CreateRef of an existing ref: err = %v, want ErrValidation", err)
	}
	if err := c.UpdateRef(ctx, "octo", "app", "heads/agent/s-1", sha2, false); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetRef(ctx, "octo", "app", "heads/agent/s-1")
	if err != nil || got != sha2 {
		t.Errorf("GetRef = %q, %v; want %q", got, err, sha2)
	}
	if s, _ := f.Ref("octo/app", "refs/heads/agent/s-1"); s != sha2 {
		t.Errorf("fake ref = %q, want %q", s, sha2)
	}
	if _, err := c.GetRef(ctx, "octo", "app", "heads/missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetRef of a missing ref: err = %v, want ErrNotFound", err)
	}
	f.CheckNoViolations(t)
}

func TestPermissionLevel(t *testing.T) {
	f, base := seeded(t)
	for _, lvl := range []string{"admin", "maintain", "write", "triage", "read", "none"} {
		f.SetPermission("octo/app", "u-"+lvl, lvl)
	}
	c := tokenClient(t, base, botTok, RetryPolicy{})
	tests := []struct {
		login   string
		want    string
		wantErr error
	}{
		{"octo", "admin", nil}, // the owner
		{"u-admin", "admin", nil},
		{"u-maintain", "maintain", nil},
		{"u-write", "write", nil},
		{"u-triage", "triage", nil},
		{"u-read", "read", nil},
		{"u-none", "none", nil},
		{"nobody-at-all", "", ErrNotFound},
		{"", "", ErrValidation},
	}
	for _, tt := range tests {
		t.Run(tt.login, func(t *testing.T) {
			got, err := c.PermissionLevel(context.Background(), "octo", "app", tt.login)
			if got != tt.want || !errors.Is(err, tt.wantErr) {
				t.Errorf("PermissionLevel(%q) = %q, %v; want %q, %v", tt.login, got, err, tt.want, tt.wantErr)
			}
		})
	}
	f.CheckNoViolations(t)
}

func TestErrorKinds(t *testing.T) {
	f, base := seeded(t)
	ctx := context.Background()
	bot := tokenClient(t, base, botTok, RetryPolicy{})
	reader := tokenClient(t, base, readerTok, RetryPolicy{})
	stranger := tokenClient(t, base, "tok-unknown", RetryPolicy{})
	tests := []struct {
		name string
		call func() error
		want error
		sent bool // whether a request reaches GitHub
	}{
		{"missing issue", func() error { _, err := bot.Issue(ctx, Repo{Owner: "octo", Name: "app"}, 42); return err }, ErrNotFound, true},
		{"unknown token", func() error { _, err := stranger.Issue(ctx, Repo{Owner: "octo", Name: "app"}, 1); return err }, ErrUnauthorized, true},
		{"reader pushes", func() error { return reader.CreateRef(ctx, "octo", "app", "heads/x", strings.Repeat("d", 40)) }, ErrForbidden, true},
		{"body too long", func() error {
			_, err := bot.CreateComment(ctx, Repo{Owner: "octo", Name: "app"}, 1, strings.Repeat("é", MaxBodyChars+1))
			return err
		}, ErrValidation, false},
		{"empty review", func() error {
			_, err := bot.CreateReview(ctx, Repo{Owner: "octo", Name: "app"}, 1, " ", "")
			return err
		}, ErrValidation, false},
		{"bad reaction", func() error { return bot.AddReaction(ctx, Repo{Owner: "octo", Name: "app"}, 1, "thumbsup") }, ErrValidation, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(f.Requests())
			err := tt.call()
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if sent := len(f.Requests()) > before; sent != tt.sent {
				t.Errorf("request sent = %v, want %v", sent, tt.sent)
			}
			var ae *APIError
			if !errors.As(err, &ae) || ae.Op == "" || !strings.HasPrefix(err.Error(), ae.Op+": ") {
				t.Errorf("err %q is not an *APIError formatted as \"op: ...\"", err)
			}
			var er *gh.ErrorResponse
			if tt.sent && !errors.As(err, &er) {
				t.Errorf("err does not unwrap to go-github's *ErrorResponse: %v", err)
			}
		})
	}
	f.CheckNoViolations(t)
}

func testKeyPEM(t *testing.T) (*rsa.PrivateKey, []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

func TestAppMode(t *testing.T) {
	f, base := seeded(t)
	key, pemKey := testKeyPEM(t)
	f.AddApp(fakegithub.App{ID: 77, Slug: "agentos", PublicKey: &key.PublicKey})
	f.AddInstallation(9001, 77, "octo/app")
	ctx := context.Background()

	app, err := New(Config{BaseURL: base, AppID: 77, PrivateKey: pemKey})
	if err != nil {
		t.Fatal(err)
	}
	login, err := app.BotLogin(ctx)
	if err != nil || login != "agentos[bot]" {
		t.Fatalf("BotLogin = %q, %v; want agentos[bot]", login, err)
	}
	id, err := app.InstallationID(ctx, "octo", "app")
	if err != nil || id != 9001 {
		t.Fatalf("InstallationID = %d, %v; want 9001", id, err)
	}
	ic, err := app.ForInstallation(id)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := app.ForInstallation(id); again != ic {
		t.Errorf("ForInstallation(%d) twice returned different clients; want the cached one", id)
	}
	for i := 0; i < 2; i++ {
		if _, err := ic.CreateComment(ctx, Repo{Owner: "octo", Name: "app"}, 1, "hello"); err != nil {
			t.Fatal(err)
		}
	}
	if cs := f.Comments("octo/app", 1); len(cs) != 2 || cs[0].User != "agentos[bot]" {
		t.Errorf("comments = %+v, want two by agentos[bot]", cs)
	}
	// The cached installation token serves both calls.
	tokens := 0
	for _, r := range f.Requests() {
		if r.Op == "/app/installations/{installation_id}/access_tokens" {
			tokens++
		}
	}
	if tokens != 1 {
		t.Errorf("access token requests = %d, want 1", tokens)
	}
	// As on GitHub, an installation token cannot call GET /user: BotLogin
	// must come from GET /app, which the root client did.
	if _, _, err := ic.GitHub().Users.Get(ctx, ""); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("GET /user with an installation token: err = %v, want 403", err)
	}
	// A repository the app is not installed on is invisible.
	f.AddRepo(fakegithub.Repo{Owner: "other", Name: "repo"})
	if _, err := app.InstallationID(ctx, "other", "repo"); !errors.Is(err, ErrNotFound) {
		t.Errorf("InstallationID of an uninstalled repo: err = %v, want ErrNotFound", err)
	}
	f.CheckNoViolations(t)
}

func TestConfigValidate(t *testing.T) {
	_, pemKey := testKeyPEM(t)
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"token", Config{Token: "x"}, ""},
		{"app", Config{AppID: 1, PrivateKey: pemKey}, ""},
		{"nothing", Config{}, "no credentials"},
		{"both", Config{Token: "x", AppID: 1, PrivateKey: pemKey}, "not both"},
		{"app without key", Config{AppID: 1}, "both an app id and a private key"},
		{"bad key", Config{AppID: 1, PrivateKey: []byte("not pem")}, "private key"},
		{"bad base", Config{Token: "x", BaseURL: "ftp://x"}, "not an http(s) URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("New = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestURLs(t *testing.T) {
	tests := []struct {
		base, wantREST, wantGraphQL string
	}{
		{"", "https://api.github.com/", "https://api.github.com/graphql"},
		{"https://api.github.com", "https://api.github.com/", "https://api.github.com/graphql"},
		{"https://ghe.example.com", "https://ghe.example.com/api/v3/", "https://ghe.example.com/api/graphql"},
		{"https://ghe.example.com/api/v3/", "https://ghe.example.com/api/v3/", "https://ghe.example.com/api/graphql"},
	}
	for _, tt := range tests {
		c, err := New(Config{BaseURL: tt.base, Token: "x"})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.gh.BaseURL.String(); got != tt.wantREST {
			t.Errorf("base %q: REST = %q, want %q", tt.base, got, tt.wantREST)
		}
		if c.graphQL != tt.wantGraphQL {
			t.Errorf("base %q: GraphQL = %q, want %q", tt.base, c.graphQL, tt.wantGraphQL)
		}
	}
}

package github

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentos/agentos/bot/internal/fakegithub"
)

// appClient is an App-mode client of seeded()'s fake with app 77
// ("agentos") installed on octo/app as installation 9001.
func appClient(t *testing.T) (*fakegithub.Fake, *Client) {
	t.Helper()
	f, base := seeded(t)
	app, key, err := fakegithub.NewApp(77, "agentos")
	if err != nil {
		t.Fatal(err)
	}
	f.AddApp(app)
	f.AddInstallation(9001, 77, "octo/app")
	c, err := New(Config{BaseURL: base, AppID: 77, PrivateKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

// An App's root client acts on a repository through its installation:
// the one the webhook said (no look-up at all), or one looked up once and
// cached; concurrent callers share the look-up; a forgotten installation
// is looked up again.
func TestAppRoutesRepositoryCallsThroughTheInstallation(t *testing.T) {
	ctx := context.Background()
	t.Run("remembered from the payload", func(t *testing.T) {
		f, c := appClient(t)
		c.RememberInstallation("Octo", "App", 9001) // logins compare without case
		// The permission check: with the app's JWT GitHub answers 401.
		if lvl, err := c.PermissionLevel(ctx, "octo", "app", "reader"); err != nil || lvl != "read" {
			t.Fatalf("PermissionLevel = %q, %v", lvl, err)
		}
		if _, err := c.CreateComment(ctx, Repo{Owner: "octo", Name: "app"}, 1, "hello"); err != nil {
			t.Fatal(err)
		}
		calls := f.Calls()
		if calls["GET /repos/{owner}/{repo}/installation"] != 0 || calls["POST /app/installations/{installation_id}/access_tokens"] != 1 {
			t.Errorf("calls = %v, want no look-up and one token", calls)
		}
		if cs := f.Comments("octo/app", 1); len(cs) != 1 || cs[0].User != "agentos[bot]" {
			t.Errorf("comments = %+v, want one by agentos[bot]", cs)
		}
		f.CheckNoViolations(t)
	})
	t.Run("looked up once", func(t *testing.T) {
		f, c := appClient(t)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := c.Issue(ctx, Repo{Owner: "octo", Name: "app"}, 1)
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if tok, err := c.GitTokenFor(ctx, "octo", "app"); err != nil || !strings.HasPrefix(tok, "ghs_") {
			t.Errorf("GitTokenFor = %q, %v", tok, err)
		}
		calls := f.Calls()
		if calls["GET /repos/{owner}/{repo}/installation"] != 1 || calls["POST /app/installations/{installation_id}/access_tokens"] != 1 {
			t.Errorf("calls = %v, want one look-up and one token for 8 calls and a git token", calls)
		}
		c.ForgetInstallation(9001)
		if _, err := c.Issue(ctx, Repo{Owner: "octo", Name: "app"}, 1); err != nil {
			t.Fatal(err)
		}
		if n := f.Calls()["GET /repos/{owner}/{repo}/installation"]; n != 2 {
			t.Errorf("after ForgetInstallation: %d look-ups, want 2", n)
		}
		f.CheckNoViolations(t)
	})
	t.Run("not installed", func(t *testing.T) {
		f, c := appClient(t)
		f.AddRepo(fakegithub.Repo{Owner: "other", Name: "repo", Private: true})
		if _, err := c.Issue(ctx, Repo{Owner: "other", Name: "repo"}, 1); err == nil {
			t.Error("a call on a repository without the app worked")
		}
	})
}

// A GitHub Enterprise Server URL, given with or without /api/v3 (and with
// or without the trailing slash), reaches the REST API under /api/v3/ —
// never /api/v3/api/v3/ — GraphQL at /api/graphql, and mints
// installation tokens under /api/v3/app/.
func TestEnterpriseServerURLs(t *testing.T) {
	ctx := context.Background()
	for _, suffix := range []string{"", "/", "/api/v3", "/api/v3/"} {
		t.Run("base"+suffix, func(t *testing.T) {
			f := fakegithub.New(t)
			f.AddRepo(fakegithub.Repo{Owner: "octo", Name: "app"})
			f.SetRef("octo/app", "heads/work", strings.Repeat("a", 40))
			app, key, _ := fakegithub.NewApp(77, "agentos")
			f.AddApp(app)
			f.AddInstallation(9001, 77, "octo/app")
			var mu sync.Mutex
			var paths []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				paths = append(paths, r.Method+" "+r.URL.Path)
				mu.Unlock()
				f.ServeHTTP(w, r)
			}))
			defer srv.Close()
			c, err := New(Config{BaseURL: srv.URL + suffix, AppID: 77, PrivateKey: key})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.BotLogin(ctx); err != nil {
				t.Fatal(err)
			}
			c.RememberInstallation("octo", "app", 9001)
			pr, err := c.CreateDraftPR(ctx, Repo{Owner: "octo", Name: "app"}, NewPR{Title: "t", Head: "work", Base: "main"})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.MarkReady(ctx, Repo{Owner: "octo", Name: "app"}, pr); err != nil {
				t.Fatal(err)
			}
			want := []string{
				"GET /api/v3/app",
				"POST /api/v3/app/installations/9001/access_tokens",
				"POST /api/v3/repos/octo/app/pulls",
				"POST /api/graphql",
			}
			mu.Lock()
			defer mu.Unlock()
			if strings.Join(paths, "\n") != strings.Join(want, "\n") {
				t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(paths, "\n"), strings.Join(want, "\n"))
			}
			f.CheckNoViolations(t)
		})
	}
	if got := uploadURL("https://ghe.example.com/api/v3/"); got != "https://ghe.example.com/api/uploads/" {
		t.Errorf("uploadURL = %q", got)
	}
}

// CommitIdentity: the bot's own account with GitHub's noreply address,
// from answers already at hand or one GET /users/{login} per process.
func TestCommitIdentity(t *testing.T) {
	ctx := context.Background()
	t.Run("token: GET /user's answer", func(t *testing.T) {
		f, base := seeded(t)
		c := tokenClient(t, base, botTok, RetryPolicy{})
		if _, err := c.BotLogin(ctx); err != nil {
			t.Fatal(err)
		}
		f.ResetCalls()
		id, err := c.CommitIdentity(ctx, "octo", "app", "agentos-bot")
		if err != nil || !strings.HasSuffix(id.Email, "+agentos-bot@users.noreply.github.com") || id.Name != "agentos-bot" {
			t.Fatalf("CommitIdentity = %+v, %v", id, err)
		}
		if n := len(f.Calls()); n != 0 {
			t.Errorf("calls = %v, want none (GET /user already answered)", f.Calls())
		}
	})
	t.Run("token with a configured login (Actions)", func(t *testing.T) {
		f, base := seeded(t)
		f.AddUser("github-actions[bot]", "Bot")
		c := tokenClient(t, base, botTok, RetryPolicy{})
		for i := 0; i < 2; i++ {
			id, err := c.CommitIdentity(ctx, "octo", "app", "github-actions[bot]")
			if err != nil || id.Name != "github-actions[bot]" || !strings.HasSuffix(id.Email, "+github-actions[bot]@users.noreply.github.com") {
				t.Fatalf("CommitIdentity = %+v, %v", id, err)
			}
		}
		if n := f.Calls()["GET /users/{username}"]; n != 1 {
			t.Errorf("GET /users/{username} called %d times, want once", n)
		}
	})
	t.Run("app: through the installation", func(t *testing.T) {
		f, c := appClient(t)
		c.RememberInstallation("octo", "app", 9001)
		id, err := c.CommitIdentity(ctx, "octo", "app", "agentos[bot]")
		if err != nil || id.Name != "agentos[bot]" || !strings.HasSuffix(id.Email, "+agentos[bot]@users.noreply.github.com") || strings.HasPrefix(id.Email, "0+") {
			t.Fatalf("CommitIdentity = %+v, %v", id, err)
		}
		f.CheckNoViolations(t)
	})
	t.Run("unknown account", func(t *testing.T) {
		_, base := seeded(t)
		c := tokenClient(t, base, botTok, RetryPolicy{})
		if _, err := c.CommitIdentity(ctx, "octo", "app", "ghost-account"); err == nil {
			t.Error("an unknown account got an identity")
		}
	})
}

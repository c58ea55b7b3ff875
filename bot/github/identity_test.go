package github

import (
	"context"
	"errors"
	"testing"

	"github.com/agentos/agentos/bot/internal/fakegithub"
)

// TokenLogin learns the bot's login from the credentials in every mode,
// never from a default: a user token is its user, an App's installation
// token (handed to the Action as github_token) and the workflow's
// GITHUB_TOKEN are their apps' bots, and an App's JWT is <slug>[bot].
// GET /user, which installation tokens may not call, is never asked.
func TestTokenLoginInEveryMode(t *testing.T) {
	ctx := context.Background()
	f, base := seeded(t)
	app, _, err := fakegithub.NewApp(77, "agentos")
	if err != nil {
		t.Fatal(err)
	}
	f.AddApp(app)
	f.AddInstallation(9001, 77, "octo/app")
	f.AddInstallationToken("ghs_app_installation", 9001)
	f.AddApp(fakegithub.App{ID: 15368, Slug: "github-actions"})
	f.AddInstallation(4242, 15368, "octo/app")
	f.AddInstallationToken("ghs_workflow_token", 4242)
	for _, c := range []struct{ token, want string }{
		{botTok, "agentos-bot"},
		{"ghs_app_installation", "agentos[bot]"},
		{"ghs_workflow_token", "github-actions[bot]"},
	} {
		cl := tokenClient(t, base, c.token, RetryPolicy{})
		f.ResetCalls()
		got, err := cl.TokenLogin(ctx)
		if err != nil || got != c.want {
			t.Errorf("token %s: TokenLogin = %q, %v; want %q", c.token, got, err, c.want)
		}
		// Cached where BotLogin looks: no second request, and no GET /user.
		if again, err := cl.BotLogin(ctx); err != nil || again != c.want {
			t.Errorf("token %s: BotLogin after TokenLogin = %q, %v", c.token, again, err)
		}
		if calls := f.Calls(); calls["POST /graphql"] != 1 || calls["GET /user"] != 0 {
			t.Errorf("token %s: calls %v, want one GraphQL query and no GET /user", c.token, calls)
		}
	}
	_, ac := appClient(t)
	if got, err := ac.TokenLogin(ctx); err != nil || got != "agentos[bot]" {
		t.Errorf("App JWT: TokenLogin = %q, %v", got, err)
	}
	f.CheckNoViolations(t)
}

// A token GitHub does not know is an error, not a guessed login.
func TestTokenLoginFailsClosed(t *testing.T) {
	_, base := seeded(t)
	cl := tokenClient(t, base, "ghs_unknown", RetryPolicy{})
	got, err := cl.TokenLogin(context.Background())
	if err == nil || got != "" || !errors.Is(err, ErrUnauthorized) {
		t.Errorf("TokenLogin with a bad token = %q, %v; want ErrUnauthorized", got, err)
	}
}

func TestValidLogin(t *testing.T) {
	for s, want := range map[string]bool{"octocat": true, "github-actions[bot]": true, "my-app[bot]": true, "": false, "[bot]": false, "-x": false, "a b": false, "x/y": false} {
		if got := validLogin(s); got != want {
			t.Errorf("validLogin(%q) = %v, want %v", s, got, want)
		}
	}
}

package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Identity of the credentials themselves, in every mode:
//
//   - an App's JWT (app id + private key): GET /app, the bot is
//     <app-slug>[bot] (BotLogin);
//   - any token: the GraphQL query viewer { login }, which answers for a
//     personal access token (the user), a GitHub App installation token
//     (<app-slug>[bot], for example from actions/create-github-app-token)
//     and the workflow's GITHUB_TOKEN (github-actions[bot]) alike. GET
//     /user is refused (403) for installation tokens and GET /app takes
//     only the JWT, so neither can tell an installation token's bot.
//
// The answer is cached where BotLogin keeps it, so the dispatcher's
// own-event checks, review look-ups and commit identity all use it.

// ErrNoIdentity means GitHub did not say who the credentials are.
var ErrNoIdentity = errors.New("github: the token's account is unknown")

// TokenLogin returns the login the client's credentials act as, learned
// from GitHub (see above), never from a default.
func (c *Client) TokenLogin(ctx context.Context) (string, error) {
	const op = "TokenLogin"
	r := c.root
	r.mu.Lock()
	login := r.login
	r.mu.Unlock()
	if login != "" {
		return login, nil
	}
	if r.apps != nil {
		return c.BotLogin(ctx)
	}
	q := map[string]any{"query": "query { viewer { login databaseId } }"}
	var out struct {
		Data struct {
			Viewer *struct {
				Login      string `json:"login"`
				DatabaseID int64  `json:"databaseId"`
			} `json:"viewer"`
		} `json:"data"`
		Errors []struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := c.graphql(ctx, q, &out); err != nil {
		return "", wrap(op, err)
	}
	if len(out.Errors) > 0 {
		var msgs []string
		for _, e := range out.Errors {
			msgs = append(msgs, e.Message)
		}
		return "", &APIError{Op: op, Status: http.StatusOK, Message: msgs[0], Details: msgs, Kind: ErrNoIdentity,
			Err: fmt.Errorf("graphql viewer: %s", strings.Join(msgs, "; "))}
	}
	v := out.Data.Viewer
	if v == nil || !validLogin(v.Login) {
		return "", &APIError{Op: op, Status: http.StatusOK, Message: "viewer has no login", Kind: ErrNoIdentity, Err: errors.New("graphql viewer: no login")}
	}
	r.mu.Lock()
	if r.login == "" {
		r.login = v.Login
	}
	login = r.login
	r.mu.Unlock()
	return login, nil
}

// validLogin accepts GitHub's login shapes: letters, digits and single
// hyphens, with a "[bot]" suffix for apps.
func validLogin(s string) bool {
	s = strings.TrimSuffix(s, "[bot]")
	if s == "" || len(s) > 100 || strings.HasPrefix(s, "-") {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

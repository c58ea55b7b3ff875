package fakegithub

import (
	"net/http"
	"regexp"
)

// viewerQuery matches the GraphQL query that asks who the credentials
// are: query { viewer { login ... } } with the login and
// databaseId fields only.
var viewerQuery = regexp.MustCompile(`(?s)^\s*(query\b[^{]*)?\{\s*viewer\s*\{\s*((login|databaseId)\s*)+\}\s*\}\s*$`)

// graphqlViewer answers the viewer query as GitHub does for each kind of
// token: a user token is the user, an installation token the app's bot
// account (<slug>[bot], github-actions[bot] for a workflow's
// GITHUB_TOKEN). It reports whether query was the viewer query.
func (f *Fake) graphqlViewer(c *call, query string) bool {
	if !viewerQuery.MatchString(query) {
		return false
	}
	login, typ := "", "User"
	switch {
	case c.id.user != nil:
		login = c.id.user.Login
	case c.id.installation != 0:
		login, typ = f.installationLogin(c.id.installation), "Bot"
	}
	if login == "" {
		writeJSON(c.w, http.StatusOK, map[string]any{
			"data":   nil,
			"errors": []any{map[string]any{"type": "FORBIDDEN", "message": "Resource not accessible by integration"}},
		})
		return true
	}
	u := f.ensureUser(login, typ)
	writeJSON(c.w, http.StatusOK, map[string]any{"data": map[string]any{
		"viewer": map[string]any{"login": u.Login, "databaseId": u.ID},
	}})
	return true
}

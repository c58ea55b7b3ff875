package fakegithub

import (
	"net/http"
	"strings"
)

// ActionsPRRefusal is GitHub's message when a workflow's GITHUB_TOKEN
// opens a pull request in a repository (or organization) where Settings →
// Actions → General → Workflow permissions → "Allow GitHub Actions to
// create and approve pull requests" is off.
const ActionsPRRefusal = "GitHub Actions is not permitted to create or approve pull requests."

// actionsAppSlug is the app whose installation tokens are the workflows'
// GITHUB_TOKEN.
const actionsAppSlug = "github-actions"

// SetActionsCanCreatePullRequests sets the repository's "Allow GitHub
// Actions to create and approve pull requests". GitHub's default for new
// repositories and organizations is off; the fake's is on (most tests
// are not about it), so a test of the refusal turns it off. It governs
// the github-actions app's tokens only: another app's installation token
// or a user's token is not affected, as on GitHub.
func (f *Fake) SetActionsCanCreatePullRequests(repo string, allowed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.actionsNoPRs == nil {
		f.actionsNoPRs = map[string]bool{}
	}
	f.actionsNoPRs[strings.ToLower(repo)] = !allowed
}

// actionsMayNotCreatePR answers 403 with GitHub's message when the caller
// is the workflow token of a repository whose setting is off, and reports
// whether it did.
func (c *call) actionsMayNotCreatePR(rs *repoState) bool {
	if c.id.installation == 0 || !c.f.actionsNoPRs[strings.ToLower(rs.Owner+"/"+rs.Name)] {
		return false
	}
	if a := c.f.apps[c.f.installs[c.id.installation]]; a == nil || a.Slug != actionsAppSlug {
		return false
	}
	writeError(c.w, http.StatusForbidden, ActionsPRRefusal)
	return true
}

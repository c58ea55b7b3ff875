package fakegithub

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
)

// markReady matches the markPullRequestReadyForReview mutation (as
// createCommitMutation matches createCommitOnBranch, and graphqlViewer the
// one query). GraphQL is
// not in the REST OpenAPI description, so this endpoint is checked by this
// shape instead: anything else is a violation.
var markReady = regexp.MustCompile(`(?s)^\s*mutation\b.*\bmarkPullRequestReadyForReview\s*\(\s*input\s*:`)

// graphql serves POST /graphql: the viewer query (the bot's login, per
// token kind) and the markPullRequestReadyForReview mutation, with the pull request's node id in variables.input.pullRequestId
// (or inline, as the bot does not need it).
func (f *Fake) graphql(c *call) {
	var in struct {
		Query     string `json:"query"`
		Variables struct {
			Input struct {
				PullRequestID    string `json:"pullRequestId"`
				ClientMutationID string `json:"clientMutationId"`
			} `json:"input"`
			PullRequestID string `json:"pullRequestId"`
		} `json:"variables"`
	}
	if err := json.Unmarshal(c.body, &in); err != nil {
		f.violation(c.w, c.r.Method, c.r.URL.Path, http.StatusBadRequest, "GraphQL body is not JSON: "+err.Error())
		return
	}
	if f.graphqlViewer(c, in.Query) {
		return
	}
	if createCommitMutation.MatchString(in.Query) {
		f.createCommitOnBranch(c)
		return
	}
	if !markReady.MatchString(in.Query) {
		f.violation(c.w, c.r.Method, c.r.URL.Path, http.StatusNotFound, "the fake's GraphQL endpoint supports only the viewer query and the markPullRequestReadyForReview and createCommitOnBranch mutations")
		return
	}
	id := in.Variables.Input.PullRequestID
	if id == "" {
		id = in.Variables.PullRequestID
	}
	for _, rs := range f.repos {
		for _, p := range rs.prs {
			if p.NodeID != id {
				continue
			}
			if c.id.installation != 0 && rs.installationID != c.id.installation {
				break
			}
			if c.id.installation == 0 {
				switch c.perm(rs, c.login()) {
				case PermAdmin, PermMaintain, PermWrite:
				default:
					gqlError(c.w, "FORBIDDEN", c.login()+" does not have permission to update the pull request")
					return
				}
			}
			wasDraft := p.Draft
			p.Draft = false
			if wasDraft {
				p.Updated = f.now()
				f.deliverPR(rs, "ready_for_review", c.login(), p, nil)
			}
			writeJSON(c.w, http.StatusOK, map[string]any{"data": map[string]any{
				"markPullRequestReadyForReview": map[string]any{
					"clientMutationId": nilIfEmpty(in.Variables.Input.ClientMutationID),
					"pullRequest":      map[string]any{"id": p.NodeID, "number": p.Number, "isDraft": false},
				},
			}})
			return
		}
	}
	gqlError(c.w, "NOT_FOUND", "Could not resolve to a node with the global id of '"+strings.ReplaceAll(id, "'", "")+"'")
}

// gqlError answers like GitHub's GraphQL API: 200 with an errors array.
func gqlError(w http.ResponseWriter, typ, msg string) {
	writeJSON(w, http.StatusOK, map[string]any{
		"data":   map[string]any{"markPullRequestReadyForReview": nil},
		"errors": []any{map[string]any{"type": typ, "message": msg, "path": []string{"markPullRequestReadyForReview"}}},
	})
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

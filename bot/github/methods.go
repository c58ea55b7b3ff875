package github

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	gh "github.com/google/go-github/v62/github"
)

// MaxBodyChars is GitHub's limit on issue, pull request, comment and
// review bodies.
const MaxBodyChars = 65536

func checkBody(op, body string) error {
	if n := utf8.RuneCountInString(body); n > MaxBodyChars {
		return invalid(op, fmt.Sprintf("body is %d characters; GitHub's limit is %d", n, MaxBodyChars))
	}
	return nil
}

// CreateComment comments on issue or pull request number.
func (c *Client) CreateComment(ctx context.Context, owner, repo string, number int, body string) (*gh.IssueComment, error) {
	if err := checkBody("CreateComment", body); err != nil {
		return nil, err
	}
	g, err := c.on(ctx, owner, repo)
	if err != nil {
		return nil, err
	}
	cm, _, err := g.Issues.CreateComment(ctx, owner, repo, number, &gh.IssueComment{Body: gh.String(body)})
	return cm, wrap("CreateComment", err)
}

// EditComment replaces the body of issue (or PR conversation) comment id.
func (c *Client) EditComment(ctx context.Context, owner, repo string, id int64, body string) (*gh.IssueComment, error) {
	if err := checkBody("EditComment", body); err != nil {
		return nil, err
	}
	g, err := c.on(ctx, owner, repo)
	if err != nil {
		return nil, err
	}
	cm, _, err := g.Issues.EditComment(ctx, owner, repo, id, &gh.IssueComment{Body: gh.String(body)})
	return cm, wrap("EditComment", err)
}

// GetComment returns issue (or PR conversation) comment id.
func (c *Client) GetComment(ctx context.Context, owner, repo string, id int64) (*gh.IssueComment, error) {
	g, err := c.on(ctx, owner, repo)
	if err != nil {
		return nil, err
	}
	cm, _, err := g.Issues.GetComment(ctx, owner, repo, id)
	return cm, wrap("GetComment", err)
}

// ListComments returns all comments on issue or pull request number,
// oldest first (every page).
func (c *Client) ListComments(ctx context.Context, owner, repo string, number int) ([]*gh.IssueComment, error) {
	g, err := c.on(ctx, owner, repo)
	if err != nil {
		return nil, err
	}
	opts := &gh.IssueListCommentsOptions{ListOptions: gh.ListOptions{PerPage: 100}}
	var all []*gh.IssueComment
	for {
		page, resp, err := g.Issues.ListComments(ctx, owner, repo, number, opts)
		if err != nil {
			return nil, wrap("ListComments", err)
		}
		all = append(all, page...)
		if resp.NextPage == 0 {
			return all, nil
		}
		opts.Page = resp.NextPage
	}
}

// GetIssue returns issue (or pull request) number.
func (c *Client) GetIssue(ctx context.Context, owner, repo string, number int) (*gh.Issue, error) {
	g, err := c.on(ctx, owner, repo)
	if err != nil {
		return nil, err
	}
	is, _, err := g.Issues.Get(ctx, owner, repo, number)
	return is, wrap("GetIssue", err)
}

// GetPullRequest returns pull request number.
func (c *Client) GetPullRequest(ctx context.Context, owner, repo string, number int) (*gh.PullRequest, error) {
	g, err := c.on(ctx, owner, repo)
	if err != nil {
		return nil, err
	}
	pr, _, err := g.PullRequests.Get(ctx, owner, repo, number)
	return pr, wrap("GetPullRequest", err)
}

// NewPR describes a pull request to open. Head must be at least one commit
// ahead of Base, or GitHub answers 422 "No commits between ...".
type NewPR struct {
	Title, Body string
	Head, Base  string // branch names
}

// CreateDraftPR opens a draft pull request.
func (c *Client) CreateDraftPR(ctx context.Context, owner, repo string, p NewPR) (*gh.PullRequest, error) {
	if err := checkBody("CreateDraftPR", p.Body); err != nil {
		return nil, err
	}
	if p.Title == "" || p.Head == "" || p.Base == "" {
		return nil, invalid("CreateDraftPR", "title, head and base are required")
	}
	g, err := c.on(ctx, owner, repo)
	if err != nil {
		return nil, err
	}
	pr, _, err := g.PullRequests.Create(ctx, owner, repo, &gh.NewPullRequest{
		Title: gh.String(p.Title), Body: gh.String(p.Body), Head: gh.String(p.Head), Base: gh.String(p.Base), Draft: gh.Bool(true),
	})
	return pr, wrap("CreateDraftPR", err)
}

// EditPullRequestBody replaces the description of pull request number.
func (c *Client) EditPullRequestBody(ctx context.Context, owner, repo string, number int, body string) error {
	if err := checkBody("EditPullRequestBody", body); err != nil {
		return err
	}
	g, err := c.on(ctx, owner, repo)
	if err != nil {
		return err
	}
	_, _, err = g.PullRequests.Edit(ctx, owner, repo, number, &gh.PullRequest{Body: gh.String(body)})
	return wrap("EditPullRequestBody", err)
}

// Repository returns owner/repo (default branch, fork parent, visibility).
func (c *Client) Repository(ctx context.Context, owner, repo string) (*gh.Repository, error) {
	g, err := c.on(ctx, owner, repo)
	if err != nil {
		return nil, err
	}
	r, _, err := g.Repositories.Get(ctx, owner, repo)
	return r, wrap("Repository", err)
}

// DefaultBranch returns the default branch of owner/repo.
func (c *Client) DefaultBranch(ctx context.Context, owner, repo string) (string, error) {
	r, err := c.Repository(ctx, owner, repo)
	if err != nil {
		return "", err
	}
	if r.GetDefaultBranch() == "" {
		return "", &APIError{Op: "DefaultBranch", Message: "repository has no default branch", Err: errors.New("repository has no default branch")}
	}
	return r.GetDefaultBranch(), nil
}

// MarkReadyForReview turns draft pull request number into a ready one. REST
// cannot do this (PATCH /pulls/{n} ignores "draft"); it is the GraphQL
// mutation markPullRequestReadyForReview, which needs the PR's node id, so
// this reads the pull request first (MarkReadyForReviewNode skips that
// read when the caller knows both). A PR that is not a draft is left as
// is.
func (c *Client) MarkReadyForReview(ctx context.Context, owner, repo string, number int) error {
	g, err := c.on(ctx, owner, repo)
	if err != nil {
		return err
	}
	pr, _, err := g.PullRequests.Get(ctx, owner, repo, number)
	if err != nil {
		return wrap("MarkReadyForReview", err)
	}
	if !pr.GetDraft() {
		return nil
	}
	return c.MarkReadyForReviewNode(ctx, owner, repo, pr.GetNodeID())
}

// MarkReadyForReviewNode runs markPullRequestReadyForReview on the pull
// request of owner/repo with GraphQL node id nodeID (the repository picks
// the installation in App mode).
func (c *Client) MarkReadyForReviewNode(ctx context.Context, owner, repo, nodeID string) error {
	const op = "MarkReadyForReview"
	if nodeID == "" {
		return invalid(op, "pull request node id is empty")
	}
	rc, err := c.ForRepo(ctx, owner, repo)
	if err != nil {
		return err
	}
	q := map[string]any{
		"query":     "mutation($input: MarkPullRequestReadyForReviewInput!) { markPullRequestReadyForReview(input: $input) { pullRequest { isDraft } } }",
		"variables": map[string]any{"input": map[string]any{"pullRequestId": nodeID}},
	}
	var out struct {
		Data struct {
			Mark *struct {
				PullRequest struct {
					IsDraft bool `json:"isDraft"`
				} `json:"pullRequest"`
			} `json:"markPullRequestReadyForReview"`
		} `json:"data"`
		Errors []struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := rc.graphql(ctx, q, &out); err != nil {
		return wrap(op, err)
	}
	if len(out.Errors) > 0 {
		e := &APIError{Op: op, Status: http.StatusOK, Message: out.Errors[0].Message}
		for _, ge := range out.Errors {
			e.Details = append(e.Details, ge.Message)
		}
		switch out.Errors[0].Type {
		case "NOT_FOUND":
			e.Kind = ErrNotFound
		case "FORBIDDEN":
			e.Kind = ErrForbidden
		default:
			e.Kind = ErrValidation
		}
		e.Err = fmt.Errorf("graphql: %s", strings.Join(e.Details, "; "))
		return e
	}
	if out.Data.Mark == nil || out.Data.Mark.PullRequest.IsDraft {
		return &APIError{Op: op, Message: "pull request is still a draft", Err: errors.New("graphql: pull request is still a draft")}
	}
	return nil
}

// graphql posts a query to the GraphQL endpoint through the same
// authenticated, rate-limit-aware transport.
func (c *Client) graphql(ctx context.Context, query any, out any) error {
	body, err := json.Marshal(query)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.graphQL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	_, err = c.gh.Do(ctx, req, out)
	return err
}

// CreateReview posts a review with event COMMENT and body on pull request
// number, pinned to commitID when it is not empty. The bot never approves
// or requests changes: nobody can on their own pull request.
func (c *Client) CreateReview(ctx context.Context, owner, repo string, number int, body, commitID string) (*gh.PullRequestReview, error) {
	if err := checkBody("CreateReview", body); err != nil {
		return nil, err
	}
	if strings.TrimSpace(body) == "" {
		return nil, invalid("CreateReview", "a COMMENT review needs a body")
	}
	g, err := c.on(ctx, owner, repo)
	if err != nil {
		return nil, err
	}
	req := &gh.PullRequestReviewRequest{Body: gh.String(body), Event: gh.String("COMMENT")}
	if commitID != "" {
		req.CommitID = gh.String(commitID)
	}
	rv, _, err := g.PullRequests.CreateReview(ctx, owner, repo, number, req)
	return rv, wrap("CreateReview", err)
}

// ListReviews returns all reviews of pull request number (every page).
func (c *Client) ListReviews(ctx context.Context, owner, repo string, number int) ([]*gh.PullRequestReview, error) {
	g, err := c.on(ctx, owner, repo)
	if err != nil {
		return nil, err
	}
	opts := &gh.ListOptions{PerPage: 100}
	var all []*gh.PullRequestReview
	for {
		page, resp, err := g.PullRequests.ListReviews(ctx, owner, repo, number, opts)
		if err != nil {
			return nil, wrap("ListReviews", err)
		}
		all = append(all, page...)
		if resp.NextPage == 0 {
			return all, nil
		}
		opts.Page = resp.NextPage
	}
}

// PermissionLevel returns login's permission on owner/repo: admin,
// maintain, write, triage, read or none. GitHub's "permission" field folds
// maintain into write and triage into read; the precise role comes from
// "role_name" when it is one of the built-in roles.
func (c *Client) PermissionLevel(ctx context.Context, owner, repo, login string) (string, error) {
	const op = "PermissionLevel"
	if login == "" {
		return "", invalid(op, "empty login")
	}
	g, err := c.on(ctx, owner, repo)
	if err != nil {
		return "", err
	}
	u := fmt.Sprintf("repos/%s/%s/collaborators/%s/permission", pathEscape(owner), pathEscape(repo), pathEscape(login))
	req, err := g.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return "", wrap(op, err)
	}
	var out struct {
		Permission string `json:"permission"`
		RoleName   string `json:"role_name"`
	}
	if _, err := g.Do(ctx, req, &out); err != nil {
		return "", wrap(op, err)
	}
	switch out.RoleName {
	case "admin", "maintain", "write", "triage", "read":
		return out.RoleName, nil
	}
	switch out.Permission {
	case "admin", "write", "read", "none":
		return out.Permission, nil
	}
	return "", &APIError{Op: op, Message: "unknown permission " + out.Permission, Err: fmt.Errorf("unknown permission %q", out.Permission)}
}

func pathEscape(s string) string { return url.PathEscape(s) }

// AddReaction reacts to issue (or PR conversation) comment id with content
// (+1, -1, laugh, confused, heart, hooray, rocket, eyes). Reacting twice is
// not an error.
func (c *Client) AddReaction(ctx context.Context, owner, repo string, id int64, content string) error {
	switch content {
	case "+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes":
	default:
		return invalid("AddReaction", fmt.Sprintf("reaction %q is not one GitHub knows", content))
	}
	g, err := c.on(ctx, owner, repo)
	if err != nil {
		return err
	}
	_, _, err = g.Reactions.CreateIssueCommentReaction(ctx, owner, repo, id, content)
	return wrap("AddReaction", err)
}

// GetRef returns the SHA branch ref ("heads/x" or "refs/heads/x") points at.
func (c *Client) GetRef(ctx context.Context, owner, repo, ref string) (string, error) {
	g, err := c.on(ctx, owner, repo)
	if err != nil {
		return "", err
	}
	r, _, err := g.Git.GetRef(ctx, owner, repo, ref)
	if err != nil {
		return "", wrap("GetRef", err)
	}
	return r.GetObject().GetSHA(), nil
}

// CreateRef creates ref ("refs/heads/x") at sha.
func (c *Client) CreateRef(ctx context.Context, owner, repo, ref, sha string) error {
	g, err := c.on(ctx, owner, repo)
	if err != nil {
		return err
	}
	_, _, err = g.Git.CreateRef(ctx, owner, repo, &gh.Reference{Ref: gh.String(fullRef(ref)), Object: &gh.GitObject{SHA: gh.String(sha)}})
	return wrap("CreateRef", err)
}

// UpdateRef moves ref to sha; force allows a non-fast-forward move.
func (c *Client) UpdateRef(ctx context.Context, owner, repo, ref, sha string, force bool) error {
	g, err := c.on(ctx, owner, repo)
	if err != nil {
		return err
	}
	_, _, err = g.Git.UpdateRef(ctx, owner, repo, &gh.Reference{Ref: gh.String(fullRef(ref)), Object: &gh.GitObject{SHA: gh.String(sha)}}, force)
	return wrap("UpdateRef", err)
}

func fullRef(ref string) string {
	if strings.HasPrefix(ref, "refs/") {
		return ref
	}
	return "refs/" + ref
}

// PullRequestByHead returns the pull request (open or closed, the newest)
// whose head is branch of the repository itself, nil when there is none:
// a publication that may have happened already looks before it creates.
func (c *Client) PullRequestByHead(ctx context.Context, owner, repo, branch string) (*gh.PullRequest, error) {
	g, err := c.on(ctx, owner, repo)
	if err != nil {
		return nil, err
	}
	prs, _, err := g.PullRequests.List(ctx, owner, repo, &gh.PullRequestListOptions{State: "all", Head: owner + ":" + branch, ListOptions: gh.ListOptions{PerPage: 10}})
	if err != nil {
		return nil, wrap("PullRequestByHead", err)
	}
	if len(prs) == 0 {
		return nil, nil
	}
	return prs[0], nil
}

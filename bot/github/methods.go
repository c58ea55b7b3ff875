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

// CreateComment comments on issue or pull request number and returns the
// comment's id.
func (c *Client) CreateComment(ctx context.Context, repo Repo, number int, body string) (int64, error) {
	if err := checkBody("CreateComment", body); err != nil {
		return 0, err
	}
	g, err := c.on(ctx, repo)
	if err != nil {
		return 0, err
	}
	cm, _, err := g.Issues.CreateComment(ctx, repo.Owner, repo.Name, number, &gh.IssueComment{Body: gh.String(body)})
	if err != nil {
		return 0, wrap("CreateComment", err)
	}
	return cm.GetID(), nil
}

// EditComment replaces the body of issue (or PR conversation) comment id.
func (c *Client) EditComment(ctx context.Context, repo Repo, id int64, body string) error {
	if err := checkBody("EditComment", body); err != nil {
		return err
	}
	g, err := c.on(ctx, repo)
	if err != nil {
		return err
	}
	_, _, err = g.Issues.EditComment(ctx, repo.Owner, repo.Name, id, &gh.IssueComment{Body: gh.String(body)})
	return wrap("EditComment", err)
}

// GetComment returns issue (or PR conversation) comment id.
func (c *Client) GetComment(ctx context.Context, repo Repo, id int64) (Comment, error) {
	g, err := c.on(ctx, repo)
	if err != nil {
		return Comment{}, err
	}
	cm, _, err := g.Issues.GetComment(ctx, repo.Owner, repo.Name, id)
	if err != nil {
		return Comment{}, wrap("GetComment", err)
	}
	return Comment{ID: cm.GetID(), User: cm.GetUser().GetLogin(), Body: cm.GetBody()}, nil
}

// ListComments returns all comments on issue or pull request number,
// oldest first (every page).
func (c *Client) ListComments(ctx context.Context, repo Repo, number int) ([]Comment, error) {
	g, err := c.on(ctx, repo)
	if err != nil {
		return nil, err
	}
	opts := &gh.IssueListCommentsOptions{ListOptions: gh.ListOptions{PerPage: 100}}
	var all []Comment
	for {
		page, resp, err := g.Issues.ListComments(ctx, repo.Owner, repo.Name, number, opts)
		if err != nil {
			return nil, wrap("ListComments", err)
		}
		for _, cm := range page {
			all = append(all, Comment{ID: cm.GetID(), User: cm.GetUser().GetLogin(), Body: cm.GetBody()})
		}
		if resp.NextPage == 0 {
			return all, nil
		}
		opts.Page = resp.NextPage
	}
}

// Issue returns issue (or pull request) number's title, body, labels and
// state.
func (c *Client) Issue(ctx context.Context, repo Repo, number int) (Issue, error) {
	g, err := c.on(ctx, repo)
	if err != nil {
		return Issue{}, err
	}
	is, _, err := g.Issues.Get(ctx, repo.Owner, repo.Name, number)
	if err != nil {
		return Issue{}, wrap("Issue", err)
	}
	return issueFrom(is), nil
}

// PullRequest returns pull request number.
func (c *Client) PullRequest(ctx context.Context, repo Repo, number int) (PullRequest, error) {
	g, err := c.on(ctx, repo)
	if err != nil {
		return PullRequest{}, err
	}
	pr, _, err := g.PullRequests.Get(ctx, repo.Owner, repo.Name, number)
	if err != nil {
		return PullRequest{}, wrap("PullRequest", err)
	}
	return pullRequestFrom(pr), nil
}

// NewPR describes a pull request to open. Head must be at least one commit
// ahead of Base, or GitHub answers 422 "No commits between ...".
type NewPR struct {
	Title, Body string
	Head, Base  string // branch names
}

// CreateDraftPR opens a draft pull request.
func (c *Client) CreateDraftPR(ctx context.Context, repo Repo, p NewPR) (PullRequest, error) {
	if err := checkBody("CreateDraftPR", p.Body); err != nil {
		return PullRequest{}, err
	}
	if p.Title == "" || p.Head == "" || p.Base == "" {
		return PullRequest{}, invalid("CreateDraftPR", "title, head and base are required")
	}
	g, err := c.on(ctx, repo)
	if err != nil {
		return PullRequest{}, err
	}
	pr, _, err := g.PullRequests.Create(ctx, repo.Owner, repo.Name, &gh.NewPullRequest{
		Title: gh.String(p.Title), Body: gh.String(p.Body), Head: gh.String(p.Head), Base: gh.String(p.Base), Draft: gh.Bool(true),
	})
	if err != nil {
		return PullRequest{}, wrap("CreateDraftPR", err)
	}
	return pullRequestFrom(pr), nil
}

// EditPRBody replaces the description of pull request number.
func (c *Client) EditPRBody(ctx context.Context, repo Repo, number int, body string) error {
	if err := checkBody("EditPRBody", body); err != nil {
		return err
	}
	g, err := c.on(ctx, repo)
	if err != nil {
		return err
	}
	_, _, err = g.PullRequests.Edit(ctx, repo.Owner, repo.Name, number, &gh.PullRequest{Body: gh.String(body)})
	return wrap("EditPRBody", err)
}

// DefaultBranch returns the default branch of repo.
func (c *Client) DefaultBranch(ctx context.Context, repo Repo) (string, error) {
	g, err := c.on(ctx, repo)
	if err != nil {
		return "", err
	}
	r, _, err := g.Repositories.Get(ctx, repo.Owner, repo.Name)
	if err != nil {
		return "", wrap("DefaultBranch", err)
	}
	if r.GetDefaultBranch() == "" {
		return "", &APIError{Op: "DefaultBranch", Message: "repository has no default branch", Err: errors.New("repository has no default branch")}
	}
	return r.GetDefaultBranch(), nil
}

// MarkReady turns draft pull request pr into a ready one. REST cannot do
// this (PATCH /pulls/{n} ignores "draft"); it is the GraphQL mutation
// markPullRequestReadyForReview, which needs the PR's node id: without
// pr.NodeID the pull request is read first, and left as is when it is not
// a draft.
func (c *Client) MarkReady(ctx context.Context, repo Repo, pr PullRequest) error {
	const op = "MarkReady"
	nodeID := pr.NodeID
	if nodeID == "" {
		cur, err := c.PullRequest(ctx, repo, pr.Number)
		if err != nil {
			return err
		}
		if !cur.Draft {
			return nil
		}
		nodeID = cur.NodeID
	}
	if nodeID == "" {
		return invalid(op, "pull request node id is empty")
	}
	rc, err := c.ForRepo(ctx, repo.Owner, repo.Name)
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
		Errors graphQLErrors `json:"errors"`
	}
	if err := rc.graphql(ctx, q, &out); err != nil {
		return wrap(op, err)
	}
	if err := out.Errors.err(op); err != nil {
		return err
	}
	if out.Data.Mark == nil || out.Data.Mark.PullRequest.IsDraft {
		return &APIError{Op: op, Message: "pull request is still a draft", Err: errors.New("graphql: pull request is still a draft")}
	}
	return nil
}

// graphQLErrors is a GraphQL answer's "errors" (HTTP 200 all the same).
type graphQLErrors []struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// err is the APIError of op for the answer's errors, nil for none. The
// first error's type decides the kind callers branch on.
func (ges graphQLErrors) err(op string) error {
	if len(ges) == 0 {
		return nil
	}
	e := &APIError{Op: op, Status: http.StatusOK, Message: ges[0].Message}
	for _, ge := range ges {
		e.Details = append(e.Details, ge.Message)
	}
	switch ges[0].Type {
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
// number, pinned to commitSHA when it is not empty, and returns its id.
// The bot never approves or requests changes: nobody can on their own
// pull request.
func (c *Client) CreateReview(ctx context.Context, repo Repo, number int, commitSHA, body string) (int64, error) {
	if err := checkBody("CreateReview", body); err != nil {
		return 0, err
	}
	if strings.TrimSpace(body) == "" {
		return 0, invalid("CreateReview", "a COMMENT review needs a body")
	}
	g, err := c.on(ctx, repo)
	if err != nil {
		return 0, err
	}
	req := &gh.PullRequestReviewRequest{Body: gh.String(body), Event: gh.String("COMMENT")}
	if commitSHA != "" {
		req.CommitID = gh.String(commitSHA)
	}
	rv, _, err := g.PullRequests.CreateReview(ctx, repo.Owner, repo.Name, number, req)
	if err != nil {
		return 0, wrap("CreateReview", err)
	}
	return rv.GetID(), nil
}

// Review is a submitted pull request review.
type Review struct {
	ID       int64
	User     string // the reviewer's login
	Body     string
	State    string // APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED
	CommitID string // the head it was submitted on
}

// ListReviews returns all reviews of pull request number, oldest first
// (every page).
func (c *Client) ListReviews(ctx context.Context, repo Repo, number int) ([]Review, error) {
	g, err := c.on(ctx, repo)
	if err != nil {
		return nil, err
	}
	opts := &gh.ListOptions{PerPage: 100}
	var all []Review
	for {
		page, resp, err := g.PullRequests.ListReviews(ctx, repo.Owner, repo.Name, number, opts)
		if err != nil {
			return nil, wrap("ListReviews", err)
		}
		for _, r := range page {
			all = append(all, Review{ID: r.GetID(), User: r.GetUser().GetLogin(), Body: r.GetBody(), State: r.GetState(), CommitID: r.GetCommitID()})
		}
		if resp.NextPage == 0 {
			return all, nil
		}
		opts.Page = resp.NextPage
	}
}

// ReviewCommit is the commit of the latest review on pull request number
// by author whose body contains marker ("" when there is none): GitHub's
// own record of the head an approval request was made on.
func (c *Client) ReviewCommit(ctx context.Context, repo Repo, number int, author, marker string) (string, error) {
	rs, err := c.ListReviews(ctx, repo, number)
	if err != nil {
		return "", err
	}
	for i := len(rs) - 1; i >= 0; i-- {
		if strings.EqualFold(rs[i].User, author) && strings.Contains(rs[i].Body, marker) {
			return rs[i].CommitID, nil
		}
	}
	return "", nil
}

// HasReview reports whether author ("" for anyone) has a review on pull
// request number whose body contains every one of parts (a session's
// marker, the approval ids of one request).
func (c *Client) HasReview(ctx context.Context, repo Repo, number int, author string, parts ...string) (bool, error) {
	rs, err := c.ListReviews(ctx, repo, number)
	if err != nil {
		return false, err
	}
	for _, r := range rs {
		if author != "" && !strings.EqualFold(r.User, author) {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(r.Body, p)
		}
		if all {
			return true, nil
		}
	}
	return false, nil
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
	g, err := c.on(ctx, Repo{Owner: owner, Name: repo})
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
func (c *Client) AddReaction(ctx context.Context, repo Repo, id int64, content string) error {
	switch content {
	case "+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes":
	default:
		return invalid("AddReaction", fmt.Sprintf("reaction %q is not one GitHub knows", content))
	}
	g, err := c.on(ctx, repo)
	if err != nil {
		return err
	}
	_, _, err = g.Reactions.CreateIssueCommentReaction(ctx, repo.Owner, repo.Name, id, content)
	return wrap("AddReaction", err)
}

// GetRef returns the SHA branch ref ("heads/x" or "refs/heads/x") points at.
func (c *Client) GetRef(ctx context.Context, owner, repo, ref string) (string, error) {
	g, err := c.on(ctx, Repo{Owner: owner, Name: repo})
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
	g, err := c.on(ctx, Repo{Owner: owner, Name: repo})
	if err != nil {
		return err
	}
	_, _, err = g.Git.CreateRef(ctx, owner, repo, &gh.Reference{Ref: gh.String(fullRef(ref)), Object: &gh.GitObject{SHA: gh.String(sha)}})
	return wrap("CreateRef", err)
}

// UpdateRef moves ref to sha; force allows a non-fast-forward move.
func (c *Client) UpdateRef(ctx context.Context, owner, repo, ref, sha string, force bool) error {
	g, err := c.on(ctx, Repo{Owner: owner, Name: repo})
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
// whose head is branch of the repository itself; false when there is none:
// a publication that may have happened already looks before it creates.
func (c *Client) PullRequestByHead(ctx context.Context, repo Repo, branch string) (PullRequest, bool, error) {
	g, err := c.on(ctx, repo)
	if err != nil {
		return PullRequest{}, false, err
	}
	prs, _, err := g.PullRequests.List(ctx, repo.Owner, repo.Name, &gh.PullRequestListOptions{State: "all", Head: repo.Owner + ":" + branch, ListOptions: gh.ListOptions{PerPage: 10}})
	if err != nil {
		return PullRequest{}, false, wrap("PullRequestByHead", err)
	}
	if len(prs) == 0 {
		return PullRequest{}, false, nil
	}
	return pullRequestFrom(prs[0]), true, nil
}

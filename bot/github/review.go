package github

import (
	"context"
	"fmt"
	"strings"

	gh "github.com/google/go-github/v62/github"
)

// LineComment is one comment of a review on a line (or a range of lines)
// of a pull request's diff, in GitHub's line/side form: Side RIGHT is the
// new file (added and context lines), LEFT the old one (removed lines).
// StartLine, when set, makes it a multi-line comment from StartLine (on
// StartSide, default Side) to Line; GitHub wants both in one hunk.
type LineComment struct {
	Path      string
	Line      int
	Side      string
	StartLine int
	StartSide string
	Body      string
}

// NewReview is a review to submit at once.
type NewReview struct {
	// CommitID pins the review to the head it was computed on ("" for the
	// current head).
	CommitID string
	Body     string
	// Event is COMMENT unless set. APPROVE and REQUEST_CHANGES are
	// accepted, but nobody can use them on their own pull request.
	Event    string
	Comments []LineComment
}

// CreateReviewWithComments submits a review with line comments in one
// request (one POST). GitHub creates a review whole or not at all: a
// comment it cannot place in the diff makes the call fail with 422 and
// nothing posted; the caller should have mapped the comments onto the
// diff first (see DiffMap).
func (c *Client) CreateReviewWithComments(ctx context.Context, repo Repo, number int, r NewReview) (int64, error) {
	const op = "CreateReviewWithComments"
	if err := checkBody(op, r.Body); err != nil {
		return 0, err
	}
	event := r.Event
	if event == "" {
		event = "COMMENT"
	}
	switch event {
	case "COMMENT", "APPROVE", "REQUEST_CHANGES":
	default:
		return 0, invalid(op, fmt.Sprintf("event %q is not COMMENT, APPROVE or REQUEST_CHANGES", event))
	}
	if event != "APPROVE" && strings.TrimSpace(r.Body) == "" && len(r.Comments) == 0 {
		return 0, invalid(op, "a "+event+" review needs a body or comments")
	}
	req := &gh.PullRequestReviewRequest{Body: gh.String(r.Body), Event: gh.String(event)}
	if r.CommitID != "" {
		req.CommitID = gh.String(r.CommitID)
	}
	for i, cm := range r.Comments {
		if cm.Path == "" || cm.Line <= 0 {
			return 0, invalid(op, fmt.Sprintf("comment %d needs a path and a positive line", i+1))
		}
		if cm.StartLine != 0 && cm.StartLine >= cm.Line && (cm.StartSide == "" || cm.StartSide == cm.Side) {
			return 0, invalid(op, fmt.Sprintf("comment %d: start_line %d must precede line %d", i+1, cm.StartLine, cm.Line))
		}
		if err := checkBody(op, cm.Body); err != nil {
			return 0, err
		}
		side := cm.Side
		if side == "" {
			side = "RIGHT"
		}
		d := &gh.DraftReviewComment{Path: gh.String(cm.Path), Line: gh.Int(cm.Line), Side: gh.String(side), Body: gh.String(cm.Body)}
		if cm.StartLine != 0 {
			d.StartLine = gh.Int(cm.StartLine)
			ss := cm.StartSide
			if ss == "" {
				ss = side
			}
			d.StartSide = gh.String(ss)
		}
		req.Comments = append(req.Comments, d)
	}
	g, err := c.on(ctx, repo)
	if err != nil {
		return 0, err
	}
	rv, _, err := g.PullRequests.CreateReview(ctx, repo.Owner, repo.Name, number, req)
	if err != nil {
		return 0, wrap(op, err)
	}
	return rv.GetID(), nil
}

// PRFile is one file of a pull request's diff.
type PRFile struct {
	Path, PreviousPath string
	Status             string // added, removed, modified, renamed, copied, changed, unchanged
	// Patch is the file's hunks; GitHub leaves it out for binary files
	// and for very large diffs.
	Patch string
}

// ListPRFiles returns the files of pull request number with their patches
// (every page, 100 a page; GitHub lists at most 3000 files).
func (c *Client) ListPRFiles(ctx context.Context, repo Repo, number int) ([]PRFile, error) {
	g, err := c.on(ctx, repo)
	if err != nil {
		return nil, err
	}
	opts := &gh.ListOptions{PerPage: 100}
	var out []PRFile
	for {
		page, resp, err := g.PullRequests.ListFiles(ctx, repo.Owner, repo.Name, number, opts)
		if err != nil {
			return nil, wrap("ListPRFiles", err)
		}
		for _, f := range page {
			out = append(out, PRFile{Path: f.GetFilename(), PreviousPath: f.GetPreviousFilename(), Status: f.GetStatus(), Patch: f.GetPatch()})
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// PullRequestDiff returns pull request number's diff as GitHub renders it
// for the diff media type (application/vnd.github.diff): one request,
// whatever the number of files.
func (c *Client) PullRequestDiff(ctx context.Context, repo Repo, number int) (string, error) {
	g, err := c.on(ctx, repo)
	if err != nil {
		return "", err
	}
	s, _, err := g.PullRequests.GetRaw(ctx, repo.Owner, repo.Name, number, gh.RawOptions{Type: gh.Diff})
	return s, wrap("PullRequestDiff", err)
}

// RepoLabels returns the names of repo's labels (every page).
func (c *Client) RepoLabels(ctx context.Context, repo Repo) ([]string, error) {
	g, err := c.on(ctx, repo)
	if err != nil {
		return nil, err
	}
	opts := &gh.ListOptions{PerPage: 100}
	var out []string
	for {
		page, resp, err := g.Issues.ListLabels(ctx, repo.Owner, repo.Name, opts)
		if err != nil {
			return nil, wrap("RepoLabels", err)
		}
		for _, l := range page {
			out = append(out, l.GetName())
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// AddLabels adds labels to issue or pull request number. GitHub creates a
// label the repository lacks (grey, no description): callers that take
// label names from a model pass only names RepoLabels returned.
func (c *Client) AddLabels(ctx context.Context, repo Repo, number int, labels []string) error {
	if len(labels) == 0 {
		return invalid("AddLabels", "no labels")
	}
	g, err := c.on(ctx, repo)
	if err != nil {
		return err
	}
	// go-github sends a bare array, which GitHub still takes but its
	// description no longer lists; send the documented {"labels": [...]}.
	u := fmt.Sprintf("repos/%s/%s/issues/%d/labels", pathEscape(repo.Owner), pathEscape(repo.Name), number)
	req, err := g.NewRequest("POST", u, map[string][]string{"labels": labels})
	if err != nil {
		return wrap("AddLabels", err)
	}
	_, err = g.Do(ctx, req, nil)
	return wrap("AddLabels", err)
}

// RevokeMintedTokens revokes (DELETE /installation/token) every
// installation token this client minted as a GitHub App, and forgets the
// installation clients, so a later call mints a fresh token. Tokens it did
// not mint — a token-mode client's configured token, such as an Actions
// GITHUB_TOKEN that later steps still use — are left alone. It returns how
// many tokens were revoked.
func (c *Client) RevokeMintedTokens(ctx context.Context) (int, error) {
	r := c.root
	if r.apps == nil {
		return 0, nil
	}
	r.mu.Lock()
	clients := make([]*Client, 0, len(r.installs))
	for id, ic := range r.installs {
		clients = append(clients, ic)
		delete(r.installs, id)
	}
	r.mu.Unlock()
	n := 0
	var errs []string
	for _, ic := range clients {
		if _, _, err := ic.inst.Expiry(); err != nil {
			continue // never minted a token: nothing to revoke
		}
		if _, err := ic.gh.Apps.RevokeInstallationToken(ctx); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		n++
	}
	if len(errs) > 0 {
		return n, wrap("RevokeMintedTokens", fmt.Errorf("%s", strings.Join(errs, "; ")))
	}
	return n, nil
}

package github

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	gh "github.com/google/go-github/v62/github"
)

// MaxTitleChars is GitHub's limit on an issue or pull request title.
const MaxTitleChars = 256

// NewIssue describes an issue to open.
type NewIssue struct {
	Title, Body string
	// Labels are set only when the caller has push access (GitHub drops
	// them silently otherwise); a label the repository lacks is created.
	Labels []string
}

// CreateIssue opens an issue. GitHub requires a title (422 otherwise);
// it is checked here, before any request, like the body's length.
func (c *Client) CreateIssue(ctx context.Context, owner, repo string, in NewIssue) (*gh.Issue, error) {
	if strings.TrimSpace(in.Title) == "" {
		return nil, invalid("CreateIssue", "title is required")
	}
	if n := utf8.RuneCountInString(in.Title); n > MaxTitleChars {
		return nil, invalid("CreateIssue", "title is too long")
	}
	if err := checkBody("CreateIssue", in.Body); err != nil {
		return nil, err
	}
	g, err := c.on(ctx, Repo{Owner: owner, Name: repo})
	if err != nil {
		return nil, err
	}
	req := &gh.IssueRequest{Title: gh.String(in.Title), Body: gh.String(in.Body)}
	if len(in.Labels) > 0 {
		req.Labels = &in.Labels
	}
	is, _, err := g.Issues.Create(ctx, owner, repo, req)
	return is, wrap("CreateIssue", err)
}

// IssueQuery narrows FindIssue's walk.
type IssueQuery struct {
	// Creator, when set, keeps only issues this login opened (compared
	// here, case-insensitively, so a bot login such as
	// "github-actions[bot]" works whatever the API's filter does with it).
	Creator string
	// CreatedAfter stops the walk at the first issue created before it:
	// issues are read newest first.
	CreatedAfter time.Time
	// MaxPages bounds the walk (100 issues a page); 0 means 10.
	MaxPages int
}

// FindIssue walks owner/repo's issues, open and closed, newest first
// (pull requests are skipped), and returns the first one match accepts,
// nil when none does. truncated reports a walk that hit MaxPages before
// reaching CreatedAfter or the last issue, so "none" is not certain.
func (c *Client) FindIssue(ctx context.Context, owner, repo string, q IssueQuery, match func(*gh.Issue) bool) (found *gh.Issue, truncated bool, err error) {
	g, err := c.on(ctx, Repo{Owner: owner, Name: repo})
	if err != nil {
		return nil, false, err
	}
	pages := q.MaxPages
	if pages <= 0 {
		pages = 10
	}
	opts := &gh.IssueListByRepoOptions{State: "all", Sort: "created", Direction: "desc", ListOptions: gh.ListOptions{PerPage: 100}}
	for n := 0; n < pages; n++ {
		page, resp, err := g.Issues.ListByRepo(ctx, owner, repo, opts)
		if err != nil {
			return nil, false, wrap("FindIssue", err)
		}
		for _, is := range page {
			if !q.CreatedAfter.IsZero() && is.GetCreatedAt().Time.Before(q.CreatedAfter) {
				return nil, false, nil
			}
			if is.IsPullRequest() || q.Creator != "" && !strings.EqualFold(is.GetUser().GetLogin(), q.Creator) {
				continue
			}
			if match(is) {
				return is, false, nil
			}
		}
		if resp.NextPage == 0 {
			return nil, false, nil
		}
		opts.Page = resp.NextPage
	}
	return nil, true, nil
}

package dispatch

import (
	"context"
	"strings"

	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/tracking"
	gh "github.com/google/go-github/v62/github"
)

// API adapts the bot's GitHub client to the GitHub port. With a GitHub App
// it picks the repository's installation for every call.
type API struct {
	Client *github.Client
}

func (a API) client(ctx context.Context, repo Repo) (*github.Client, error) {
	if !a.Client.IsApp() {
		return a.Client, nil
	}
	id, err := a.Client.InstallationID(ctx, repo.Owner, repo.Name)
	if err != nil {
		return nil, err
	}
	return a.Client.ForInstallation(id)
}

// DefaultBranch implements GitHub.
func (a API) DefaultBranch(ctx context.Context, repo Repo) (string, error) {
	c, err := a.client(ctx, repo)
	if err != nil {
		return "", err
	}
	return c.DefaultBranch(ctx, repo.Owner, repo.Name)
}

func prFrom(p *gh.PullRequest) PullRequest {
	return PullRequest{
		Number: p.GetNumber(), NodeID: p.GetNodeID(), URL: p.GetHTMLURL(),
		HeadRef: p.GetHead().GetRef(), HeadSHA: p.GetHead().GetSHA(), HeadRepo: p.GetHead().GetRepo().GetFullName(),
		BaseRef: p.GetBase().GetRef(), State: p.GetState(), Draft: p.GetDraft(),
	}
}

// PullRequest implements GitHub.
func (a API) PullRequest(ctx context.Context, repo Repo, number int) (PullRequest, error) {
	c, err := a.client(ctx, repo)
	if err != nil {
		return PullRequest{}, err
	}
	p, err := c.GetPullRequest(ctx, repo.Owner, repo.Name, number)
	if err != nil {
		return PullRequest{}, err
	}
	return prFrom(p), nil
}

// CreateComment implements GitHub.
func (a API) CreateComment(ctx context.Context, repo Repo, number int, body string) (int64, error) {
	c, err := a.client(ctx, repo)
	if err != nil {
		return 0, err
	}
	cm, err := c.CreateComment(ctx, repo.Owner, repo.Name, number, tracking.Fit(body))
	if err != nil {
		return 0, err
	}
	return cm.GetID(), nil
}

// EditComment implements GitHub.
func (a API) EditComment(ctx context.Context, repo Repo, id int64, body string) error {
	c, err := a.client(ctx, repo)
	if err != nil {
		return err
	}
	_, err = c.EditComment(ctx, repo.Owner, repo.Name, id, tracking.Fit(body))
	return err
}

// CreateDraftPR implements GitHub.
func (a API) CreateDraftPR(ctx context.Context, repo Repo, head, base, title, body string) (PullRequest, error) {
	c, err := a.client(ctx, repo)
	if err != nil {
		return PullRequest{}, err
	}
	p, err := c.CreateDraftPR(ctx, repo.Owner, repo.Name, github.NewPR{Title: title, Head: head, Base: base, Body: tracking.Fit(body)})
	if err != nil {
		return PullRequest{}, err
	}
	return prFrom(p), nil
}

// EditPRBody implements GitHub.
func (a API) EditPRBody(ctx context.Context, repo Repo, number int, body string) error {
	c, err := a.client(ctx, repo)
	if err != nil {
		return err
	}
	return c.EditPullRequestBody(ctx, repo.Owner, repo.Name, number, tracking.Fit(body))
}

// MarkReady implements GitHub.
func (a API) MarkReady(ctx context.Context, repo Repo, pr PullRequest) error {
	c, err := a.client(ctx, repo)
	if err != nil {
		return err
	}
	if pr.NodeID != "" {
		return c.MarkReadyForReviewNode(ctx, pr.NodeID)
	}
	return c.MarkReadyForReview(ctx, repo.Owner, repo.Name, pr.Number)
}

// CreateReview implements GitHub.
func (a API) CreateReview(ctx context.Context, repo Repo, number int, commitSHA, body string) (int64, error) {
	c, err := a.client(ctx, repo)
	if err != nil {
		return 0, err
	}
	r, err := c.CreateReview(ctx, repo.Owner, repo.Name, number, tracking.Fit(body), commitSHA)
	if err != nil {
		return 0, err
	}
	return r.GetID(), nil
}

// ReviewCommit implements GitHub.
func (a API) ReviewCommit(ctx context.Context, repo Repo, number int, author, marker string) (string, error) {
	c, err := a.client(ctx, repo)
	if err != nil {
		return "", err
	}
	rs, err := c.ListReviews(ctx, repo.Owner, repo.Name, number)
	if err != nil {
		return "", err
	}
	for i := len(rs) - 1; i >= 0; i-- {
		r := rs[i]
		if strings.EqualFold(r.GetUser().GetLogin(), author) && strings.Contains(r.GetBody(), marker) {
			return r.GetCommitID(), nil
		}
	}
	return "", nil
}

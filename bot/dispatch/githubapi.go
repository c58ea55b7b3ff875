package dispatch

import (
	"context"
	"strings"

	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/tracking"
	gh "github.com/google/go-github/v62/github"
)

// API adapts the bot's GitHub client to the GitHub port. With a GitHub App
// the client acts on each repository through its installation (see
// github.Client); the dispatcher tells it the installation of every
// trigger (Dispatcher.Installations), so no call looks it up.
type API struct {
	Client *github.Client
}

// DefaultBranch implements GitHub.
func (a API) DefaultBranch(ctx context.Context, repo Repo) (string, error) {
	return a.Client.DefaultBranch(ctx, repo.Owner, repo.Name)
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
	p, err := a.Client.GetPullRequest(ctx, repo.Owner, repo.Name, number)
	if err != nil {
		return PullRequest{}, err
	}
	return prFrom(p), nil
}

// ListComments implements GitHub.
func (a API) ListComments(ctx context.Context, repo Repo, number int) ([]Comment, error) {
	list, err := a.Client.ListComments(ctx, repo.Owner, repo.Name, number)
	if err != nil {
		return nil, err
	}
	out := make([]Comment, 0, len(list))
	for _, c := range list {
		out = append(out, Comment{ID: c.GetID(), User: c.GetUser().GetLogin(), Body: c.GetBody()})
	}
	return out, nil
}

// CreateComment implements GitHub.
func (a API) CreateComment(ctx context.Context, repo Repo, number int, body string) (int64, error) {
	cm, err := a.Client.CreateComment(ctx, repo.Owner, repo.Name, number, tracking.Fit(body))
	if err != nil {
		return 0, err
	}
	return cm.GetID(), nil
}

// EditComment implements GitHub.
func (a API) EditComment(ctx context.Context, repo Repo, id int64, body string) error {
	_, err := a.Client.EditComment(ctx, repo.Owner, repo.Name, id, tracking.Fit(body))
	return err
}

// CreateDraftPR implements GitHub.
func (a API) CreateDraftPR(ctx context.Context, repo Repo, head, base, title, body string) (PullRequest, error) {
	p, err := a.Client.CreateDraftPR(ctx, repo.Owner, repo.Name, github.NewPR{Title: title, Head: head, Base: base, Body: tracking.Fit(body)})
	if err != nil {
		return PullRequest{}, err
	}
	return prFrom(p), nil
}

// EditPRBody implements GitHub.
func (a API) EditPRBody(ctx context.Context, repo Repo, number int, body string) error {
	return a.Client.EditPullRequestBody(ctx, repo.Owner, repo.Name, number, tracking.Fit(body))
}

// MarkReady implements GitHub.
func (a API) MarkReady(ctx context.Context, repo Repo, pr PullRequest) error {
	if pr.NodeID != "" {
		return a.Client.MarkReadyForReviewNode(ctx, repo.Owner, repo.Name, pr.NodeID)
	}
	return a.Client.MarkReadyForReview(ctx, repo.Owner, repo.Name, pr.Number)
}

// CreateReview implements GitHub.
func (a API) CreateReview(ctx context.Context, repo Repo, number int, commitSHA, body string) (int64, error) {
	r, err := a.Client.CreateReview(ctx, repo.Owner, repo.Name, number, tracking.Fit(body), commitSHA)
	if err != nil {
		return 0, err
	}
	return r.GetID(), nil
}

// ReviewCommit implements GitHub.
func (a API) ReviewCommit(ctx context.Context, repo Repo, number int, author, marker string) (string, error) {
	rs, err := a.Client.ListReviews(ctx, repo.Owner, repo.Name, number)
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

// PullRequestByHead implements GitHub.
func (a API) PullRequestByHead(ctx context.Context, repo Repo, branch string) (PullRequest, bool, error) {
	p, err := a.Client.PullRequestByHead(ctx, repo.Owner, repo.Name, branch)
	if err != nil || p == nil {
		return PullRequest{}, false, err
	}
	return prFrom(p), true, nil
}

// HasReview implements GitHub.
func (a API) HasReview(ctx context.Context, repo Repo, number int, author string, parts ...string) (bool, error) {
	rs, err := a.Client.ListReviews(ctx, repo.Owner, repo.Name, number)
	if err != nil {
		return false, err
	}
	for _, r := range rs {
		if author != "" && !strings.EqualFold(r.GetUser().GetLogin(), author) {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(r.GetBody(), p)
		}
		if all {
			return true, nil
		}
	}
	return false, nil
}

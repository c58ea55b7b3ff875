package dispatch

import (
	"context"

	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/tracking"
)

// PRFiles implements WorkflowGitHub.
func (a API) PRFiles(ctx context.Context, repo Repo, number int) ([]github.PRFile, error) {
	return a.Client.ListPRFiles(ctx, repo.Owner, repo.Name, number)
}

// CreateLineReview implements WorkflowGitHub.
func (a API) CreateLineReview(ctx context.Context, repo Repo, number int, r github.NewReview) (int64, error) {
	r.Body = tracking.Fit(r.Body)
	rv, err := a.Client.CreateReviewWithComments(ctx, repo.Owner, repo.Name, number, r)
	if err != nil {
		return 0, err
	}
	return rv.GetID(), nil
}

// Issue implements WorkflowGitHub.
func (a API) Issue(ctx context.Context, repo Repo, number int) (Issue, error) {
	is, err := a.Client.GetIssue(ctx, repo.Owner, repo.Name, number)
	if err != nil {
		return Issue{}, err
	}
	out := Issue{Title: is.GetTitle(), Body: is.GetBody(), State: is.GetState()}
	for _, l := range is.Labels {
		out.Labels = append(out.Labels, l.GetName())
	}
	return out, nil
}

// RepoLabels implements WorkflowGitHub.
func (a API) RepoLabels(ctx context.Context, repo Repo) ([]string, error) {
	return a.Client.RepoLabels(ctx, repo.Owner, repo.Name)
}

// AddLabels implements WorkflowGitHub.
func (a API) AddLabels(ctx context.Context, repo Repo, number int, labels []string) error {
	return a.Client.AddLabels(ctx, repo.Owner, repo.Name, number, labels)
}

var _ WorkflowGitHub = API{}

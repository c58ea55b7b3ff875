package action

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/tracking"
	gh "github.com/google/go-github/v62/github"
)

// actionsPRMessage is GitHub's answer (403) when the workflow's
// GITHUB_TOKEN opens a pull request in a repository where "Allow GitHub
// Actions to create and approve pull requests" is off, GitHub's default.
const actionsPRMessage = "GitHub Actions is not permitted to create or approve pull requests"

// PRSetting names the setting that lets the workflow token open pull
// requests, as a maintainer finds it.
const PRSetting = `Settings → Actions → General → Workflow permissions → "Allow GitHub Actions to create and approve pull requests"`

// ErrPRsNotPermitted is the step's error when GitHub refused to let the
// workflow's token open the session's pull request.
var ErrPRsNotPermitted = errors.New("GitHub Actions may not create pull requests in this repository")

// isPRRefusal reports whether err is GitHub's refusal to let the workflow
// token open a pull request.
func isPRRefusal(err error) bool {
	var ae *github.APIError
	if !errors.As(err, &ae) || ae.Status != 403 {
		return false
	}
	return strings.Contains(ae.Message, actionsPRMessage) || strings.Contains(ae.Error(), actionsPRMessage)
}

// prRefusalNote is what the tracking comment says after the refusal.
func prRefusalNote(sid, branch string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n**agentos** could not open the pull request of session `%s`: GitHub answered 403 \"%s.\"\n\n", tracking.Marker(sid), sid, actionsPRMessage)
	b.WriteString("The workflow's `GITHUB_TOKEN` may not open pull requests in this repository. To allow it: " + PRSetting +
		" (in an organization, the organization's setting must allow it first). ")
	if branch != "" {
		fmt.Fprintf(&b, "The work is kept on branch `%s`; re-run this job once the setting is on and it opens the pull request. ", branch)
	} else {
		b.WriteString("Re-run this job once the setting is on. ")
	}
	b.WriteString("Or run the Action as a GitHub App (`app_id` and `app_private_key`, or an App token as `github_token`): an App's pull requests also start the repository's CI workflows, which a pull request opened with `GITHUB_TOKEN` never does.\n\n")
	b.WriteString("Status: **failed** (no pull request).")
	return b.String()
}

// settleTrackingComment rewrites the session's tracking comment on issue
// number (the one with the session's marker, by the bot) to note; it
// reports whether it found one.
func settleTrackingComment(ctx context.Context, client *github.Client, owner, repo string, number int, botLogin, sid, note string) (bool, error) {
	rc, err := client.ForRepo(ctx, owner, repo)
	if err != nil {
		return false, err
	}
	g := rc.GitHub()
	opts := &gh.IssueListCommentsOptions{ListOptions: gh.ListOptions{PerPage: 100}}
	for {
		page, resp, err := g.Issues.ListComments(ctx, owner, repo, number, opts)
		if err != nil {
			return false, fmt.Errorf("list the comments of #%d: %w", number, err)
		}
		for _, c := range page {
			if found, ok := tracking.FindSessionID(c.GetBody()); !ok || found != sid || !strings.EqualFold(c.GetUser().GetLogin(), botLogin) {
				continue
			}
			if _, _, err := g.Issues.EditComment(ctx, owner, repo, c.GetID(), &gh.IssueComment{Body: gh.String(note)}); err != nil {
				return false, fmt.Errorf("update the tracking comment: %w", err)
			}
			return true, nil
		}
		if resp == nil || resp.NextPage == 0 {
			return false, nil
		}
		opts.Page = resp.NextPage
	}
}

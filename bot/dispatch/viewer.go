package dispatch

import (
	"context"
	"errors"
	"fmt"
	"github.com/agentos/agentos/bot/github"

	"github.com/agentos/agentos/bot/auth"
	"github.com/agentos/agentos/bot/webhook"
)

// ErrNotAGitHubSession: the session was not started from GitHub (it has
// no link to a repository, issue or pull request).
var ErrNotAGitHubSession = errors.New("the session was not started from GitHub")

// ErrRefused: the collaborator permission check refused the answer.
var ErrRefused = errors.New("refused")

// AnswerFromViewer answers a pending approval of a GitHub session given on
// the run viewer's page by login: the same path as a PR review or
// `/agent approve ID` (the permission check with the collaborator API,
// the stale check against the pull request's head, the answer recorded
// with login and reason, the run resumed and published), on the
// session's pull request (or its issue).
func (d *Dispatcher) AnswerFromViewer(ctx context.Context, sessionID, approvalID, decision, login, reason string) (Result, error) {
	evs, err := d.runs.Store.Read(ctx, sessionID, 1)
	if err != nil {
		return Result{SessionID: sessionID}, err
	}
	l, ok := loadLink(evs)
	if !ok {
		return Result{SessionID: sessionID}, ErrNotAGitHubSession
	}
	repo, ok := github.ParseRepo(l.Repo)
	if !ok {
		return Result{SessionID: sessionID}, ErrNotAGitHubSession
	}
	num := l.PR
	if num == 0 {
		num = l.Issue
	}
	t := webhook.Trigger{Kind: webhook.KindComment, Repo: l.Repo, Number: num, Author: login, AuthorType: "User", DeliveryID: "viewer", InstallationID: l.Installation}
	d.remember(repo, l.Installation)
	action := auth.ActionApprove
	var a answer
	switch decision {
	case "approve":
		a = answer{decision: "approve", id: approvalID, reason: reason}
	case "deny":
		action, a = auth.ActionDeny, answer{decision: "deny", id: approvalID, reason: reason}
	default:
		return Result{SessionID: sessionID}, fmt.Errorf("decision must be approve or deny, not %q", decision)
	}
	if res, refused, err := d.authorize(ctx, repo, t, action, false); refused || err != nil {
		res.SessionID = sessionID
		if err == nil {
			err = fmt.Errorf("%w: %s", ErrRefused, res.Reason)
		}
		return res, err
	}
	var pr *github.PullRequest
	if l.PR != 0 {
		p, err := d.gh.PullRequest(ctx, repo, l.PR)
		if err != nil {
			return Result{SessionID: sessionID}, err
		}
		pr = &p
	}
	return d.answerSession(ctx, repo, t, sessionID, pr, a)
}

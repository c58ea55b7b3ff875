package dispatch

// Pull request events on a session's pull request (closed, synchronize),
// and reading a trigger's pull request.

import (
	"context"
	"github.com/agentos/agentos/bot/github"

	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/replay"
)

// pullRequest is the trigger's pull request: as its payload describes it
// (reviews, line comments and pull_request events carry it), or read from
// GitHub (a comment on a pull request carries only its number).
func (d *Dispatcher) pullRequest(ctx context.Context, repo github.Repo, t webhook.Trigger) (github.PullRequest, error) {
	if pr, ok := prFromTrigger(t); ok {
		return pr, nil
	}
	return d.gh.PullRequest(ctx, repo, t.Number)
}

func prFromTrigger(t webhook.Trigger) (github.PullRequest, bool) {
	if !t.IsPR || t.HeadRef == "" || t.HeadSHA == "" {
		return github.PullRequest{}, false
	}
	return github.PullRequest{Number: t.Number, NodeID: t.PRNodeID, URL: t.PRURL, HeadRef: t.HeadRef, HeadSHA: t.HeadSHA,
		HeadRepo: t.HeadRepo, BaseRef: t.BaseRef, State: t.IssueState, Draft: t.Draft}, true
}

func (d *Dispatcher) onPRClosed(ctx context.Context, repo github.Repo, t webhook.Trigger) (Result, error) {
	sid, _, err := d.sessionFor(ctx, repo, t)
	if err != nil {
		return Result{Outcome: "ignored", Reason: "not a session pull request"}, err
	}
	t.Author = orWord(t.Author, "github")
	// A request to start a session on it may still wait in the queue.
	res, err := d.cancelOf(ctx, repo, t, "the pull request was closed", func() (string, error) { return sid, nil })
	if sid == "" && err == nil && res.Outcome == "ignored" {
		// No session, and no request to start one waited in the queue.
		return Result{Outcome: "ignored", Reason: "not a session pull request"}, nil
	}
	return res, err
}

func (d *Dispatcher) onPRSynchronize(ctx context.Context, repo github.Repo, t webhook.Trigger) (Result, error) {
	sid, pr, err := d.sessionFor(ctx, repo, t)
	if err != nil || sid == "" {
		return Result{Outcome: "ignored", Reason: "not a session pull request"}, err
	}
	unlock := d.lock(sid)
	evs, err := d.loadSession(ctx, repo, sid)
	if err != nil {
		unlock()
		return Result{SessionID: sid}, err
	}
	l, _ := loadLink(evs)
	d.adopt(repo, t, &l)
	snap, err := replay.Replay(evs)
	unlock()
	if err != nil {
		return Result{SessionID: sid}, err
	}
	if snap.RunStatus != replay.RunPaused || pr == nil {
		return Result{Outcome: "ignored", Reason: "no approval to invalidate", SessionID: sid}, nil
	}
	requestedOn, err := d.requestedOn(ctx, repo, pr, l, sid)
	if err != nil {
		return Result{SessionID: sid}, err
	}
	if requestedOn == "" || pr.HeadSHA == requestedOn {
		return Result{Outcome: "ignored", Reason: "no approval to invalidate", SessionID: sid}, nil
	}
	// answer() sees the moved head, marks the approvals stale and asks again.
	return d.answer(ctx, repo, t, answer{decision: "approve", all: true})
}

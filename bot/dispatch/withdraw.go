package dispatch

// A cancel that reaches `/agent` requests still waiting in the delivery
// queue: withdrawn there before they start (docs/replicas.md, "Cancel
// across replicas").

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentos/agentos/bot/command"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/bot/tracking"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/untrusted"
)

// queuedRequest is a request to start a run (`/agent <prompt>`) of the
// cancelled issue or pull request that the queue held.
type queuedRequest struct {
	queue.Withdrawal
	Author string
	SID    string // the session it starts (deliverySessionID)
}

// withdrawQueued withdraws the requests to start a run on t's issue or
// pull request that wait in the queue the cancel's own delivery came
// from (queue.Claimed), received before the cancel. withdrawn are those
// withdrawn; starting are those a worker holds (being started, or taken
// over after their replica died), left to the caller. Without a queue
// in ctx (a dispatch not from the Processor) there is nothing to do.
func (d *Dispatcher) withdrawQueued(ctx context.Context, repo github.Repo, t webhook.Trigger, by, reason string) (withdrawn, starting []queuedRequest, err error) {
	q, self, ok := queue.Claimed(ctx)
	if !ok {
		return nil, nil, nil
	}
	w, ok := q.(queue.Withdrawer)
	if !ok {
		return nil, nil, nil
	}
	authors := map[string]string{}
	match := func(del queue.Delivery) bool {
		if del.ID == self {
			return false
		}
		author, ok := d.startsRunOn(del, repo, t.Number)
		if ok {
			authors[del.ID] = author
		}
		return ok
	}
	ws, err := w.Withdraw(ctx, self, match, fmt.Sprintf("withdrawn before it started: %s (by @%s)", reason, by))
	if err != nil {
		return nil, nil, fmt.Errorf("withdraw the queued requests: %w", err)
	}
	for _, x := range ws {
		r := queuedRequest{Withdrawal: x, Author: authors[x.ID], SID: deliverySessionID(t.Number, x.ID)}
		if x.Withdrawn {
			withdrawn = append(withdrawn, r)
			d.log().Info("queued request withdrawn", "repo", repo.FullName(), "number", t.Number, "delivery", x.ID, "author", r.Author, "by", by, "reason", reason)
		} else {
			starting = append(starting, r)
		}
	}
	return withdrawn, starting, nil
}

// startsRunOn reports whether a queued delivery is a request to start a
// run (the route commands.startRun) on issue or pull request number of
// repo, and who made it. It reads the delivery as the Processor and
// dispatch would.
func (d *Dispatcher) startsRunOn(del queue.Delivery, repo github.Repo, number int) (string, bool) {
	t, ok, err := webhook.Normalize(del.Event, del.ID, del.Body)
	if err != nil || !ok || t.Number != number || !strings.EqualFold(t.Repo, repo.FullName()) || !isComment(t) {
		return "", false
	}
	if d.botLogin != "" && strings.EqualFold(t.Author, d.botLogin) {
		return "", false
	}
	body, _ := untrusted.GitHubText(t.Body, 0)
	p := d.parse(body)
	if p.Kind != command.Command || p.Command.Name != command.Run {
		return "", false
	}
	r, ok, _ := d.routes.lookup(t, command.Run)
	return t.Author, ok && r.Handler == "commands.startRun"
}

// reportWithdrawn tells the issue or pull request that its queued
// requests were withdrawn, and corrects the tracking comment an earlier
// attempt of one of them posted (it waited for a retry).
func (d *Dispatcher) reportWithdrawn(ctx context.Context, repo github.Repo, t webhook.Trigger, ws []queuedRequest, by, reason string) error {
	var whose []string
	for _, w := range ws {
		if w.Attempts > 0 {
			cid, err := d.trackingComment(ctx, repo, t.Number, w.SID)
			if err != nil {
				return err
			}
			if cid != 0 {
				body := fmt.Sprintf("%s\n**agentos** did not start: the request was withdrawn from the queue before it started (%s, by @%s).\n\nNothing was changed.", tracking.Marker(w.SID), reason, by)
				if err := d.gh.EditComment(ctx, repo, cid, tracking.Fit(body)); err != nil {
					return err
				}
			}
		}
		whose = append(whose, "@"+orWord(w.Author, "someone"))
	}
	msg := fmt.Sprintf("@%s the request of %s was still waiting in the queue and is withdrawn: it will not start, and nothing was changed (%s).", by, whose[0], reason)
	if len(ws) > 1 {
		msg = fmt.Sprintf("@%s %d requests (of %s) were still waiting in the queue and are withdrawn: they will not start, and nothing was changed (%s).", by, len(ws), strings.Join(whose, ", "), reason)
	}
	_, err := d.gh.CreateComment(ctx, repo, t.Number, msg)
	return err
}

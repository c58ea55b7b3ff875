package dispatch

// The `/agent` commands written in a comment: the route's handler for a
// new request (`/agent <prompt>`, a follow-up on the bot's own pull
// request), `/agent status` and `/agent cancel`. `/agent approve|deny` are
// in approvals.go, `/agent review` in review.go, `/agent triage` in
// triage.go.

import (
	"context"
	"errors"
	"fmt"
	"github.com/agentos/agentos/bot/github"
	"strings"

	"github.com/agentos/agentos/bot/tracking"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/kernel/worktree"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/workflow/cycle"
)

// forkRefusal is the reply to `/agent <prompt>` on a fork's pull request.
func forkRefusal(author, headRepo string) string {
	return fmt.Sprintf("@%s this pull request comes from a fork (`%s`), so I won't work on it here: "+
		"that would push the fork's commits to a branch of this repository, where its workflows would run them with this repository's secrets. "+
		"Push the branch to this repository (or ask its author to), then ask again on that pull request. `/agent review` works on forks.",
		author, headRepo)
}

// notStarted is the reply to a request whose run could not start: the
// model provider refused the bot's configuration (permanent) or did not
// answer on the last attempt. The provider's own message stays in the
// server's log: it can name internal endpoints.
func notStarted(author string, permanent bool, trigger string) string {
	if permanent {
		return fmt.Sprintf("@%s I could not start this run: the model provider refused the bot's configuration (a rejected API key or an unknown model). "+
			"The bot's operator needs to fix the provider settings (`agentos doctor` checks them); then ask again with `%s`.", author, trigger)
	}
	return fmt.Sprintf("@%s I could not start this run: the model provider did not answer, after several attempts. "+
		"Ask again with `%s` later; if it keeps failing, the bot's operator can check the provider with `agentos doctor`.", author, trigger)
}

// renderJoined is the reply to a request made while a run of the same
// issue is still working: it names the live session and where to follow
// it, and how to start something else.
func renderJoined(author, sid, trackingURL, trigger string) string {
	where := "its tracking comment"
	if trackingURL != "" {
		where = fmt.Sprintf("[its tracking comment](%s)", trackingURL)
	}
	return fmt.Sprintf("@%s a run is already working on this (session `%s`); I won't start a second one. "+
		"Follow it on %s: it goes on, and if the server working it stopped another one takes it over. "+
		"Ask again when it has finished, or `%s cancel` it first.", author, sid, where, trigger)
}

// startRun begins a session for `/agent <prompt>`. On the bot's own PR it
// starts a follow-up run of that PR's session instead.
func (d *Dispatcher) startRun(ctx context.Context, repo github.Repo, t webhook.Trigger, prompt string) (Result, error) {
	if d.preflight != nil {
		if perr := d.preflight(ctx); perr != nil {
			err := perr
			permanent := errors.Is(err, webhook.ErrPermanent)
			d.log().Error("run not started: preflight failed", "repo", repo.FullName(), "number", t.Number, "author", t.Author, "delivery", t.DeliveryID, "permanent", permanent, "final_attempt", t.FinalAttempt, "err", err)
			err = fmt.Errorf("%w: %w", ErrPreflight, err)
			// No retry will start it: the user hears so on GitHub. (A
			// failure the queue retries says nothing yet.)
			if permanent || t.FinalAttempt {
				if _, cerr := d.gh.CreateComment(ctx, repo, t.Number, notStarted(t.Author, permanent, d.trigger())); cerr != nil {
					err = errors.Join(err, cerr)
				}
			}
			return Result{Outcome: "not_started", Reason: "preflight: " + perr.Error()}, err
		}
	}
	if t.IssueState == "closed" {
		_, err := d.gh.CreateComment(ctx, repo, t.Number, fmt.Sprintf("@%s this %s is closed, so I won't start work here. Reopen it, or ask on an open one.", t.Author, kindWord(t.IsPR)))
		return Result{Outcome: "replied", Reason: "closed"}, err
	}
	base := Base{}
	l := link{Repo: repo.FullName(), Issue: t.Number, Prompt: prompt, Installation: t.InstallationID}
	if t.IsPR {
		pr, err := d.pullRequest(ctx, repo, t)
		if err != nil {
			return Result{}, err
		}
		if pr.HeadRepo == repo.FullName() {
			sid, ok, err := d.sessionOfBranch(ctx, repo, pr.HeadRef)
			if err != nil {
				return Result{}, err
			}
			if ok {
				return d.followUp(ctx, repo, t, sid, prompt, &pr)
			}
		}
		if pr.HeadRepo != repo.FullName() {
			// A fork: its commits never go to a branch of this repository.
			// A branch here would run them in this repository's
			// push-triggered workflows, with its secrets, before any
			// maintainer approved anything (docs/architecture.md, trust
			// boundaries). Reading work (/agent review) stays available.
			_, err := d.gh.CreateComment(ctx, repo, t.Number, forkRefusal(t.Author, pr.HeadRepo))
			return Result{Outcome: "replied", Reason: "fork"}, err
		}
		base = Base{Ref: pr.HeadRef, SHA: pr.HeadSHA}
		l.BaseRef = pr.HeadRef
	} else {
		// The payload names the default branch; ask only when it does not.
		def := t.DefaultBranch
		if def == "" {
			var err error
			if def, err = d.gh.DefaultBranch(ctx, repo); err != nil {
				return Result{}, err
			}
		}
		base = Base{Ref: def}
		l.BaseRef = def
	}
	sid := d.triggerSession(t)
	l.Branch = d.branchPrefix() + sid
	unlock, err := d.lease(ctx, sid)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	evs, err := d.runs.Store.Read(ctx, sid, 1)
	if err != nil {
		return Result{}, err
	}
	if len(evs) == 0 && d.resumeFromArtifact {
		// A missing log is a session nobody began; a log that does not
		// verify is refused (ErrTamperedLog), never started over.
		if evs, err = d.loadSession(ctx, repo, sid); errors.Is(err, worktree.ErrNotFound) || errors.Is(err, errBranchGone) {
			evs, err = nil, nil
		}
		if err != nil {
			return Result{SessionID: sid}, err
		}
	}
	if runBegun(evs) {
		return d.redelivered(ctx, repo, sid, evs, l, base)
	}
	// A run of this issue is still working (or waits to be taken over
	// after its replica stopped): a repeated request joins it instead of
	// starting a second session, second pull request and second review.
	if live, ll, ok, err := d.liveSessionOf(ctx, repo, t.Number, sid); err != nil {
		return Result{}, err
	} else if ok {
		if ll.TrackingComment == 0 { // it died before its first pause saved the link
			if ll.TrackingComment, err = d.trackingComment(ctx, repo, t.Number, live); err != nil {
				return Result{}, err
			}
			ll.Issue = t.Number
		}
		_, err := d.gh.CreateComment(ctx, repo, t.Number, renderJoined(t.Author, live, d.commentURL(repo, ll.Issue, ll.TrackingComment), d.trigger()))
		d.log().Info("request joined the live session of its issue", "repo", repo.FullName(), "number", t.Number, "author", t.Author, "session", live, "delivery", t.DeliveryID)
		return Result{Outcome: "replied", Reason: "joined a live session", SessionID: live}, err
	}
	// No run began (an earlier attempt died before its run.started, or
	// none came this far): start it; Start continues the session.

	// An earlier attempt may have posted the tracking comment and died
	// before the session's first event: reuse that comment.
	var cid int64
	if t.Attempt > 1 {
		if cid, err = d.trackingComment(ctx, repo, t.Number, sid); err != nil {
			return Result{}, err
		}
	}
	if cid == 0 {
		if cid, err = d.gh.CreateComment(ctx, repo, t.Number, renderStarting(sid, prompt, d.trigger())); err != nil {
			return Result{}, err
		}
	}
	l.TrackingComment = cid
	wt, err := d.git.Start(ctx, repo, l.Branch, base)
	if err != nil {
		return Result{}, d.failEarly(ctx, repo, l, fmt.Errorf("prepare the worktree: %w", err))
	}
	defer wt.Close()
	eng, x, release, err := d.engine(ctx, EngineRequest{Dir: wt.Dir(), SessionID: sid, Untrusted: l.Untrusted})
	if err != nil {
		return Result{}, d.failEarly(ctx, repo, l, fmt.Errorf("set up the runtime: %w", err))
	}
	defer release()
	sr, err := d.fixRequest(x, cycle.Request{
		SessionID:     sid,
		Prompt:        prompt,
		SessionKey:    fmt.Sprintf("%s#%d", repo.FullName(), t.Number),
		CorrelationID: t.DeliveryID,
		Trigger:       map[string]any{"repo": repo.FullName(), "number": t.Number, "author": t.Author, "delivery_id": t.DeliveryID, "kind": string(t.Kind)},
		Cwd:           wt.Dir(),
	})
	if err != nil {
		return Result{}, d.failEarly(ctx, repo, l, fmt.Errorf("resolve the fix cycle: %w", err))
	}
	out, runErr := d.runs.Start(ctx, eng, sr)
	if runErr != nil && out.Status == "" {
		return Result{}, d.failEarly(ctx, repo, l, runErr)
	}
	return d.publish(ctx, repo, sid, wt, l, out, "started", replay.Usage{}, nil, nil)
}

// triggerSession is the session a new request starts. It derives from
// the delivery ID, so a delivery handled again (its process died mid-way,
// or a replica's outcome was lost) finds the session an earlier attempt
// began instead of starting a second one.
func (d *Dispatcher) triggerSession(t webhook.Trigger) string {
	if t.DeliveryID != "" {
		return deliverySessionID(t.Number, t.DeliveryID)
	}
	return newSessionID(t.Number, d.now())
}

// trackingComment finds the bot's tracking comment of session sid on an
// issue, 0 if there is none.
func (d *Dispatcher) trackingComment(ctx context.Context, repo github.Repo, number int, sid string) (int64, error) {
	cs, err := d.gh.ListComments(ctx, repo, number)
	if err != nil {
		return 0, err
	}
	for _, c := range cs {
		if found, ok := tracking.FindSessionID(c.Body); ok && found == sid && (d.botLogin == "" || strings.EqualFold(c.User, d.botLogin)) {
			return c.ID, nil
		}
	}
	return 0, nil
}

// redelivered handles a `/agent` delivery whose session an earlier attempt
// began (its process was killed, or the replica working it died, or its
// outcome was not recorded): it never starts a second run. A run left
// running is taken over and continues from the log; a stopped run's
// publication is completed, each step looking before it creates
// (recoverSession). cur is the link this attempt computed (the earlier
// one may have died before saving its own), base where the branch starts.
func (d *Dispatcher) redelivered(ctx context.Context, repo github.Repo, sid string, evs []event.Event, cur link, base Base) (Result, error) {
	l, ok := loadLink(evs)
	if !ok {
		l = cur
	}
	return d.recoverSession(ctx, repo, sid, l, &base, "recorded", nil)
}

// followUp starts another run of an existing session (a new request on the
// bot's own PR, pr).
func (d *Dispatcher) followUp(ctx context.Context, repo github.Repo, t webhook.Trigger, sid, prompt string, pr *github.PullRequest) (Result, error) {
	evs, l, unlock, err := d.openSession(ctx, repo, t, sid)
	if err != nil {
		return Result{SessionID: sid}, err
	}
	defer unlock()
	snap, err := replay.Replay(evs)
	if err != nil {
		return Result{}, err
	}
	if snap.RunStatus == replay.RunPaused {
		_, err := d.gh.CreateComment(ctx, repo, t.Number, fmt.Sprintf("@%s this session is waiting for an approval; answer it (or `%s cancel`) before asking for more.", t.Author, d.trigger()))
		return Result{Outcome: "replied", Reason: "paused", SessionID: sid}, err
	}
	wt, err := d.git.Reopen(ctx, repo, l.Branch, "")
	if err != nil {
		return Result{}, err
	}
	defer wt.Close()
	eng, x, release, err := d.engine(ctx, EngineRequest{Dir: wt.Dir(), SessionID: sid, Untrusted: l.Untrusted})
	if err != nil {
		return Result{}, err
	}
	defer release()
	l.Prompt = prompt
	sr, err := d.fixRequest(x, cycle.Request{SessionID: sid, Prompt: prompt, SessionKey: fmt.Sprintf("%s#%d", repo.FullName(), l.Issue), CorrelationID: t.DeliveryID,
		Trigger: map[string]any{"repo": repo.FullName(), "number": t.Number, "author": t.Author, "delivery_id": t.DeliveryID, "kind": string(t.Kind)}, Cwd: wt.Dir()})
	if err != nil {
		return Result{}, err
	}
	out, runErr := d.runs.Start(ctx, eng, sr)
	if runErr != nil && out.Status == "" {
		return Result{}, runErr
	}
	return d.publish(ctx, repo, sid, wt, l, out, "started", snap.Usage, pr, nil)
}

// failEarly reports a session that could not start on its tracking comment.
// A run cut by a graceful stop (run.ErrInterrupted) did start and is
// taken over from its log: its tracking comment is left to the replica
// that takes it over, never told "could not start". So is a run handed
// back because the event store was unavailable (run.ErrStoreUnavailable),
// or a start the store could not record: the delivery waits for the
// store (storeWait) and its retry goes on from the log; nothing failed.
func (d *Dispatcher) failEarly(ctx context.Context, repo github.Repo, l link, cause error) error {
	if errors.Is(cause, run.ErrInterrupted) || errors.Is(cause, store.ErrUnavailable) {
		return cause
	}
	if l.TrackingComment != 0 {
		body := fmt.Sprintf("**agentos** could not start: %s\n\nNothing was changed.", cause.Error())
		if _, sid, ok := worktree.SessionIDInBranch(l.Branch); ok {
			// Kept, so that a retried delivery finds this comment.
			body = tracking.Marker(sid) + "\n" + body
		}
		if err := d.gh.EditComment(ctx, repo, l.TrackingComment, tracking.Fit(body)); err != nil {
			return errors.Join(cause, err)
		}
	}
	return cause
}

// storeWait makes err, when it says the event store was unavailable (a
// run handed back with run.ErrStoreUnavailable, or any read or append
// that outlasted the store's retry bound), a retry that waits: it wraps
// webhook.ErrBusy, so the queue retries the delivery with backoff, counts
// no failure and never gives up on it, as it does for a session another
// replica works. The session's lease is released on the way out, and the
// retry, once the store answers, takes the run over from its log
// (recoverSession). Such an error is never published as a failure.
func storeWait(err error) error {
	if err == nil || !errors.Is(err, store.ErrUnavailable) || errors.Is(err, webhook.ErrBusy) {
		return err
	}
	return fmt.Errorf("%w: the event store is unavailable, the delivery waits for it: %w", webhook.ErrBusy, err)
}

// cancel ends the session of the trigger's issue or pull request, on
// behalf of the trigger's author, wherever its run runs or waits: a run
// of this process or of another replica, a paused run, and a request to
// start one that still waits in the delivery queue (withdrawn there, so
// it never starts) or that a worker is starting right now (cancelled as
// soon as its run has begun: the cancel is retried until then).
func (d *Dispatcher) cancel(ctx context.Context, repo github.Repo, t webhook.Trigger, reason string) (Result, error) {
	return d.cancelOf(ctx, repo, t, reason, func() (string, error) {
		sid, _, err := d.sessionFor(ctx, repo, t)
		return sid, err
	})
}

// cancelOf is cancel with the lookup of the trigger's session given
// (called only when no queued request named the session to cancel).
func (d *Dispatcher) cancelOf(ctx context.Context, repo github.Repo, t webhook.Trigger, reason string, session func() (string, error)) (Result, error) {
	by := t.Author
	withdrawn, starting, err := d.withdrawQueued(ctx, repo, t, by, reason)
	if err != nil {
		return Result{}, err
	}
	// Requests withdrawn now are answered now: a retry of this cancel
	// would not find them again.
	var begun []string
	var fresh []queuedRequest
	for _, w := range withdrawn {
		// An earlier attempt may have begun its run (it waited for a
		// retry, or was handed back by a stopping replica): that session
		// is cancelled like any other.
		if ok, err := d.sessionBegun(ctx, w.SID); err != nil {
			return Result{}, err
		} else if ok {
			begun = append(begun, w.SID)
			continue
		}
		fresh = append(fresh, w)
	}
	if len(fresh) > 0 {
		if err := d.reportWithdrawn(ctx, repo, t, fresh, by, reason); err != nil {
			return Result{}, err
		}
	}
	// A request a worker is starting: its session, once its run began, is
	// cancelled; before that the cancel waits for it (see below).
	var waiting *queuedRequest
	for _, s := range starting {
		ok, err := d.sessionBegun(ctx, s.SID)
		if err != nil {
			return Result{}, err
		}
		if ok {
			begun = append(begun, s.SID)
		} else if waiting == nil {
			waiting = &s
		}
	}
	var res Result
	switch {
	case len(begun) > 0:
		for _, sid := range begun {
			if res, err = d.cancelSession(ctx, repo, t, sid, by, reason); err != nil {
				return res, err
			}
		}
	default:
		sid, err := session()
		if err != nil {
			return Result{}, err
		}
		live := sid != ""
		if live && waiting != nil {
			// Only a run live now is cancelled while a request is being
			// started: it may be the run that request works (a follow-up
			// on the bot's pull request continues its session).
			if live, err = d.sessionLive(ctx, sid); err != nil {
				return Result{SessionID: sid}, err
			}
		}
		if live {
			if res, err = d.cancelSession(ctx, repo, t, sid, by, reason); err != nil {
				return res, err
			}
		}
		if res.Outcome == "" || res.Outcome == "ignored" {
			res = Result{Outcome: "ignored", Reason: "no session", SessionID: sid}
			if len(fresh) > 0 {
				res = Result{Outcome: "withdrawn", Reason: "the queued request was withdrawn", SessionID: fresh[0].SID}
			} else if live {
				res = Result{Outcome: "ignored", Reason: "nothing to cancel", SessionID: sid}
			}
		}
	}
	if waiting != nil {
		// Retried (a busy retry: no failure counted, every couple of
		// seconds) until its run has begun, then cancelled above; or
		// until its worker finished without starting one.
		return res, fmt.Errorf("the request of delivery %s is being started; the cancel waits for its run to begin (%w)", waiting.ID, webhook.ErrBusy)
	}
	return res, nil
}

// sessionLive reports whether session sid's run is running (in this
// process, at another replica, or waiting to be taken over) or paused.
func (d *Dispatcher) sessionLive(ctx context.Context, sid string) (bool, error) {
	if d.runs.Running(sid) {
		return true, nil
	}
	evs, err := d.runs.Store.Read(ctx, sid, 1)
	if err != nil || len(evs) == 0 {
		return false, err
	}
	snap, err := replay.Replay(evs)
	if err != nil {
		return false, err
	}
	return snap.RunStatus == replay.RunRunning || snap.RunStatus == replay.RunPaused, nil
}

// sessionBegun reports whether session sid's run has begun: running in
// this process, or its run.started stored.
func (d *Dispatcher) sessionBegun(ctx context.Context, sid string) (bool, error) {
	if d.runs.Running(sid) {
		return true, nil
	}
	evs, err := d.runs.Store.Read(ctx, sid, 1)
	if err != nil {
		return false, err
	}
	return runBegun(evs), nil
}

// cancelSession cancels the run of session sid: in this process, at
// another replica (asked on the lease), or paused.
func (d *Dispatcher) cancelSession(ctx context.Context, repo github.Repo, t webhook.Trigger, sid, by, reason string) (Result, error) {
	if d.runs.Running(sid) {
		// The run's own flow holds the session and publishes its end;
		// Cancel stops it (the same path as the API) and waits for that.
		out, err := d.runs.Cancel(ctx, sid, by, reason)
		if err != nil && !errors.Is(err, run.ErrNotPaused) {
			return Result{SessionID: sid}, err
		}
		if err == nil {
			return Result{Outcome: "cancelled", SessionID: sid, Status: string(out.Status)}, nil
		}
	}
	_, l, unlock, err := d.openSession(ctx, repo, t, sid)
	if errors.Is(err, ErrSessionBusy) {
		// Another replica works the session: it is asked to cancel the
		// run (it hears of it within seconds), and this delivery is
		// retried until the session is free — then it finds the run
		// cancelled, or cancels it if it paused meanwhile.
		if c, ok := d.leases.(CancelRequester); ok {
			if held, rerr := c.RequestCancel(ctx, sid, by, reason); rerr != nil {
				err = errors.Join(err, rerr)
			} else if held {
				d.log().Info("cancel asked of the replica working the session", "repo", repo.FullName(), "session", sid, "by", by)
			}
		}
	}
	if err != nil {
		return Result{SessionID: sid}, err
	}
	defer unlock()
	out, err := d.runs.Cancel(ctx, sid, by, reason)
	if errors.Is(err, run.ErrNotPaused) {
		return Result{Outcome: "ignored", Reason: "nothing to cancel", SessionID: sid}, nil
	}
	if err != nil {
		return Result{SessionID: sid}, err
	}
	if err := d.saveLink(ctx, sid, l); err != nil {
		return Result{SessionID: sid}, err
	}
	snap, artSHA, err := d.commitArtifact(ctx, repo, sid, nil)
	if err != nil {
		return Result{SessionID: sid}, err
	}
	if l.TrackingComment != 0 {
		if err := d.gh.EditComment(ctx, repo, l.TrackingComment, d.renderTracking("", snap, d.logURL(repo, artSHA, sid))); err != nil {
			return Result{SessionID: sid}, err
		}
	}
	res := Result{Outcome: "cancelled", SessionID: sid, Status: string(out.Status), PR: l.PR, Usage: snap.Usage}
	d.logOutcome(repo, l, res, snap)
	return res, nil
}

func (d *Dispatcher) status(ctx context.Context, repo github.Repo, t webhook.Trigger) (Result, error) {
	sid, _, err := d.sessionFor(ctx, repo, t)
	if err != nil {
		return Result{}, err
	}
	if sid == "" {
		_, err := d.gh.CreateComment(ctx, repo, t.Number, fmt.Sprintf("@%s there is no agentos session for this %s yet. Start one with `%s <what to do>`.", t.Author, kindWord(t.IsPR), d.trigger()))
		return Result{Outcome: "status"}, err
	}
	evs, err := d.loadSession(ctx, repo, sid)
	if err != nil {
		return Result{SessionID: sid}, err
	}
	l, _ := loadLink(evs)
	snap, err := replay.Replay(evs)
	if err != nil {
		return Result{SessionID: sid}, err
	}
	_, err = d.gh.CreateComment(ctx, repo, t.Number, d.renderTracking("", snap, ""))
	return Result{Outcome: "status", SessionID: sid, Status: string(snap.RunStatus), PR: l.PR}, err
}

// help answers `/agent help` with the help rendered from the route table.
func (d *Dispatcher) help(ctx context.Context, repo github.Repo, t webhook.Trigger) (Result, error) {
	_, err := d.gh.CreateComment(ctx, repo, t.Number, d.routes.help(d.trigger()))
	return Result{Outcome: "help"}, err
}

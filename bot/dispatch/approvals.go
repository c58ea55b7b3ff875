package dispatch

// Answers to a paused session's approval requests: an Approve or
// Request-changes review on the session's pull request, and `/agent
// approve|deny` comments. What happens on an Approve review is here, from
// onApproveReview to resume.

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/agentos/agentos/bot/github"
	"strings"

	"github.com/agentos/agentos/bot/auth"
	"github.com/agentos/agentos/bot/tracking"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/replay"
)

// answer is a maintainer's answer to pending approvals.
type answer struct {
	decision string // approve | deny
	id       string
	all      bool
	reason   string
}

func (d *Dispatcher) answer(ctx context.Context, repo github.Repo, t webhook.Trigger, a answer) (Result, error) {
	sid, pr, err := d.sessionFor(ctx, repo, t)
	if err != nil {
		return Result{}, err
	}
	if sid == "" {
		_, err := d.gh.CreateComment(ctx, repo, t.Number, fmt.Sprintf("@%s there is no agentos session here waiting for an answer.", t.Author))
		return Result{Outcome: "replied", Reason: "no session"}, err
	}
	return d.answerSession(ctx, repo, t, sid, pr, a)
}

// answerSession answers approvals of session sid (pr is the session's pull
// request when the trigger came from it).
func (d *Dispatcher) answerSession(ctx context.Context, repo github.Repo, t webhook.Trigger, sid string, pr *github.PullRequest, a answer) (Result, error) {
	evs, l, unlock, err := d.openSession(ctx, repo, t, sid)
	if err != nil {
		return Result{SessionID: sid}, err
	}
	defer unlock()
	snap, err := replay.Replay(evs)
	if err != nil {
		return Result{SessionID: sid}, err
	}
	recorded := t.Attempt > 1 && answeredBy(evs, t.DeliveryID)
	if recorded && !answerUnapplied(evs, snap, t.DeliveryID) {
		// An earlier attempt of this delivery applied the answer: it is
		// never applied again (it could approve a later request); what
		// that attempt left unfinished is finished.
		if snap.RunStatus == replay.RunPaused || d.recoverable(snap, l, t, sid) {
			return d.recoverSession(ctx, repo, sid, l, nil, "answered", pr)
		}
		return Result{Outcome: "recorded", Reason: "this answer was applied by an earlier attempt", SessionID: sid, Status: string(snap.RunStatus), PR: l.PR}, nil
	}
	// Otherwise, when recorded, an earlier attempt recorded this answer and
	// died before it resolved anything: the approvals it answered are
	// still the pending ones (a run asks for new approvals only after it
	// resumed), so it is applied now, as the first attempt would have,
	// without recording it again.
	if recover := d.recoverable(snap, l, t, sid); recover {
		// An earlier attempt of this answer (or of the run's publication)
		// stopped half-way: finish that instead of answering something the
		// maintainer was not shown.
		return d.recoverSession(ctx, repo, sid, l, nil, "answered", pr)
	}
	if snap.RunStatus != replay.RunPaused || len(snap.PendingApprovals) == 0 {
		_, err := d.gh.CreateComment(ctx, repo, t.Number, fmt.Sprintf("@%s nothing in session `%s` is waiting for approval (it is %s).", t.Author, sid, orWord(string(snap.RunStatus), "idle")))
		return Result{Outcome: "replied", Reason: "not paused", SessionID: sid}, err
	}
	if pr == nil && l.PR != 0 {
		p, err := d.gh.PullRequest(ctx, repo, l.PR)
		if err != nil {
			return Result{SessionID: sid}, err
		}
		pr = &p
	}
	if pr != nil && pr.State == "closed" {
		_, err := d.gh.CreateComment(ctx, repo, t.Number, fmt.Sprintf("@%s the pull request of session `%s` is closed; the session was cancelled.", t.Author, sid))
		return Result{Outcome: "replied", Reason: "closed", SessionID: sid}, err
	}
	head := pendingRevision(snap)
	requestedOn, err := d.requestedOn(ctx, repo, pr, l, sid)
	if err != nil {
		return Result{SessionID: sid}, err
	}
	if t.DeliveryID != "" && !recorded {
		// Which delivery answered: a retried delivery must not answer again.
		if err := d.annotate(ctx, sid, answeredKind, "answer", map[string]any{"delivery_id": t.DeliveryID, "by": t.Author, "decision": a.decision}); err != nil {
			return Result{SessionID: sid}, err
		}
	}
	if pr != nil && requestedOn != "" && pr.HeadSHA != requestedOn {
		// Someone pushed after the request: the approvals no longer
		// describe the branch. Mark them stale; resuming asks again.
		for _, p := range snap.PendingApprovals {
			if err := d.runs.Resolve(ctx, sid, p.ID, "stale", t.Author, "the branch moved to "+short(pr.HeadSHA)+" after approval was requested"); err != nil {
				return Result{SessionID: sid}, err
			}
		}
		head = ""
	} else {
		targets, unknown := pick(snap.PendingApprovals, l.RequestedIDs, a)
		if unknown != "" {
			_, err := d.gh.CreateComment(ctx, repo, t.Number, tracking.Fit(fmt.Sprintf("@%s `%s` is not a pending approval of session `%s`. Pending: %s.", t.Author, unknown, sid, pendingList(snap))))
			return Result{Outcome: "replied", Reason: "unknown approval", SessionID: sid}, err
		}
		for _, id := range targets {
			if err := d.runs.Resolve(ctx, sid, id, a.decision, t.Author, a.reason); err != nil {
				return Result{SessionID: sid}, err
			}
		}
		if len(targets) < len(snap.PendingApprovals) {
			// Others still wait: record and show, resume later.
			snap, artSHA, err := d.commitArtifact(ctx, repo, sid, nil)
			if err != nil {
				return Result{SessionID: sid}, err
			}
			err = d.gh.EditComment(ctx, repo, l.TrackingComment, d.renderTracking("", snap, d.logURL(repo, artSHA, sid)))
			return Result{Outcome: "answered", SessionID: sid, Status: "paused", PR: l.PR}, err
		}
	}
	return d.resume(ctx, repo, sid, l, head, snap.Usage, pr)
}

// requestedOn is the head the session's latest approval request was made
// on: the link records it; a link without it (the log on the session
// branch, or written before it did) is completed from GitHub's record,
// the request review's commit.
func (d *Dispatcher) requestedOn(ctx context.Context, repo github.Repo, pr *github.PullRequest, l link, sid string) (string, error) {
	if pr == nil {
		return "", nil
	}
	if l.RequestedOn != "" {
		return l.RequestedOn, nil
	}
	return d.gh.ReviewCommit(ctx, repo, pr.Number, d.botLogin, tracking.ReviewMarker(sid))
}

// resume reopens the session's worktree and continues its run; pr is the
// session's pull request when known.
func (d *Dispatcher) resume(ctx context.Context, repo github.Repo, sid string, l link, head string, before replay.Usage, pr *github.PullRequest) (Result, error) {
	wt, err := d.git.Reopen(ctx, repo, l.Branch, head)
	if err != nil {
		return Result{SessionID: sid}, err
	}
	defer wt.Close()
	eng, _, release, err := d.engine(ctx, EngineRequest{Dir: wt.Dir(), SessionID: sid, Untrusted: l.Untrusted})
	if err != nil {
		return Result{SessionID: sid}, err
	}
	defer release()
	out, runErr := d.runs.Resume(ctx, eng, sid, wt.Dir(), "")
	if runErr != nil && out.Status == "" {
		return Result{SessionID: sid}, runErr
	}
	return d.publish(ctx, repo, sid, wt, l, out, "answered", before, pr, nil)
}

// pendingRevision is the commit the pending approvals were computed
// against (HEAD before the bot's checkpoint commit).
func pendingRevision(s replay.Snapshot) string {
	for _, p := range s.PendingApprovals {
		var rev struct {
			Commit string `json:"commit"`
		}
		if json.Unmarshal(p.Revision, &rev) == nil && rev.Commit != "" {
			return rev.Commit
		}
	}
	return ""
}

// pick chooses the approvals an answer applies to: one by id, or all those
// listed in the latest request (all pending if the request is unknown).
func pick(pending []replay.Approval, requested []string, a answer) (ids []string, unknown string) {
	if a.id != "" && !a.all {
		for _, p := range pending {
			if p.ID == a.id {
				return []string{p.ID}, ""
			}
		}
		return nil, a.id
	}
	want := map[string]bool{}
	for _, id := range requested {
		want[id] = true
	}
	for _, p := range pending {
		if len(want) == 0 || want[p.ID] {
			ids = append(ids, p.ID)
		}
	}
	if len(ids) == 0 { // the latest request is fully answered: take all
		for _, p := range pending {
			ids = append(ids, p.ID)
		}
	}
	return ids, ""
}

// onApproveReview handles an Approve review on a session's pull request:
// it approves every pending action of the latest request, and the run
// resumes (answer → answerSession → resume). A review from someone who
// may not approve is recorded in the session's log and ignored.
func (d *Dispatcher) onApproveReview(ctx context.Context, repo github.Repo, t webhook.Trigger) (Result, error) {
	return d.reviewAnswer(ctx, repo, t, auth.ActionApprove, answer{decision: "approve", all: true})
}

// onChangesRequested handles a Request-changes review on a session's pull
// request: it denies the pending actions, with the review's text as the
// reason the agent is given.
func (d *Dispatcher) onChangesRequested(ctx context.Context, repo github.Repo, t webhook.Trigger) (Result, error) {
	reason := strings.TrimSpace(t.Body)
	if reason == "" {
		reason = "changes requested without a comment"
	}
	return d.reviewAnswer(ctx, repo, t, auth.ActionDeny, answer{decision: "deny", all: true, reason: reason})
}

// reviewAnswer answers the session of the review's pull request when the
// reviewer may (need); a refusal gets no reply: it is recorded in the
// session's log.
func (d *Dispatcher) reviewAnswer(ctx context.Context, repo github.Repo, t webhook.Trigger, need auth.Action, a answer) (Result, error) {
	sid, _, err := d.sessionFor(ctx, repo, t)
	if err != nil || sid == "" {
		return Result{Outcome: "ignored", Reason: "not a session pull request"}, err
	}
	if res, refused, err := d.authorize(ctx, repo, t, need, false); refused || err != nil {
		res.SessionID = sid
		if err == nil {
			unlock, lerr := d.lease(ctx, sid)
			if lerr != nil {
				return res, lerr
			}
			defer unlock()
			if _, lerr := d.loadSession(ctx, repo, sid); lerr != nil {
				return res, lerr
			}
			err = d.annotate(ctx, sid, ignoredKind, "review", map[string]any{"by": t.Author, "review_id": t.ReviewID, "state": t.ReviewState, "reason": res.Reason, "delivery_id": t.DeliveryID})
		}
		return res, err
	}
	return d.answer(ctx, repo, t, a)
}

func pendingList(s replay.Snapshot) string {
	var ids []string
	for _, p := range s.PendingApprovals {
		ids = append(ids, "`"+p.ID+"`")
	}
	return strings.Join(ids, ", ")
}

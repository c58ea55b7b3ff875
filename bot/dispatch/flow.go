package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/agentos/agentos/bot/auth"
	"github.com/agentos/agentos/bot/tracking"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/workflow/cycle"
)

// startRun begins a session for `/agent <prompt>`. On the bot's own PR it
// starts a follow-up run of that PR's session instead.
func (d *Dispatcher) startRun(ctx context.Context, repo Repo, t webhook.Trigger, prompt string) (Result, error) {
	if d.Preflight != nil {
		if err := d.Preflight(ctx); err != nil {
			d.log().Error("run not started: preflight failed", "repo", repo.FullName(), "number", t.Number, "author", t.Author, "delivery", t.DeliveryID, "permanent", errors.Is(err, webhook.ErrPermanent), "err", err)
			return Result{Outcome: "not_started", Reason: "preflight: " + err.Error()}, fmt.Errorf("%w: %w", ErrPreflight, err)
		}
	}
	if t.IssueState == "closed" {
		_, err := d.GitHub.CreateComment(ctx, repo, t.Number, fmt.Sprintf("@%s this %s is closed, so I won't start work here. Reopen it, or ask on an open one.", t.Author, kindWord(t.IsPR)))
		return Result{Outcome: "replied", Reason: "closed"}, err
	}
	base := Base{}
	l := link{Repo: repo.FullName(), Issue: t.Number, Prompt: prompt, Installation: t.InstallationID}
	if t.IsPR {
		pr, err := d.pullRequest(ctx, repo, t)
		if err != nil {
			return Result{}, err
		}
		if sid, ok := sessionFromBranch(pr.HeadRef); ok && pr.HeadRepo == repo.FullName() {
			return d.followUp(ctx, repo, t, sid, prompt, &pr)
		}
		if pr.HeadRepo == repo.FullName() {
			base = Base{Ref: pr.HeadRef, SHA: pr.HeadSHA}
			l.BaseRef = pr.HeadRef
		} else {
			// A fork: take the head through the base repository's
			// refs/pull/N/head, and put the work on our own branch.
			base = Base{PullNumber: pr.Number, SHA: pr.HeadSHA}
			l.BaseRef = pr.BaseRef
			l.Untrusted = true
		}
	} else {
		// The payload names the default branch; ask only when it does not.
		def := t.DefaultBranch
		if def == "" {
			var err error
			if def, err = d.GitHub.DefaultBranch(ctx, repo); err != nil {
				return Result{}, err
			}
		}
		base = Base{Ref: def}
		l.BaseRef = def
	}
	sid := d.triggerSession(t)
	l.Branch = BranchPrefix + sid
	unlock, err := d.lease(ctx, sid)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	evs, err := d.Runs.Store.Read(ctx, sid, 1)
	if err != nil {
		return Result{}, err
	}
	if runBegun(evs) {
		return d.redelivered(ctx, repo, sid, evs, l, base)
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
		if cid, err = d.GitHub.CreateComment(ctx, repo, t.Number, renderStarting(sid, prompt, d.trigger())); err != nil {
			return Result{}, err
		}
	}
	l.TrackingComment = cid
	wt, err := d.Git.Start(ctx, repo, l.Branch, base)
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
	out, runErr := d.Runs.Start(ctx, eng, sr)
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
func (d *Dispatcher) trackingComment(ctx context.Context, repo Repo, number int, sid string) (int64, error) {
	cs, err := d.GitHub.ListComments(ctx, repo, number)
	if err != nil {
		return 0, err
	}
	for _, c := range cs {
		if found, ok := tracking.FindSessionID(c.Body); ok && found == sid && (d.BotLogin == "" || strings.EqualFold(c.User, d.BotLogin)) {
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
func (d *Dispatcher) redelivered(ctx context.Context, repo Repo, sid string, evs []event.Event, cur link, base Base) (Result, error) {
	l, ok := loadLink(evs)
	if !ok {
		l = cur
	}
	return d.recoverSession(ctx, repo, sid, l, &base, "recorded", nil)
}

// followUp starts another run of an existing session (a new request on the
// bot's own PR, pr).
func (d *Dispatcher) followUp(ctx context.Context, repo Repo, t webhook.Trigger, sid, prompt string, pr *PullRequest) (Result, error) {
	unlock, err := d.lease(ctx, sid)
	if err != nil {
		return Result{SessionID: sid}, err
	}
	defer unlock()
	evs, err := d.loadSession(ctx, repo, sid)
	if err != nil {
		return Result{}, err
	}
	l, _ := loadLink(evs)
	d.adopt(repo, t, &l)
	snap, err := replay.Replay(evs)
	if err != nil {
		return Result{}, err
	}
	if snap.RunStatus == "paused" {
		_, err := d.GitHub.CreateComment(ctx, repo, t.Number, fmt.Sprintf("@%s this session is waiting for an approval; answer it (or `%s cancel`) before asking for more.", t.Author, d.trigger()))
		return Result{Outcome: "replied", Reason: "paused", SessionID: sid}, err
	}
	wt, err := d.Git.Reopen(ctx, repo, l.Branch, "")
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
	out, runErr := d.Runs.Start(ctx, eng, sr)
	if runErr != nil && out.Status == "" {
		return Result{}, runErr
	}
	return d.publish(ctx, repo, sid, wt, l, out, "started", snap.Usage, pr, nil)
}

// failEarly reports a session that could not start on its tracking comment.
func (d *Dispatcher) failEarly(ctx context.Context, repo Repo, l link, cause error) error {
	if l.TrackingComment != 0 {
		body := fmt.Sprintf("**agentos** could not start: %s\n\nNothing was changed.", cause.Error())
		if sid, ok := sessionFromBranch(l.Branch); ok {
			// Kept, so that a retried delivery finds this comment.
			body = tracking.Marker(sid) + "\n" + body
		}
		if err := d.GitHub.EditComment(ctx, repo, l.TrackingComment, body); err != nil {
			return errors.Join(cause, err)
		}
	}
	return cause
}

// publish makes the outcome of a run visible: commit and push the work,
// open the draft PR (with its description) or mark it ready, request
// approvals as a review, record the link, commit the log to the artifact
// branch, and edit the PR description and the tracking comment. known is
// the session's pull request as the trigger's payload (or an earlier
// call) showed it, nil when unknown: it spares reading it back.
//
// again is set when a retried delivery publishes what an earlier attempt
// may have published in part: each step looks on GitHub before it
// creates (the PR by its head branch, the approval review by its marker
// and approval ids), so nothing is published twice.
func (d *Dispatcher) publish(ctx context.Context, repo Repo, sid string, wt Worktree, l link, out run.Outcome, outcome string, before replay.Usage, known *PullRequest, again *recovery) (Result, error) {
	res := Result{Outcome: outcome, SessionID: sid, Status: out.Status, Branch: l.Branch}
	snap, lastSeq, err := d.snapshotAt(ctx, sid)
	if err != nil {
		return res, err
	}
	msg := commitMessageAt(l.Prompt, out, lastSeq)
	if again != nil && l.PR == 0 {
		pr, found, err := d.GitHub.PullRequestByHead(ctx, repo, l.Branch)
		if err != nil {
			return res, err
		}
		if found {
			l.PR, l.PRNodeID, l.PRURL = pr.Number, pr.NodeID, pr.URL
			known = &pr
		}
	}
	// The draft PR needs a commit; later pauses commit only changes. A
	// branch an earlier attempt pushed has its commit already.
	empty := out.Status == "paused" && l.PR == 0 && (again == nil || !again.onRemote)
	head, made, err := wt.Commit(ctx, msg, out.RunID, empty)
	if err != nil {
		return res, err
	}
	if made {
		if err := wt.Push(ctx); err != nil {
			return res, err
		}
	}
	created := false
	if l.PR == 0 && (made || out.Status == "paused" || (again != nil && again.onRemote)) {
		pr, err := d.GitHub.CreateDraftPR(ctx, repo, l.Branch, l.BaseRef, "agentos: "+oneLine(l.Prompt, 72), renderPRBody(l, snap, d.logRefURL(repo, sid), d.trigger()))
		if err != nil {
			return res, err
		}
		l.PR, l.PRNodeID, l.PRURL = pr.Number, pr.NodeID, pr.URL
		known, created = &pr, true
	}
	if out.Status == "paused" {
		l.RequestedIDs = l.RequestedIDs[:0]
		for _, a := range snap.PendingApprovals {
			l.RequestedIDs = append(l.RequestedIDs, a.ID)
		}
		l.RequestedOn = ""
		if d.Git.ArtifactBranch() != "" {
			l.RequestedOn = head // the review below is made on it
		}
	}
	if out.Status == "completed" && l.PR != 0 && !l.Ready {
		pr := PullRequest{Number: l.PR, NodeID: l.PRNodeID, Draft: true}
		if known != nil && known.Number == l.PR {
			pr = *known
		} else if pr, err = d.GitHub.PullRequest(ctx, repo, l.PR); err != nil {
			return res, err
		}
		if pr.Draft {
			if err := d.GitHub.MarkReady(ctx, repo, pr); err != nil {
				return res, err
			}
		}
		l.Ready = true
	}
	res.PR = l.PR
	if err := d.saveLink(ctx, sid, l); err != nil {
		return res, err
	}
	snap, artSHA, err := d.commitArtifact(ctx, repo, sid, wt)
	if err != nil {
		return res, err
	}
	if d.Git.ArtifactBranch() == "" {
		head = artSHA // the log went on the session branch
	}
	if out.Status == "paused" {
		posted := false
		if again != nil && !created {
			if posted, err = d.reviewPosted(ctx, repo, l.PR, sid, snap); err != nil {
				return res, err
			}
		}
		// GitHub records the review's commit: that is the head the
		// approvals bind to (see answer).
		if !posted {
			if _, err := d.GitHub.CreateReview(ctx, repo, l.PR, head, renderApprovalReview(d.trigger(), snap, head)); err != nil {
				return res, err
			}
		}
		if l.RequestedOn == "" {
			// On the session branch the head is the log's own commit: the
			// link learns it now (in the store; the next log commit
			// carries it).
			l.RequestedOn = head
			if err := d.saveLink(ctx, sid, l); err != nil {
				return res, err
			}
		}
	}
	res.Usage = snap.Usage
	res.Spent = replay.Usage{InputTokens: snap.Usage.InputTokens - before.InputTokens, OutputTokens: snap.Usage.OutputTokens - before.OutputTokens, CostUSD: snap.Usage.CostUSD - before.CostUSD}
	logURL := d.logURL(repo, artSHA, sid)
	res.LogURL = logURL
	if l.PR != 0 && !created {
		if err := d.GitHub.EditPRBody(ctx, repo, l.PR, renderPRBody(l, snap, d.logRefURL(repo, sid), d.trigger())); err != nil {
			return res, err
		}
	}
	if l.TrackingComment != 0 {
		if err := d.GitHub.EditComment(ctx, repo, l.TrackingComment, d.renderTracking(head, snap, logURL)); err != nil {
			return res, err
		}
	}
	d.logOutcome(repo, l, res, snap)
	return res, nil
}

// snapshotAt is the session's state and the seq of its last event.
func (d *Dispatcher) snapshotAt(ctx context.Context, sid string) (replay.Snapshot, int64, error) {
	evs, err := d.Runs.Store.Read(ctx, sid, 1)
	if err != nil {
		return replay.Snapshot{}, 0, err
	}
	if len(evs) == 0 {
		return replay.Snapshot{}, 0, fmt.Errorf("session %s has no events", sid)
	}
	snap, err := replay.Replay(evs)
	return snap, evs[len(evs)-1].Seq, err
}

// commitArtifact exports the session's log and snapshot to the artifact
// branch.
func (d *Dispatcher) commitArtifact(ctx context.Context, repo Repo, sid string, wt Worktree) (replay.Snapshot, string, error) {
	var buf bytes.Buffer
	if _, err := store.Export(ctx, d.Runs.Store, sid, &buf); err != nil {
		return replay.Snapshot{}, "", err
	}
	snap, err := replay.ReplayReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		return replay.Snapshot{}, "", err
	}
	sj, err := json.MarshalIndent(snap, "", "  ")
	if err != nil {
		return replay.Snapshot{}, "", err
	}
	sha, err := d.Git.CommitArtifact(ctx, repo, sid, wt, buf.Bytes(), append(sj, '\n'))
	return snap, sha, err
}

// logRefURL links the session's log on the branch that keeps it (the
// latest log, whatever commit): the PR description uses it, so that it is
// written once with the PR and need not change with every log commit.
func (d *Dispatcher) logRefURL(repo Repo, sid string) string {
	ref := d.Git.ArtifactBranch()
	if ref == "" {
		ref = BranchPrefix + sid
	}
	return d.logURL(repo, ref, sid)
}

func (d *Dispatcher) logURL(repo Repo, commit, sid string) string {
	server := d.ServerURL
	if server == "" {
		server = "https://github.com"
	}
	dir := "sessions/" + sid
	if d.Git.ArtifactBranch() == "" {
		dir = ".agent/sessions/" + sid
	}
	return fmt.Sprintf("%s/%s/blob/%s/%s/events.jsonl", strings.TrimRight(server, "/"), repo.FullName(), commit, dir)
}

// answer is a maintainer's answer to pending approvals.
type answer struct {
	decision string // approve | deny
	id       string
	all      bool
	reason   string
}

// sessionFor finds the session a trigger on issue or PR number refers to:
// the session of a bot PR's branch, or the latest session started from that
// issue. A session this store has never seen (started by a GitHub Action
// run on another machine, or by another data directory) is found by its
// branch on the remote and imported from its artifact log.
func (d *Dispatcher) sessionFor(ctx context.Context, repo Repo, t webhook.Trigger) (string, *PullRequest, error) {
	number := t.Number
	if t.IsPR {
		pr, err := d.pullRequest(ctx, repo, t)
		if err != nil {
			return "", nil, err
		}
		if sid, ok := sessionFromBranch(pr.HeadRef); ok && pr.HeadRepo == repo.FullName() {
			return sid, &pr, nil
		}
	}
	infos, err := d.Runs.Store.Sessions(ctx)
	if err != nil {
		return "", nil, err
	}
	prefix := fmt.Sprintf("%d-", number)
	sort.Slice(infos, func(i, j int) bool { return infos[i].LastTS > infos[j].LastTS })
	for _, in := range infos {
		if !strings.HasPrefix(in.SessionID, prefix) {
			continue
		}
		evs, err := d.Runs.Store.Read(ctx, in.SessionID, 1)
		if err != nil {
			return "", nil, err
		}
		if l, ok := loadLink(evs); ok && l.Repo == repo.FullName() && l.Issue == number {
			return in.SessionID, nil, nil
		}
	}
	sid, err := d.remoteSessionFor(ctx, repo, number)
	return sid, nil, err
}

// pullRequest is the trigger's pull request: as its payload describes it
// (reviews, line comments and pull_request events carry it), or read from
// GitHub (a comment on a pull request carries only its number).
func (d *Dispatcher) pullRequest(ctx context.Context, repo Repo, t webhook.Trigger) (PullRequest, error) {
	if pr, ok := prFromTrigger(t); ok {
		return pr, nil
	}
	return d.GitHub.PullRequest(ctx, repo, t.Number)
}

func prFromTrigger(t webhook.Trigger) (PullRequest, bool) {
	if !t.IsPR || t.HeadRef == "" || t.HeadSHA == "" {
		return PullRequest{}, false
	}
	return PullRequest{Number: t.Number, NodeID: t.PRNodeID, URL: t.PRURL, HeadRef: t.HeadRef, HeadSHA: t.HeadSHA,
		HeadRepo: t.HeadRepo, BaseRef: t.BaseRef, State: t.IssueState, Draft: t.Draft}, true
}

// remoteSessionFor finds the latest session of issue number among the
// remote's session branches, importing each one's log (verified, and
// refused if it was tampered with) to learn which issue it belongs to and
// when it last moved. A branch whose log cannot be loaded (its run
// committed none yet, or keeps it on the session branch and is gone) is
// passed over with a warning.
func (d *Dispatcher) remoteSessionFor(ctx context.Context, repo Repo, number int) (string, error) {
	branches, err := d.Git.SessionBranches(ctx, repo, number)
	if err != nil {
		return "", fmt.Errorf("list session branches: %w", err)
	}
	var best, bestTS string
	for _, b := range branches {
		sid, ok := sessionFromBranch(b)
		if !ok {
			continue
		}
		unlock := d.lock(sid)
		evs, err := d.loadSession(ctx, repo, sid)
		unlock()
		if err != nil {
			if errors.Is(err, ErrTamperedLog) || ctx.Err() != nil {
				return "", err
			}
			d.log().Warn("session branch without a loadable log", "repo", repo.FullName(), "branch", b, "err", err)
			continue
		}
		if l, ok := loadLink(evs); !ok || l.Repo != repo.FullName() || l.Issue != number || len(evs) == 0 {
			continue
		}
		if ts := evs[len(evs)-1].TS; best == "" || ts > bestTS {
			best, bestTS = sid, ts
		}
	}
	return best, nil
}

func (d *Dispatcher) answer(ctx context.Context, repo Repo, t webhook.Trigger, a answer) (Result, error) {
	sid, pr, err := d.sessionFor(ctx, repo, t)
	if err != nil {
		return Result{}, err
	}
	if sid == "" {
		_, err := d.GitHub.CreateComment(ctx, repo, t.Number, fmt.Sprintf("@%s there is no agentos session here waiting for an answer.", t.Author))
		return Result{Outcome: "replied", Reason: "no session"}, err
	}
	return d.answerSession(ctx, repo, t, sid, pr, a)
}

// answerSession answers approvals of session sid (pr is the session's pull
// request when the trigger came from it).
func (d *Dispatcher) answerSession(ctx context.Context, repo Repo, t webhook.Trigger, sid string, pr *PullRequest, a answer) (Result, error) {
	unlock, err := d.lease(ctx, sid)
	if err != nil {
		return Result{SessionID: sid}, err
	}
	defer unlock()
	evs, err := d.loadSession(ctx, repo, sid)
	if err != nil {
		return Result{SessionID: sid}, err
	}
	l, _ := loadLink(evs)
	d.adopt(repo, t, &l)
	snap, err := replay.Replay(evs)
	if err != nil {
		return Result{SessionID: sid}, err
	}
	recorded := t.Attempt > 1 && answeredBy(evs, t.DeliveryID)
	if recorded && !answerUnapplied(evs, snap, t.DeliveryID) {
		// An earlier attempt of this delivery applied the answer: it is
		// never applied again (it could approve a later request); what
		// that attempt left unfinished is finished.
		if snap.RunStatus == "paused" || d.recoverable(snap, l, t, sid) {
			return d.recoverSession(ctx, repo, sid, l, nil, "answered", pr)
		}
		return Result{Outcome: "recorded", Reason: "this answer was applied by an earlier attempt", SessionID: sid, Status: snap.RunStatus, PR: l.PR}, nil
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
	if snap.RunStatus != "paused" || len(snap.PendingApprovals) == 0 {
		_, err := d.GitHub.CreateComment(ctx, repo, t.Number, fmt.Sprintf("@%s nothing in session `%s` is waiting for approval (it is %s).", t.Author, sid, orWord(snap.RunStatus, "idle")))
		return Result{Outcome: "replied", Reason: "not paused", SessionID: sid}, err
	}
	if pr == nil && l.PR != 0 {
		p, err := d.GitHub.PullRequest(ctx, repo, l.PR)
		if err != nil {
			return Result{SessionID: sid}, err
		}
		pr = &p
	}
	if pr != nil && pr.State == "closed" {
		_, err := d.GitHub.CreateComment(ctx, repo, t.Number, fmt.Sprintf("@%s the pull request of session `%s` is closed; the session was cancelled.", t.Author, sid))
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
			if err := d.Runs.Resolve(ctx, sid, p.ID, "stale", t.Author, "the branch moved to "+short(pr.HeadSHA)+" after approval was requested"); err != nil {
				return Result{SessionID: sid}, err
			}
		}
		head = ""
	} else {
		targets, unknown := pick(snap.PendingApprovals, l.RequestedIDs, a)
		if unknown != "" {
			_, err := d.GitHub.CreateComment(ctx, repo, t.Number, fmt.Sprintf("@%s `%s` is not a pending approval of session `%s`. Pending: %s.", t.Author, unknown, sid, pendingList(snap)))
			return Result{Outcome: "replied", Reason: "unknown approval", SessionID: sid}, err
		}
		for _, id := range targets {
			if err := d.Runs.Resolve(ctx, sid, id, a.decision, t.Author, a.reason); err != nil {
				return Result{SessionID: sid}, err
			}
		}
		if len(targets) < len(snap.PendingApprovals) {
			// Others still wait: record and show, resume later.
			snap, artSHA, err := d.commitArtifact(ctx, repo, sid, nil)
			if err != nil {
				return Result{SessionID: sid}, err
			}
			err = d.GitHub.EditComment(ctx, repo, l.TrackingComment, d.renderTracking("", snap, d.logURL(repo, artSHA, sid)))
			return Result{Outcome: "answered", SessionID: sid, Status: "paused", PR: l.PR}, err
		}
	}
	return d.resume(ctx, repo, sid, l, head, snap.Usage, pr)
}

// requestedOn is the head the session's latest approval request was made
// on: the link records it; a link without it (the log on the session
// branch, or written before it did) is completed from GitHub's record,
// the request review's commit.
func (d *Dispatcher) requestedOn(ctx context.Context, repo Repo, pr *PullRequest, l link, sid string) (string, error) {
	if pr == nil {
		return "", nil
	}
	if l.RequestedOn != "" {
		return l.RequestedOn, nil
	}
	return d.GitHub.ReviewCommit(ctx, repo, pr.Number, d.BotLogin, tracking.ReviewMarker(sid))
}

// resume reopens the session's worktree and continues its run; pr is the
// session's pull request when known.
func (d *Dispatcher) resume(ctx context.Context, repo Repo, sid string, l link, head string, before replay.Usage, pr *PullRequest) (Result, error) {
	wt, err := d.Git.Reopen(ctx, repo, l.Branch, head)
	if err != nil {
		return Result{SessionID: sid}, err
	}
	defer wt.Close()
	eng, _, release, err := d.engine(ctx, EngineRequest{Dir: wt.Dir(), SessionID: sid, Untrusted: l.Untrusted})
	if err != nil {
		return Result{SessionID: sid}, err
	}
	defer release()
	out, runErr := d.Runs.Resume(ctx, eng, sid, wt.Dir(), "")
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

func (d *Dispatcher) onReview(ctx context.Context, repo Repo, t webhook.Trigger) (Result, error) {
	switch t.ReviewState {
	case "approved", "changes_requested":
	case "commented":
		if strings.TrimSpace(t.Body) == "" {
			return Result{Outcome: "ignored", Reason: "empty review"}, nil
		}
		return d.onComment(ctx, repo, t)
	default:
		return Result{Outcome: "ignored", Reason: "review " + t.ReviewState}, nil
	}
	sid, _, err := d.sessionFor(ctx, repo, t)
	if err != nil || sid == "" {
		return Result{Outcome: "ignored", Reason: "not a session pull request"}, err
	}
	// A review from someone without write access is recorded and ignored:
	// it neither approves nor denies, and gets no reply.
	action := auth.ActionApprove
	if t.ReviewState == "changes_requested" {
		action = auth.ActionDeny
	}
	if res, refused, err := d.authorize(ctx, repo, t, action, false); refused || err != nil {
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
	if t.ReviewState == "approved" {
		return d.answer(ctx, repo, t, answer{decision: "approve", all: true})
	}
	reason := strings.TrimSpace(t.Body)
	if reason == "" {
		reason = "changes requested without a comment"
	}
	return d.answer(ctx, repo, t, answer{decision: "deny", all: true, reason: reason})
}

func (d *Dispatcher) onPRClosed(ctx context.Context, repo Repo, t webhook.Trigger) (Result, error) {
	sid, _, err := d.sessionFor(ctx, repo, t)
	if err != nil || sid == "" {
		return Result{Outcome: "ignored", Reason: "not a session pull request"}, err
	}
	t.Author = orWord(t.Author, "github")
	return d.cancel(ctx, repo, t, "the pull request was closed")
}

func (d *Dispatcher) onPRSynchronize(ctx context.Context, repo Repo, t webhook.Trigger) (Result, error) {
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
	if snap.RunStatus != "paused" || pr == nil {
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

// cancel ends the paused session of the trigger's issue or pull request,
// on behalf of the trigger's author.
func (d *Dispatcher) cancel(ctx context.Context, repo Repo, t webhook.Trigger, reason string) (Result, error) {
	by := t.Author
	sid, _, err := d.sessionFor(ctx, repo, t)
	if err != nil {
		return Result{}, err
	}
	if sid == "" {
		return Result{Outcome: "ignored", Reason: "no session"}, nil
	}
	if d.Runs.Running(sid) {
		// The run's own flow holds the session and publishes its end;
		// Cancel stops it (the same path as the API) and waits for that.
		out, err := d.Runs.Cancel(ctx, sid, by, reason)
		if err != nil && !errors.Is(err, run.ErrNotPaused) {
			return Result{SessionID: sid}, err
		}
		if err == nil {
			return Result{Outcome: "cancelled", SessionID: sid, Status: out.Status}, nil
		}
	}
	unlock, err := d.lease(ctx, sid)
	if err != nil {
		return Result{SessionID: sid}, err
	}
	defer unlock()
	evs, err := d.loadSession(ctx, repo, sid)
	if err != nil {
		return Result{SessionID: sid}, err
	}
	l, _ := loadLink(evs)
	d.adopt(repo, t, &l)
	out, err := d.Runs.Cancel(ctx, sid, by, reason)
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
		if err := d.GitHub.EditComment(ctx, repo, l.TrackingComment, d.renderTracking("", snap, d.logURL(repo, artSHA, sid))); err != nil {
			return Result{SessionID: sid}, err
		}
	}
	res := Result{Outcome: "cancelled", SessionID: sid, Status: out.Status, PR: l.PR, Usage: snap.Usage}
	d.logOutcome(repo, l, res, snap)
	return res, nil
}

func (d *Dispatcher) status(ctx context.Context, repo Repo, t webhook.Trigger) (Result, error) {
	sid, _, err := d.sessionFor(ctx, repo, t)
	if err != nil {
		return Result{}, err
	}
	if sid == "" {
		_, err := d.GitHub.CreateComment(ctx, repo, t.Number, fmt.Sprintf("@%s there is no agentos session for this %s yet. Start one with `%s <what to do>`.", t.Author, kindWord(t.IsPR), d.trigger()))
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
	_, err = d.GitHub.CreateComment(ctx, repo, t.Number, d.renderTracking("", snap, ""))
	return Result{Outcome: "status", SessionID: sid, Status: snap.RunStatus, PR: l.PR}, err
}

// commitMessage is the subject of a session commit; the worktree adds the
// Agent-Session and Agent-Run trailers.
func commitMessage(prompt string, out run.Outcome) string {
	if out.Status == "paused" {
		return "agentos: checkpoint before approval: " + oneLine(prompt, 40)
	}
	return "agentos: " + oneLine(prompt, 60)
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func orWord(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func kindWord(isPR bool) string {
	if isPR {
		return "pull request"
	}
	return "issue"
}

func pendingList(s replay.Snapshot) string {
	var ids []string
	for _, p := range s.PendingApprovals {
		ids = append(ids, "`"+p.ID+"`")
	}
	return strings.Join(ids, ", ")
}

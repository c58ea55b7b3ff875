package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentos/agentos/bot/github"
	"strconv"
	"strings"

	"github.com/agentos/agentos/bot/tracking"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/run"
)

// Recovery: a delivery handled again (its process was killed, or its
// replica died and another claimed it) can find its session anywhere an
// earlier attempt left it. Nothing the earlier attempt wrote to the store
// is lost, but its worktree is, and any of its publication steps may or
// may not have reached GitHub. The dispatcher then:
//
//   - takes over a run still "running" in the log (Takeover: re-executed
//     from the log, live from where it ends) in a worktree rebuilt from
//     the session branch and the log's recorded changes; a run whose
//     worktree cannot be rebuilt gets its report_missing terminal report,
//     with the reason;
//   - resumes a paused run whose approvals were all answered;
//   - publishes again what a stopped run (paused or finished) may not have
//     published, looking before creating: the PR by its head branch, the
//     approval review by the session's marker and the approval ids.

// logSeqKey names the line of a session commit's message that says which
// events' worktree changes the commit holds.
const logSeqKey = "Agent-Log-Seq: "

func parseLogSeq(msg string) (int64, bool) {
	for _, line := range strings.Split(msg, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), logSeqKey); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil && n >= 0
		}
	}
	return 0, false
}

// recovery says what publish must check first: a retried delivery may
// find any of its steps done already.
type recovery struct {
	// onRemote: the session branch was on the remote when the worktree was
	// rebuilt (a draft PR needs no empty commit then).
	onRemote bool
}

// recoverSession handles session sid as an earlier attempt left it (see
// above). l is the session's link (an earlier attempt may have died
// before saving it: startRun passes the one it computed), base where a
// new branch starts when no attempt pushed one (nil: the branch must be
// on the remote). The caller holds the session's lease.
func (d *Dispatcher) recoverSession(ctx context.Context, repo github.Repo, sid string, l link, base *Base, outcome string, known *github.PullRequest) (Result, error) {
	res := Result{Outcome: "recorded", Reason: "this delivery's session was begun by an earlier attempt", SessionID: sid, PR: l.PR}
	if d.runs.Running(sid) {
		return res, nil // this process runs it; its flow publishes
	}
	// A process that died between the run's terminal report and its
	// session.close left the log unclosed.
	if _, err := d.runs.CloseEnded(ctx, sid); err != nil {
		return res, err
	}
	evs, err := d.runs.Store.Read(ctx, sid, 1)
	if err != nil {
		return res, err
	}
	snap, err := replay.Replay(evs)
	if err != nil {
		return res, err
	}
	if l.TrackingComment == 0 && l.Issue != 0 {
		if l.TrackingComment, err = d.trackingComment(ctx, repo, l.Issue, sid); err != nil {
			return res, err
		}
	}
	if base == nil && l.BaseRef != "" && !l.Untrusted {
		// Where startRun began the branch (a fork's work starts from its
		// pull request's head, which the link does not keep).
		base = &Base{Ref: l.BaseRef}
	}
	takeover := snap.RunStatus == replay.RunRunning
	answered := snap.RunStatus == replay.RunPaused && len(snap.PendingApprovals) == 0 && len(snap.ResolvedApprovals) > 0
	wt, onRemote, rerr := d.rebuild(ctx, repo, sid, l, base, evs, takeover || answered)
	if rerr != nil {
		var nr *run.NotRebuildableError
		if !errors.As(rerr, &nr) && !errors.Is(rerr, errBranchGone) {
			return res, rerr // git or GitHub unreachable: the delivery is retried
		}
		d.log().Warn("session cannot continue after a crash", "session", sid, "repo", repo.FullName(), "err", rerr)
		if !takeover {
			// Nothing to close; what was published stays as it is.
			res.Status = string(snap.RunStatus)
			return res, nil
		}
		return d.closeOrphan(ctx, repo, sid, l, res, rerr.Error())
	}
	defer wt.Close()
	out := run.Outcome{SessionID: sid, RunID: snap.RunID, Status: snap.RunStatus}
	if takeover || answered {
		eng, _, release, err := d.engine(ctx, EngineRequest{Dir: wt.Dir(), SessionID: sid, Untrusted: l.Untrusted})
		if err != nil {
			return res, err
		}
		defer release()
		var runErr error
		if takeover {
			d.log().Info("taking over a run whose process stopped", "session", sid, "repo", repo.FullName(), "run", snap.RunID)
			out, runErr = d.runs.Takeover(ctx, eng, sid, wt.Dir(), "", "")
		} else {
			out, runErr = d.runs.Resume(ctx, eng, sid, wt.Dir(), "")
		}
		if runErr != nil && out.Status == "" {
			return res, runErr
		}
		outcome = "resumed"
	}
	return d.publish(ctx, repo, sid, wt, l, out, outcome, replay.Usage{}, known, &recovery{onRemote: onRemote})
}

// closeOrphan ends a run that cannot continue with its report_missing
// terminal report, saying why, and shows it.
func (d *Dispatcher) closeOrphan(ctx context.Context, repo github.Repo, sid string, l link, res Result, why string) (Result, error) {
	out, err := d.runs.CloseOrphanReason(ctx, sid, why)
	if err != nil {
		return res, err
	}
	res.Status = string(out.Status)
	snap, artSHA, err := d.commitArtifact(ctx, repo, sid, nil)
	if err != nil {
		return res, err
	}
	// The draft pull request (and the approval requests its reviews hold)
	// says the run ended and why: a maintainer is not left waiting on it.
	if l.PR != 0 {
		if err := d.gh.EditPRBody(ctx, repo, l.PR, renderPRBody(l, snap, d.logRefURL(repo, sid, l), d.trigger())); err != nil {
			return res, err
		}
	}
	if l.TrackingComment != 0 {
		if err := d.gh.EditComment(ctx, repo, l.TrackingComment, d.renderTracking("", snap, d.logURL(repo, artSHA, sid))); err != nil {
			return res, err
		}
	}
	res.Usage = snap.Usage
	d.logOutcome(repo, l, res, snap)
	return res, nil
}

// rebuild opens the session's worktree as its log says it is: the session
// branch as the remote has it (or, when no attempt pushed it yet, a new
// branch at base), with the workspace changes recorded after the branch's
// last session commit applied again (run.RebuildWorkspace). continuing
// puts HEAD where an approved call of the run checks it (the commit its
// approval was computed against) when that call has not run yet.
func (d *Dispatcher) rebuild(ctx context.Context, repo github.Repo, sid string, l link, base *Base, evs []event.Event, continuing bool) (Worktree, bool, error) {
	if l.Branch == "" {
		l.Branch = d.branchPrefix() + sid
	}
	head := ""
	if continuing {
		head = unexecutedApprovalRevision(evs)
	}
	onRemote := true
	wt, err := d.git.Reopen(ctx, repo, l.Branch, head)
	if errors.Is(err, errBranchGone) && base != nil {
		onRemote = false
		wt, err = d.git.Start(ctx, repo, l.Branch, *base)
	}
	if err != nil {
		return nil, false, err
	}
	after := int64(0) // a new branch holds none of the session's changes
	if onRemote {
		st, ok := wt.(*sessionTree)
		var found bool
		if ok {
			after, found = st.logSeq()
		}
		if !found {
			// A commit from before Agent-Log-Seq, or not the bot's: it
			// holds the work up to the run's latest start or pause.
			after = lastBoundary(evs)
		}
	}
	n, err := run.RebuildWorkspace(wt.Dir(), evs, after)
	if err != nil {
		wt.Close()
		return nil, false, err
	}
	d.log().Info("worktree rebuilt from the branch and the log", "session", sid, "branch", l.Branch, "on_remote", onRemote, "after_seq", after, "changes_applied", n)
	return wt, onRemote, nil
}

// lastBoundary is the seq of the session's latest run.started or
// run.paused: where a session commit was made last.
func lastBoundary(evs []event.Event) int64 {
	for i := len(evs) - 1; i >= 0; i-- {
		if t := evs[i].Type; t == event.RunStarted || t == event.RunPaused {
			return evs[i].Seq
		}
	}
	return 0
}

// unexecutedApprovalRevision is the commit the latest approval request of
// the session was computed against, when the approved call has not been
// invoked yet ("" otherwise).
func unexecutedApprovalRevision(evs []event.Event) string {
	for i := len(evs) - 1; i >= 0; i-- {
		e := evs[i]
		if e.Type == event.ToolInvoke && event.FieldString(e.Payload, "approval_id") != "" {
			return ""
		}
		if e.Type == event.ApprovalRequested {
			var rev struct {
				Commit string `json:"commit"`
			}
			if json.Unmarshal(event.Field(e.Payload, "revision"), &rev) == nil {
				return rev.Commit
			}
			return ""
		}
	}
	return ""
}

// published reports whether every pending approval of snap was requested
// on GitHub (the link records the ids publish asked for): an answer can
// only be to approvals the maintainer was shown.
func published(snap replay.Snapshot, l link) bool {
	asked := map[string]bool{}
	for _, id := range l.RequestedIDs {
		asked[id] = true
	}
	for _, p := range snap.PendingApprovals {
		if !asked[p.ID] {
			return false
		}
	}
	return true
}

// reviewPosted reports whether the approval review of the pending
// approvals of snap is on pull request number already.
func (d *Dispatcher) reviewPosted(ctx context.Context, repo github.Repo, number int, sid string, snap replay.Snapshot) (bool, error) {
	parts := []string{tracking.ReviewMarker(sid)}
	for _, p := range snap.PendingApprovals {
		parts = append(parts, p.ID)
	}
	return d.gh.HasReview(ctx, repo, number, d.botLogin, parts...)
}

// commitMessageAt is a session commit's message with the seq of the last
// event whose worktree changes it holds.
func commitMessageAt(prompt string, out run.Outcome, seq int64) string {
	return fmt.Sprintf("%s\n\n%s%d", commitMessage(prompt, out), logSeqKey, seq)
}

// recoverable reports whether an answer finds session sid where an
// earlier attempt stopped half-way: a run left running by a process that
// died, a run whose approvals were all answered but that did not resume,
// a pause whose approval request never reached GitHub, or (for a retried
// delivery) a finished run whose publication may not have completed —
// also one whose process died between its end (run.completed or
// run.failed) and its terminal report, which recoverSession writes from
// the recorded end (CloseEnded) before it publishes.
func (d *Dispatcher) recoverable(snap replay.Snapshot, l link, t webhook.Trigger, sid string) bool {
	switch {
	case d.runs.Running(sid):
		return false
	case snap.RunStatus == replay.RunRunning:
		return true
	case snap.RunStatus == replay.RunPaused && len(snap.PendingApprovals) == 0:
		return len(snap.ResolvedApprovals) > 0
	case snap.RunStatus == replay.RunPaused:
		return !published(snap, l)
	case snap.RunStatus == replay.RunNone:
		return false
	case snap.Terminal == nil && snap.RunStatus != replay.RunCompleted && snap.RunStatus != replay.RunFailed:
		return false
	}
	return t.Attempt > 1
}

// runBegun reports whether the session's log has a run.
func runBegun(evs []event.Event) bool {
	for _, e := range evs {
		if e.Type == event.RunStarted {
			return true
		}
	}
	return false
}

// answeredKind records which delivery answered a session's approvals.
const answeredKind = "github.answer"

// answeredBy reports whether delivery answered the session already.
func answeredBy(evs []event.Event, delivery string) bool {
	if delivery == "" {
		return false
	}
	for _, e := range evs {
		if e.Type == event.ArtifactEmitted && event.FieldString(e.Payload, "kind") == answeredKind {
			var a struct {
				DeliveryID string `json:"delivery_id"`
			}
			if json.Unmarshal([]byte(event.FieldString(e.Payload, "content")), &a) == nil && a.DeliveryID == delivery {
				return true
			}
		}
	}
	return false
}

// answerUnapplied reports whether the answer delivery recorded was never
// applied: the process that recorded it died before it resolved an
// approval, so after the record the log has no approval.resolved, no
// run.resumed and no end, and the run is still paused for approvals.
func answerUnapplied(evs []event.Event, snap replay.Snapshot, delivery string) bool {
	if snap.RunStatus != replay.RunPaused || len(snap.PendingApprovals) == 0 {
		return false
	}
	at := -1
	for i, e := range evs {
		if answeredBy([]event.Event{e}, delivery) {
			at = i
		}
	}
	if at < 0 {
		return false
	}
	for _, e := range evs[at+1:] {
		switch e.Type {
		case event.ApprovalResolved, event.RunResumed, event.TurnTerminal, event.SessionClose:
			return false
		}
	}
	return true
}

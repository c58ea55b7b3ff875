package dispatch

// Publishing a run's outcome to GitHub: the session branch's commit, the
// draft pull request, the approval review, the artifact log and the
// tracking comment.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/tracking"
	"strings"

	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/kernel/worktree"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/store"
)

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
func (d *Dispatcher) publish(ctx context.Context, repo github.Repo, sid string, wt Worktree, l link, out run.Outcome, outcome string, before replay.Usage, known *github.PullRequest, again *recovery) (Result, error) {
	res := Result{Outcome: outcome, SessionID: sid, Status: string(out.Status), Branch: l.Branch}
	snap, lastSeq, evs, err := d.publishedState(ctx, sid)
	if err != nil {
		return res, err
	}
	// The branch's last session commit holds the changes up to the seq it
	// records; a commit takes the file tools' changes after it (all of
	// them on a new branch). Earlier ones are in the branch already, or
	// were changed since by a commit that is not the session's.
	after := int64(0)
	if st, ok := wt.(*sessionTree); ok {
		if n, found := st.logSeq(); found {
			after = n
		}
	}
	changes := replay.WorkspaceChanges(evs, after)
	msg := commitMessageAt(l.Prompt, out, lastSeq)
	if again != nil && l.PR == 0 {
		pr, found, err := d.gh.PullRequestByHead(ctx, repo, l.Branch)
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
	empty := out.Status == run.StatusPaused && l.PR == 0 && (again == nil || !again.onRemote)
	head, made, err := wt.Commit(ctx, msg, out.RunID, changes, empty)
	var changed *worktree.ChangedError
	if errors.As(err, &changed) {
		// A command changed a file after the kernel wrote it. What it left
		// is not committed, and no retry of the delivery changes that:
		// the maintainer is told on the tracking comment, not left with
		// one that still says the work goes on.
		err = fmt.Errorf("%w: %w", webhook.ErrPermanent, err)
		if l.TrackingComment != 0 {
			note := "\n\n---\n⚠️ **Nothing was published.** " + tracking.Plain(changed.Error(), 600, d.trigger()) +
				" The session's log keeps what happened; ask again to redo the work."
			if e := d.gh.EditComment(ctx, repo, l.TrackingComment, tracking.Fit(d.renderTracking("", snap, "")+note)); e != nil {
				err = errors.Join(err, e)
			}
		}
		return res, err
	}
	if err != nil {
		return res, err
	}
	if made {
		if head, err = wt.Push(ctx); err != nil {
			return res, err
		}
	}
	created := false
	if l.PR == 0 && (made || out.Status == run.StatusPaused || (again != nil && again.onRemote)) {
		pr, err := d.gh.CreateDraftPR(ctx, repo, github.NewPR{Head: l.Branch, Base: l.BaseRef, Title: "agentos: " + oneLine(l.Prompt, 72), Body: renderPRBody(l, snap, d.logRefURL(repo, sid, l), d.trigger())})
		if err != nil {
			return res, err
		}
		l.PR, l.PRNodeID, l.PRURL = pr.Number, pr.NodeID, pr.URL
		known, created = &pr, true
	}
	if out.Status == run.StatusPaused {
		l.RequestedIDs = l.RequestedIDs[:0]
		for _, a := range snap.PendingApprovals {
			l.RequestedIDs = append(l.RequestedIDs, a.ID)
		}
		l.RequestedOn = ""
		if d.git.ArtifactBranch() != "" {
			l.RequestedOn = head // the review below is made on it
		}
	}
	if out.Status == run.StatusCompleted && l.PR != 0 && !l.Ready {
		pr := github.PullRequest{Number: l.PR, NodeID: l.PRNodeID, Draft: true}
		if known != nil && known.Number == l.PR {
			pr = *known
		} else if pr, err = d.gh.PullRequest(ctx, repo, l.PR); err != nil {
			return res, err
		}
		if pr.Draft {
			if err := d.gh.MarkReady(ctx, repo, pr); err != nil {
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
	if d.git.ArtifactBranch() == "" {
		head = artSHA // the log went on the session branch
	}
	if out.Status == run.StatusPaused {
		posted := false
		if again != nil && !created {
			if posted, err = d.reviewPosted(ctx, repo, l.PR, sid, snap); err != nil {
				return res, err
			}
		}
		// GitHub records the review's commit: that is the head the
		// approvals bind to (see answer).
		if !posted {
			if _, err := d.gh.CreateReview(ctx, repo, l.PR, head, renderApprovalReview(d.trigger(), snap, head)); err != nil {
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
		if err := d.gh.EditPRBody(ctx, repo, l.PR, renderPRBody(l, snap, d.logRefURL(repo, sid, l), d.trigger())); err != nil {
			return res, err
		}
	}
	if l.TrackingComment != 0 {
		if err := d.gh.EditComment(ctx, repo, l.TrackingComment, d.renderTracking(head, snap, logURL)); err != nil {
			return res, err
		}
	}
	d.logOutcome(repo, l, res, snap)
	return res, nil
}

// publishedState is the session's state, the seq of its last event and
// its events, from which publish takes the change set of its file tools
// (the only worktree content a session commit takes).
func (d *Dispatcher) publishedState(ctx context.Context, sid string) (replay.Snapshot, int64, []event.Event, error) {
	evs, err := d.runs.Store.Read(ctx, sid, 1)
	if err != nil {
		return replay.Snapshot{}, 0, nil, err
	}
	if len(evs) == 0 {
		return replay.Snapshot{}, 0, nil, fmt.Errorf("session %s has no events", sid)
	}
	snap, err := replay.Replay(evs)
	return snap, evs[len(evs)-1].Seq, evs, err
}

// snapshotAt is the session's state and the seq of its last event.
func (d *Dispatcher) snapshotAt(ctx context.Context, sid string) (replay.Snapshot, int64, error) {
	snap, last, _, err := d.publishedState(ctx, sid)
	return snap, last, err
}

// commitArtifact exports the session's log and snapshot to the artifact
// branch.
func (d *Dispatcher) commitArtifact(ctx context.Context, repo github.Repo, sid string, wt Worktree) (replay.Snapshot, string, error) {
	var buf bytes.Buffer
	if _, err := store.Export(ctx, d.runs.Store, sid, &buf); err != nil {
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
	sha, err := d.git.CommitArtifact(ctx, repo, sid, wt, buf.Bytes(), append(sj, '\n'))
	return snap, sha, err
}

// logRefURL links the session's log on the branch that keeps it (the
// latest log, whatever commit): the PR description uses it, so that it is
// written once with the PR and need not change with every log commit.
func (d *Dispatcher) logRefURL(repo github.Repo, sid string, l link) string {
	ref := d.git.ArtifactBranch()
	if ref == "" {
		ref = l.Branch
	}
	return d.logURL(repo, ref, sid)
}

// server is GitHub's web address, without a trailing slash.
func (d *Dispatcher) server() string {
	if d.serverURL == "" {
		return "https://github.com"
	}
	return strings.TrimRight(d.serverURL, "/")
}

// commentURL is the web address of comment id on issue or pull request
// number ("" without a comment).
func (d *Dispatcher) commentURL(repo github.Repo, number int, id int64) string {
	if id == 0 {
		return ""
	}
	return fmt.Sprintf("%s/%s/issues/%d#issuecomment-%d", d.server(), repo.FullName(), number, id)
}

func (d *Dispatcher) logURL(repo github.Repo, commit, sid string) string {
	server := d.server()
	dir := "sessions/" + sid
	if d.git.ArtifactBranch() == "" {
		dir = ".agent/sessions/" + sid
	}
	return fmt.Sprintf("%s/%s/blob/%s/%s/events.jsonl", server, repo.FullName(), commit, dir)
}

// commitMessage is the subject of a session commit; the worktree adds the
// Agent-Session and Agent-Run trailers.
func commitMessage(prompt string, out run.Outcome) string {
	if out.Status == run.StatusPaused {
		return "agentos: checkpoint before approval: " + oneLine(prompt, 40)
	}
	return "agentos: " + oneLine(prompt, 60)
}

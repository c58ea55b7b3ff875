package dispatch

// Sessions and their links: session ids and branches, the link recording
// where a session lives on GitHub, and finding a trigger's session (in the
// store, or on the remote's session branches).

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentos/agentos/bot/github"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/kernel/worktree"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/run"
	"github.com/oklog/ulid/v2"
)

var ids = struct {
	sync.Mutex
	e *ulid.MonotonicEntropy
}{e: ulid.Monotonic(rand.Reader, 0)}

// newSessionID is "<number>-<8 lowercase base32 characters>": unique
// enough (40 random bits per millisecond), safe as a file name, and its own
// branch suffix: the session branch is agent/<session id>.
func newSessionID(number int, now time.Time) string {
	ids.Lock()
	id := ulid.MustNew(ulid.Timestamp(now), ids.e).String()
	ids.Unlock()
	// The last 8 characters are random (monotonic within a millisecond).
	return fmt.Sprintf("%d-%s", number, strings.ToLower(id[len(id)-8:]))
}

// deliverySessionID is the session of a `/agent` delivery when replicas
// share a store: "<number>-<8 base32 characters of the delivery ID's
// SHA-256>", so a delivery dispatched again (its replica died, or its
// outcome was lost) finds the session an earlier attempt began instead of
// starting a second one.
func deliverySessionID(number int, deliveryID string) string {
	sum := sha256.Sum256([]byte("agentos-session\x00" + deliveryID))
	return fmt.Sprintf("%d-%s", number, strings.ToLower(base32.StdEncoding.EncodeToString(sum[:])[:8]))
}

// defaultBranchPrefix starts session branches unless the Dispatcher's
// BranchPrefix says otherwise.
const defaultBranchPrefix = worktree.DefaultBranchPrefix

// branchPrefix starts the branches of new sessions.
func (d *Dispatcher) branchPrefix() string {
	if d.prefix == "" {
		return defaultBranchPrefix
	}
	return d.prefix
}

// sessionFromBranch returns the session id of a branch under the current
// prefix, checked: branch names come from users.
func (d *Dispatcher) sessionFromBranch(ref string) (string, bool) {
	prefix, id, ok := worktree.SessionIDInBranch(ref)
	if !ok || prefix != d.branchPrefix() || !event.ValidSessionID(id) {
		return "", false
	}
	return id, true
}

// sessionOfBranch returns the session whose branch ref is. A branch under
// the current prefix names its session; one under another prefix (the
// session began before branch_prefix changed) is a session's when the
// session's recorded link names that branch, in repo. A branch that only
// looks like one, and whose session cannot be found, is no session's.
func (d *Dispatcher) sessionOfBranch(ctx context.Context, repo github.Repo, ref string) (string, bool, error) {
	if sid, ok := d.sessionFromBranch(ref); ok {
		return sid, true, nil
	}
	_, sid, ok := worktree.SessionIDInBranch(ref)
	if !ok || !event.ValidSessionID(sid) {
		return "", false, nil
	}
	evs, err := d.runs.Store.Read(ctx, sid, 1)
	if err != nil {
		return "", false, err
	}
	if len(evs) == 0 {
		unlock := d.lock(sid)
		evs, err = d.loadSession(ctx, repo, sid)
		unlock()
		if err != nil {
			if errors.Is(err, ErrTamperedLog) || ctx.Err() != nil {
				return "", false, err
			}
			d.log().Info("a branch like a session branch, without a session", "repo", repo.FullName(), "branch", ref, "err", err)
			return "", false, nil
		}
	}
	l, ok := loadLink(evs)
	return sid, ok && l.Repo == repo.FullName() && l.Branch == strings.TrimPrefix(ref, "refs/heads/"), nil
}

// link is the bot's record of where a session lives on GitHub, kept in the
// session's log as artifact.emitted (kind "github.session") so that any
// process, or a later Action run, can find it.
type link struct {
	Repo            string   `json:"repo"`
	Issue           int      `json:"issue"`        // the issue or PR the request came from
	PR              int      `json:"pr,omitempty"` // the session's draft PR
	PRNodeID        string   `json:"pr_node_id,omitempty"`
	PRURL           string   `json:"pr_url,omitempty"`
	Branch          string   `json:"branch"`
	BaseRef         string   `json:"base_ref"`
	TrackingComment int64    `json:"tracking_comment,omitempty"`
	RequestedIDs    []string `json:"requested_ids,omitempty"`
	// RequestedOn is the head commit the latest approval request (a
	// review) was made on: an answer binds to it. Empty when the log is
	// kept on the session branch (the review is on the commit that holds
	// the log, which cannot name itself): GitHub's record of the review
	// is asked then.
	RequestedOn  string `json:"requested_on,omitempty"`
	Installation int64  `json:"installation,omitempty"` // the GitHub App installation serving Repo
	Prompt       string `json:"prompt,omitempty"`
	Untrusted    bool   `json:"untrusted,omitempty"` // the work started from a fork's code
	Ready        bool   `json:"ready,omitempty"`
}

const linkKind = "github.session"

func (d *Dispatcher) saveLink(ctx context.Context, sessionID string, l link) error {
	return d.annotate(ctx, sessionID, linkKind, "github", l)
}

// ignoredKind records an answer that did not count (its author may not
// approve): part of the session's audit trail, not of its state.
const ignoredKind = "github.ignored_answer"

// annotate appends a host event (artifact.emitted with JSON content) to
// the session.
func (d *Dispatcher) annotate(ctx context.Context, sessionID, kind, name string, v any) error {
	evs, err := d.runs.Store.Read(ctx, sessionID, 1)
	if err != nil {
		return err
	}
	if len(evs) == 0 {
		return fmt.Errorf("annotate: session %s has no events", sessionID)
	}
	last := evs[len(evs)-1]
	content, err := json.Marshal(v)
	if err != nil {
		return err
	}
	payload := map[string]any{"kind": kind, "name": name, "media_type": "application/json", "content": string(content), "size": len(content), "digest": digest(content)}
	_, err = d.runs.Store.Append(ctx, sessionID, last.Seq, event.Draft{RunID: last.RunID, Type: event.ArtifactEmitted, Actor: run.HostActor, Payload: payload})
	return err
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func loadLink(evs []event.Event) (link, bool) {
	for i := len(evs) - 1; i >= 0; i-- {
		e := evs[i]
		if e.Type != event.ArtifactEmitted || event.FieldString(e.Payload, "kind") != linkKind {
			continue
		}
		var l link
		if json.Unmarshal([]byte(event.FieldString(e.Payload, "content")), &l) == nil {
			return l, true
		}
	}
	return link{}, false
}

// loadSession returns the session's events from the store, importing them
// from the artifact branch first when this process has never seen the
// session (another replica, or a new Action run). An imported log must
// verify and belong to repo.
func (d *Dispatcher) loadSession(ctx context.Context, repo github.Repo, sessionID string) ([]event.Event, error) {
	evs, err := d.runs.Store.Read(ctx, sessionID, 1)
	if err != nil {
		return nil, err
	}
	if len(evs) > 0 {
		return evs, nil
	}
	raw, err := d.git.LoadArtifact(ctx, repo, sessionID)
	if err != nil {
		return nil, fmt.Errorf("load session %s from %s: %w", sessionID, d.git.ArtifactBranch(), err)
	}
	// The one recovery path of CLI, server and Action: verify, then import.
	if _, err := run.ImportLog(ctx, d.runs.Store, sessionID, raw); err != nil {
		if errors.Is(err, run.ErrUnverifiedLog) {
			return nil, fmt.Errorf("%w: %v", ErrTamperedLog, err)
		}
		return nil, err
	}
	evs, err = d.runs.Store.Read(ctx, sessionID, 1)
	if err != nil {
		return nil, err
	}
	if l, ok := loadLink(evs); !ok || l.Repo != repo.FullName() {
		return nil, fmt.Errorf("%w: the log does not belong to %s", ErrTamperedLog, repo.FullName())
	}
	return evs, nil
}

// sessionFor finds the session a trigger on issue or PR number refers to:
// the session of a bot PR's branch, or the latest session started from that
// issue. A session this store has never seen (started by a GitHub Action
// run on another machine, or by another data directory) is found by its
// branch on the remote and imported from its artifact log.
func (d *Dispatcher) sessionFor(ctx context.Context, repo github.Repo, t webhook.Trigger) (string, *github.PullRequest, error) {
	number := t.Number
	if t.IsPR {
		pr, err := d.pullRequest(ctx, repo, t)
		if err != nil {
			return "", nil, err
		}
		if pr.HeadRepo == repo.FullName() {
			sid, ok, err := d.sessionOfBranch(ctx, repo, pr.HeadRef)
			if err != nil {
				return "", nil, err
			}
			if ok {
				return sid, &pr, nil
			}
		}
	}
	infos, err := d.runs.Store.Sessions(ctx)
	if err != nil {
		return "", nil, err
	}
	prefix := fmt.Sprintf("%d-", number)
	sort.Slice(infos, func(i, j int) bool { return infos[i].LastTS > infos[j].LastTS })
	for _, in := range infos {
		if !strings.HasPrefix(in.SessionID, prefix) {
			continue
		}
		evs, err := d.runs.Store.Read(ctx, in.SessionID, 1)
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

// liveSessionOf finds a session of issue number in the store whose run
// is running — worked by a replica now, or waiting for a takeover after
// its replica stopped — other than except. ok is false when there is none.
func (d *Dispatcher) liveSessionOf(ctx context.Context, repo github.Repo, number int, except string) (string, link, bool, error) {
	infos, err := d.runs.Store.Sessions(ctx)
	if err != nil {
		return "", link{}, false, err
	}
	prefix := fmt.Sprintf("%d-", number)
	for _, in := range infos {
		if in.SessionID == except || !strings.HasPrefix(in.SessionID, prefix) {
			continue
		}
		evs, err := d.runs.Store.Read(ctx, in.SessionID, 1)
		if err != nil {
			return "", link{}, false, err
		}
		l, ok := loadLink(evs)
		if ok && (l.Repo != repo.FullName() || l.Issue != number) || !ok && !startedFrom(evs, repo, number) {
			continue
		}
		snap, err := replay.Replay(evs)
		if err != nil {
			return "", link{}, false, err
		}
		if snap.RunStatus == replay.RunRunning {
			return in.SessionID, l, true, nil
		}
	}
	return "", link{}, false, nil
}

// startedFrom reports whether the session's first run was started by a
// request on issue or PR number of repo (its run.started trigger): a
// session whose process died before its first pause has no link yet.
func startedFrom(evs []event.Event, repo github.Repo, number int) bool {
	for _, e := range evs {
		if e.Type == event.RunStarted {
			tr := event.Field(e.Payload, "trigger")
			return event.FieldString(tr, "repo") == repo.FullName() && event.FieldInt(tr, "number") == int64(number)
		}
	}
	return false
}

// remoteSessionFor finds the latest session of issue number among the
// remote's session branches, importing each one's log (verified, and
// refused if it was tampered with) to learn which issue it belongs to and
// when it last moved. A branch whose log cannot be loaded (its run
// committed none yet, or keeps it on the session branch and is gone) is
// passed over with a warning.
func (d *Dispatcher) remoteSessionFor(ctx context.Context, repo github.Repo, number int) (string, error) {
	branches, err := d.git.SessionBranches(ctx, repo, number)
	if err != nil {
		return "", fmt.Errorf("list session branches: %w", err)
	}
	var best, bestTS string
	for _, b := range branches {
		sid, ok := d.sessionFromBranch(b)
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

// openSession takes session sid's lease and loads its log and link, with
// the trigger's installation adopted into the link: the preamble of every
// handler that acts on an existing session (answers, follow-ups, cancel).
// The caller releases the lease with unlock; on error nothing is held.
func (d *Dispatcher) openSession(ctx context.Context, repo github.Repo, t webhook.Trigger, sid string) ([]event.Event, link, func(), error) {
	unlock, err := d.lease(ctx, sid)
	if err != nil {
		return nil, link{}, nil, err
	}
	evs, err := d.loadSession(ctx, repo, sid)
	if err != nil {
		unlock()
		return nil, link{}, nil, err
	}
	l, _ := loadLink(evs)
	d.adopt(repo, t, &l)
	return evs, l, unlock, nil
}

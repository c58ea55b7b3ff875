// Package dispatch turns normalised GitHub triggers into runs: it parses
// the comment command, authorizes the author, prepares the session's
// worktree, drives the runtime's RunManager, and publishes what happened —
// the session branch and draft PR, approval requests as PR reviews, the
// tracking comment, and the event log on the artifact branch.
//
// It keeps no state of its own between triggers: a paused session is its
// event log (in the store, or on the artifact branch when this process has
// never seen it), so any process can answer an approval.
package dispatch

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentos/agentos/runtime/untrusted"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/agentos/agentos/bot/auth"
	"github.com/agentos/agentos/bot/command"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/run"
	"github.com/oklog/ulid/v2"
)

// EngineRequest says which worktree an engine works in.
type EngineRequest struct {
	Dir       string // the session's worktree: the kernel is jailed in it
	SessionID string
	// Untrusted is set when the worktree holds code from outside the
	// repository (a fork's pull request): its own hooks must not run.
	Untrusted bool
}

// Engines builds a run engine for a session's worktree. The returned func
// releases it.
type Engines func(ctx context.Context, r EngineRequest) (*run.Engine, func(), error)

// Dispatcher handles triggers. The zero value is not usable; set every
// field but Log and Now.
type Dispatcher struct {
	Trigger  string // the command word, default /agent
	BotLogin string // the bot's own login, e.g. agentos[bot]
	GitHub   GitHub
	Auth     Authorizer
	Git      Git
	Runs     *run.Manager
	Engines  Engines
	Log      *slog.Logger
	Now      func() time.Time
	// ServerURL is GitHub's web address for links (default
	// https://github.com; GitHub Enterprise Server differs).
	ServerURL string
	// Result, when set, is told how each trigger ended (for metrics and the
	// Action's outputs).
	Result func(Result)
	// Installations, when set (GitHub App mode), is told which app
	// installation serves each trigger's repository: the webhook payload
	// says so (installation.id), or the session's link when a trigger
	// lacks it, so that no call looks it up. *github.Client satisfies it.
	Installations Installations
	// Sandbox is the mechanism the runs' commands are confined by
	// (sandbox.Mechanism: bwrap, landlock, none, unavailable); the tracking
	// comment warns when it is none or unavailable.
	Sandbox string
	// ViewerBase is the server's public URL (https://…): the tracking
	// comment links each session's run viewer page under it. "" leaves
	// the link out.
	ViewerBase string
	// Preflight, when set, is called for every new run (`/agent <prompt>`)
	// after the author is authorized and before anything is written to
	// GitHub (no tracking comment, branch or pull request when it fails):
	// it checks that the run can work at all (the model endpoint answers,
	// the key is accepted). Its error is logged at ERROR and returned
	// wrapped in ErrPreflight: the queue retries the delivery with backoff
	// (an endpoint that is down may come back), unless the error wraps
	// webhook.ErrPermanent (a rejected key, an unknown model: no retry
	// helps), which fails the delivery at once.
	Preflight func(ctx context.Context) error
	// Leases, when set (several replicas on one database), make the
	// dispatcher hold the session's lease whenever it changes a session:
	// one replica at a time works it. A trigger for a session leased by
	// another replica (an Approve review arriving while that replica
	// still works the session) fails with ErrSessionBusy, which the
	// webhook queue retries with backoff: the delivery is handed back
	// through the queue, and the session is never worked twice at once.
	Leases SessionLeases
	// Workflows, when set, runs the workflow plane's cycles for
	// `/agent review` and `/agent triage` (see review.go, triage.go).
	Workflows *Workflows
	// ResumeFromArtifact, when set (the Action: every job starts on a
	// fresh machine, and the session's log on the artifact branch is the
	// only state), makes a new run look for its session's log there
	// before it starts: a re-run of the same workflow run (the same
	// delivery id, so the same session) continues the session an earlier
	// attempt began instead of starting it a second time.
	ResumeFromArtifact bool

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// Result is how one trigger ended.
type Result struct {
	Outcome   string // ignored | refused | help | started | answered | cancelled | status | replied | recorded | reviewed | triaged
	Reason    string
	SessionID string
	Status    string // the run's status after the trigger: paused | completed | failed | denied
	PR        int
	Branch    string
	// Usage is the session's token use and cost after the trigger;
	// Spent is the part this trigger's work added.
	Usage replay.Usage
	Spent replay.Usage
	// LogURL links the session's log at the commit this trigger wrote.
	LogURL string
}

// ErrTamperedLog is returned when a session log loaded from the artifact
// branch does not verify.
var ErrTamperedLog = errors.New("session log on the artifact branch does not verify")

// ErrPreflight wraps the error of a failed Preflight: the run was not
// started and nothing was written to GitHub.
var ErrPreflight = errors.New("preflight failed: the run was not started")

// Installations records which GitHub App installation serves a
// repository (see Dispatcher.Installations).
type Installations interface {
	RememberInstallation(owner, repo string, id int64)
	ForgetInstallation(id int64)
}

// Dispatch handles one trigger. Errors are returned only for failures worth
// retrying or reporting (GitHub or git unreachable, a store failure); a
// refused or ignored trigger is a nil error with a Result.
func (d *Dispatcher) Dispatch(ctx context.Context, t webhook.Trigger) error {
	res, err := d.dispatch(ctx, t)
	if d.Result != nil {
		d.Result(res)
	}
	if err != nil {
		if !errors.Is(err, ErrPreflight) { // startRun logged it
			d.log().Error("dispatch failed", "delivery", t.DeliveryID, "repo", t.Repo, "number", t.Number, "session", res.SessionID, "err", err)
		}
		if errors.Is(err, ErrTamperedLog) {
			// No retry makes a tampered log verify.
			err = fmt.Errorf("%w: %w", webhook.ErrPermanent, err)
		}
	}
	return err
}

// logOutcome logs how a run ended or paused, at INFO (the default level),
// so that an operator sees every run's fate without debug logs: the
// session, repository, issue and pull request, and for a run that did not
// complete its error class and terminal reason.
func (d *Dispatcher) logOutcome(repo Repo, l link, res Result, snap replay.Snapshot) {
	status := res.Status
	msg := "run " + status
	switch {
	case res.Outcome == "cancelled":
		msg = "run cancelled"
	case status == "paused":
		msg = "run paused for approval"
	}
	attrs := []any{"session", res.SessionID, "repo", repo.FullName(), "issue", l.Issue, "pr", l.PR, "status", status}
	if status == "paused" {
		attrs = append(attrs, "pending", len(snap.PendingApprovals))
	}
	if tr := snap.Terminal; tr != nil && status != "completed" && status != "paused" {
		attrs = append(attrs, "error_class", tr.ErrorClass, "error", tr.Reason)
	}
	attrs = append(attrs, "cost_usd", fmt.Sprintf("%.4f", snap.Usage.CostUSD))
	d.log().Info(msg, attrs...)
}

func (d *Dispatcher) log() *slog.Logger {
	if d.Log != nil {
		return d.Log
	}
	return slog.Default()
}

func (d *Dispatcher) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Dispatcher) trigger() string {
	if d.Trigger == "" {
		return command.DefaultTrigger
	}
	return d.Trigger
}

func (d *Dispatcher) dispatch(ctx context.Context, t webhook.Trigger) (Result, error) {
	// The bot's own comments and reviews come back as webhooks: drop them
	// before anything else.
	if d.BotLogin != "" && strings.EqualFold(t.Author, d.BotLogin) {
		return Result{Outcome: "ignored", Reason: "the bot's own event"}, nil
	}
	// What renders invisibly on GitHub (HTML comments, hidden characters,
	// image alt text, link definitions) is not part of what the author
	// visibly asked: it never reaches a model, nor the command parser.
	if t.Body != "" {
		clean, rm := untrusted.GitHubText(t.Body, 0)
		if rm.Any() {
			d.log().Info("hidden text removed", "delivery", t.DeliveryID, "author", t.Author, "removed", rm)
		}
		t.Body = clean
	}
	if t.Kind == webhook.KindInstallation {
		// The delivery itself is kept in the queue's store; nothing to run.
		d.log().Info("installation changed", "action", t.Action, "installation", t.InstallationID, "repositories", t.Repositories, "by", t.Author)
		d.installationChanged(t)
		return Result{Outcome: "recorded", Reason: "installation " + t.Action}, nil
	}
	repo, ok := ParseRepo(t.Repo)
	if !ok {
		return Result{Outcome: "ignored", Reason: "no repository"}, nil
	}
	d.remember(repo, t.InstallationID)
	switch t.Kind {
	case webhook.KindComment, webhook.KindReviewComment:
		return d.onComment(ctx, repo, t)
	case webhook.KindReview:
		return d.onReview(ctx, repo, t)
	case webhook.KindPRClosed:
		return d.onPRClosed(ctx, repo, t)
	case webhook.KindPRSynchronize:
		return d.onPRSynchronize(ctx, repo, t)
	default:
		return Result{Outcome: "ignored", Reason: "nothing to do for " + string(t.Kind)}, nil
	}
}

// remember tells Installations that id serves repo.
func (d *Dispatcher) remember(repo Repo, id int64) {
	if d.Installations != nil && id > 0 {
		d.Installations.RememberInstallation(repo.Owner, repo.Name, id)
	}
}

// installationChanged keeps Installations in step with installation
// events: repositories added to an installation are served by it; a
// deleted or suspended installation, or one that lost repositories, is
// forgotten (calls on its repositories look the installation up again).
func (d *Dispatcher) installationChanged(t webhook.Trigger) {
	if d.Installations == nil || t.InstallationID <= 0 {
		return
	}
	switch t.Action {
	case "deleted", "suspend", "removed":
		d.Installations.ForgetInstallation(t.InstallationID)
	case "created", "added":
		for _, full := range t.Repositories {
			if r, ok := ParseRepo(full); ok {
				d.remember(r, t.InstallationID)
			}
		}
	}
}

// adopt reconciles a session's link with the trigger: the trigger's
// installation wins and is recorded in the link; without one, the link's
// is remembered (a later trigger without installation.id, or another
// process).
func (d *Dispatcher) adopt(repo Repo, t webhook.Trigger, l *link) {
	switch {
	case t.InstallationID > 0:
		l.Installation = t.InstallationID
	case l.Installation > 0:
		d.remember(repo, l.Installation)
	}
}

func (d *Dispatcher) onComment(ctx context.Context, repo Repo, t webhook.Trigger) (Result, error) {
	p := command.Parse(t.Body, d.trigger())
	switch p.Kind {
	case command.Ignore:
		return Result{Outcome: "ignored", Reason: p.Reason}, nil
	case command.Help:
		_, err := d.GitHub.CreateComment(ctx, repo, t.Number, command.HelpText(d.trigger()))
		return Result{Outcome: "help"}, err
	case command.Invalid:
		body := fmt.Sprintf("@%s %s\n\nUsage: `%s`", t.Author, p.Reason, p.Usage)
		_, err := d.GitHub.CreateComment(ctx, repo, t.Number, body)
		return Result{Outcome: "replied", Reason: p.Reason}, err
	}
	c := p.Command
	if res, refused, err := d.authorize(ctx, repo, t, authAction(c.Name), true); refused || err != nil {
		return res, err
	}
	switch c.Name {
	case command.Run:
		return d.startRun(ctx, repo, t, c.Prompt)
	case command.Approve:
		return d.answer(ctx, repo, t, answer{decision: "approve", id: c.ApprovalID, all: c.All})
	case command.Deny:
		return d.answer(ctx, repo, t, answer{decision: "deny", id: c.ApprovalID, reason: c.DenyReason})
	case command.Status:
		return d.status(ctx, repo, t)
	case command.Cancel:
		return d.cancel(ctx, repo, t, "cancelled with "+d.trigger()+" cancel")
	case command.Review:
		return d.review(ctx, repo, t)
	case command.Triage:
		return d.triage(ctx, repo, t)
	}
	return Result{Outcome: "ignored", Reason: "unknown command " + string(c.Name)}, nil
}

// authorize checks the author; a refusal gets one polite comment when
// reply is set.
func (d *Dispatcher) authorize(ctx context.Context, repo Repo, t webhook.Trigger, action auth.Action, reply bool) (Result, bool, error) {
	dec := d.Auth.Authorize(ctx, auth.Request{Owner: repo.Owner, Repo: repo.Name, Login: t.Author, UserType: t.AuthorType, Action: action})
	if dec.Allowed {
		return Result{}, false, nil
	}
	res := Result{Outcome: "refused", Reason: string(dec.Reason)}
	d.log().Info("refused", "repo", repo.FullName(), "author", t.Author, "action", action, "reason", dec.Reason, "detail", dec.Detail, "delivery", t.DeliveryID)
	if !reply {
		return res, true, nil
	}
	_, err := d.GitHub.CreateComment(ctx, repo, t.Number, auth.RefusalMessage(dec))
	return res, true, err
}

func authAction(n command.Name) auth.Action {
	switch n {
	case command.Approve:
		return auth.ActionApprove
	case command.Deny:
		return auth.ActionDeny
	case command.Cancel:
		return auth.ActionCancel
	}
	return auth.ActionRun // run and status: status shows the log, which only collaborators see in full
}

// SessionLeases grant one replica at a time the right to work a session
// (postgres.Leases).
type SessionLeases interface {
	Acquire(ctx context.Context, sessionID string) (release func(), err error)
}

// ErrSessionBusy is returned when another replica holds the session's
// lease; it wraps webhook.ErrBusy, so the delivery is retried with backoff
// for as long as it takes, never dead-lettered for its attempts.
var ErrSessionBusy = fmt.Errorf("the session is being worked by another replica; the delivery goes back to the queue (%w)", webhook.ErrBusy)

// lease serialises work on the session in this process (lock) and, with
// Leases, across replicas.
func (d *Dispatcher) lease(ctx context.Context, sid string) (func(), error) {
	unlock := d.lock(sid)
	if d.Leases == nil {
		return unlock, nil
	}
	release, err := d.Leases.Acquire(ctx, sid)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("%w: %w", ErrSessionBusy, err)
	}
	return func() { release(); unlock() }, nil
}

// lock serialises the dispatcher's work on one session in this process.
func (d *Dispatcher) lock(key string) func() {
	d.mu.Lock()
	if d.locks == nil {
		d.locks = map[string]*sync.Mutex{}
	}
	l, ok := d.locks[key]
	if !ok {
		l = &sync.Mutex{}
		d.locks[key] = l
	}
	d.mu.Unlock()
	l.Lock()
	return l.Unlock
}

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

// BranchPrefix starts every session branch.
const BranchPrefix = "agent/"

// sessionFromBranch returns the session id encoded in a session branch
// name, checked: branch names come from users.
func sessionFromBranch(ref string) (string, bool) {
	ref = strings.TrimPrefix(ref, "refs/heads/")
	id, ok := strings.CutPrefix(ref, BranchPrefix)
	if !ok || !event.ValidSessionID(id) {
		return "", false
	}
	return id, true
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
	evs, err := d.Runs.Store.Read(ctx, sessionID, 1)
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
	_, err = d.Runs.Store.Append(ctx, sessionID, last.Seq, event.Draft{RunID: last.RunID, Type: event.ArtifactEmitted, Actor: run.HostActor, Payload: payload})
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
func (d *Dispatcher) loadSession(ctx context.Context, repo Repo, sessionID string) ([]event.Event, error) {
	evs, err := d.Runs.Store.Read(ctx, sessionID, 1)
	if err != nil {
		return nil, err
	}
	if len(evs) > 0 {
		return evs, nil
	}
	raw, err := d.Git.LoadArtifact(ctx, repo, sessionID)
	if err != nil {
		return nil, fmt.Errorf("load session %s from %s: %w", sessionID, d.Git.ArtifactBranch(), err)
	}
	// The one recovery path of CLI, server and Action: verify, then import.
	if _, err := run.ImportLog(ctx, d.Runs.Store, sessionID, raw); err != nil {
		if errors.Is(err, run.ErrUnverifiedLog) {
			return nil, fmt.Errorf("%w: %v", ErrTamperedLog, err)
		}
		return nil, err
	}
	evs, err = d.Runs.Store.Read(ctx, sessionID, 1)
	if err != nil {
		return nil, err
	}
	if l, ok := loadLink(evs); !ok || l.Repo != repo.FullName() {
		return nil, fmt.Errorf("%w: the log does not belong to %s", ErrTamperedLog, repo.FullName())
	}
	return evs, nil
}

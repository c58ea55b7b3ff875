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
	"errors"
	"fmt"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/tracking"
	"log/slog"
	"strings"
	"time"

	"github.com/agentos/agentos/bot/auth"
	"github.com/agentos/agentos/bot/command"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/kernel/worktree"
	"github.com/agentos/agentos/runtime/keylock"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/untrusted"
)

// EngineRequest says which worktree an engine works in.
type EngineRequest struct {
	Dir       string // the session's worktree: the kernel is jailed in it
	SessionID string
	// Untrusted is set when the worktree holds code from outside the
	// repository (a fork's pull request): its own hooks, skills and
	// workflow definitions must not be loaded.
	Untrusted bool
	// Runs is the dispatcher's run manager: the engine's workflow plane
	// must start cycles through it (setup.Options.Runs).
	Runs *run.Manager
}

// Engines builds a run engine for a session's worktree, with the workflow
// plane as its Plane (setup.Build with Options.Runs = r.Runs and
// RequireWorkflows): every `/agent` run is a cycle. The returned func
// releases it.
type Engines func(ctx context.Context, r EngineRequest) (*run.Engine, func(), error)

// Dispatcher handles triggers. It is built by New and not changed
// afterwards: every setting is in the Config it was built from.
type Dispatcher struct {
	word               string // the command word (Config.Trigger)
	botLogin           string
	gh                 GitHub
	authz              Authorizer
	git                Git
	runs               *run.Manager
	engines            Engines
	logger             *slog.Logger
	clock              func() time.Time
	serverURL          string
	onResult           func(Result)
	installs           Installations
	sandbox            string
	viewerBase         string
	preflight          func(ctx context.Context) error
	leases             SessionLeases
	workflows          Workflows // the zero value: no review or triage cycles
	prefix             string
	resumeFromArtifact bool
	routes             routeTable // routes(), taken once

	locks keylock.Map // per session, in this process
}

// ErrConfig is returned by New for a Config it cannot build a working
// Dispatcher from.
var ErrConfig = errors.New("dispatch: invalid configuration")

// New builds a Dispatcher from c, checked: a missing required dependency
// or an invalid setting is an error wrapping ErrConfig, never a
// dispatcher that fails on its first trigger. With c.Workflows.OwnPlane
// the review and triage cycles Reviewer and Triager leave unset run on
// the dispatcher's own workflow plane (its worktrees, engines and run
// manager).
func New(c Config) (*Dispatcher, error) {
	var missing []string
	for _, r := range []struct {
		name string
		set  bool
	}{
		{"BotLogin (the bot's own login: its own events are dropped, and it never authorizes itself)", c.BotLogin != ""},
		{"GitHub", c.GitHub != nil},
		{"Auth", c.Auth != nil},
		{"Git", c.Git != nil},
		{"Runs", c.Runs != nil},
		{"Engines", c.Engines != nil},
	} {
		if !r.set {
			missing = append(missing, r.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: missing %s", ErrConfig, strings.Join(missing, ", "))
	}
	if c.BranchPrefix != "" {
		if err := worktree.CheckBranchPrefix(c.BranchPrefix); err != nil {
			return nil, fmt.Errorf("%w: branch prefix: %w", ErrConfig, err)
		}
	}
	if c.ServerURL != "" && !strings.HasPrefix(c.ServerURL, "https://") && !strings.HasPrefix(c.ServerURL, "http://") {
		return nil, fmt.Errorf("%w: server URL %q is not http(s)", ErrConfig, c.ServerURL)
	}
	d := &Dispatcher{
		word: c.Trigger, botLogin: c.BotLogin, gh: c.GitHub, authz: c.Auth, git: c.Git, runs: c.Runs, engines: c.Engines,
		logger: c.Log, clock: c.Now, serverURL: c.ServerURL, onResult: c.Result, installs: c.Installations,
		sandbox: c.Sandbox, viewerBase: c.ViewerBase, preflight: c.Preflight, leases: c.Leases,
		prefix: c.BranchPrefix, resumeFromArtifact: c.ResumeFromArtifact, routes: routes(),
	}
	if w := c.Workflows; w != nil {
		d.workflows = *w
		if w.OwnPlane {
			plane := &workflowPlane{D: d}
			if d.workflows.Reviewer == nil {
				d.workflows.Reviewer = plane
			}
			if d.workflows.Triager == nil {
				d.workflows.Triager = plane
			}
		}
	}
	return d, nil
}

// BotLogin is the bot's own login, as the dispatcher was built with.
func (d *Dispatcher) BotLogin() string { return d.botLogin }

// Authorizer is the dispatcher's authorizer: who may drive the bot (the
// viewer checks maintainers with the same one).
func (d *Dispatcher) Authorizer() Authorizer { return d.authz }

// Config is everything a Dispatcher is built from (New). BotLogin,
// GitHub, Auth, Git, Runs and Engines are required; the rest is optional.
type Config struct {
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
	// `/agent review` and `/agent triage` (see cycles.go); without it
	// those commands answer that they are not set up here.
	Workflows *Workflows
	// BranchPrefix starts the branches of new sessions (branch_prefix,
	// default agent/; see CheckBranchPrefix). A session keeps the branch
	// its link records, so sessions begun under an earlier prefix are
	// still found and resumed after it changes.
	BranchPrefix string
	// ResumeFromArtifact, when set (the Action: every job starts on a
	// fresh machine, and the session's log on the artifact branch is the
	// only state), makes a new run look for its session's log there
	// before it starts: a re-run of the same workflow run (the same
	// delivery id, so the same session) continues the session an earlier
	// attempt began instead of starting it a second time.
	ResumeFromArtifact bool
}

// Result is how one trigger ended.
type Result struct {
	Outcome   string // ignored | refused | help | started | not_started (the provider preflight failed: nothing ran) | answered | cancelled | withdrawn (a cancel withdrew the queued request: nothing ran) | status | replied | recorded | reviewed | triaged
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
	// Proposal is the session of the fix proposal a review started (or
	// found started).
	Proposal string
}

// ErrTamperedLog is returned when a session log loaded from the artifact
// branch does not verify.
var ErrTamperedLog = errors.New("session log on the artifact branch does not verify")

// ErrPreflight wraps the error of a failed Preflight: the run was not
// started and nothing was written to GitHub.
var ErrPreflight = errors.New("preflight failed: the run was not started")

// Dispatch handles one trigger. Errors are returned only for failures worth
// retrying or reporting (GitHub or git unreachable, a store failure); a
// refused or ignored trigger is a nil error with a Result.
func (d *Dispatcher) Dispatch(ctx context.Context, t webhook.Trigger) error {
	res, err := d.dispatch(ctx, t)
	if d.onResult != nil {
		d.onResult(res)
	}
	if err != nil {
		switch {
		case errors.Is(err, ErrPreflight): // startRun logged it
		case errors.Is(err, run.ErrInterrupted):
			// This process is stopping: the run is handed back, for the
			// process that takes the delivery over (not a failure).
			d.log().Info("dispatch handed back", "delivery", t.DeliveryID, "repo", t.Repo, "number", t.Number, "session", res.SessionID, "reason", err)
		case errors.Is(err, store.ErrUnavailable):
			// Not a failure: the delivery waits for the store and is
			// retried.
			d.log().Warn("dispatch waits for the store", "delivery", t.DeliveryID, "repo", t.Repo, "number", t.Number, "session", res.SessionID, "err", err)
		case errors.Is(err, webhook.ErrBusy):
			// Not a failure: another replica works the session; retried
			// every couple of seconds until it lets go.
			d.log().Info("dispatch waits", "delivery", t.DeliveryID, "repo", t.Repo, "number", t.Number, "session", res.SessionID, "reason", err)
		default:
			d.log().Error("dispatch failed", "delivery", t.DeliveryID, "repo", t.Repo, "number", t.Number, "session", res.SessionID, "err", err)
		}
		if errors.Is(err, ErrTamperedLog) {
			// No retry makes a tampered log verify.
			err = fmt.Errorf("%w: %w", webhook.ErrPermanent, err)
		}
		err = storeWait(err)
	}
	return err
}

// logOutcome logs how a run ended or paused, at INFO (the default level),
// so that an operator sees every run's fate without debug logs: the
// session, repository, issue and pull request, and for a run that did not
// complete its error class and terminal reason.
func (d *Dispatcher) logOutcome(repo github.Repo, l link, res Result, snap replay.Snapshot) {
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
	if d.logger != nil {
		return d.logger
	}
	return slog.Default()
}

func (d *Dispatcher) now() time.Time {
	if d.clock != nil {
		return d.clock()
	}
	return time.Now()
}

func (d *Dispatcher) trigger() string {
	if d.word == "" {
		return command.DefaultTrigger
	}
	return d.word
}

func (d *Dispatcher) dispatch(ctx context.Context, t webhook.Trigger) (Result, error) {
	// The bot's own comments and reviews come back as webhooks: drop them
	// before anything else.
	if d.botLogin != "" && strings.EqualFold(t.Author, d.botLogin) {
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
	// Events are routed on what they are; a comment on the command it holds.
	var r route
	if !isComment(t) {
		var ok bool
		var reason string
		if r, ok, reason = d.routes.lookup(t, ""); !ok {
			return d.unrouted(t, reason), nil
		}
	}
	var repo github.Repo
	if t.Kind != webhook.KindInstallation { // an account's installation has no repository
		var ok bool
		if repo, ok = github.ParseRepo(t.Repo); !ok {
			return Result{Outcome: "ignored", Reason: "no repository"}, nil
		}
		d.remember(repo, t.InstallationID)
	}
	var c command.Cmd
	if isComment(t) {
		p := d.parse(t.Body)
		switch p.Kind {
		case command.Ignore:
			return Result{Outcome: "ignored", Reason: p.Reason}, nil
		case command.Invalid:
			body := tracking.Fit(fmt.Sprintf("@%s %s\n\nUsage: `%s`", t.Author, p.Reason, p.Usage))
			_, err := d.gh.CreateComment(ctx, repo, t.Number, body)
			return Result{Outcome: "replied", Reason: p.Reason}, err
		case command.Help:
			c = command.Cmd{Name: command.HelpCmd}
		default:
			c = p.Command
		}
		var ok bool
		var reason string
		if r, ok, reason = d.routes.lookup(t, c.Name); !ok {
			return d.unrouted(t, reason), nil
		}
	}
	// A route whose refusals are recorded on the session authorizes in its
	// handler, once it knows the session.
	if r.Need != "" && r.Refusal == reply {
		if res, refused, err := d.authorize(ctx, repo, t, r.Need, true); refused || err != nil {
			return res, err
		}
	}
	return r.handle(d, ctx, repo, t, c)
}

// unrouted is the result of a trigger no route takes: ignored, and logged
// with why, so that nothing the bot receives disappears without a trace.
func (d *Dispatcher) unrouted(t webhook.Trigger, reason string) Result {
	d.log().Info("trigger ignored", "reason", reason, "delivery", t.DeliveryID, "repo", t.Repo, "number", t.Number, "author", t.Author)
	return Result{Outcome: "ignored", Reason: reason}
}

// authorize checks the author; a refusal gets one polite comment when
// reply is set.
func (d *Dispatcher) authorize(ctx context.Context, repo github.Repo, t webhook.Trigger, action auth.Action, reply bool) (Result, bool, error) {
	dec := d.authz.Authorize(ctx, auth.Request{Owner: repo.Owner, Repo: repo.Name, Login: t.Author, UserType: t.AuthorType, Action: action})
	if dec.Allowed {
		return Result{}, false, nil
	}
	res := Result{Outcome: "refused", Reason: string(dec.Reason)}
	d.log().Info("refused", "repo", repo.FullName(), "author", t.Author, "action", action, "reason", dec.Reason, "detail", dec.Detail, "delivery", t.DeliveryID)
	if !reply {
		return res, true, nil
	}
	_, err := d.gh.CreateComment(ctx, repo, t.Number, auth.RefusalMessage(dec))
	return res, true, err
}

// SessionLeases grant one replica at a time the right to work a session
// (postgres.Leases).
type SessionLeases interface {
	Acquire(ctx context.Context, sessionID string) (release func(), err error)
}

// CancelRequester is SessionLeases that can ask the replica holding a
// session's lease to cancel the session's run (the PostgreSQL leases:
// the holder hears of it at its next renewal and calls CancelRequested).
type CancelRequester interface {
	RequestCancel(ctx context.Context, sessionID, by, reason string) (held bool, err error)
}

// CancelRequested cancels the run of sessionID this process works, as
// another replica asked (a `/agent cancel`, a closed pull request or the
// API's cancel that reached it while this replica held the session): the
// run's own flow records the cancel and publishes its end. A session
// this process does not run right now is left alone: the asking
// replica's delivery is retried and cancels it once the lease is free.
func (d *Dispatcher) CancelRequested(sessionID, by, reason string) {
	if !d.runs.Running(sessionID) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := d.runs.Cancel(ctx, sessionID, by, reason); err != nil && !errors.Is(err, run.ErrNotPaused) {
		d.log().Warn("cancel asked by another replica failed", "session", sessionID, "by", by, "err", err)
		return
	}
	d.log().Info("run cancelled as another replica asked", "session", sessionID, "by", by)
}

// ErrSessionBusy is returned when another replica holds the session's
// lease; it wraps webhook.ErrBusy, so the delivery is retried with backoff
// for as long as it takes, never dead-lettered for its attempts.
var ErrSessionBusy = fmt.Errorf("the session is being worked by another replica; the delivery goes back to the queue (%w)", webhook.ErrBusy)

// lease serialises work on the session in this process (lock) and, with
// Leases, across replicas.
func (d *Dispatcher) lease(ctx context.Context, sid string) (func(), error) {
	unlock := d.lock(sid)
	if d.leases == nil {
		return unlock, nil
	}
	release, err := d.leases.Acquire(ctx, sid)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("%w: %w", ErrSessionBusy, err)
	}
	return func() { release(); unlock() }, nil
}

// lock serialises the dispatcher's work on one session in this process.
// A session's lock is forgotten once nobody holds or waits for it.
func (d *Dispatcher) lock(key string) func() { return d.locks.Lock(key) }

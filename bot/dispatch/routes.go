package dispatch

// The route table: every trigger the bot receives is looked up here, from
// (webhook event, action, /agent command) to its handler, with the
// permission its author needs. A trigger no route takes is ignored with
// the reason "no route for …", logged and reported through Result; it is
// never dropped silently. `/agent help` is rendered from this table, so it
// says who may use each command as the dispatcher enforces it.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/agentos/agentos/bot/auth"
	"github.com/agentos/agentos/bot/command"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/webhook"
)

// source is one way a trigger arrives: a GitHub webhook event and action,
// as webhook.Normalize turns it into a Trigger of Kind.
type source struct {
	Event   string   // X-GitHub-Event
	Actions []string // the event's actions; none: any
	Kind    string   // the Trigger kind they become
	State   string   // pull_request_review: the review's state
}

// The sources of the route table.
var (
	// A comment holding an /agent command: on an issue or pull request's
	// conversation, a line comment on a diff, or the body of a review
	// submitted as a comment.
	commentSources = []source{
		{Event: "issue_comment", Actions: []string{"created"}, Kind: webhook.KindComment},
		{Event: "pull_request_review_comment", Actions: []string{"created"}, Kind: webhook.KindReviewComment},
		{Event: "pull_request_review", Actions: []string{"submitted"}, Kind: webhook.KindReview, State: "commented"},
	}
	approvedReview     = []source{{Event: "pull_request_review", Actions: []string{"submitted"}, Kind: webhook.KindReview, State: "approved"}}
	changesRequested   = []source{{Event: "pull_request_review", Actions: []string{"submitted"}, Kind: webhook.KindReview, State: "changes_requested"}}
	pullRequestClosed  = []source{{Event: "pull_request", Actions: []string{"closed"}, Kind: webhook.KindPRClosed}}
	pullRequestPushed  = []source{{Event: "pull_request", Actions: []string{"synchronize"}, Kind: webhook.KindPRSynchronize}}
	installationEvents = []source{
		{Event: "installation", Kind: webhook.KindInstallation},
		{Event: "installation_repositories", Kind: webhook.KindInstallation},
	}
)

// refusal says what a refused author gets.
type refusal int

const (
	// reply: one polite comment saying why.
	reply refusal = iota
	// record: no reply; the refusal is recorded in the session's log (a
	// review from someone without write access neither approves nor
	// denies).
	record
)

// route is one entry of the route table.
type route struct {
	On []source
	// Command is the command of a route on comment sources ("" for
	// events): a lower-case word. Every word of the table but run, help,
	// approve and deny (whose grammar is bot/command's) is a bare command
	// word: `/agent <word>` alone is that command (Dispatcher.parse).
	Command command.Name
	// Need is what the author must be authorized for (auth.Authorizer:
	// write access, within the allow-lists); "" means no check: help, and
	// events GitHub sends about a session's own pull request.
	Need    auth.Action
	Refusal refusal
	// Handler names the function that handles it (file.function, the
	// file relative to this package's folder), for readers, logs and the
	// tests.
	Handler string
	// Summary and Examples describe a bare command word that bot/command
	// does not describe, for `/agent help` (the examples written with
	// "{trigger}"); bot/command describes its own words.
	Summary  string
	Examples []string
	handle   handler
}

type handler func(d *Dispatcher, ctx context.Context, repo github.Repo, t webhook.Trigger, c command.Cmd) (Result, error)

// routeTable is a route table: what a trigger is routed to, which events
// and actions the bot handles (events) and what `/agent help` says (help)
// all come from it.
type routeTable []route

// routes returns the bot's route table, commands in help order. It is
// built by a function, not kept in a variable: the help route renders the
// table. A Dispatcher takes it once, in New.
//
// A new trigger is one entry here when its event and action are ones
// webhook.Normalize turns into a Trigger (every action of issue_comment,
// pull_request_review_comment, pull_request_review, installation and
// installation_repositories; pull_request closed and synchronize): the
// intake accepts its event, the worker acts on its action, the
// reconciler redelivers it and the help lists it, all from this table
// (TestNewTriggerIsOneRouteTableEntry). A new bare `/agent <word>` (a
// command without arguments, like status) is one entry too, on
// commentSources with its Summary and Examples: the parser takes its
// bare words from this table (Dispatcher.parse), and the help lists it
// (TestNewCommandWordIsOneRouteTableEntry). Two things are not
// routing and are not here: a new event, or a pull_request action, needs
// its payload decoded into a Trigger kind (webhook.Normalize); a word
// that takes arguments, as approve and deny do, needs its grammar and
// its description in bot/command.
func routes() routeTable {
	return routeTable{
		{On: commentSources, Command: command.Run, Need: auth.ActionRun, Handler: "commands.startRun",
			handle: func(d *Dispatcher, ctx context.Context, repo github.Repo, t webhook.Trigger, c command.Cmd) (Result, error) {
				return d.startRun(ctx, repo, t, c.Prompt)
			}},
		{On: commentSources, Command: command.Approve, Need: auth.ActionApprove, Handler: "approvals.answer",
			handle: func(d *Dispatcher, ctx context.Context, repo github.Repo, t webhook.Trigger, c command.Cmd) (Result, error) {
				return d.answer(ctx, repo, t, answer{decision: "approve", id: c.ApprovalID, all: c.All})
			}},
		{On: commentSources, Command: command.Deny, Need: auth.ActionDeny, Handler: "approvals.answer",
			handle: func(d *Dispatcher, ctx context.Context, repo github.Repo, t webhook.Trigger, c command.Cmd) (Result, error) {
				return d.answer(ctx, repo, t, answer{decision: "deny", id: c.ApprovalID, reason: c.DenyReason})
			}},
		{On: commentSources, Command: command.Review, Need: auth.ActionRun, Handler: "../review/review.Review",
			handle: func(d *Dispatcher, ctx context.Context, repo github.Repo, t webhook.Trigger, _ command.Cmd) (Result, error) {
				return reported(d.reviews().Review(ctx, repo, t))
			}},
		{On: commentSources, Command: command.Triage, Need: auth.ActionRun, Handler: "../review/triage.Triage",
			handle: func(d *Dispatcher, ctx context.Context, repo github.Repo, t webhook.Trigger, _ command.Cmd) (Result, error) {
				return reported(d.reviews().Triage(ctx, repo, t))
			}},
		// Status posts the session's state, which comes from its log; the log
		// is imported from the artifact branch when this process has not seen
		// it, so asking costs work and posts a comment: write access, as for
		// the other commands.
		{On: commentSources, Command: command.Status, Need: auth.ActionStatus, Handler: "commands.status",
			handle: func(d *Dispatcher, ctx context.Context, repo github.Repo, t webhook.Trigger, _ command.Cmd) (Result, error) {
				return d.status(ctx, repo, t)
			}},
		{On: commentSources, Command: command.Cancel, Need: auth.ActionCancel, Handler: "commands.cancel",
			handle: func(d *Dispatcher, ctx context.Context, repo github.Repo, t webhook.Trigger, _ command.Cmd) (Result, error) {
				return d.cancel(ctx, repo, t, "cancelled with "+d.trigger()+" cancel")
			}},
		{On: commentSources, Command: command.HelpCmd, Handler: "commands.help",
			handle: func(d *Dispatcher, ctx context.Context, repo github.Repo, t webhook.Trigger, _ command.Cmd) (Result, error) {
				return d.help(ctx, repo, t)
			}},
		{On: approvedReview, Need: auth.ActionApprove, Refusal: record, Handler: "approvals.onApproveReview",
			handle: func(d *Dispatcher, ctx context.Context, repo github.Repo, t webhook.Trigger, _ command.Cmd) (Result, error) {
				return d.onApproveReview(ctx, repo, t)
			}},
		{On: changesRequested, Need: auth.ActionDeny, Refusal: record, Handler: "approvals.onChangesRequested",
			handle: func(d *Dispatcher, ctx context.Context, repo github.Repo, t webhook.Trigger, _ command.Cmd) (Result, error) {
				return d.onChangesRequested(ctx, repo, t)
			}},
		{On: pullRequestClosed, Handler: "pullrequests.onPRClosed",
			handle: func(d *Dispatcher, ctx context.Context, repo github.Repo, t webhook.Trigger, _ command.Cmd) (Result, error) {
				return d.onPRClosed(ctx, repo, t)
			}},
		{On: pullRequestPushed, Handler: "pullrequests.onPRSynchronize",
			handle: func(d *Dispatcher, ctx context.Context, repo github.Repo, t webhook.Trigger, _ command.Cmd) (Result, error) {
				return d.onPRSynchronize(ctx, repo, t)
			}},
		{On: installationEvents, Handler: "installations.installationChanged",
			handle: func(d *Dispatcher, ctx context.Context, _ github.Repo, t webhook.Trigger, _ command.Cmd) (Result, error) {
				return d.installationChanged(t), nil
			}},
	}
}

// matches reports whether t arrived the way s describes. A trigger that
// names its webhook event (every delivery, and the Action's event) must
// match event and action too; one built in code (a test, a replayed
// trigger) is matched on its kind and review state.
func (s source) matches(t webhook.Trigger) bool {
	if s.Kind != t.Kind || (s.State != "" && s.State != t.ReviewState) {
		return false
	}
	if t.Event == "" {
		return true
	}
	return s.Event == t.Event && (len(s.Actions) == 0 || slices.Contains(s.Actions, t.Action))
}

// isComment reports whether t arrived as a comment that may hold a command.
func isComment(t webhook.Trigger) bool {
	return slices.ContainsFunc(commentSources, func(s source) bool { return s.matches(t) })
}

// bare reports whether n is a command word of rt: ParseWith's bare words
// (bot/command does not ask about run, help, approve and deny).
func (rt routeTable) bare(n command.Name) bool {
	return n != "" && slices.ContainsFunc(rt, func(r route) bool { return r.Command == n })
}

// parse finds the command of a comment body with the dispatcher's trigger
// and its route table's bare words: what a comment asks is parsed the
// same way wherever the dispatcher reads one.
func (d *Dispatcher) parse(body string) command.Result {
	return command.ParseWith(body, d.trigger(), d.routes.bare)
}

// lookup finds the route of t in the bot's route table; for a comment, c
// is its parsed command. ok is false for a trigger no route takes: reason
// says what it was.
func lookup(t webhook.Trigger, c command.Name) (r route, ok bool, reason string) {
	return routes().lookup(t, c)
}

// lookup finds the route of t in rt (see the function lookup).
func (rt routeTable) lookup(t webhook.Trigger, c command.Name) (r route, ok bool, reason string) {
	for _, r := range rt {
		if r.Command != c {
			continue
		}
		if slices.ContainsFunc(r.On, func(s source) bool { return s.matches(t) }) {
			return r, true, ""
		}
	}
	return route{}, false, "no route for " + describe(t, c)
}

// describe names a trigger the way the route table does.
func describe(t webhook.Trigger, c command.Name) string {
	ev := t.Event
	switch {
	case ev != "":
	case t.Kind != "":
		ev = "trigger kind " + t.Kind
	default:
		ev = "a trigger without an event"
	}
	parts := []string{ev}
	if t.Action != "" {
		parts = append(parts, t.Action)
	}
	if t.ReviewState != "" {
		parts = append(parts, "(review "+t.ReviewState+")")
	}
	if c != "" {
		parts = append(parts, "command "+string(c))
	}
	return strings.Join(parts, " ")
}

// who says who may use a route, for the help text.
func (r route) who() string {
	if r.Need == "" {
		return "anyone who can comment"
	}
	return "users with write, maintain or admin permission on the repository (within the bot's `allowed_users`/`allowed_bots` lists when set)"
}

// helpText renders `/agent help` for trigger ("" means the default) from
// the bot's route table: each command's usage, what it does and who may
// use it, then the reviews that answer approvals.
func helpText(trigger string) string { return routes().help(trigger) }

// help renders `/agent help` from rt (see helpText).
func (rt routeTable) help(trigger string) string {
	if trigger == "" {
		trigger = command.DefaultTrigger
	}
	descs := map[command.Name]command.Description{}
	for _, d := range command.Descriptions() {
		descs[d.Name] = d
	}
	var b strings.Builder
	b.WriteString("### Commands\n\nWrite a command at the start of a line of a comment. Only the first command of a comment runs; commands in code blocks, code spans and quoted replies are ignored.\n\n")
	b.WriteString("| command | what it does | who may use it |\n|---|---|---|\n")
	var examples []string
	for _, r := range rt {
		if r.Command == "" {
			continue
		}
		d, ok := descs[r.Command]
		if !ok {
			d = command.Description{Name: r.Command, Summary: r.Summary, Examples: r.Examples}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", cell(d.Usage(trigger)), cell(strings.ReplaceAll(d.Summary, "{trigger}", trigger)), r.who())
		for _, e := range d.Examples {
			examples = append(examples, strings.ReplaceAll(e, "{trigger}", trigger))
		}
	}
	b.WriteString("\n### Reviews\n\nOn the pull request of a session waiting for approval:\n\n| review | what it does | who may use it |\n|---|---|---|\n")
	for _, r := range rt {
		if r.Command != "" || r.Need == "" {
			continue
		}
		switch {
		case slices.EqualFunc(r.On, approvedReview, sameSource):
			fmt.Fprintf(&b, "| Approve | Approves every pending action of the latest request; the run resumes. | %s; a review from anyone else is recorded and ignored |\n", r.who())
		case slices.EqualFunc(r.On, changesRequested, sameSource):
			fmt.Fprintf(&b, "| Request changes | Denies the pending actions; the review's text is the reason given to the agent. | %s; a review from anyone else is recorded and ignored |\n", r.who())
		}
	}
	b.WriteString("\n**Examples**\n\n```\n")
	for _, e := range examples {
		b.WriteString(e + "\n")
	}
	b.WriteString("```\n")
	return b.String()
}

func sameSource(a, b source) bool {
	return a.Event == b.Event && a.Kind == b.Kind && a.State == b.State && slices.Equal(a.Actions, b.Actions)
}

// cell escapes "|", which ends a table cell in GitHub Markdown even inside
// a code span.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// Events are the webhook events and actions some route of the bot's route
// table takes: the webhook handler (webhook.Config.Events) accepts these
// events (and ping), bot/worker's Processor acts on these actions and the
// reconciler redelivers failed deliveries of these events only; a new
// trigger is one entry of routes.
func Events() webhook.Events { return routes().events() }

// events are the webhook events and actions some route of rt takes (see
// Events).
func (rt routeTable) events() webhook.Events {
	ev := webhook.Events{}
	for _, r := range rt {
		for _, s := range r.On {
			acts, seen := ev[s.Event]
			switch {
			case !seen:
				ev[s.Event] = slices.Clone(s.Actions)
			case len(acts) == 0 || len(s.Actions) == 0:
				ev[s.Event] = nil // some source takes any action
			default:
				for _, a := range s.Actions {
					if !slices.Contains(acts, a) {
						acts = append(acts, a)
					}
				}
				ev[s.Event] = acts
			}
		}
	}
	return ev
}

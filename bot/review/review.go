// Package review owns what the bot does on GitHub around the workflow
// plane's review and triage cycles: `/agent review` on a pull request
// reads its files, hands the diff to the review cycle (Reviewer) and posts
// what it found as one PR review — findings the policies let through on
// the diff lines GitHub accepts, the rest in the review's body, what the
// policies held back counted by policy and reason, never quoted — and a
// review's safe_auto findings become one follow-up fix proposal;
// `/agent triage` on an issue applies the labels and posts the summary
// the triage cycle proposes, when the policies allow it.
//
// The session lifecycle (session ids, leases, the log, starting runs)
// belongs to bot/dispatch, which routes the commands here and serves the
// Sessions interface this package declares.
package review

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sort"
	"strings"

	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/tracking"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/untrusted"
	"github.com/agentos/agentos/runtime/workflow"
)

// Modes of a cycle (the mode-dispatch policy's input): a command in a
// comment is interactive; the Action on pull_request or issues is
// headless.
const (
	ModeInteractive = "interactive"
	ModeHeadless    = "headless"
)

// Input is what the review cycle reviews.
type Input struct {
	SessionID string
	Repo      string // owner/name
	PR        int
	HeadSHA   string
	// Diff is the pull request's unified diff, built from its files'
	// patches (binary and oversized files have none).
	Diff string
	// Files are the paths the pull request changes.
	Files []string
	Mode  string // ModeInteractive or ModeHeadless
	// Instructions are the maintainer's extra instructions (the Action's
	// custom_instructions), "" for none.
	Instructions string
	// HeadRef is the pull request's head branch. Untrusted is set when
	// the head comes from outside the repository (a fork): it is fetched
	// as refs/pull/N/head, and its own hooks and workflow definitions must
	// not run.
	HeadRef   string
	Untrusted bool
}

// FindingDecision is the policies' decision on one finding (by
// workflow.Finding.ID), as the review gate merged it (the most
// conservative outcome wins). Gate decides what the bot does with it:
// allow posts it (as a line comment when the diff shows its lines),
// advisory puts it in the review's body only, anything else — deny, an
// unknown decision, no decision at all — holds it back. Route is the
// severity-routing outcome (safe_auto, gated_auto, manual, advisory),
// shown beside the finding.
type FindingDecision struct {
	FindingID string
	Gate      workflow.Outcome
	Route     workflow.Outcome
}

// Output is what the review cycle returns.
type Output struct {
	Findings  []workflow.Finding
	Decisions []FindingDecision
	// Verdict is the cycle's verdict: done, halted or abort.
	Verdict string
	// Usage is what the cycle spent on models.
	Usage replay.Usage
	// Proposal is the bot's follow-up fix proposal for the safe_auto
	// findings, set by the bot (not the cycle) before the review is
	// built, so that the review's body names it; nil for none.
	Proposal *ProposalNote
	// Personas are the reviewer personas the cycle asked and how each
	// fared. One that did not report (its reply failed its schema, its
	// provider failed, a policy forbade it) reviewed nothing, and the
	// review says so instead of "Nothing to report".
	Personas []PersonaCoverage
	// Aggregate is the personas' fan-in verdict (pass or fail) and
	// Coverage the share of the personas that reported; "" when no
	// fan-in ran.
	Aggregate string
	Coverage  float64
}

// PersonaCoverage is how one reviewer persona fared in the review.
type PersonaCoverage struct {
	Persona string
	// Status is ran, failed or forbidden.
	Status string
	Reason string
}

// Persona statuses of PersonaCoverage (the cycle's PersonaReport).
const (
	PersonaRan       = "ran"
	PersonaFailed    = "failed"
	PersonaForbidden = "forbidden"
)

// ProposalNote is what a review's body says of its fix proposal.
type ProposalNote struct {
	// SessionID is the proposal's session.
	SessionID string
	// Findings are the proposed findings' ids.
	Findings []string
}

// Reviewer runs the review cycle (the workflow plane's executor).
type Reviewer interface {
	Review(ctx context.Context, in Input) (Output, error)
}

// GitHub is the part of the GitHub API the review and triage flows use.
// *github.Client satisfies it.
type GitHub interface {
	CreateComment(ctx context.Context, repo github.Repo, number int, body string) (int64, error)
	// ListComments lists an issue's comments (all pages).
	ListComments(ctx context.Context, repo github.Repo, number int) ([]github.Comment, error)
	PullRequest(ctx context.Context, repo github.Repo, number int) (github.PullRequest, error)
	// ListPRFiles lists a pull request's files with their patches (all
	// pages).
	ListPRFiles(ctx context.Context, repo github.Repo, number int) ([]github.PRFile, error)
	// CreateReviewWithComments submits a review with line comments in one
	// request and returns its id.
	CreateReviewWithComments(ctx context.Context, repo github.Repo, number int, r github.NewReview) (int64, error)
	// HasReview reports whether author already posted a review on the
	// pull request whose body contains every one of parts (a marker).
	HasReview(ctx context.Context, repo github.Repo, number int, author string, parts ...string) (bool, error)
	Issue(ctx context.Context, repo github.Repo, number int) (github.Issue, error)
	// RepoLabels lists the repository's label names.
	RepoLabels(ctx context.Context, repo github.Repo) ([]string, error)
	// AddLabels adds labels to an issue.
	AddLabels(ctx context.Context, repo github.Repo, number int, labels []string) error
}

// Sessions is the session lifecycle the flows work in, served by
// bot/dispatch: a review or triage is a session of its own, derived from
// its delivery, so a delivery handled again finds what an earlier
// attempt did.
type Sessions interface {
	// SessionID is the session a trigger starts (derived from its
	// delivery id).
	SessionID(t webhook.Trigger) string
	// Lease holds the session for the caller, in this process and across
	// replicas; release lets it go.
	Lease(ctx context.Context, sessionID string) (release func(), err error)
	// MayRun reports whether t's author may start runs on repo (the check
	// of `/agent <prompt>`); a refusal posts nothing.
	MayRun(ctx context.Context, repo github.Repo, t webhook.Trigger) (bool, error)
	// Events reads the session's log; none when it has none.
	Events(ctx context.Context, sessionID string) ([]event.Event, error)
	// Annotate appends a record of kind (artifact.emitted, JSON content)
	// to the session's log, which must exist.
	Annotate(ctx context.Context, sessionID, kind string, v any) error
	// KeepLog commits the session's log to the artifact branch and links
	// it at that commit; "" when logs live on session branches.
	KeepLog(ctx context.Context, repo github.Repo, sessionID string) (string, error)
	// IsSessionBranch reports whether branch is an agentos session's.
	IsSessionBranch(ctx context.Context, repo github.Repo, branch string) (bool, error)
	// StartRun starts the run t asks for with prompt, as `/agent <prompt>`
	// does (or finds it started: the session derives from t's delivery),
	// and returns its session ("" when none started).
	StartRun(ctx context.Context, repo github.Repo, t webhook.Trigger, prompt string) (string, error)
}

// Result is how a review or triage trigger ended (bot/dispatch reports it
// as its own Result).
type Result struct {
	Outcome   string // replied | ignored | reviewed | triaged
	Reason    string
	SessionID string
	Status    string // the cycle's verdict
	PR        int
	Usage     replay.Usage
	Spent     replay.Usage
	LogURL    string
	// Proposal is the session of the fix proposal a review started (or
	// found started).
	Proposal string
}

// Handler answers `/agent review` and `/agent triage`. A nil Reviewer or
// Triager makes the command answer that the cycle is not set up here.
type Handler struct {
	GitHub   GitHub
	Sessions Sessions
	Reviewer Reviewer
	Triager  Triager
	// Trigger is the command word (/agent), BotLogin the bot's own login.
	Trigger  string
	BotLogin string
	// Mode is the mode the cycles run in (ModeInteractive or
	// ModeHeadless).
	Mode string
	// Instructions are passed to every cycle (custom_instructions).
	Instructions string
	// ProposeFixes makes a review's safe_auto findings one follow-up fix
	// proposal (see proposal.go): a fix session that pauses for approval
	// like any `/agent` request. Without it a review only reports.
	ProposeFixes bool
	Log          *slog.Logger
}

func (h *Handler) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.Default()
}

// Marker starts the body of every review the bot posts for a session, so
// a redelivered trigger finds it instead of posting twice.
func Marker(sessionID string) string {
	return "<!-- agentos:review session=" + sessionID + " -->"
}

// ErrNotConfigured is the reason given when a cycle command reaches a bot
// without the workflow plane's cycles configured.
var ErrNotConfigured = errors.New("the workflow plane is not configured on this bot")

// Review handles `/agent review` (and the Action's review cycle).
func (h *Handler) Review(ctx context.Context, repo github.Repo, t webhook.Trigger) (Result, error) {
	if !t.IsPR {
		_, err := h.GitHub.CreateComment(ctx, repo, t.Number, fmt.Sprintf("@%s `%s review` works on pull requests. On an issue, `%s triage` proposes labels and a summary.", t.Author, h.Trigger, h.Trigger))
		return Result{Outcome: "replied", Reason: "review on an issue"}, err
	}
	if h.Reviewer == nil {
		_, err := h.GitHub.CreateComment(ctx, repo, t.Number, fmt.Sprintf("@%s %s, so `%s review` cannot run here.", t.Author, ErrNotConfigured, h.Trigger))
		return Result{Outcome: "replied", Reason: ErrNotConfigured.Error()}, err
	}
	pr, err := h.GitHub.PullRequest(ctx, repo, t.Number)
	if err != nil {
		return Result{}, err
	}
	if pr.State == "closed" {
		_, err := h.GitHub.CreateComment(ctx, repo, t.Number, fmt.Sprintf("@%s this pull request is closed, so I won't review it.", t.Author))
		return Result{Outcome: "replied", Reason: "closed"}, err
	}
	sid := h.Sessions.SessionID(t)
	unlock, err := h.Sessions.Lease(ctx, sid)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	marker := Marker(sid)
	if done, err := h.GitHub.HasReview(ctx, repo, t.Number, h.BotLogin, marker); err != nil {
		return Result{}, err
	} else if done {
		// The review is posted; the proposal it recorded may not have
		// started yet (the process died in between): start it, or find
		// it started (its session derives from the review's).
		res := Result{Outcome: "ignored", Reason: "review already posted", SessionID: sid, PR: t.Number}
		if h.ProposeFixes {
			p, ok, err := h.recordedProposal(ctx, sid)
			if err != nil {
				return res, err
			}
			if ok {
				if res.Proposal, err = h.startProposal(ctx, repo, t, pr, p); err != nil {
					return res, err
				}
			}
		}
		return res, nil
	}
	files, err := h.GitHub.ListPRFiles(ctx, repo, t.Number)
	if err != nil {
		return Result{}, err
	}
	dm, err := github.NewDiffMap(files)
	if err != nil {
		return Result{}, err
	}
	in := Input{SessionID: sid, Repo: repo.FullName(), PR: t.Number, HeadSHA: pr.HeadSHA, HeadRef: pr.HeadRef, Diff: unifiedDiff(files), Mode: h.Mode, Instructions: h.Instructions,
		Untrusted: pr.HeadRepo != repo.FullName()}
	for _, f := range files {
		in.Files = append(in.Files, f.Path)
	}
	out, err := h.Reviewer.Review(ctx, in)
	if err != nil {
		return Result{SessionID: sid, PR: t.Number}, fmt.Errorf("review cycle: %w", err)
	}
	for _, dc := range out.Decisions {
		// The decisions, never the findings' text, go to the bot's log.
		h.log().Info("review finding decided", "repo", repo.FullName(), "pr", t.Number, "session", sid, "finding", dc.FindingID,
			"gate", dc.Gate.Decision, "policy", dc.Gate.PolicyID, "reason", dc.Gate.Reason, "route", dc.Route.Decision)
	}
	var prop *fixProposal
	if h.ProposeFixes {
		if prop, err = h.proposeFixes(ctx, repo, t, sid, pr, out); err != nil {
			return Result{SessionID: sid, PR: t.Number}, err
		}
		if prop != nil {
			out.Proposal = &ProposalNote{SessionID: prop.ProposalSession}
			for _, f := range prop.Findings {
				out.Proposal.Findings = append(out.Proposal.Findings, f.ID)
			}
		}
	}
	rv, rec := Build(sid, pr.HeadSHA, h.Trigger, dm, out)
	rec.PR = t.Number
	res := Result{Outcome: "reviewed", SessionID: sid, PR: t.Number, Status: out.Verdict, Usage: out.Usage, Spent: out.Usage}
	id, err := h.GitHub.CreateReviewWithComments(ctx, repo, t.Number, rv)
	var apiErr *github.APIError
	if errors.As(err, &apiErr) && apiErr.Status == 422 && len(rv.Comments) > 0 {
		// GitHub could not place a comment (the head moved since the files
		// were read): post the same findings in the body rather than lose
		// them.
		h.log().Warn("review comments refused; posting them in the body", "repo", repo.FullName(), "pr", t.Number, "session", sid, "err", err)
		rv, rec = Build(sid, pr.HeadSHA, h.Trigger, github.DiffMap{}, out)
		rec.PR, rec.InBodyOnly = t.Number, true
		id, err = h.GitHub.CreateReviewWithComments(ctx, repo, t.Number, rv)
	}
	if err != nil {
		return res, err
	}
	rec.ReviewID = id
	if res.LogURL, err = h.recordReview(ctx, repo, sid, rec); err != nil {
		// The review is posted and a retry would find it by its marker
		// and stop there: say so loudly instead of failing the delivery.
		h.log().Error("review posted, but its record was not kept in the session log", "repo", repo.FullName(), "pr", t.Number, "session", sid, "err", err)
	}
	h.log().Info("review posted", "repo", repo.FullName(), "pr", t.Number, "session", sid, "comments", len(rv.Comments), "verdict", out.Verdict)
	if prop != nil {
		// Recorded before the review was posted: a retried delivery that
		// finds the review starts (or finds) this same proposal.
		if res.Proposal, err = h.startProposal(ctx, repo, t, pr, *prop); err != nil {
			return res, err
		}
	}
	return res, nil
}

// unifiedDiff joins the files' patches under git-style headers: the
// review cycle's input.
func unifiedDiff(files []github.PRFile) string {
	var b strings.Builder
	for _, f := range files {
		old := f.Path
		if f.PreviousPath != "" {
			old = f.PreviousPath
		}
		fmt.Fprintf(&b, "diff --git a/%s b/%s\n", old, f.Path)
		if f.Patch == "" {
			b.WriteString("(no patch: binary or too large)\n")
			continue
		}
		from, to := "a/"+old, "b/"+f.Path
		switch f.Status {
		case "added":
			from = "/dev/null"
		case "removed":
			to = "/dev/null"
		}
		fmt.Fprintf(&b, "--- %s\n+++ %s\n%s", from, to, f.Patch)
		if !strings.HasSuffix(f.Patch, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

var severities = map[string]bool{"P0": true, "P1": true, "P2": true, "P3": true}

// validFinding checks what a model produced before any of it is shown:
// a relative, clean path (or none), lines that make sense, a known
// severity and a title.
func validFinding(f workflow.Finding) bool {
	if f.Path != "" && (path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || strings.HasPrefix(f.Path, "../") || f.Path == ".." || strings.ContainsAny(f.Path, "\x00\n\r`")) {
		return false
	}
	if f.Line < 0 || f.EndLine < 0 || (f.Line == 0 && f.EndLine != 0) {
		return false
	}
	return severities[f.Severity] && strings.TrimSpace(f.Title) != ""
}

// Build renders the review for out: the allowed findings on the
// lines dm places them on, the others in the body; findings the policies
// held back (or that no decision covers: default deny) and malformed ones
// are only counted. The event is always COMMENT: the bot reports, and a
// maintainer decides; a bot's REQUEST_CHANGES would block merging under
// branch protection until someone dismissed it, and nobody may approve
// their own pull request, the bot's follow-up fixes included.
func Build(sessionID, headSHA, trigger string, dm github.DiffMap, out Output) (github.NewReview, Record) {
	rec := Record{Head: headSHA, Verdict: out.Verdict}
	decisions := map[string]FindingDecision{}
	for _, dc := range out.Decisions {
		if prev, ok := decisions[dc.FindingID]; ok {
			// Two decisions on one finding: the conservative one stands.
			m, err := workflow.Merge(prev.Gate, dc.Gate)
			if err != nil {
				m = workflow.Outcome{PolicyID: "(merge)", Decision: workflow.Deny, Reason: err.Error()}
			}
			dc.Gate = m
		}
		decisions[dc.FindingID] = dc
	}
	type held struct{ policy, reason string }
	heldBack := map[held]int{}
	malformed := 0
	var inBody []workflow.Finding
	rv := github.NewReview{CommitID: headSHA, Event: "COMMENT"}
	posted := 0
	for _, f := range out.Findings {
		if !validFinding(f) {
			malformed++
			rec.Dropped++
			continue
		}
		dc, ok := decisions[f.ID]
		if !ok || f.ID == "" {
			heldBack[held{"", "no policy decision: denied by default"}]++
			rec.HeldBack = append(rec.HeldBack, HeldFinding{Finding: f.ID, Policy: "", Decision: string(workflow.Deny), Reason: "no policy decision: denied by default"})
			continue
		}
		switch dc.Gate.Decision {
		case workflow.Allow, workflow.Advisory:
		default:
			heldBack[held{dc.Gate.PolicyID, dc.Gate.Reason}]++
			rec.HeldBack = append(rec.HeldBack, HeldFinding{Finding: f.ID, Policy: dc.Gate.PolicyID, Decision: string(dc.Gate.Decision), Reason: dc.Gate.Reason})
			continue
		}
		posted++
		if c, ok := dm.Place(f.Path, f.Line, f.EndLine); ok && dc.Gate.Decision == workflow.Allow {
			var suggested bool
			c.Body, suggested = lineCommentText(f, dc, trigger, exactRange(c, f))
			rv.Comments = append(rv.Comments, c)
			rec.Comments = append(rec.Comments, PlacedFinding{Finding: f.ID, Path: c.Path, Line: c.Line, StartLine: c.StartLine, Side: c.Side,
				Suggestion: suggested})
			continue
		}
		inBody = append(inBody, f)
		rec.InBody = append(rec.InBody, f.ID)
	}
	var notReviewed []PersonaCoverage
	for _, p := range out.Personas {
		if p.Status != PersonaRan {
			notReviewed = append(notReviewed, p)
			rec.NotReviewed = append(rec.NotReviewed, NotReviewed(p))
		}
	}
	reviewedBy := len(out.Personas) - len(notReviewed)
	var b strings.Builder
	b.WriteString(Marker(sessionID) + "\n")
	if len(out.Personas) > 0 && reviewedBy == 0 {
		fmt.Fprintf(&b, "### agentos review: not reviewed\n\n")
	} else {
		fmt.Fprintf(&b, "### agentos review: %d finding%s\n\n", posted, plural(posted))
	}
	reviewed := "Reviewed"
	if len(out.Personas) > 0 && reviewedBy == 0 {
		reviewed = "Asked to review"
	}
	if headSHA != "" {
		fmt.Fprintf(&b, "%s at `%s`", reviewed, oneWord(short(headSHA)))
	} else {
		b.WriteString(reviewed)
	}
	if out.Verdict != "" {
		fmt.Fprintf(&b, "; the review cycle ended %s", oneWord(out.Verdict))
	}
	b.WriteString(". ")
	if out.Aggregate != "" {
		fmt.Fprintf(&b, "The reviewers' verdict: %s (%d of %d persona%s reported). ", oneWord(out.Aggregate), reviewedBy, len(out.Personas), plural(len(out.Personas)))
	}
	switch {
	case len(out.Personas) > 0 && reviewedBy == 0:
		// Coverage 0: no finding means nothing, say so.
		fmt.Fprintf(&b, "No reviewer persona reported, so this pull request was **not reviewed**; see below why.\n")
	case posted == 0 && len(notReviewed) > 0:
		fmt.Fprintf(&b, "No findings from the %d persona%s that reported, but the review is **incomplete**: %d did not review.\n", reviewedBy, plural(reviewedBy), len(notReviewed))
	case posted == 0:
		b.WriteString("Nothing to report.\n")
	case len(rv.Comments) > 0:
		fmt.Fprintf(&b, "%d on the diff as line comments.\n", len(rv.Comments))
	default:
		b.WriteString("\n")
	}
	if len(notReviewed) > 0 {
		b.WriteString("\n#### Not reviewed\n\nWhat these personas review was not looked at in this review.\n\n")
		for _, p := range notReviewed {
			why := p.Status
			if r := clean(p.Reason, 300, trigger); r != "" {
				why += ": " + r
			}
			fmt.Fprintf(&b, "- not reviewed: `%s` (%s)\n", oneWord(p.Persona), why)
		}
	}
	if len(inBody) > 0 {
		b.WriteString("\n#### Not on the diff\n\nOutside the diff's lines, or advisory by policy.\n\n")
		for _, f := range inBody {
			where := "(no location)"
			if f.Path != "" {
				where = "`" + f.Path
				if f.Line > 0 {
					where += fmt.Sprintf(":%d", f.Line)
					if f.EndLine > f.Line {
						where += fmt.Sprintf("-%d", f.EndLine)
					}
				}
				where += "`"
			}
			fmt.Fprintf(&b, "- %s — %s", where, findingText(f, decisions[f.ID], trigger))
			if body := clean(f.Body, 300, trigger); body != "" {
				b.WriteString(": " + body)
			}
			b.WriteString("\n")
		}
	}
	if p := out.Proposal; p != nil && len(p.Findings) > 0 {
		n := len(p.Findings)
		fmt.Fprintf(&b, "\n#### Fix proposal\n\n%d safe_auto finding%s %s proposed as one fix in session `%s`. It runs like a `%s` request: it pauses for a maintainer's approval, and nothing is pushed before that; its tracking comment on this pull request links its draft pull request.\n",
			n, plural(n), map[bool]string{true: "is", false: "are"}[n == 1], oneWord(p.SessionID), trigger)
		rec.Proposal = p.SessionID
	}
	if len(heldBack) > 0 || malformed > 0 {
		b.WriteString("\n#### Held back\n\n")
		keys := make([]held, 0, len(heldBack))
		for k := range heldBack {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if keys[i].policy != keys[j].policy {
				return keys[i].policy < keys[j].policy
			}
			return keys[i].reason < keys[j].reason
		})
		for _, k := range keys {
			n := heldBack[k]
			if k.policy == "" {
				fmt.Fprintf(&b, "- %d finding%s held back: no policy decided %s (denied by default)\n", n, plural(n), map[bool]string{true: "it", false: "them"}[n == 1])
				continue
			}
			fmt.Fprintf(&b, "- %d finding%s held back by policy `%s`: %s\n", n, plural(n), oneWord(k.policy), clean(k.reason, 300, trigger))
		}
		if malformed > 0 {
			fmt.Fprintf(&b, "- %d malformed finding%s dropped (bad path, line or severity)\n", malformed, plural(malformed))
		}
	}
	rv.Body = tracking.Fit(b.String())
	return rv, rec
}

// Record is what the bot did with a review cycle's findings, kept in the
// session's log (artifact.emitted, kind github.review) beside the
// cycle's own events: which finding went on which line, which into the
// body, which a policy held back and why.
type Record struct {
	PR       int             `json:"pr"`
	ReviewID int64           `json:"review_id,omitempty"`
	Head     string          `json:"head,omitempty"`
	Verdict  string          `json:"verdict,omitempty"`
	Comments []PlacedFinding `json:"comments,omitempty"`
	InBody   []string        `json:"in_body,omitempty"`
	HeldBack []HeldFinding   `json:"held_back,omitempty"`
	Dropped  int             `json:"dropped,omitempty"`
	// InBodyOnly is set when GitHub refused the line comments and every
	// finding went into the body.
	InBodyOnly bool `json:"in_body_only,omitempty"`
	// Proposal is the session of the review's fix proposal, if any.
	Proposal string `json:"proposal,omitempty"`
	// NotReviewed are the personas that did not review (failed or
	// forbidden), as the review's body lists them.
	NotReviewed []NotReviewed `json:"not_reviewed,omitempty"`
}

// NotReviewed is a reviewer persona that did not review.
type NotReviewed struct {
	Persona string `json:"persona"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
}

// PlacedFinding is a finding posted as a line comment.
type PlacedFinding struct {
	Finding   string `json:"finding"`
	Path      string `json:"path"`
	Line      int    `json:"line"`
	StartLine int    `json:"start_line,omitempty"`
	Side      string `json:"side"`
	// Suggestion is set when the comment carries the finding's suggested
	// change.
	Suggestion bool `json:"suggestion,omitempty"`
}

// HeldFinding is a finding a policy kept off GitHub.
type HeldFinding struct {
	Finding  string `json:"finding"`
	Policy   string `json:"policy"`
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
}

// reviewKind is the log annotation of a posted review.
const reviewKind = "github.review"

// recordReview appends rec to the session's log and commits the log to
// the artifact branch, when the review cycle left a log under the session
// (the workflow plane's executor does); it returns the link to the log at
// that commit, "" when there was no log to keep.
func (h *Handler) recordReview(ctx context.Context, repo github.Repo, sid string, rec Record) (string, error) {
	evs, err := h.Sessions.Events(ctx, sid)
	if err != nil || len(evs) == 0 {
		return "", err
	}
	if err := h.Sessions.Annotate(ctx, sid, reviewKind, rec); err != nil {
		return "", err
	}
	return h.Sessions.KeepLog(ctx, repo, sid)
}

// findingText renders one finding: severity, rule, reviewer and title,
// the route when severity-routing gave one. Everything from the model is
// cleaned of hidden text, @mentions, images and command lines.
func findingText(f workflow.Finding, dc FindingDecision, trigger string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s**", oneWord(f.Severity))
	if f.Rule != "" {
		fmt.Fprintf(&b, " `%s`", oneWord(f.Rule))
	}
	b.WriteString(" ")
	b.WriteString(clean(f.Title, 500, trigger))
	var meta []string
	if f.Reviewer != "" {
		// A finding fan-in merged names every persona that reported it,
		// comma-separated.
		var who []string
		for _, r := range strings.Split(f.Reviewer, ",") {
			if r = strings.TrimSpace(r); r != "" {
				who = append(who, oneWord(r))
			}
		}
		meta = append(meta, "reviewer: "+strings.Join(who, ", "))
	}
	if f.Confidence > 0 {
		meta = append(meta, fmt.Sprintf("confidence %d", f.Confidence))
	}
	switch {
	case dc.Route.Decision != "":
		meta = append(meta, "route: "+oneWord(string(dc.Route.Decision)))
	case f.AutofixClass != "":
		meta = append(meta, "autofix: "+oneWord(f.AutofixClass))
	}
	if len(meta) > 0 {
		b.WriteString(" _(" + strings.Join(meta, ", ") + ")_")
	}
	return b.String()
}

// clean makes model text safe to show: what GitHub renders invisibly is
// removed (an HTML comment could fake the bot's marker), it is cut to one
// line of at most max characters, and mentions, images and command lines
// are neutralised.
func clean(s string, max int, trigger string) string {
	s, _ = untrusted.GitHubText(s, 4*max)
	return tracking.Plain(s, max, trigger)
}

// oneWord keeps identifier-like model text (severity, rule, reviewer,
// route, verdict) to letters, digits and -_.:/ so it cannot leave its
// code span or carry markup.
func oneWord(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 64 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("-_.:/", r):
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "?"
	}
	return b.String()
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

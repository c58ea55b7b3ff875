package review

// `/agent triage` on an issue (and the Action's triage cycle on
// issues: opened): the triage cycle proposes labels and a summary; the
// bot applies the labels only when the policy decision allows it and
// only labels the repository already has (adding a missing label on
// GitHub creates it, so model output could litter the repository), and
// posts the summary as one comment, found again by its marker on
// redelivery.

import (
	"context"
	"fmt"
	"github.com/agentos/agentos/bot/github"
	"sort"
	"strings"

	"github.com/agentos/agentos/bot/tracking"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/untrusted"
	"github.com/agentos/agentos/runtime/workflow"
)

// TriageInput is what the triage cycle reads.
type TriageInput struct {
	SessionID string
	Repo      string
	Issue     int
	// Title and Body are the issue's, without what GitHub renders
	// invisibly (untrusted.GitHubText).
	Title, Body string
	// Labels are the labels the repository has: the only ones the cycle
	// may propose.
	Labels       []string
	Current      []string // the issue's labels now
	Mode         string
	Instructions string
}

// TriageOutput is what the triage cycle proposes and what the policies
// decided about it.
type TriageOutput struct {
	Labels  []string
	Summary string
	// LabelDecision gates applying Labels; SummaryDecision gates posting
	// Summary. Only workflow.Allow lets them through: advisory, deny, an
	// unknown decision or none (the zero value) hold them back.
	LabelDecision   workflow.Outcome
	SummaryDecision workflow.Outcome
	Verdict         string
	Usage           replay.Usage
}

// Triager runs the triage cycle.
type Triager interface {
	Triage(ctx context.Context, in TriageInput) (TriageOutput, error)
}

// TriageMarker starts the bot's triage comment for a session.
func TriageMarker(sessionID string) string {
	return "<!-- agentos:triage session=" + sessionID + " -->"
}

// Triage handles `/agent triage` (and the Action's triage cycle).
func (h *Handler) Triage(ctx context.Context, repo github.Repo, t webhook.Trigger) (Result, error) {
	if t.IsPR {
		_, err := h.GitHub.CreateComment(ctx, repo, t.Number, fmt.Sprintf("@%s `%s triage` works on issues. On a pull request, `%s review` reviews the diff.", t.Author, h.Trigger, h.Trigger))
		return Result{Outcome: "replied", Reason: "triage on a pull request"}, err
	}
	if h.Triager == nil {
		_, err := h.GitHub.CreateComment(ctx, repo, t.Number, fmt.Sprintf("@%s %s, so `%s triage` cannot run here.", t.Author, ErrNotConfigured, h.Trigger))
		return Result{Outcome: "replied", Reason: ErrNotConfigured.Error()}, err
	}
	sid := h.Sessions.SessionID(t)
	unlock, err := h.Sessions.Lease(ctx, sid)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	marker := TriageMarker(sid)
	comments, err := h.GitHub.ListComments(ctx, repo, t.Number)
	if err != nil {
		return Result{}, err
	}
	for _, c := range comments {
		if strings.EqualFold(c.User, h.BotLogin) && strings.Contains(c.Body, marker) {
			return Result{Outcome: "ignored", Reason: "triage already posted", SessionID: sid}, nil
		}
	}
	is, err := h.GitHub.Issue(ctx, repo, t.Number)
	if err != nil {
		return Result{}, err
	}
	if is.State == "closed" {
		_, err := h.GitHub.CreateComment(ctx, repo, t.Number, fmt.Sprintf("@%s this issue is closed, so I won't triage it.", t.Author))
		return Result{Outcome: "replied", Reason: "closed"}, err
	}
	have, err := h.GitHub.RepoLabels(ctx, repo)
	if err != nil {
		return Result{}, err
	}
	title, _ := untrusted.GitHubText(is.Title, 1024)
	body, _ := untrusted.GitHubText(is.Body, 0)
	out, err := h.Triager.Triage(ctx, TriageInput{SessionID: sid, Repo: repo.FullName(), Issue: t.Number, Title: title, Body: body,
		Labels: have, Current: is.Labels, Mode: h.Mode, Instructions: h.Instructions})
	if err != nil {
		return Result{SessionID: sid}, fmt.Errorf("triage cycle: %w", err)
	}
	res := Result{Outcome: "triaged", SessionID: sid, Status: out.Verdict, Usage: out.Usage, Spent: out.Usage}
	known, unknown := knownLabels(out.Labels, have, is.Labels)
	applied := false
	if len(known) > 0 && out.LabelDecision.Decision == workflow.Allow {
		if err := h.GitHub.AddLabels(ctx, repo, t.Number, known); err != nil {
			return res, err
		}
		applied = true
	}
	if out.SummaryDecision.Decision != workflow.Allow {
		// Report-only: the decision is in the log and the bot's log; the
		// issue gets nothing to read.
		h.log().Info("triage summary held back", "repo", repo.FullName(), "issue", t.Number, "session", sid, "policy", out.SummaryDecision.PolicyID, "reason", out.SummaryDecision.Reason, "labels_applied", applied)
		return res, nil
	}
	_, err = h.GitHub.CreateComment(ctx, repo, t.Number, TriageComment(sid, h.Trigger, out, known, unknown, applied))
	return res, err
}

// knownLabels splits proposed labels into the repository's own (with its
// spelling, without ones the issue already has, no duplicates) and the
// rest.
func knownLabels(proposed, have, current []string) (known, unknown []string) {
	byLower := map[string]string{}
	for _, l := range have {
		byLower[strings.ToLower(l)] = l
	}
	on := map[string]bool{}
	for _, l := range current {
		on[strings.ToLower(l)] = true
	}
	seen := map[string]bool{}
	for _, p := range proposed {
		k := strings.ToLower(strings.TrimSpace(p))
		if k == "" || seen[k] {
			continue
		}
		seen[k] = true
		name, ok := byLower[k]
		switch {
		case !ok:
			unknown = append(unknown, p)
		case !on[k]:
			known = append(known, name)
		}
	}
	sort.Strings(known)
	return known, unknown
}

// TriageComment renders the triage summary comment.
func TriageComment(sid, trigger string, out TriageOutput, known, unknown []string, applied bool) string {
	var b strings.Builder
	b.WriteString(TriageMarker(sid) + "\n### agentos triage\n\n")
	summary, _ := untrusted.GitHubText(out.Summary, 8000)
	if s := strings.TrimSpace(summary); s != "" {
		b.WriteString(tracking.Quote(s, trigger) + "\n\n") // model text: inert, and its blocks stay in the quote
	}
	if len(known) > 0 {
		names := make([]string, len(known))
		for i, l := range known {
			names[i] = "`" + oneLabel(l) + "`"
		}
		if applied {
			fmt.Fprintf(&b, "Labels added: %s.\n", strings.Join(names, ", "))
		} else {
			fmt.Fprintf(&b, "Labels proposed, not applied (policy `%s`: %s): %s.\n", oneWord(or(out.LabelDecision.PolicyID, "(none)")), clean(or(out.LabelDecision.Reason, "denied by default"), 300, trigger), strings.Join(names, ", "))
		}
	}
	if len(unknown) > 0 {
		fmt.Fprintf(&b, "%d proposed label%s the repository does not have %s left out.\n", len(unknown), plural(len(unknown)), map[bool]string{true: "was", false: "were"}[len(unknown) == 1])
	}
	return tracking.Fit(b.String())
}

// oneLabel keeps a label name inside its code span.
func oneLabel(s string) string {
	return strings.NewReplacer("`", "'", "\n", " ", "\r", " ").Replace(s)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

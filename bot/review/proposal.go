package review

// A review's safe_auto findings become one follow-up fix proposal: a fix
// session started like an `/agent` request on the pull request, whose
// prompt lists the findings as data. Like every `/agent` run it changes
// the worktree only through the kernel, and the kernel's policy makes it
// pause for a maintainer's approval before a change is applied, so
// nothing is pushed until someone approves; it is answered like any
// session (an Approve review or `/agent approve` on its draft pull
// request). The review session's log records the proposal
// (artifact.emitted, kind github.fix_proposal, fix_proposal_v1) before
// the review is posted, and the proposal's delivery id is
// fix-proposal:<review session>, so a retried review delivery starts the
// same proposal or finds it started, never a second one.

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/agentos/agentos/bot/github"
	"strings"

	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/untrusted"
	"github.com/agentos/agentos/runtime/workflow"
	"github.com/agentos/agentos/schemas"
)

// proposalKind is the annotation recording a review's fix proposal.
const proposalKind = "github.fix_proposal"

// proposalDeliveryPrefix starts a proposal's delivery id; the review
// session follows.
const proposalDeliveryPrefix = "fix-proposal:"

// fixProposal is a github.fix_proposal record (fix_proposal_v1).
type fixProposal struct {
	ReviewSession   string             `json:"review_session"`
	ProposalSession string             `json:"proposal_session"`
	DeliveryID      string             `json:"delivery_id"`
	PR              int                `json:"pr"`
	Head            string             `json:"head,omitempty"`
	Findings        []proposedFinding  `json:"findings"`
	SchemaVersion   string             `json:"schema_version"`
	full            []workflow.Finding // the findings with body and suggestion: the prompt's data
}

// proposedFinding is a finding as the record names it (its text is in
// the cycle's own events, and in the proposal's prompt).
type proposedFinding struct {
	ID            string `json:"id"`
	Severity      string `json:"severity"`
	Title         string `json:"title"`
	Path          string `json:"path,omitempty"`
	Line          int    `json:"line,omitempty"`
	EndLine       int    `json:"end_line,omitempty"`
	Rule          string `json:"rule,omitempty"`
	HasSuggestion bool   `json:"has_suggestion,omitempty"`
}

// safeFindings are the findings a proposal takes: severity-routing said
// safe_auto and the gate let them be posted as actionable (allow). An
// advisory gate (medium confidence, or a report-only mode) or a deny
// proposes nothing; so does a finding that failed validation.
func safeFindings(out Output) []workflow.Finding {
	gate := map[string]workflow.Decision{}
	route := map[string]workflow.Decision{}
	for _, dc := range out.Decisions {
		if prev, ok := gate[dc.FindingID]; ok && prev != dc.Gate.Decision {
			gate[dc.FindingID] = workflow.Deny // two decisions that differ: not safe
		} else {
			gate[dc.FindingID] = dc.Gate.Decision
		}
		if prev, ok := route[dc.FindingID]; ok && prev != dc.Route.Decision {
			route[dc.FindingID] = workflow.Manual
		} else {
			route[dc.FindingID] = dc.Route.Decision
		}
	}
	var fs []workflow.Finding
	for _, f := range out.Findings {
		if f.ID != "" && validFinding(f) && gate[f.ID] == workflow.Allow && route[f.ID] == workflow.SafeAuto {
			fs = append(fs, f)
		}
	}
	return fs
}

// proposeFixes decides the review's fix proposal and records it in the
// review session's log; nil when there is nothing to propose, or when the
// proposal may not start: the requester may not start runs (the same
// check as `/agent <prompt>`), or the pull request is agentos' own
// session's (ask there). A proposal the log already holds (an earlier
// attempt recorded it, then died before posting the review) is reused.
func (h *Handler) proposeFixes(ctx context.Context, repo github.Repo, t webhook.Trigger, sid string, pr github.PullRequest, out Output) (*fixProposal, error) {
	fs := safeFindings(out)
	if len(fs) == 0 {
		return nil, nil
	}
	own := false
	if pr.HeadRepo == repo.FullName() {
		var err error
		if own, err = h.Sessions.IsSessionBranch(ctx, repo, pr.HeadRef); err != nil {
			return nil, err
		}
	}
	if own {
		h.log().Info("no fix proposal: the pull request is an agentos session's", "repo", repo.FullName(), "pr", t.Number, "session", sid)
		return nil, nil
	}
	if may, err := h.Sessions.MayRun(ctx, repo, t); err != nil {
		return nil, err
	} else if !may {
		h.log().Info("no fix proposal: the review's requester may not start runs", "repo", repo.FullName(), "pr", t.Number, "session", sid, "author", t.Author)
		return nil, nil
	}
	if p, ok, err := h.recordedProposal(ctx, sid); err != nil || ok {
		p.full = fs
		return &p, err
	}
	delivery := proposalDeliveryPrefix + sid
	p := fixProposal{ReviewSession: sid, ProposalSession: h.Sessions.SessionID(proposalTrigger(t, pr, delivery, t.Number, pr.HeadSHA)), DeliveryID: delivery, PR: t.Number, Head: pr.HeadSHA, SchemaVersion: "v1", full: fs}
	for _, f := range fs {
		p.Findings = append(p.Findings, proposedFinding{ID: f.ID, Severity: f.Severity, Title: f.Title, Path: f.Path, Line: f.Line, EndLine: f.EndLine, Rule: f.Rule, HasSuggestion: f.HasSuggestion})
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	if err := schemas.MustDefault().ValidateJSON("fix_proposal_v1", raw); err != nil {
		return nil, fmt.Errorf("fix proposal: %w", err)
	}
	if err := h.Sessions.Annotate(ctx, sid, proposalKind, p); err != nil {
		return nil, fmt.Errorf("record the fix proposal: %w", err)
	}
	return &p, nil
}

// recordedProposal returns the fix proposal the review session's log
// records, if any.
func (h *Handler) recordedProposal(ctx context.Context, sid string) (fixProposal, bool, error) {
	evs, err := h.Sessions.Events(ctx, sid)
	if err != nil {
		return fixProposal{}, false, err
	}
	for i := len(evs) - 1; i >= 0; i-- {
		e := evs[i]
		if e.Type != event.ArtifactEmitted || event.FieldString(e.Payload, "kind") != proposalKind {
			continue
		}
		var p fixProposal
		if err := json.Unmarshal([]byte(event.FieldString(e.Payload, "content")), &p); err != nil || p.ProposalSession == "" || !strings.HasPrefix(p.DeliveryID, proposalDeliveryPrefix) {
			return fixProposal{}, false, fmt.Errorf("the review session's %s record does not read: %v", proposalKind, err)
		}
		return p, true, nil
	}
	return fixProposal{}, false, nil
}

// startProposal starts the proposal's fix session on the pull request, as
// an `/agent` request delivered as p.DeliveryID would: a delivery handled
// again finds the session its first attempt began and never starts a
// second run. The work starts from the head the review reviewed (the
// findings' lines are that commit's). It returns the proposal's session.
func (h *Handler) startProposal(ctx context.Context, repo github.Repo, t webhook.Trigger, pr github.PullRequest, p fixProposal) (string, error) {
	head := pr.HeadSHA
	if p.Head != "" {
		head = p.Head
	}
	sid, err := h.Sessions.StartRun(ctx, repo, proposalTrigger(t, pr, p.DeliveryID, p.PR, head), proposalPrompt(p))
	if err != nil {
		return p.ProposalSession, fmt.Errorf("fix proposal %s: %w", p.ProposalSession, err)
	}
	if sid != "" && sid != p.ProposalSession {
		return sid, fmt.Errorf("fix proposal: started session %s, recorded %s", sid, p.ProposalSession)
	}
	h.log().Info("fix proposal", "repo", repo.FullName(), "pr", p.PR, "review", p.ReviewSession, "session", p.ProposalSession, "started", sid != "")
	return p.ProposalSession, nil
}

// proposalTrigger is the `/agent` request a proposal is started as: on
// pull request number at head, by the review's requester, delivered as
// delivery.
func proposalTrigger(t webhook.Trigger, pr github.PullRequest, delivery string, number int, head string) webhook.Trigger {
	return webhook.Trigger{Kind: t.Kind, Repo: t.Repo, Owner: t.Owner, Name: t.Name, Number: number, IsPR: true, IssueState: "open",
		Author: t.Author, AuthorType: t.AuthorType, DeliveryID: delivery, Attempt: t.Attempt, InstallationID: t.InstallationID,
		HeadRef: pr.HeadRef, HeadSHA: head, HeadRepo: pr.HeadRepo, BaseRef: pr.BaseRef, PRNodeID: pr.NodeID, PRURL: pr.URL}
}

// proposalPrompt is the fix session's request: what to do, then the
// findings as untrusted data (a model wrote them). A retried delivery
// whose review cycle is not re-run has only the record's fields; the
// session it finds started already has its prompt.
func proposalPrompt(p fixProposal) string {
	n := len(p.Findings)
	var b strings.Builder
	fmt.Fprintf(&b, "Fix the %d safe_auto finding%s of review %s on pull request #%d, and nothing else. Each finding names a file and lines of the pull request's head; when it has a suggestion, that is the proposed new text of exactly those lines. Check each finding against the code before changing anything, skip one that is wrong, and run the project's tests when it has them.", n, plural(n), p.ReviewSession, p.PR)
	type item struct {
		ID         string  `json:"id"`
		Severity   string  `json:"severity"`
		Rule       string  `json:"rule,omitempty"`
		Path       string  `json:"path,omitempty"`
		Line       int     `json:"line,omitempty"`
		EndLine    int     `json:"end_line,omitempty"`
		Title      string  `json:"title"`
		Body       string  `json:"body,omitempty"`
		Suggestion *string `json:"suggestion,omitempty"`
	}
	items := make([]item, 0, n)
	if len(p.full) > 0 {
		for _, f := range p.full {
			it := item{ID: f.ID, Severity: f.Severity, Rule: f.Rule, Path: f.Path, Line: f.Line, EndLine: f.EndLine, Title: f.Title, Body: f.Body}
			if f.HasSuggestion {
				s := f.Suggestion
				it.Suggestion = &s
			}
			items = append(items, it)
		}
	} else {
		for _, f := range p.Findings {
			items = append(items, item{ID: f.ID, Severity: f.Severity, Rule: f.Rule, Path: f.Path, Line: f.Line, EndLine: f.EndLine, Title: f.Title})
		}
	}
	raw, _ := json.MarshalIndent(items, "", "  ")
	b.WriteString("\n\n")
	b.WriteString(untrusted.Block("review_findings", untrusted.Visible(string(raw), true)))
	return b.String()
}

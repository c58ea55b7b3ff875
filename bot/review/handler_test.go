package review_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/review"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/workflow"
)

const botLogin = "agentos[bot]"

var repo = github.Repo{Owner: "octo", Name: "app"}

// plantedReviewer is the review cycle reduced to its answer: the planted
// findings with fixed decisions. It writes the start of the cycle's log
// under the review's session, as the workflow plane's executor does.
type plantedReviewer struct {
	sessions  *fakeSessions
	decisions []review.FindingDecision
	mu        sync.Mutex
	inputs    []review.Input
}

func (p *plantedReviewer) Review(_ context.Context, in review.Input) (review.Output, error) {
	p.mu.Lock()
	p.inputs = append(p.inputs, in)
	p.mu.Unlock()
	p.sessions.begin(in.SessionID)
	return review.Output{Findings: plantedFindings(), Decisions: p.decisions, Verdict: "done"}, nil
}

// decisions are the shipped policies' answers for the planted findings:
// f-untested is the one safe_auto finding posted as actionable.
func decisions() []review.FindingDecision {
	route := func(d workflow.Decision) workflow.Outcome {
		return workflow.Outcome{PolicyID: "severity-routing", Decision: d}
	}
	return []review.FindingDecision{
		{FindingID: "f-sqli", Gate: allow("confidence-gating"), Route: route(workflow.Manual)},
		{FindingID: "f-untested", Gate: allow("confidence-gating"), Route: route(workflow.SafeAuto)},
		{FindingID: "f-outside", Gate: allow("confidence-gating"), Route: route(workflow.Manual)},
		{FindingID: "f-advisory", Gate: workflow.Outcome{PolicyID: "confidence-gating", Decision: workflow.Advisory, Reason: "medium confidence"}},
		{FindingID: "f-unsure", Gate: workflow.Outcome{PolicyID: "confidence-gating", Decision: workflow.Deny, Reason: "low confidence"}},
		{FindingID: "f-forbidden", Gate: workflow.Outcome{PolicyID: "role-permissions", Decision: workflow.Deny, Reason: "no rule matched: policy default"}},
		{FindingID: "f-escape", Gate: allow("confidence-gating")},
	}
}

type reviewWorld struct {
	gh       *fakeGitHub
	sessions *fakeSessions
	reviewer *plantedReviewer
	h        *review.Handler
	pr       int
	head     string
}

func newReviewWorld(t *testing.T) *reviewWorld {
	t.Helper()
	w := &reviewWorld{gh: newFakeGitHub(botLogin), sessions: newFakeSessions(), pr: 7, head: strings.Repeat("c", 40)}
	w.gh.prs[w.pr] = github.PullRequest{Number: w.pr, NodeID: "PR_7", HeadRef: "find-users", HeadSHA: w.head, HeadRepo: "octo/app", BaseRef: "main", State: "open"}
	w.gh.files[w.pr] = reviewFiles
	w.reviewer = &plantedReviewer{sessions: w.sessions, decisions: decisions()}
	w.h = &review.Handler{GitHub: w.gh, Sessions: w.sessions, Reviewer: w.reviewer, Trigger: "/agent", BotLogin: botLogin, Mode: review.ModeInteractive}
	return w
}

func (w *reviewWorld) trigger(delivery string) webhook.Trigger {
	return webhook.Trigger{Kind: webhook.KindComment, Repo: "octo/app", Owner: "octo", Name: "app", Number: w.pr, IsPR: true, Author: "alice", AuthorType: "User", DeliveryID: delivery}
}

// `/agent review`: one COMMENT review pinned to the head, line comments on
// the diff's lines, its record in the session's log and the log kept; the
// same delivery handled again finds the review by its marker and posts
// nothing more.
func TestReviewPostsOneReviewAndRecordsIt(t *testing.T) {
	w := newReviewWorld(t)
	res, err := w.h.Review(context.Background(), repo, w.trigger("d1"))
	if err != nil {
		t.Fatal(err)
	}
	sid := w.sessions.SessionID(w.trigger("d1"))
	if res.Outcome != "reviewed" || res.SessionID != sid || res.PR != w.pr || res.Status != "done" || !strings.Contains(res.LogURL, sid) {
		t.Fatalf("result = %+v", res)
	}
	if in := w.reviewer.inputs; len(in) != 1 || in[0].HeadSHA != w.head || in[0].HeadRef != "find-users" || in[0].Untrusted || in[0].Mode != review.ModeInteractive ||
		!strings.Contains(in[0].Diff, "+++ b/store/users.go") || len(in[0].Files) != len(reviewFiles) {
		t.Fatalf("review input = %+v", in)
	}
	rvs := w.gh.reviews[w.pr]
	if len(rvs) != 1 {
		t.Fatalf("%d reviews, want 1", len(rvs))
	}
	rv := rvs[0]
	if rv.Event != "COMMENT" || rv.CommitID != w.head || rv.User != botLogin || !strings.HasPrefix(rv.Body, review.Marker(sid)) {
		t.Errorf("review = %+v", rv.NewReview)
	}
	var placed []string
	for _, c := range rv.Comments {
		placed = append(placed, c.Path)
	}
	if strings.Join(placed, ",") != "store/users.go,auth/token.go" {
		t.Errorf("line comments on %v, want the SQL injection and the untested branch", placed)
	}
	for _, secret := range []string{"LOW-CONFIDENCE-TEXT", "FORBIDDEN-PERSONA-TEXT", "MALFORMED-TEXT"} {
		if strings.Contains(rv.Body, secret) {
			t.Errorf("the review shows held-back text %q", secret)
		}
	}
	recs := w.sessions.records(sid, "github.review")
	if len(recs) != 1 {
		t.Fatalf("%d review records in the log, want 1", len(recs))
	}
	var rec review.Record
	if err := json.Unmarshal([]byte(recs[0]), &rec); err != nil || rec.ReviewID != rv.ID || rec.PR != w.pr || rec.Head != w.head || len(rec.Comments) != 2 || rec.Dropped != 1 {
		t.Errorf("record = %+v, %v", rec, err)
	}
	if len(w.sessions.kept) != 1 || len(w.sessions.leased) != 0 {
		t.Errorf("kept %v, leases still held %v", w.sessions.kept, w.sessions.leased)
	}

	again, err := w.h.Review(context.Background(), repo, w.trigger("d1"))
	if err != nil {
		t.Fatal(err)
	}
	if again.Outcome != "ignored" || again.SessionID != sid || len(w.gh.reviews[w.pr]) != 1 || len(w.reviewer.inputs) != 1 {
		t.Errorf("redelivery: %+v, %d reviews, %d cycles", again, len(w.gh.reviews[w.pr]), len(w.reviewer.inputs))
	}
}

// GitHub refuses the line comments (the head moved): the same findings
// go in the body of one review, and the record says so.
func TestReviewFallsBackToTheBody(t *testing.T) {
	w := newReviewWorld(t)
	w.gh.moved = true
	res, err := w.h.Review(context.Background(), repo, w.trigger("d1"))
	if err != nil {
		t.Fatal(err)
	}
	rvs := w.gh.reviews[w.pr]
	if res.Outcome != "reviewed" || len(rvs) != 1 || len(rvs[0].Comments) != 0 || !strings.Contains(rvs[0].Body, "store/users.go:11") {
		t.Fatalf("result %+v, reviews %+v", res, rvs)
	}
	var rec review.Record
	recs := w.sessions.records(res.SessionID, "github.review")
	if len(recs) != 1 || json.Unmarshal([]byte(recs[0]), &rec) != nil || !rec.InBodyOnly {
		t.Errorf("records = %q", recs)
	}
}

// What the review refuses, with one reply and no cycle: an issue, a
// closed pull request, a bot without the review cycle. A fork's pull
// request is reviewed as untrusted code.
func TestReviewRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(w *reviewWorld, t *webhook.Trigger)
		reply string
	}{
		{"issue", func(w *reviewWorld, t *webhook.Trigger) {
			t.IsPR = false
			w.gh.issues[t.Number] = github.Issue{Title: "x", State: "open"}
		}, "works on pull requests"},
		{"closed", func(w *reviewWorld, t *webhook.Trigger) {
			pr := w.gh.prs[w.pr]
			pr.State = "closed"
			w.gh.prs[w.pr] = pr
		}, "this pull request is closed"},
		{"no cycle", func(w *reviewWorld, t *webhook.Trigger) { w.h.Reviewer = nil }, review.ErrNotConfigured.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newReviewWorld(t)
			tr := w.trigger("d1")
			tc.setup(w, &tr)
			res, err := w.h.Review(context.Background(), repo, tr)
			if err != nil {
				t.Fatal(err)
			}
			cs := w.gh.comments[w.pr]
			if res.Outcome != "replied" || len(cs) != 1 || !strings.Contains(cs[0].Body, tc.reply) || !strings.HasPrefix(cs[0].Body, "@alice ") {
				t.Errorf("result %+v, comments %+v", res, cs)
			}
			if len(w.reviewer.inputs) != 0 || len(w.gh.reviews[w.pr]) != 0 {
				t.Errorf("the cycle ran or a review was posted")
			}
		})
	}
	w := newReviewWorld(t)
	pr := w.gh.prs[w.pr]
	pr.HeadRepo = "mallory/app"
	w.gh.prs[w.pr] = pr
	if _, err := w.h.Review(context.Background(), repo, w.trigger("d1")); err != nil {
		t.Fatal(err)
	}
	if in := w.reviewer.inputs; len(in) != 1 || !in[0].Untrusted {
		t.Errorf("a fork's pull request was not reviewed as untrusted: %+v", in)
	}
}

// With ProposeFixes the safe_auto finding becomes one fix proposal: it is
// recorded in the review's log, named in the review's body, and started as
// an `/agent` request on the pull request at the reviewed head, delivered
// as fix-proposal:<review session>; a redelivery starts the same one
// again (the run finds its session) and posts nothing.
func TestReviewProposesSafeFixes(t *testing.T) {
	w := newReviewWorld(t)
	w.h.ProposeFixes = true
	res, err := w.h.Review(context.Background(), repo, w.trigger("d1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(w.sessions.started) != 1 {
		t.Fatalf("%d runs started, want 1", len(w.sessions.started))
	}
	st := w.sessions.started[0]
	if st.t.DeliveryID != "fix-proposal:"+res.SessionID || !st.t.IsPR || st.t.Number != w.pr || st.t.HeadSHA != w.head || st.t.HeadRef != "find-users" || st.t.Author != "alice" {
		t.Errorf("proposal trigger = %+v", st.t)
	}
	if !strings.Contains(st.prompt, "f-untested") || strings.Contains(st.prompt, "f-sqli") {
		t.Errorf("the proposal's prompt does not hold exactly the safe_auto finding:\n%s", st.prompt)
	}
	if res.Proposal != w.sessions.SessionID(st.t) {
		t.Errorf("Proposal = %q, want %q", res.Proposal, w.sessions.SessionID(st.t))
	}
	if body := w.gh.reviews[w.pr][0].Body; !strings.Contains(body, "Fix proposal") || !strings.Contains(body, res.Proposal) {
		t.Errorf("the review does not name its proposal:\n%s", body)
	}
	if recs := w.sessions.records(res.SessionID, "github.fix_proposal"); len(recs) != 1 || !strings.Contains(recs[0], `"proposal_session":"`+res.Proposal+`"`) {
		t.Errorf("proposal records = %q", recs)
	}
	again, err := w.h.Review(context.Background(), repo, w.trigger("d1"))
	if err != nil {
		t.Fatal(err)
	}
	if again.Outcome != "ignored" || again.Proposal != res.Proposal || len(w.sessions.started) != 2 || w.sessions.started[1].t.DeliveryID != st.t.DeliveryID || len(w.gh.reviews[w.pr]) != 1 {
		t.Errorf("redelivery: %+v, %d starts, %d reviews", again, len(w.sessions.started), len(w.gh.reviews[w.pr]))
	}
}

// No proposal when its requester may not start runs, or when the pull
// request is an agentos session's own: the review still posts.
func TestReviewProposesNothingWhenItMayNot(t *testing.T) {
	for name, setup := range map[string]func(w *reviewWorld){
		"requester may not run": func(w *reviewWorld) { w.sessions.mayRun = false },
		"session's own PR":      func(w *reviewWorld) { w.sessions.branches["find-users"] = true },
	} {
		t.Run(name, func(t *testing.T) {
			w := newReviewWorld(t)
			w.h.ProposeFixes = true
			setup(w)
			res, err := w.h.Review(context.Background(), repo, w.trigger("d1"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != "reviewed" || res.Proposal != "" || len(w.sessions.started) != 0 || len(w.gh.reviews[w.pr]) != 1 {
				t.Errorf("result %+v, %d starts", res, len(w.sessions.started))
			}
			if recs := w.sessions.records(res.SessionID, "github.fix_proposal"); len(recs) != 0 {
				t.Errorf("a proposal was recorded: %q", recs)
			}
		})
	}
}

// fixedTriager answers the triage cycle with a fixed proposal.
type fixedTriager struct {
	sessions *fakeSessions
	out      review.TriageOutput
	inputs   []review.TriageInput
}

func (f *fixedTriager) Triage(_ context.Context, in review.TriageInput) (review.TriageOutput, error) {
	f.inputs = append(f.inputs, in)
	f.sessions.begin(in.SessionID)
	return f.out, nil
}

// `/agent triage`: only labels the repository has are applied (with its
// spelling, not ones the issue has), the summary is posted once with its
// marker, and a redelivery posts nothing; a policy that holds the
// proposal back leaves the issue untouched.
func TestTriage(t *testing.T) {
	allowed := workflow.Outcome{PolicyID: "mode-dispatch", Decision: workflow.Allow}
	for _, tc := range []struct {
		name     string
		decision workflow.Outcome
		labels   []string // the issue's labels after
		comment  bool
	}{
		{"allowed", allowed, []string{"docs", "Bug"}, true},
		{"held back", workflow.Outcome{PolicyID: "mode-dispatch", Decision: workflow.Advisory, Reason: "report only"}, []string{"docs"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gh, ss := newFakeGitHub(botLogin), newFakeSessions()
			gh.labels = []string{"Bug", "docs", "question"}
			gh.issues[3] = github.Issue{Title: "Saving crashes <!-- hidden -->", Body: "it crashes", Labels: []string{"docs"}, State: "open"}
			tr := &fixedTriager{sessions: ss, out: review.TriageOutput{Labels: []string{"bug", "docs", "invented"}, Summary: "Saving crashes.", LabelDecision: tc.decision, SummaryDecision: tc.decision, Verdict: "done"}}
			h := &review.Handler{GitHub: gh, Sessions: ss, Triager: tr, Trigger: "/agent", BotLogin: botLogin, Mode: review.ModeHeadless}
			trig := webhook.Trigger{Kind: webhook.KindComment, Repo: "octo/app", Number: 3, Author: "alice", DeliveryID: "d1"}
			res, err := h.Triage(context.Background(), repo, trig)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != "triaged" || res.Status != "done" {
				t.Errorf("result = %+v", res)
			}
			if in := tr.inputs; len(in) != 1 || in[0].Title != "Saving crashes " || in[0].Mode != review.ModeHeadless || strings.Join(in[0].Labels, ",") != "Bug,docs,question" {
				t.Errorf("triage input = %+v", in)
			}
			if got := gh.issues[3].Labels; strings.Join(got, ",") != strings.Join(tc.labels, ",") {
				t.Errorf("labels = %v, want %v", got, tc.labels)
			}
			if len(gh.labels) != 3 {
				t.Errorf("the repository's labels changed: %v", gh.labels)
			}
			cs := gh.comments[3]
			if tc.comment != (len(cs) == 1) || tc.comment && (!strings.HasPrefix(cs[0].Body, review.TriageMarker(res.SessionID)) || !strings.Contains(cs[0].Body, "Saving crashes.") || !strings.Contains(cs[0].Body, "1 proposed label the repository does not have was left out")) {
				t.Fatalf("comments = %+v", cs)
			}
			if !tc.comment {
				return
			}
			again, err := h.Triage(context.Background(), repo, trig)
			if err != nil {
				t.Fatal(err)
			}
			if again.Outcome != "ignored" || len(tr.inputs) != 1 || len(gh.comments[3]) != 1 {
				t.Errorf("redelivery: %+v, %d cycles, %d comments", again, len(tr.inputs), len(gh.comments[3]))
			}
		})
	}
}

package dispatch_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/bot/review"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider/scripted"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/schemas"
)

// cycleWorld is a bot whose every process (the first and each restarted
// one) runs review and triage on the workflow plane with script.
func cycleWorld(t *testing.T, script string) *world {
	t.Helper()
	w := newWorld(t)
	s, err := scripted.Parse(strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	w.script = s
	w.onStart = func() {
		w.configure(func(c *dispatch.Config) { c.Workflows = &dispatch.Workflows{OwnPlane: true} })
	}
	w.start(t.TempDir())
	return w
}

// reviewedPR adds the pull request with the planted SQL injection.
func reviewedPR(t *testing.T, w *world) int {
	t.Helper()
	head := gittest.Commit(t, w.bare, "find-users", "find users by name", map[string]string{"db.go": planeDBGo})
	w.fake.SetRef(repoName, "heads/find-users", head)
	return w.fake.AddPullRequest(repoName, fakegithub.PullRequest{Title: "Find users by name", User: "alice", Head: "find-users", HeadSHA: head, Base: "main",
		Files: []fakegithub.PRFile{{Path: "db.go", Status: "added", Patch: "@@ -0,0 +1,8 @@\n" + prefixLines(planeDBGo, "+")}}})
}

// deathPoints are the numbers of events after which a process dies: every
// event of the persona fan-out (each lane's opening, request, response,
// tool call and end), and a spread over the rest of the session.
func deathPoints(evs []event.Event) []int {
	var points []int
	first, last := 0, 0
	for i, e := range evs {
		if e.Type == event.AgentTransition && event.FieldString(e.Payload, "to") == "PERSONA" && first == 0 {
			first = i + 1
		}
		if e.Type == event.AgentTransition && event.FieldString(e.Payload, "to") == "PERSONA_DONE" {
			last = i + 1
		}
	}
	for n := max(first-1, 1); n <= last; n++ {
		points = append(points, n)
	}
	for n := 1; n < len(evs); n += max(1, len(evs)/8) {
		points = append(points, n)
	}
	points = append(points, len(evs)-1)
	slices.Sort(points)
	return slices.Compact(points)
}

// thinned keeps every third death point and the last one: each point is a
// whole bot process set-up and review (seconds each), and the cycle's own
// TestCycleKilledMidPhaseIsTakenOver already kills after every event.
// AGENTOS_ALL_DEATH_POINTS=1 tries them all.
func thinned(points []int) []int {
	if os.Getenv("AGENTOS_ALL_DEATH_POINTS") != "" || len(points) < 10 {
		return points
	}
	var out []int
	for i, n := range points {
		if i%3 == 0 || i == len(points)-1 {
			out = append(out, n)
		}
	}
	return out
}

// llmRequests counts a session's model requests by role.
func llmRequests(evs []event.Event) map[string]int {
	out := map[string]int{}
	for _, e := range evs {
		if e.Type == event.LLMRequest {
			out[e.Actor]++
		}
	}
	return out
}

// checkTakenOver: the session's log verifies, holds one run with one
// terminal report and no report_missing, and asked the model no more
// often than the undisturbed run did (a request whose process died
// before its response is asked again under the same llm.request).
func checkTakenOver(t *testing.T, evs []event.Event, want map[string]int) {
	t.Helper()
	if rep := replay.VerifyEvents(schemas.MustDefault(), evs); !rep.Valid {
		t.Fatalf("the session's log does not verify: %v", rep.Problem)
	}
	starts, terminals := 0, 0
	for _, e := range evs {
		switch e.Type {
		case event.RunStarted:
			starts++
		case event.TurnTerminal:
			terminals++
			if c := event.FieldString(e.Payload, "error_class"); c == "report_missing" {
				t.Errorf("the earlier run was closed report_missing: %s", e.Payload)
			}
		}
	}
	if starts != 1 || terminals != 1 {
		t.Errorf("%d runs and %d terminal reports, want 1 and 1 (taken over, not run again)", starts, terminals)
	}
	if got := llmRequests(evs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("model requests %v, want %v as undisturbed", got, want)
	}
}

// TestReviewTakenOverAfterDeathMidFanOut: the bot's process dies after n
// events of `/agent review` (for every n through the persona fan-out,
// whose three lanes run in parallel, and a spread after it); the delivery
// handled again by a new process takes the cycle run over from the log
// instead of running it again: finished lanes are not asked again, one
// run with one terminal report, and GitHub gets exactly one review (the
// strict fake counts the bot's POSTs) with the injection on db.go:7.
func TestReviewTakenOverAfterDeathMidFanOut(t *testing.T) {
	ref := cycleWorld(t, planeScript)
	pr := reviewedPR(t, ref)
	r := ref.comment(pr, true, "alice", "/agent review")
	if r.Outcome != "reviewed" {
		t.Fatalf("undisturbed: %+v", r)
	}
	refEvents := ref.events(r.SessionID)
	want := llmRequests(refEvents)
	points := deathPoints(refEvents)
	if len(points) < 15 {
		t.Fatalf("only %d death points", len(points))
	}
	for _, n := range thinned(points) {
		t.Run(fmt.Sprintf("after-%d-events", n), func(t *testing.T) {
			w := cycleWorld(t, planeScript)
			pr := reviewedPR(t, w)
			w.mortalRuns(n)
			w.fake.AddComment(repoName, pr, "alice", "/agent review")
			res := w.deliverUntilDone(webhook.Trigger{Kind: webhook.KindComment, Number: pr, IsPR: true, Author: "alice", Body: "/agent review", IssueState: "open", DeliveryID: "d-review"})
			if res.Outcome != "reviewed" && res.Outcome != "ignored" {
				t.Fatalf("result %+v", res)
			}
			calls := w.fake.CallsBy(botLogin)
			if got := calls["POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews"]; got != 1 {
				t.Errorf("%d review POSTs, want 1", got)
			}
			if got := calls["POST /repos/{owner}/{repo}/issues/{issue_number}/comments"]; got != 0 {
				t.Errorf("%d comments posted, want none", got)
			}
			reviews := w.fake.Reviews(repoName, pr)
			if len(reviews) != 1 || !strings.Contains(reviews[0].Body, review.Marker(res.SessionID)) {
				t.Fatalf("reviews %+v, want one with the session's marker", reviews)
			}
			injection := 0
			for _, c := range w.fake.ReviewComments(repoName, pr) {
				if c.Path == "db.go" && c.Line == 7 && strings.Contains(c.Body, "`sql-injection`") {
					injection++
				}
			}
			if injection != 1 {
				t.Errorf("%d sql-injection comments on db.go:7, want 1", injection)
			}
			checkTakenOver(t, w.events(res.SessionID), want)
		})
	}
}

// triageScript: the triager reads auth.go before it proposes, so a death
// can fall between its two model calls.
const triageScript = `
model: scripted
roles:
  triager:
  - tool_calls: [{id: r1, name: repo.read, args: {path: auth.go}}]
  - text: '{"labels":["bug","made-up"],"summary":"auth.go accepts any prefix of the token as valid.","schema_version":"v1"}'
`

// TestTriageTakenOverAfterDeathMidPersona: the process dies after n events
// of `/agent triage` (every n through the triager persona's lane — its
// request, response, tool call and result — and a spread after); the
// delivery handled again takes the run over: the triager's recorded calls
// are not asked again, one run, and exactly one label request and one
// triage comment reach GitHub.
func TestTriageTakenOverAfterDeathMidPersona(t *testing.T) {
	ref := cycleWorld(t, triageScript)
	ref.fake.AddLabel(repoName, fakegithub.Label{Name: "bug"})
	r := ref.comment(ref.issue, false, "alice", "/agent triage")
	if r.Outcome != "triaged" || r.Status != "done" {
		t.Fatalf("undisturbed: %+v", r)
	}
	refEvents := ref.events(r.SessionID)
	want := llmRequests(refEvents)
	if want["triager"] != 2 {
		t.Fatalf("the triager made %d requests, want 2", want["triager"])
	}
	for _, n := range thinned(deathPoints(refEvents)) {
		t.Run(fmt.Sprintf("after-%d-events", n), func(t *testing.T) {
			w := cycleWorld(t, triageScript)
			w.fake.AddLabel(repoName, fakegithub.Label{Name: "bug"})
			w.mortalRuns(n)
			w.fake.AddComment(repoName, w.issue, "alice", "/agent triage")
			res := w.deliverUntilDone(webhook.Trigger{Kind: webhook.KindComment, Number: w.issue, Author: "alice", Body: "/agent triage", IssueState: "open", DeliveryID: "d-triage"})
			if res.Outcome != "triaged" {
				t.Fatalf("result %+v", res)
			}
			calls := w.fake.CallsBy(botLogin)
			if got := calls["POST /repos/{owner}/{repo}/issues/{issue_number}/comments"]; got != 1 {
				t.Errorf("%d comments posted, want 1 (the triage summary)", got)
			}
			if got := calls["POST /repos/{owner}/{repo}/issues/{issue_number}/labels"]; got != 1 {
				t.Errorf("%d label requests, want 1", got)
			}
			summaries := 0
			for _, c := range w.fake.Comments(repoName, w.issue) {
				if strings.Contains(c.Body, review.TriageMarker(res.SessionID)) {
					summaries++
				}
			}
			if summaries != 1 {
				t.Errorf("%d triage comments, want 1", summaries)
			}
			if is, _ := w.fake.Issue(repoName, w.issue); strings.Join(is.Labels, ",") != "bug" {
				t.Errorf("labels %v, want bug", is.Labels)
			}
			checkTakenOver(t, w.events(res.SessionID), want)
		})
	}
}

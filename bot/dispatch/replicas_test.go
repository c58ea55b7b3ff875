package dispatch_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/postgres"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
	"github.com/agentos/agentos/schemas"
	gh "github.com/google/go-github/v62/github"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestApprovalAtAnotherReplica: two bot replicas on one PostgreSQL store
// with session leases. Replica A runs the request up to the approval
// request; the Approve review reaches replica B, a new process that never
// saw the session. While A still holds the session's lease, B hands the
// delivery back (ErrSessionBusy, a retry through the queue) and changes
// nothing; once the lease is free, B resumes the session from the shared
// log to completed, and the log holds one run with one terminal report.
func TestApprovalAtAnotherReplica(t *testing.T) {
	u := pgtest.Schema(t, pgtest.URL(t))
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	w := newLiveWorld(t, "app", "")
	w.openStore = func(s *event.Sealer) store.Store {
		st, err := postgres.Open(context.Background(), pool, s, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	leases := func(owner string) *postgres.Leases {
		l, err := postgres.OpenLeases(context.Background(), pool, postgres.LeaseOptions{Owner: owner, TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		return l
	}
	w.startBot() // replica A
	leasesA := leases("replica-a")
	w.opts.Leases = leasesA
	w.login()
	first := w.request("token check")

	// A is still busy with the session (say, a follow-up run).
	ctx := context.Background()
	release, err := leasesA.Acquire(ctx, first.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	w.startBot() // replica B: a new process, its own data directory
	w.opts.Leases = leases("replica-b")
	w.login()
	before, err := w.bot.Runs.Store.Read(ctx, first.SessionID, 1)
	if err != nil || len(before) == 0 {
		t.Fatalf("B does not see the session's log in the shared store: %d events, %v", len(before), err)
	}
	pr, _ := w.fake.PR(repoName, first.PR)
	w.asHuman(func() error {
		_, _, err := w.alice.GitHub().PullRequests.CreateReview(ctx, "octo", "app", first.PR, &gh.PullRequestReviewRequest{CommitID: gh.String(pr.HeadSHA), Body: gh.String("Looks right."), Event: gh.String("APPROVE")})
		return err
	})
	var review webhook.Trigger
	for _, d := range w.fake.DeliveriesSince(w.seen) {
		w.seen++
		if d.Event == "pull_request_review" && !strings.EqualFold(d.Sender(), w.botLogin) {
			tr, ok, err := webhook.Normalize(d.Event, d.ID, d.Body)
			if err != nil || !ok {
				t.Fatalf("normalize: %v %v", ok, err)
			}
			review = tr
		}
	}
	if review.DeliveryID == "" {
		t.Fatal("no review delivery")
	}
	err = w.d.Dispatch(ctx, review)
	if !errors.Is(err, dispatch.ErrSessionBusy) || !errors.Is(err, postgres.ErrLeased) || errors.Is(err, webhook.ErrPermanent) {
		t.Fatalf("approval at B while A holds the lease: %v", err)
	}
	after, _ := w.bot.Runs.Store.Read(ctx, first.SessionID, 1)
	if len(after) != len(before) {
		t.Fatalf("B appended %d events to a session leased by A", len(after)-len(before))
	}
	// A lets go; the queue's retry reaches B (or any replica) again.
	release()
	n := len(w.results)
	if err := w.d.Dispatch(ctx, review); err != nil {
		t.Fatalf("retry: %v", err)
	}
	got := w.results[n:]
	if len(got) == 0 || got[len(got)-1].Status != "completed" || got[len(got)-1].SessionID != first.SessionID {
		t.Fatalf("after the retry: %+v", got)
	}
	evs, _ := w.bot.Runs.Store.Read(ctx, first.SessionID, 1)
	starts, terminals := 0, 0
	for _, e := range evs {
		switch e.Type {
		case event.RunStarted:
			starts++
		case event.TurnTerminal:
			terminals++
		}
	}
	if starts != 1 || terminals != 1 {
		t.Fatalf("%d run.started and %d turn.terminal events, want one each", starts, terminals)
	}
}

// replicaWorld is a liveWorld whose bots share one PostgreSQL store and
// hold session leases, as `agentos serve --store postgres://…` wires them.
func replicaWorld(t *testing.T) (*liveWorld, *pgxpool.Pool) {
	t.Helper()
	u := pgtest.Schema(t, pgtest.URL(t))
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	w := newLiveWorld(t, "app", "")
	w.openStore = func(s *event.Sealer) store.Store {
		st, err := postgres.Open(context.Background(), pool, s, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	w.startBot()
	l, err := postgres.OpenLeases(context.Background(), pool, postgres.LeaseOptions{Owner: "replica-a", TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	w.opts.Leases = l
	w.login()
	return w, pool
}

func countTypes(evs []event.Event) map[string]int {
	c := map[string]int{}
	for _, e := range evs {
		c[e.Type]++
	}
	return c
}

// TestRedeliveredRequestRunsOnce: with replicas, an `/agent` delivery
// dispatched again (its outcome was lost with its replica) finds the
// session the first attempt made and starts nothing: one session, one
// run, one pull request.
func TestRedeliveredRequestRunsOnce(t *testing.T) {
	w, _ := replicaWorld(t)
	first := w.request("token check")
	var comment webhook.Trigger
	for _, d := range w.fake.DeliveriesSince(0) {
		if d.Event == "issue_comment" && !strings.EqualFold(d.Sender(), w.botLogin) {
			tr, ok, err := webhook.Normalize(d.Event, d.ID, d.Body)
			if err == nil && ok && strings.HasPrefix(tr.Body, "/agent") {
				comment = tr
			}
		}
	}
	if comment.DeliveryID == "" || first.SessionID != dispatch.DeliverySessionID(comment.Number, comment.DeliveryID) {
		t.Fatalf("session %s is not the delivery's (%s)", first.SessionID, comment.DeliveryID)
	}
	n := len(w.results)
	if err := w.d.Dispatch(context.Background(), comment); err != nil {
		t.Fatal(err)
	}
	got := w.results[n:]
	if len(got) != 1 || got[0].Outcome != "recorded" || got[0].SessionID != first.SessionID || got[0].Status != "paused" {
		t.Fatalf("redelivery: %+v", got)
	}
	evs, _ := w.bot.Runs.Store.Read(context.Background(), first.SessionID, 1)
	if c := countTypes(evs); c[event.RunStarted] != 1 || c[event.TurnTerminal] != 0 {
		t.Fatalf("after the redelivery: %v", c)
	}
	// The paused session still completes on approval.
	w.approve(first)
}

// TestRedeliveredRequestAfterDeath: the replica that began an `/agent`
// request died mid-run (its session has run.started and no terminal
// report). The delivery, dispatched again on another replica, does not
// start a second run: it takes the run over from the log (issue 18) up to
// its approval request, and a further redelivery publishes nothing
// twice; the approval then completes the one run.
func TestRedeliveredRequestAfterDeath(t *testing.T) {
	w, _ := replicaWorld(t)
	ctx := context.Background()
	issue := w.fake.AddIssue(repoName, fakegithub.Issue{Title: "dies", Body: "auth.go is broken", User: "alice"})
	w.asHuman(func() error {
		_, err := w.alice.CreateComment(ctx, github.Repo{Owner: "octo", Name: "app"}, issue, "/agent "+demo.Prompt)
		return err
	})
	var comment webhook.Trigger
	for _, d := range w.fake.DeliveriesSince(w.seen) {
		w.seen++
		if d.Event == "issue_comment" {
			tr, ok, err := webhook.Normalize(d.Event, d.ID, d.Body)
			if err != nil || !ok {
				t.Fatalf("normalize: %v", err)
			}
			comment = tr
		}
	}
	sid := dispatch.DeliverySessionID(comment.Number, comment.DeliveryID)
	st := w.bot.Runs.Store
	// What the dead replica had written.
	if _, err := st.Append(ctx, sid, 0,
		event.Draft{RunID: "run-dead", Type: event.SessionStart, Actor: "user", Payload: map[string]any{"prompt": demo.Prompt}},
		event.Draft{RunID: "run-dead", Type: event.RunStarted, Actor: "runtime", Payload: map[string]any{"run_id": "run-dead", "prompt": demo.Prompt}},
	); err != nil {
		t.Fatal(err)
	}
	var first dispatch.Result
	for attempt := 0; attempt < 2; attempt++ {
		n := len(w.results)
		comment.Attempt = attempt + 2
		if err := w.d.Dispatch(ctx, comment); err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
		want := map[int]string{0: "resumed", 1: "recorded"}[attempt]
		got := w.results[n:]
		if len(got) != 1 || got[0].Outcome != want || got[0].Status != "paused" || got[0].PR == 0 {
			t.Fatalf("attempt %d: %+v, want %s and paused on a PR", attempt, got, want)
		}
		first = got[0]
	}
	evs, _ := st.Read(ctx, sid, 1)
	c := countTypes(evs)
	if c[event.RunStarted] != 1 || c[event.RunResumed] != 1 || c[event.TurnTerminal] != 0 {
		t.Fatalf("after the redeliveries: %v", c)
	}
	if prs := w.fake.PRs(repoName); len(prs) != 1 {
		t.Fatalf("%d pull requests, want 1", len(prs))
	}
	if rv := w.fake.Reviews(repoName, first.PR); len(rv) != 1 {
		t.Fatalf("%d approval reviews, want 1", len(rv))
	}
	w.approve(first)
	evs, _ = st.Read(ctx, sid, 1)
	if c := countTypes(evs); c[event.RunStarted] != 1 || c[event.TurnTerminal] != 1 {
		t.Fatalf("after the approval: %v", c)
	}
	if rep := replay.VerifyEvents(schemas.MustDefault(), evs); !rep.Valid {
		t.Fatalf("log: %v", rep.Problem)
	}
}

// TestCancelAtAnotherReplica: a `/agent cancel` that reaches replica B
// while replica A holds the session is asked of A through the lease (A's
// renewal hands it to CancelRequested, which cancels a run A works) and
// the delivery goes back to the queue; its retry, once the session is
// free, cancels the run (here paused) and says so on the tracking
// comment.
func TestCancelAtAnotherReplica(t *testing.T) {
	w, pool := replicaWorld(t)
	first := w.request("token check")
	ctx := context.Background()
	leasesA, err := postgres.OpenLeases(ctx, pool, postgres.LeaseOptions{Owner: "replica-a2", TTL: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(leasesA.Close)
	asked := make(chan string, 1)
	leasesA.OnCancel(func(sid, by, reason string) { asked <- sid + " " + by })
	release, err := leasesA.Acquire(ctx, first.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	w.startBot() // replica B
	leasesB, err := postgres.OpenLeases(ctx, pool, postgres.LeaseOptions{Owner: "replica-b", TTL: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(leasesB.Close)
	w.opts.Leases = leasesB
	w.login()
	cancel := webhook.Trigger{Kind: webhook.KindComment, Repo: repoName, Owner: "octo", Name: "app", Number: first.PR, IsPR: true,
		Author: "alice", AuthorType: "User", Body: "/agent cancel", IssueState: "open", DeliveryID: "d-cancel", Attempt: 1}
	if err := w.d.Dispatch(ctx, cancel); !errors.Is(err, dispatch.ErrSessionBusy) {
		t.Fatalf("cancel at B while A holds the session: %v, want ErrSessionBusy (retried)", err)
	}
	select {
	case got := <-asked:
		if got != first.SessionID+" alice" {
			t.Errorf("A was asked %q", got)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("A never heard of the cancel")
	}
	release()
	cancel.Attempt = 2
	n := len(w.results)
	if err := w.d.Dispatch(ctx, cancel); err != nil {
		t.Fatalf("the retried cancel: %v", err)
	}
	if got := w.results[n:]; len(got) != 1 || got[0].Outcome != "cancelled" || got[0].Status != "cancelled" {
		t.Fatalf("the retried cancel: %+v", got)
	}
}

package dispatch_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/bot/tracking"
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

// cancelQueue is what these tests need of a queue.
type cancelQueue interface {
	queue.Queue
	Get(ctx context.Context, id string) (queue.Record, bool, error)
}

// enqueueNew puts the fake's new deliveries (not the bot's own) into q,
// as intake does, and returns them.
func enqueueNew(t *testing.T, w *liveWorld, q queue.Queue) []fakegithub.Delivery {
	t.Helper()
	var out []fakegithub.Delivery
	for _, d := range w.fake.DeliveriesSince(w.seen) {
		w.seen++
		if strings.EqualFold(d.Sender(), w.botLogin) {
			continue
		}
		if _, err := q.Enqueue(context.Background(), queue.Delivery{ID: d.ID, Event: d.Event, Action: d.Action(), Body: d.Body}); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// processed is how processOne handled a delivery.
type processed struct {
	id, outcome string
	err         error // the dispatch's
}

// processOne claims the next delivery of q and handles it as the
// webhook Processor does: dispatched with its claim in the context, then
// Done with the Processor's outcome (a dispatch error is a retry, a busy
// one without backoff). ok is false when nothing was claimable.
func processOne(t *testing.T, d *dispatch.Dispatcher, q queue.Queue) (processed, bool) {
	t.Helper()
	ctx := context.Background()
	del, ok, cerr := q.Claim(ctx)
	if cerr != nil {
		t.Error(cerr)
		return processed{}, false
	}
	if !ok {
		return processed{}, false
	}
	tr, routed, nerr := webhook.Normalize(del.Event, del.ID, del.Body)
	if nerr != nil || !routed {
		t.Errorf("normalize %s: %v", del.ID, nerr)
		return processed{}, false
	}
	tr.Attempt = del.Attempts
	outcome, msg := queue.OutcomeProcessed, ""
	err := d.Dispatch(queue.WithClaim(ctx, q, del.ID), tr)
	if err != nil {
		outcome, msg = queue.OutcomeRetry, "dispatch: "+err.Error()
		if errors.Is(err, webhook.ErrBusy) {
			msg = queue.BusyPrefix + err.Error()
		}
	}
	if derr := q.Done(ctx, del.ID, outcome, msg); derr != nil {
		t.Error(derr)
	}
	return processed{del.ID, outcome, err}, true
}

// replicaStore opens each bot process's store on the shared database.
func replicaStore(t *testing.T, pool *pgxpool.Pool) func(*event.Sealer) store.Store {
	return func(s *event.Sealer) store.Store {
		st, err := postgres.Open(context.Background(), pool, s, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
}

// comment posts a maintainer's comment on issue n.
func (w *liveWorld) comment(n int, body string) {
	w.t.Helper()
	w.asHuman(func() error {
		_, err := w.alice.CreateComment(context.Background(), github.Repo{Owner: "octo", Name: "app"}, n, body)
		return err
	})
}

// TestCancelWithdrawsQueuedRequest: an `/agent` request waits in the
// queue for its retry (its first attempt failed: the model provider did
// not answer, and a tracking comment of an earlier attempt stands) when
// the maintainer comments `/agent cancel`. The cancel withdraws it: its
// delivery ends withdrawn (not failed, not pending), it never starts (no
// session, no pull request), the reply says it was withdrawn and the
// tracking comment says it did not start. On both queues.
func TestCancelWithdrawsQueuedRequest(t *testing.T) {
	for _, kind := range []string{"log", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			var w *liveWorld
			var q cancelQueue
			if kind == "log" {
				w = newLiveWorld(t, "token", "")
				lq, err := queue.OpenLogQueue(filepath.Join(t.TempDir(), "webhooks"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { lq.Close() })
				q = lq
			} else {
				var pool *pgxpool.Pool
				w, pool = replicaWorld(t)
				pq, err := queue.OpenPGQueue(context.Background(), pool, queue.PGQueueOptions{Owner: "replica-a"})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { pq.Close() })
				q = pq
			}
			var mu sync.Mutex
			failing := true
			w.opts.Preflight = func(context.Context) error {
				mu.Lock()
				defer mu.Unlock()
				if failing {
					failing = false
					return errors.New("the provider did not answer")
				}
				return nil
			}
			w.login()
			ctx := context.Background()
			issue := w.fake.AddIssue(repoName, fakegithub.Issue{Title: "token check", Body: "auth.go is broken", User: "alice"})
			w.comment(issue, "/agent "+demo.Prompt)
			fix := enqueueNew(t, w, q)
			if len(fix) != 1 {
				t.Fatalf("%d deliveries for the request", len(fix))
			}
			if p, _ := processOne(t, w.d, q); p.id != fix[0].ID || p.outcome != queue.OutcomeRetry || !errors.Is(p.err, dispatch.ErrPreflight) {
				t.Fatalf("first attempt: %+v; want the request retried", p)
			}
			sid := dispatch.DeliverySessionID(issue, fix[0].ID)
			tracked := w.fake.AddComment(repoName, issue, w.botLogin, tracking.Marker(sid)+"\n**agentos** is starting on this.")

			w.comment(issue, "/agent cancel")
			cancel := enqueueNew(t, w, q)
			n := len(w.results)
			if p, _ := processOne(t, w.d, q); p.id != cancel[0].ID || p.outcome != queue.OutcomeProcessed || p.err != nil {
				t.Fatalf("the cancel: %+v", p)
			}
			if got := w.results[n:]; len(got) != 1 || got[0].Outcome != "withdrawn" || got[0].SessionID != sid {
				t.Fatalf("cancel results %+v, want one withdrawn of session %s", got, sid)
			}
			rec, ok, err := q.Get(ctx, fix[0].ID)
			if err != nil || !ok || rec.State != "done" || rec.Outcome != queue.OutcomeWithdrawn || !strings.Contains(rec.Error, "by @alice") {
				t.Fatalf("the request's delivery: %+v %v %v; want done, withdrawn by alice", rec, ok, err)
			}
			if n, err := q.Depth(ctx); err != nil || n != 0 {
				t.Fatalf("queue depth %d %v, want 0", n, err)
			}
			if _, ok := processOne(t, w.d, q); ok {
				t.Fatal("something was claimable after the cancel")
			}
			var replies, trackingBody []string
			for _, c := range w.fake.Comments(repoName, issue) {
				switch {
				case c.ID == tracked:
					trackingBody = append(trackingBody, c.Body)
				case strings.EqualFold(c.User, w.botLogin):
					replies = append(replies, c.Body)
				}
			}
			if len(replies) != 1 || !strings.Contains(replies[0], "@alice the request of @alice was still waiting in the queue and is withdrawn: it will not start") {
				t.Errorf("the bot's replies %q, want one saying the request was withdrawn", replies)
			}
			if len(trackingBody) != 1 || !strings.Contains(trackingBody[0], "did not start: the request was withdrawn") || !strings.Contains(trackingBody[0], tracking.Marker(sid)) {
				t.Errorf("tracking comment %q, want it to say the request did not start", trackingBody)
			}
			if evs, err := w.bot.Runs.Store.Read(ctx, sid, 1); err != nil || len(evs) != 0 {
				t.Errorf("session %s has %d events (%v); the withdrawn request must not start", sid, len(evs), err)
			}
			if prs := w.fake.PRs(repoName); len(prs) != 0 {
				t.Errorf("%d pull requests opened", len(prs))
			}
		})
	}
}

// TestCancelReachesRequestStartingAtAnotherReplica: two replicas on one
// PostgreSQL database (store, queue, leases). Replica A has claimed an
// `/agent` request and is starting it when the maintainer's `/agent
// cancel` reaches replica B. B finds the request claimed and its run not
// begun: it changes nothing and its delivery waits (a busy retry, never
// a failure). Once A's run has begun (it pauses for approval), B's retry
// cancels it: one session, cancelled, with its tracking comment saying
// so and a log that verifies.
func TestCancelReachesRequestStartingAtAnotherReplica(t *testing.T) {
	u := pgtest.Schema(t, pgtest.URL(t))
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	w := newLiveWorld(t, "app", "")
	w.openStore = replicaStore(t, pool)
	var mu sync.Mutex
	w.startBot()
	w.opts.Result = func(r dispatch.Result) { mu.Lock(); w.results = append(w.results, r); mu.Unlock() }
	replica := func(owner string, preflight func(context.Context) error) (*dispatch.Dispatcher, *queue.PGQueue) {
		l, err := postgres.OpenLeases(ctx, pool, postgres.LeaseOptions{Owner: owner, TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		w.opts.Leases, w.opts.Preflight = l, preflight
		w.login()
		q, err := queue.OpenPGQueue(ctx, pool, queue.PGQueueOptions{Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Close() })
		d := w.d
		l.OnCancel(d.CancelRequested)
		return d, q
	}
	starting, proceed := make(chan struct{}), make(chan struct{})
	dA, qA := replica("replica-a", func(context.Context) error {
		close(starting)
		<-proceed
		return nil
	})
	storeA := w.bot.Runs.Store
	w.startBot() // replica B: a new process
	w.opts.Result = func(r dispatch.Result) { mu.Lock(); w.results = append(w.results, r); mu.Unlock() }
	dB, qB := replica("replica-b", nil)

	issue := w.fake.AddIssue(repoName, fakegithub.Issue{Title: "token check", Body: "auth.go is broken", User: "alice"})
	w.comment(issue, "/agent "+demo.Prompt)
	fix := enqueueNew(t, w, qA)
	sid := dispatch.DeliverySessionID(issue, fix[0].ID)
	atA := make(chan processed, 1)
	go func() {
		p, _ := processOne(t, dA, qA)
		atA <- p
	}()
	<-starting // A holds the request's claim and is starting it

	w.comment(issue, "/agent cancel")
	cancel := enqueueNew(t, w, qB)
	if p, _ := processOne(t, dB, qB); p.id != cancel[0].ID || p.outcome != queue.OutcomeRetry || !errors.Is(p.err, webhook.ErrBusy) || errors.Is(p.err, webhook.ErrPermanent) {
		t.Fatalf("the cancel at B while A starts the request: %+v; want a busy retry", p)
	}
	if rec, _, _ := qB.Get(ctx, fix[0].ID); rec.State != "claimed" {
		t.Fatalf("the request's delivery is %s, want still claimed by A", rec.State)
	}
	if rec, _, _ := qB.Get(ctx, cancel[0].ID); rec.State != "pending" || rec.Failures != 0 {
		t.Fatalf("the cancel's delivery: %+v; want pending, no failure counted", rec)
	}

	close(proceed)
	if p := <-atA; p.outcome != queue.OutcomeProcessed || p.err != nil {
		t.Fatalf("the request at A: %+v", p)
	}
	// B's retry (the queue's busy delay, then claimable again).
	var res []dispatch.Result
	for deadline := time.Now().Add(30 * time.Second); ; {
		mu.Lock()
		n := len(w.results)
		mu.Unlock()
		p, ok := processOne(t, dB, qB)
		if ok {
			if p.id != cancel[0].ID || p.outcome != queue.OutcomeProcessed || p.err != nil {
				t.Fatalf("the cancel's retry at B: %+v", p)
			}
			mu.Lock()
			res = append(res, w.results[n:]...)
			mu.Unlock()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancel never became claimable again")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(res) != 1 || res[0].Outcome != "cancelled" || res[0].SessionID != sid || res[0].Status != string(replay.RunCancelled) {
		t.Fatalf("the cancel's result %+v, want session %s cancelled", res, sid)
	}
	evs, err := storeA.Read(ctx, sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	if c := countTypes(evs); c[event.RunStarted] != 1 || c[event.RunCancelled] != 1 || c[event.TurnTerminal] != 1 {
		t.Fatalf("the session's events: %v", c)
	}
	var lines strings.Builder
	for _, e := range evs {
		lines.Write(e.Line())
		lines.WriteByte('\n')
	}
	if rep, err := replay.VerifyReader(schemas.MustDefault(), strings.NewReader(lines.String())); err != nil || !rep.Valid {
		t.Fatalf("the session's log does not verify: %+v %v", rep, err)
	}
	for _, c := range w.fake.Comments(repoName, issue) {
		if strings.Contains(c.Body, tracking.Marker(sid)) && !strings.Contains(strings.ToLower(c.Body), "cancel") {
			t.Errorf("the tracking comment does not say the run was cancelled:\n%s", c.Body)
		}
	}
	for _, q := range []cancelQueue{qA, qB} {
		if n, err := q.Depth(ctx); err != nil || n != 0 {
			t.Errorf("queue depth %d %v, want 0", n, err)
		}
	}
}

// TestPRCloseWithdrawsQueuedRequest: an `/agent` request on a pull
// request waits in the queue for its retry when the pull request is
// closed: the close withdraws it, and says so on the pull request.
func TestPRCloseWithdrawsQueuedRequest(t *testing.T) {
	w := newLiveWorld(t, "token", "")
	q, err := queue.OpenLogQueue(filepath.Join(t.TempDir(), "webhooks"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	failing := true
	w.opts.Preflight = func(context.Context) error {
		if failing {
			failing = false
			return errors.New("the provider did not answer")
		}
		return nil
	}
	w.login()
	ctx := context.Background()
	head := gittest.Commit(t, w.bare, "find-users", "find users by name", map[string]string{"db.go": "package app\n"})
	w.fake.SetRef(repoName, "heads/find-users", head)
	pr := w.fake.AddPullRequest(repoName, fakegithub.PullRequest{Title: "Find users by name", User: "alice", Head: "find-users", HeadSHA: head, Base: "main"})
	w.comment(pr, "/agent "+demo.Prompt)
	fix := enqueueNew(t, w, q)
	if p, _ := processOne(t, w.d, q); len(fix) != 1 || p.id != fix[0].ID || p.outcome != queue.OutcomeRetry {
		t.Fatalf("first attempt: %+v", p)
	}
	w.asHuman(func() error {
		_, _, err := w.alice.GitHub().PullRequests.Edit(ctx, "octo", "app", pr, &gh.PullRequest{State: gh.String("closed")})
		return err
	})
	closed := enqueueNew(t, w, q)
	n := len(w.results)
	if p, _ := processOne(t, w.d, q); len(closed) != 1 || p.id != closed[0].ID || p.outcome != queue.OutcomeProcessed {
		t.Fatalf("the close: %+v", p)
	}
	if got := w.results[n:]; len(got) != 1 || got[0].Outcome != "withdrawn" {
		t.Fatalf("results of the close %+v, want withdrawn", got)
	}
	if rec, _, _ := q.Get(ctx, fix[0].ID); rec.Outcome != queue.OutcomeWithdrawn || !strings.Contains(rec.Error, "the pull request was closed") {
		t.Fatalf("the request's delivery: %+v", rec)
	}
	if c := lastComment(w.fake.Comments(repoName, pr), w.botLogin); !strings.Contains(c.Body, "withdrawn: it will not start") || !strings.Contains(c.Body, "the pull request was closed") {
		t.Errorf("the bot's reply on the pull request:\n%s", c.Body)
	}
	if _, ok := processOne(t, w.d, q); ok {
		t.Fatal("something was claimable after the close")
	}
}

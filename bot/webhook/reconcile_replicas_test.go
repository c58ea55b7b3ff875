package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/runtime/store/postgres"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v62/github"
	"github.com/jackc/pgx/v5/pgxpool"
)

// downPGQueue fails every Enqueue while down is set (the database is down
// for intake, and there is no spool): the handler answers 503.
type downPGQueue struct {
	*queue.PGQueue
	down *atomic.Bool
}

func (q downPGQueue) Enqueue(ctx context.Context, d queue.Delivery) (bool, error) {
	if q.down.Load() {
		return false, errors.New("the database is down")
	}
	return q.PGQueue.Enqueue(ctx, d)
}

// countedHooks counts a reconciler's passes (first pages listed) and the
// redeliveries it asks for.
type countedHooks struct {
	AppHooks
	mu     sync.Mutex
	passes []time.Time
	asked  []int64
}

func (c *countedHooks) ListHookDeliveries(ctx context.Context, opts *github.ListCursorOptions) ([]*github.HookDelivery, *github.Response, error) {
	if opts == nil || opts.Cursor == "" {
		c.mu.Lock()
		c.passes = append(c.passes, time.Now())
		c.mu.Unlock()
	}
	return c.AppHooks.ListHookDeliveries(ctx, opts)
}

func (c *countedHooks) RedeliverHookDelivery(ctx context.Context, id int64) (*github.HookDelivery, *github.Response, error) {
	c.mu.Lock()
	c.asked = append(c.asked, id)
	c.mu.Unlock()
	return c.AppHooks.RedeliverHookDelivery(ctx, id)
}

func (c *countedHooks) counts() (passes int, asked []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.passes), append([]int64(nil), c.asked...)
}

// TestReconcilersOneAtATime: three replicas on one PostgreSQL database
// each run a reconciler against the App's delivery log, with the session
// leases `agentos serve` opens. One replica at a time passes (the holder
// of the reconciler's lease; the others skip), at most once per interval,
// and each failed delivery is redelivered once. When the holder dies (its
// database connections gone, its lease no longer renewed) another replica
// takes over once the lease expires and redelivers what failed since.
func TestReconcilersOneAtATime(t *testing.T) {
	u := pgtest.Schema(t, pgtest.URL(t))
	ctx := context.Background()
	f, api, n, pemKey := appDeliveryWorld(t)

	type replica struct {
		name  string
		pool  *pgxpool.Pool
		q     *queue.PGQueue
		hooks *countedHooks
		stop  context.CancelFunc
		done  chan struct{}
	}
	open := func(name string) *replica {
		pool, err := pgxpool.New(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		q, err := queue.OpenPGQueue(ctx, pool, queue.PGQueueOptions{Owner: name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Close() })
		return &replica{name: name, pool: pool, q: q}
	}
	var down atomic.Bool
	intake := open("intake")
	srv := httptest.NewServer(newEngine(NewHandler(Config{Events: testEvents, Secrets: [][]byte{testSecret}}, downPGQueue{intake.q, &down}, nil)))
	t.Cleanup(srv.Close)
	f.DeliverTo(srv.URL+"/webhook", testSecret)
	comment := func(i int) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/repos/octo/app/issues/%d/comments", api, n), strings.NewReader(fmt.Sprintf(`{"body":"/agent look %d"}`, i)))
		req.Header.Set("Authorization", "token ghp_dev")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("comment %d: %s", i, resp.Status)
		}
	}
	// failWhileDown makes k comments while intake answers 503.
	failWhileDown := func(from, k int) {
		t.Helper()
		down.Store(true)
		before := len(f.HookAttempts())
		for i := from; i < from+k; i++ {
			comment(i)
		}
		waitFor(t, func() bool { return len(f.HookAttempts()) == before+k })
		for _, a := range f.HookAttempts()[before:] {
			if a.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("attempt %+v, want 503 while intake is down", a)
			}
		}
		down.Store(false)
	}
	stored := func() bool {
		for _, d := range f.Deliveries() {
			if _, ok, err := intake.q.Get(ctx, d.ID); err != nil || !ok {
				return false
			}
		}
		return true
	}

	atr, err := ghinstallation.NewAppsTransport(http.DefaultTransport, 77, pemKey)
	if err != nil {
		t.Fatal(err)
	}
	gh := github.NewClient(&http.Client{Transport: atr})
	gh.BaseURL, _ = url.Parse(api + "/")
	const interval = 100 * time.Millisecond
	start := func(r *replica) {
		leases, err := postgres.OpenLeases(ctx, r.pool, postgres.LeaseOptions{Owner: r.name, TTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(leases.Close)
		r.hooks = &countedHooks{AppHooks: gh.Apps}
		rec := &Reconciler{Hooks: r.hooks, Events: testEvents, Interval: interval, Lease: leases,
			Known: func(ctx context.Context, guid string) (bool, error) {
				_, ok, err := r.q.Get(ctx, guid)
				return ok, err
			}}
		rctx, stop := context.WithCancel(ctx)
		r.stop, r.done = stop, make(chan struct{})
		go func() {
			defer close(r.done)
			if err := rec.Run(rctx); err != nil {
				t.Error(err)
			}
		}()
	}

	failWhileDown(0, 3)
	var replicas []*replica
	began := time.Now()
	for _, name := range []string{"replica-a", "replica-b", "replica-c"} {
		r := open(name)
		start(r)
		replicas = append(replicas, r)
	}
	waitFor(t, stored)
	time.Sleep(5 * interval) // more passes, nothing more to ask for
	elapsed := time.Since(began)

	// asked checks that every failed delivery was redelivered once, by
	// any replica, and returns the replicas that passed.
	asked := func(phase string) (passing []*replica, total int) {
		t.Helper()
		perAttempt := map[int64]int{}
		for _, r := range replicas {
			p, ids := r.hooks.counts()
			if p > 0 {
				passing = append(passing, r)
			}
			total += p
			for _, id := range ids {
				perAttempt[id]++
			}
		}
		failed := 0
		for _, a := range f.HookAttempts() {
			if !a.Redelivery && a.StatusCode == http.StatusServiceUnavailable {
				failed++
			}
		}
		redelivered := 0
		for _, a := range f.HookAttempts() {
			if a.Redelivery {
				redelivered++
			}
		}
		if len(perAttempt) != failed || redelivered != failed {
			t.Errorf("%s: %d failed deliveries, %d redeliveries asked for %d attempts (%v); want each failed one redelivered once", phase, failed, redelivered, len(perAttempt), perAttempt)
		}
		for id, k := range perAttempt {
			if k != 1 {
				t.Errorf("%s: attempt %d redelivered %d times", phase, id, k)
			}
		}
		return passing, total
	}
	passing, passes := asked("three replicas")
	if len(passing) != 1 {
		t.Fatalf("%d replicas passed, want one at a time", len(passing))
	}
	holder := passing[0]
	if most := int(elapsed/interval) + 1; passes > most {
		t.Errorf("%d passes in %v, more than one per interval of %v", passes, elapsed, interval)
	}
	t.Logf("%s held the lease: %d passes in %v", holder.name, passes, elapsed.Round(time.Millisecond))

	// The holder dies: its connections are gone and it renews nothing.
	holder.pool.Close()
	holder.stop()
	<-holder.done
	holderPasses, _ := holder.hooks.counts()
	for _, r := range replicas {
		if r != holder {
			r.hooks.mu.Lock()
			r.hooks.passes = nil
			r.hooks.mu.Unlock()
		}
	}
	died := time.Now()
	failWhileDown(3, 2)
	waitFor(t, stored) // within the lease's TTL and an interval
	t.Logf("taken over and redelivered %v after the holder died", time.Since(died).Round(time.Millisecond))
	if p, _ := holder.hooks.counts(); p != holderPasses {
		t.Errorf("the dead holder passed %d more times", p-holderPasses)
	}
	passing, _ = asked("after the holder died")
	var others []string
	for _, r := range passing {
		if r == holder {
			continue
		}
		if p, _ := r.hooks.counts(); p > 0 {
			others = append(others, r.name)
		}
	}
	if len(others) != 1 {
		t.Errorf("replicas passing after the holder died: %v, want exactly one", others)
	}
	for _, r := range replicas {
		if r != holder {
			r.stop()
			<-r.done
		}
	}
	f.CheckNoViolations(t)
}

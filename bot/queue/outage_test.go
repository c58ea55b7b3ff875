package queue

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestClaimFollowsProgressThroughOutage: PostgreSQL is unreachable for
// 10 s (every connection of both replicas cut) while replica A works two
// deliveries. The run of "stuck" stops with the outage (as a run whose
// session lease ran out does); the run of "alive" goes on writing once the
// database is back. A's claim on "stuck" is no longer renewed, so replica
// B takes it over (attempt 2) and A's late Done is refused; "alive" stays
// A's, renewed by its progress, and A finishes it. Before, A renewed both
// claims on a timer for as long as it lived, and "stuck" never moved.
func TestClaimFollowsProgressThroughOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("takes half a minute: a 10 s database outage")
	}
	direct := pgtest.Schema(t, pgtest.URL(t))
	proxy, viaProxy := pgtest.Proxied(t, direct)
	// The claim outlives the outage (renewals every 4 s fail during it);
	// progress older than 3 s stops the renewals.
	opts := PGQueueOptions{ClaimTTL: 12 * time.Second, StallTimeout: 3 * time.Second}
	a := openPGQueueAt(t, viaProxy, opts)
	b := openPGQueueAt(t, viaProxy, opts)
	ctx := context.Background()
	enqueue(t, a, "stuck")
	enqueue(t, a, "alive")
	d1, _ := claim(t, a)
	d2, _ := claim(t, a)
	if d1.ID != "stuck" || d2.ID != "alive" {
		t.Fatalf("claims %q %q", d1.ID, d2.ID)
	}
	// The runs: each writes to the database through its own pool every
	// 200 ms and beats on success.
	pool, err := pgxpool.New(ctx, viaProxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE TABLE progress (id text, at timestamptz)`); err != nil {
		t.Fatal(err)
	}
	runCtx, stopRuns := context.WithCancel(ctx)
	var runs sync.WaitGroup
	var aliveBeats atomic.Int64
	run := func(id string, stopOnError bool) {
		defer runs.Done()
		bctx := WithClaim(runCtx, a, id)
		for runCtx.Err() == nil {
			wctx, cancel := context.WithTimeout(runCtx, time.Second)
			_, err := pool.Exec(wctx, `INSERT INTO progress VALUES ($1, now())`, id)
			cancel()
			switch {
			case err == nil:
				Beat(bctx)
				if id == "alive" {
					aliveBeats.Add(1)
				}
			case stopOnError:
				<-runCtx.Done() // stuck for good
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	runs.Add(2)
	go run("stuck", true)
	go run("alive", false)
	t.Cleanup(func() { stopRuns(); runs.Wait() })

	time.Sleep(time.Second)
	proxy.Down()
	time.Sleep(10 * time.Second)
	if err := proxy.Up(); err != nil {
		t.Fatal(err)
	}
	back := aliveBeats.Load()

	// B takes "stuck" over once A's last renewal runs out.
	var got Delivery
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		d, ok, err := b.Claim(ctx)
		if err == nil && ok {
			got = d
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if got.ID != "stuck" || got.Attempts != 2 {
		t.Fatalf("after the outage B claimed %+v, want stuck on attempt 2", got)
	}
	if err := a.Done(ctx, "stuck", OutcomeProcessed, ""); !errors.Is(err, ErrUnknownDelivery) {
		t.Fatalf("A's Done on the delivery B took over: %v, want ErrUnknownDelivery", err)
	}
	if err := b.Done(ctx, "stuck", OutcomeProcessed, ""); err != nil {
		t.Fatal(err)
	}
	// "alive" made progress after the outage and stays A's through more
	// than a claim's TTL.
	if aliveBeats.Load() <= back {
		t.Fatal("the live run made no progress after the outage")
	}
	until := time.Now().Add(opts.ClaimTTL + 2*time.Second)
	for time.Now().Before(until) {
		if d, ok, err := b.Claim(ctx); err == nil && ok {
			t.Fatalf("B claimed %s, which A's live run holds", d.ID)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if rec, _, _ := b.Get(ctx, "alive"); rec.State != "claimed" || rec.Attempts != 1 {
		t.Fatalf("alive = %s attempt %d, want still claimed by A on attempt 1", rec.State, rec.Attempts)
	}
	if err := a.Done(ctx, "alive", OutcomeProcessed, ""); err != nil {
		t.Fatalf("A's Done on its live claim: %v", err)
	}
}

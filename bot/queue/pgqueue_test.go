package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
)

// crash stops the queue as a killed process would: no renewal, no release.
func (q *PGQueue) crash() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.gc.Close()
	close(q.stop)
	<-q.done
}

// TestPGQueueReplicasClaimOnce: three replicas claim concurrently from one
// table; every delivery is claimed exactly once (SKIP LOCKED), and the same
// delivery sent to all three is stored once.
func TestPGQueueReplicasClaimOnce(t *testing.T) {
	u := pgtest.Schema(t, pgtest.URL(t))
	reps := []*PGQueue{openPGQueueAt(t, u, PGQueueOptions{}), openPGQueueAt(t, u, PGQueueOptions{}), openPGQueueAt(t, u, PGQueueOptions{})}
	ctx := context.Background()
	const n = 150
	var wg sync.WaitGroup
	var newOnes, dups sync.Map
	for i := 0; i < n; i++ {
		for r, q := range reps { // the load balancer's retries reach every replica
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("d-%d", i)
				dup, err := q.Enqueue(ctx, Delivery{ID: id, Event: "issue_comment", Action: "created", Body: []byte(`{}`)})
				if err != nil {
					t.Error(err)
					return
				}
				if dup {
					dups.Store(fmt.Sprint(id, r), true)
				} else if _, loaded := newOnes.LoadOrStore(id, r); loaded {
					t.Errorf("%s stored twice", id)
				}
			}()
		}
	}
	wg.Wait()
	claimed := map[string]int{}
	var mu sync.Mutex
	for _, q := range reps {
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					d, ok, err := q.Claim(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					if !ok {
						return
					}
					mu.Lock()
					claimed[d.ID]++
					mu.Unlock()
					if err := q.Done(ctx, d.ID, OutcomeProcessed, ""); err != nil {
						t.Error(err)
					}
				}
			}()
		}
	}
	wg.Wait()
	if len(claimed) != n {
		t.Fatalf("%d deliveries claimed, want %d", len(claimed), n)
	}
	for id, c := range claimed {
		if c != 1 {
			t.Errorf("%s claimed %d times", id, c)
		}
	}
	if d, _ := reps[1].Depth(ctx); d != 0 {
		t.Errorf("depth %d after all done", d)
	}
}

// TestPGQueueClaimExpiry: a replica that dies holding a claim loses it
// after the TTL; another replica claims the delivery (attempt 2), and the
// dead one's late Done is refused. A live replica's claim is renewed and
// never taken.
func TestPGQueueClaimExpiry(t *testing.T) {
	u := pgtest.Schema(t, pgtest.URL(t))
	ttl := 1500 * time.Millisecond // renewed every 500 ms: room for a slow (race) build
	a := openPGQueueAt(t, u, PGQueueOptions{ClaimTTL: ttl})
	b := openPGQueueAt(t, u, PGQueueOptions{ClaimTTL: ttl})
	ctx := context.Background()
	enqueue(t, a, "dies")
	enqueue(t, a, "lives")
	d1, _ := claim(t, a)
	d2, _ := claim(t, b)
	if d1.ID != "dies" || d2.ID != "lives" {
		t.Fatalf("claims %s %s", d1.ID, d2.ID)
	}
	a.crash()
	if _, ok := claim(t, b); ok {
		t.Fatal("a claim was taken before its TTL")
	}
	deadline := time.Now().Add(10 * time.Second)
	var got Delivery
	for time.Now().Before(deadline) {
		d, ok := claim(t, b)
		if ok {
			got = d
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got.ID != "dies" || got.Attempts != 2 {
		t.Fatalf("after the TTL b claimed %+v, want dies attempt 2", got)
	}
	// a's claim token is stale: finishing it must fail, not overwrite b's.
	a.mu.Lock()
	a.closed = false
	a.mu.Unlock()
	if err := a.Done(ctx, "dies", OutcomeProcessed, ""); !errors.Is(err, ErrUnknownDelivery) {
		t.Fatalf("stale Done: %v", err)
	}
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	if err := b.Done(ctx, "dies", OutcomeProcessed, ""); err != nil {
		t.Fatal(err)
	}
	// "lives" stayed claimed by b through several TTLs (renewed).
	if rec, _, _ := b.Get(ctx, "lives"); rec.State != "claimed" || rec.Attempts != 1 {
		t.Fatalf("renewed claim: %+v", rec)
	}
	if err := b.Done(ctx, "lives", OutcomeProcessed, ""); err != nil {
		t.Fatal(err)
	}
}

// TestPGQueueDeadLetter: failed deliveries and deliveries whose claims
// expired MaxAttempts times are listed as dead.
func TestPGQueueDeadLetter(t *testing.T) {
	u := pgtest.Schema(t, pgtest.URL(t))
	q := openPGQueueAt(t, u, PGQueueOptions{MaxAttempts: 2, ClaimTTL: time.Minute})
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	q.setNow(func() time.Time { return now })
	enqueue(t, q, "bad")
	enqueue(t, q, "poison")
	enqueue(t, q, "fine")
	for _, want := range []string{"bad", "poison", "fine"} {
		d, _ := claim(t, q)
		if d.ID != want {
			t.Fatalf("claimed %s, want %s", d.ID, want)
		}
	}
	if err := q.Done(ctx, "bad", OutcomeFailed, "decode: nope"); err != nil {
		t.Fatal(err)
	}
	if err := q.Done(ctx, "fine", OutcomeProcessed, ""); err != nil {
		t.Fatal(err)
	}
	// "poison" kills its replica twice: its claims expire.
	now = now.Add(2 * time.Minute)
	if d, ok := claim(t, q); !ok || d.ID != "poison" || d.Attempts != 2 {
		t.Fatalf("reclaim: %+v %v", d, ok)
	}
	now = now.Add(2 * time.Minute)
	if d, ok := claim(t, q); ok {
		t.Fatalf("claimed %s after MaxAttempts expiries", d.ID)
	}
	dead, err := q.List(ctx, "dead", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 2 || dead[0].ID != "bad" || dead[1].ID != "poison" || dead[0].Error != "decode: nope" || !strings.Contains(dead[1].Error, "claimed 2 times") {
		t.Fatalf("dead letters %+v", dead)
	}
	if n, _ := q.Dead(ctx); n != 2 {
		t.Fatalf("Dead = %d", n)
	}
	if _, err := q.List(ctx, "bogus", 0); err == nil {
		t.Fatal("unknown state listed")
	}
}

// TestPGQueueNotify: a replica idle on Ready wakes when another enqueues.
func TestPGQueueNotify(t *testing.T) {
	u := pgtest.Schema(t, pgtest.URL(t))
	a := openPGQueueAt(t, u, PGQueueOptions{})
	b := openPGQueueAt(t, u, PGQueueOptions{})
	<-b.opts.Listener.Connected()
	for len(b.Ready()) > 0 { // the connect-time resync wake-up
		<-b.Ready()
	}
	enqueue(t, a, "n1")
	select {
	case <-b.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up from another replica's enqueue")
	}
}

// TestPGQueueFailuresAreNotClaims: on PostgreSQL too, a delivery handed
// back at shutdown (Release) is claimable at once, as handled before
// (Attempts 2) with no failure counted; a failed dispatch counts one
// failure and waits the first backoff (1 s), whatever the claims.
func TestPGQueueFailuresAreNotClaims(t *testing.T) {
	u := pgtest.Schema(t, pgtest.URL(t))
	q := openPGQueueAt(t, u, PGQueueOptions{})
	ctx := context.Background()
	enqueue(t, q, "a")
	for i := 1; i <= 3; i++ {
		d, ok := claim(t, q)
		if !ok || d.Attempts != i || d.Failures != 0 {
			t.Fatalf("claim %d: %+v %v; want attempts %d, no failure", i, d, ok, i)
		}
		if err := q.Release(ctx, "a"); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Release(ctx, "a"); !errors.Is(err, ErrUnknownDelivery) {
		t.Fatalf("release of an unclaimed delivery: %v", err)
	}
	d, ok := claim(t, q)
	if !ok || d.Attempts != 4 {
		t.Fatalf("claim after three releases: %+v %v", d, ok)
	}
	start := time.Now()
	q.now = func() time.Time { return start }
	if err := q.Done(ctx, "a", OutcomeRetry, "busy"); err != nil {
		t.Fatal(err)
	}
	rec, _, err := q.Get(ctx, "a")
	if err != nil || rec.State != "pending" || rec.Failures != 1 || rec.Attempts != 4 {
		t.Fatalf("after one failed dispatch: %+v %v; want pending, 1 failure, 4 attempts", rec, err)
	}
	q.now = func() time.Time { return start.Add(900 * time.Millisecond) }
	if _, ok := claim(t, q); ok {
		t.Fatal("claimed before the first backoff (1 s)")
	}
	q.now = func() time.Time { return start.Add(1100 * time.Millisecond) }
	if d, ok := claim(t, q); !ok || d.Failures != 1 {
		t.Fatalf("claim after 1 s: %+v %v; want 1 failure", d, ok)
	}
}

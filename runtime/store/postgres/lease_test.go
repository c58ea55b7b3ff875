package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

func openLeases(t *testing.T, u, owner string, ttl time.Duration) *Leases {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	l, err := OpenLeases(context.Background(), pool, LeaseOptions{Owner: owner, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// TestLeases: one replica at a time holds a session; the holder's renewal
// keeps it past the TTL; release frees it at once; a dead holder's lease
// is taken over after the TTL and the dead one's late release does not
// free the new holder's lease.
func TestLeases(t *testing.T) {
	u := pgtest.Schema(t, pgtest.URL(t))
	ttl := 1500 * time.Millisecond // renewed every 500 ms: room for a slow (race) build
	a := openLeases(t, u, "a", ttl)
	b := openLeases(t, u, "b", ttl)
	ctx := context.Background()
	relA, err := a.Acquire(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Acquire(ctx, "s1")
	var le *LeasedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLeased) || le.Owner != "a" {
		t.Fatalf("second acquire: %v", err)
	}
	time.Sleep(2 * ttl) // renewed meanwhile
	if _, err := b.Acquire(ctx, "s1"); !errors.Is(err, ErrLeased) {
		t.Fatalf("acquire of a renewed lease: %v", err)
	}
	relA()
	relB, err := b.Acquire(ctx, "s1")
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	relB()

	// a takes s2 and dies.
	if _, err := a.Acquire(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	a.crash()
	start := time.Now()
	var relB2 func()
	for {
		relB2, err = b.Acquire(ctx, "s2")
		if err == nil {
			break
		}
		if !errors.Is(err, ErrLeased) || time.Since(start) > 10*time.Second {
			t.Fatalf("takeover: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if took := time.Since(start); took < ttl/2 {
		t.Fatalf("taken over after %v, before the TTL", took)
	}
	// The dead replica's stale release must not free b's lease.
	a.release("s2", "stale-token")
	c := openLeases(t, u, "c", ttl)
	if _, err := c.Acquire(ctx, "s2"); !errors.Is(err, ErrLeased) {
		t.Fatalf("after a stale release: %v", err)
	}
	relB2()

	// A replica restarted under the same name takes its leases back at once.
	if _, err := c.Acquire(ctx, "s3"); err != nil {
		t.Fatal(err)
	}
	c.crash()
	c2 := openLeases(t, u, "c", ttl)
	if _, err := c2.Acquire(ctx, "s3"); err != nil {
		t.Fatalf("restarted owner: %v", err)
	}
}

// TestLeaseLost: a holder that stalls past the TTL finds at its next
// renewal that another replica took the session, and says so.
func TestLeaseLost(t *testing.T) {
	u := pgtest.Schema(t, pgtest.URL(t))
	ttl := 900 * time.Millisecond
	a := openLeases(t, u, "a", ttl)
	b := openLeases(t, u, "b", ttl)
	ctx := context.Background()
	if _, err := a.Acquire(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	// Simulate a stall: a's renewals stop and its lease expires.
	a.crash()
	if _, err := a.pool.Exec(ctx, `UPDATE agentos_leases SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	a.renew()
	if !a.Lost("s") {
		t.Fatal("a did not notice it lost the lease")
	}
}

// TestLeaseCancelRequest: a cancel asked of a session another replica
// holds reaches that replica's OnCancel at its next renewal, once; a
// session nobody holds reports so; a lease taken over after its holder
// died keeps the request for the new holder.
func TestLeaseCancelRequest(t *testing.T) {
	u := pgtest.Schema(t, pgtest.URL(t))
	ttl := 1500 * time.Millisecond
	a := openLeases(t, u, "a", ttl)
	b := openLeases(t, u, "b", ttl)
	ctx := context.Background()
	type asked struct{ sid, by, reason string }
	got := make(chan asked, 4)
	a.OnCancel(func(sid, by, reason string) { got <- asked{sid, by, reason} })

	if held, err := b.RequestCancel(ctx, "nobody", "alice", "stop"); err != nil || held {
		t.Fatalf("cancel of an unheld session: held %v, %v", held, err)
	}
	if _, err := a.Acquire(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if held, err := b.RequestCancel(ctx, "s1", "alice", "wrong approach"); err != nil || !held {
		t.Fatalf("cancel of a held session: held %v, %v", held, err)
	}
	select {
	case c := <-got:
		if c != (asked{"s1", "alice", "wrong approach"}) {
			t.Errorf("OnCancel got %+v", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the holder never heard of the cancel")
	}
	time.Sleep(ttl) // more renewals: no second call
	select {
	case c := <-got:
		t.Errorf("OnCancel called again: %+v", c)
	default:
	}

	// The holder dies; the request stays with the lease for whoever takes
	// the session over.
	if _, err := a.Acquire(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	if held, err := b.RequestCancel(ctx, "s2", "bob", ""); err != nil || !held {
		t.Fatalf("cancel s2: %v %v", held, err)
	}
	a.crash()
	if _, err := a.pool.Exec(ctx, `UPDATE agentos_leases SET expires_at = now() - interval '1 second' WHERE session_id = 's2'`); err != nil {
		t.Fatal(err)
	}
	c := openLeases(t, u, "c", ttl)
	gotC := make(chan asked, 1)
	c.OnCancel(func(sid, by, reason string) { gotC <- asked{sid, by, reason} })
	if _, err := c.Acquire(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	c.renew()
	select {
	case x := <-gotC:
		if x.sid != "s2" || x.by != "bob" {
			t.Errorf("the new holder got %+v", x)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the new holder never heard of the cancel")
	}
}

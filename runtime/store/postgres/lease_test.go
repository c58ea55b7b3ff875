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
	// Simulate a stall: the lease expires without a's renewal.
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

package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/store/postgres"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
)

// TestCache: two replicas' caches on one database see each other's
// values; a delete on one is seen by the other; an entry expires by the
// database's clock; bad input is refused, not truncated.
func TestCache(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	a, err := postgres.OpenCache(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	b, err := postgres.OpenCache(ctx, pool) // a second replica: the migration is applied once
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.Get(ctx, "perm:octo/app:alice"); err != nil || ok {
		t.Fatalf("empty cache: ok %v err %v", ok, err)
	}
	if err := a.Put(ctx, "perm:octo/app:alice", "write", time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := b.Get(ctx, "perm:octo/app:alice"); err != nil || !ok || v != "write" {
		t.Fatalf("the other replica reads %q %v %v, want write", v, ok, err)
	}
	if err := b.Put(ctx, "perm:octo/app:alice", "read", time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := a.Get(ctx, "perm:octo/app:alice"); v != "read" {
		t.Fatalf("after a replace: %q, want read", v)
	}
	if err := b.Delete(ctx, "perm:octo/app:alice"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := a.Get(ctx, "perm:octo/app:alice"); ok {
		t.Fatal("a value deleted on one replica is still read on the other")
	}
	if err := a.Put(ctx, "short", "v", 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if _, ok, _ := b.Get(ctx, "short"); ok {
		t.Fatal("an expired entry is read")
	}
	if n, err := a.Prune(ctx); err != nil || n != 1 {
		t.Fatalf("prune: %d %v, want 1", n, err)
	}
	for _, c := range []struct {
		key, value string
		ttl        time.Duration
	}{
		{"", "v", time.Minute},
		{strings.Repeat("k", postgres.MaxCacheKey+1), "v", time.Minute},
		{"k", strings.Repeat("v", postgres.MaxCacheValue+1), time.Minute},
		{"k", "v", 0},
		{"k\x00", "v", time.Minute},
		{"k", "\xff", time.Minute},
	} {
		if err := a.Put(ctx, c.key, c.value, c.ttl); err == nil {
			t.Errorf("Put(%d-byte key, %d-byte value, %s) accepted", len(c.key), len(c.value), c.ttl)
		}
	}
	if _, ok, _ := a.Get(ctx, "k"); ok {
		t.Error("a refused Put wrote something")
	}
	// Expired entries do not pile up: Puts delete them as they go.
	for i := range 300 {
		if err := a.Put(ctx, fmt.Sprint("gone-", i), "v", time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	for i := range 256 {
		if err := a.Put(ctx, fmt.Sprint("fresh-", i%4), "v", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM agentos_cache`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows > 4+300-256 {
		t.Errorf("%d rows after 556 puts of which 300 expired, want the expired ones pruned", rows)
	}
}

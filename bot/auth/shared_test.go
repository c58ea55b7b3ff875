package auth

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/store/postgres"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
)

// brokenCache is a shared cache whose database is gone.
type brokenCache struct{ puts int }

func (b *brokenCache) Get(context.Context, string) (string, bool, error) {
	return "", false, errors.New("connection refused")
}
func (b *brokenCache) Put(context.Context, string, string, time.Duration) error {
	b.puts++
	return errors.New("connection refused")
}
func (b *brokenCache) Delete(context.Context, string) error { return errors.New("connection refused") }

// TestSharedPermissionCache: three replicas' Authorizers on one
// PostgreSQL cache. A permission one replica asked GitHub for is reused by
// the others (one GitHub call for all three); Forget on one replica makes
// every replica ask again; the shared entry expires after TTL.
func TestSharedPermissionCache(t *testing.T) {
	ctx := context.Background()
	cache, err := postgres.OpenCache(ctx, pgtest.Pool(t))
	if err != nil {
		t.Fatal(err)
	}
	src := &perms{levels: map[string]string{"alice": "write"}}
	var replicas []*Authorizer
	for range 3 {
		replicas = append(replicas, New(src, Policy{TTL: 2 * time.Second, Shared: cache}))
	}
	ask := func(a *Authorizer) Decision {
		return a.Authorize(ctx, Request{Owner: "octo", Repo: "app", Login: "alice", UserType: "User", Action: ActionRun})
	}
	for i, a := range replicas {
		if d := ask(a); !d.Allowed {
			t.Fatalf("replica %d refused: %+v", i, d)
		}
	}
	if src.calls != 1 {
		t.Fatalf("three replicas asked GitHub %d times, want 1", src.calls)
	}
	// Write access revoked; one replica hears of it.
	src.levels["alice"] = "read"
	replicas[2].Forget("octo", "APP", "Alice")
	if d := ask(replicas[0]); d.Allowed || src.calls != 2 {
		t.Fatalf("after Forget on another replica: allowed %v, calls %d; want refused, 2", d.Allowed, src.calls)
	}
	if d := ask(replicas[1]); d.Allowed || src.calls != 2 {
		t.Fatalf("the refreshed answer is not shared: allowed %v, calls %d", d.Allowed, src.calls)
	}
	time.Sleep(2500 * time.Millisecond) // past TTL, by the database's clock
	if _ = ask(replicas[1]); src.calls != 3 {
		t.Fatalf("an expired shared answer was reused: calls %d, want 3", src.calls)
	}
}

// TestSharedCacheDown: a shared cache that fails is not a refusal and not
// a stale answer: every check asks GitHub.
func TestSharedCacheDown(t *testing.T) {
	src := &perms{levels: map[string]string{"alice": "write"}}
	b := &brokenCache{}
	a := New(src, Policy{Shared: b})
	for range 2 {
		if d := a.Authorize(context.Background(), Request{Owner: "octo", Repo: "app", Login: "alice", UserType: "User", Action: ActionRun}); !d.Allowed {
			t.Fatalf("refused with the cache down: %+v", d)
		}
	}
	if src.calls != 2 || b.puts != 2 {
		t.Fatalf("calls %d puts %d, want 2 and 2", src.calls, b.puts)
	}
	a.Forget("octo", "app", "alice") // must not panic or block
}

package github

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/runtime/store/postgres"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
)

// TestAppLoginSharedAcrossReplicas: three App-mode clients (three
// replicas, or restarts) on one PostgreSQL cache learn the app's login
// with one GET /app between them; a cache holding something that is not
// an app login is not believed.
func TestAppLoginSharedAcrossReplicas(t *testing.T) {
	f, base := seeded(t)
	key, pemKey := testKeyPEM(t)
	f.AddApp(fakegithub.App{ID: 77, Slug: "agentos", PublicKey: &key.PublicKey})
	ctx := context.Background()
	cache, err := postgres.OpenCache(ctx, pgtest.Pool(t))
	if err != nil {
		t.Fatal(err)
	}
	getApp := func() int { return f.Calls()["GET /app"] }
	for i := range 3 {
		c, err := New(Config{BaseURL: base, AppID: 77, PrivateKey: pemKey, Shared: cache})
		if err != nil {
			t.Fatal(err)
		}
		if login, err := c.BotLogin(ctx); err != nil || login != "agentos[bot]" {
			t.Fatalf("replica %d: BotLogin = %q, %v", i, login, err)
		}
	}
	if n := getApp(); n != 1 {
		t.Fatalf("three replicas called GET /app %d times, want 1", n)
	}
	// Something else under the key (a bug, a hand edit): asked again.
	if err := cache.Put(ctx, "github.app-login:"+mustHost(t, base)+":77", "mallory", time.Minute); err != nil {
		t.Fatal(err)
	}
	c, _ := New(Config{BaseURL: base, AppID: 77, PrivateKey: pemKey, Shared: cache})
	if login, err := c.BotLogin(ctx); err != nil || login != "agentos[bot]" || getApp() != 2 {
		t.Fatalf("with a bad cached value: %q %v, GET /app %d times", login, err, getApp())
	}
	f.CheckNoViolations(t)
}

func mustHost(t *testing.T, base string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

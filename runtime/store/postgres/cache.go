package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Cache is a small key/value table with expiry that replicas sharing the
// database read and write together: answers that every replica would
// otherwise ask GitHub for once each (a collaborator's permission, the
// App's own identity) are asked once, and a value dropped on one replica
// (a permission revoked, say) is dropped on all of them.
//
// Only what is not a secret belongs here: anyone who can read the
// database can read the table (installation tokens are never stored).
// Expiry is decided by the database's clock, so replicas whose clocks
// disagree still agree on what is fresh.
type Cache struct {
	pool *pgxpool.Pool
	puts atomic.Int64
}

// pruneEvery is how many Puts of one process pass between two deletions
// of the expired entries, so the table holds about what is fresh: a
// permission per person and repository asked in the last minute.
const pruneEvery = 256

var cacheMigrations = []Migration{
	{Version: 1, SQL: `
CREATE TABLE agentos_cache (
	key        text        PRIMARY KEY,
	value      text        NOT NULL,
	expires_at timestamptz NOT NULL
);
CREATE INDEX agentos_cache_expires ON agentos_cache (expires_at);`},
}

// MaxCacheKey and MaxCacheValue bound what Put accepts (bytes).
const (
	MaxCacheKey   = 512
	MaxCacheValue = 64 << 10
)

// OpenCache migrates the cache's table and returns the cache.
func OpenCache(ctx context.Context, pool *pgxpool.Pool) (*Cache, error) {
	if pool == nil {
		return nil, errors.New("postgres: the cache needs a pool")
	}
	if err := Migrate(ctx, pool, "cache", cacheMigrations); err != nil {
		return nil, err
	}
	return &Cache{pool: pool}, nil
}

// Get returns key's value if it is there and has not expired.
func (c *Cache) Get(ctx context.Context, key string) (string, bool, error) {
	var v string
	err := c.pool.QueryRow(ctx, `SELECT value FROM agentos_cache WHERE key = $1 AND expires_at > now()`, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("postgres: cache get: %w", err)
	}
	return v, true, nil
}

// Put stores value under key for ttl (from the database's now()),
// replacing what was there.
func (c *Cache) Put(ctx context.Context, key, value string, ttl time.Duration) error {
	switch {
	case key == "" || len(key) > MaxCacheKey:
		return fmt.Errorf("postgres: cache put: a key of %d bytes (1 to %d)", len(key), MaxCacheKey)
	case len(value) > MaxCacheValue:
		return fmt.Errorf("postgres: cache put: a value of %d bytes (at most %d)", len(value), MaxCacheValue)
	case !utf8.ValidString(key) || !utf8.ValidString(value) || strings.ContainsRune(key, 0) || strings.ContainsRune(value, 0):
		return errors.New("postgres: cache put: keys and values are text (valid UTF-8, no NUL)")
	case ttl <= 0:
		return fmt.Errorf("postgres: cache put: ttl %s is not positive", ttl)
	}
	_, err := c.pool.Exec(ctx, `
INSERT INTO agentos_cache (key, value, expires_at) VALUES ($1, $2, now() + make_interval(secs => $3))
ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`, key, value, ttl.Seconds())
	if err != nil {
		return fmt.Errorf("postgres: cache put: %w", err)
	}
	if c.puts.Add(1)%pruneEvery == 0 {
		_, _ = c.Prune(ctx) // the next pass catches up
	}
	return nil
}

// Delete drops key (no error if it is not there).
func (c *Cache) Delete(ctx context.Context, key string) error {
	if _, err := c.pool.Exec(ctx, `DELETE FROM agentos_cache WHERE key = $1`, key); err != nil {
		return fmt.Errorf("postgres: cache delete: %w", err)
	}
	return nil
}

// Prune deletes the expired entries and returns how many it deleted.
func (c *Cache) Prune(ctx context.Context) (int64, error) {
	tag, err := c.pool.Exec(ctx, `DELETE FROM agentos_cache WHERE expires_at <= now()`)
	if err != nil {
		return 0, fmt.Errorf("postgres: cache prune: %w", err)
	}
	return tag.RowsAffected(), nil
}

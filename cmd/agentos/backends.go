package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentos/agentos/bot/config"
	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/postgres"
	"github.com/jackc/pgx/v5/pgxpool"
)

// defaultPoolConns bounds a replica's connections unless the URL says
// pool_max_conns: with 3 replicas, 48 of PostgreSQL's default 100.
const defaultPoolConns = 16

// serveQueue is what serve needs of a delivery queue: LogQueue (one
// process) or PGQueue (replicas).
type serveQueue interface {
	queue.Queue
	queue.Lister
	Get(ctx context.Context, id string) (queue.Record, bool, error)
	Prune(ctx context.Context, before time.Time) (int64, error)
	Close() error
}

// backends are the event store and (opened on demand) the delivery queue
// serve runs on: SQLite and the log queue in the data directory, or both
// in the PostgreSQL database of cfg.StoreURL.
type backends struct {
	store store.Store
	kind  string // "sqlite" | "postgres"
	cfg   config.Config
	pool  *pgxpool.Pool
	l     *postgres.Listener
	log   *slog.Logger
}

// openBackends opens the event store.
func openBackends(ctx context.Context, cfg config.Config, sealer *event.Sealer, log *slog.Logger) (*backends, error) {
	if cfg.StoreURL == "" {
		st, err := openStore(cfg.DataDir, sealer)
		if err != nil {
			return nil, fmt.Errorf("serve: open the event store in %s: %w", cfg.DataDir, err)
		}
		return &backends{store: st, kind: "sqlite", cfg: cfg, log: log}, nil
	}
	pcfg, err := pgxpool.ParseConfig(cfg.StoreURL)
	if err != nil {
		// pgx's message may quote the URL: name it redacted instead.
		return nil, usageErrorf("serve: --store %s is not a valid PostgreSQL URL", config.RedactURL(cfg.StoreURL))
	}
	if !strings.Contains(cfg.StoreURL, "pool_max_conns") {
		// pgxpool's default (4 on a 2-core machine) is less than what one
		// replica holds at once: two event committers and two enqueue
		// committers in their flushes, the queue's workers, event streams.
		pcfg.MaxConns = defaultPoolConns
	}
	if _, set := pcfg.ConnConfig.RuntimeParams["application_name"]; !set {
		pcfg.ConnConfig.RuntimeParams["application_name"] = "agentos"
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(octx, pcfg)
	if err == nil {
		err = pool.Ping(octx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		return nil, fmt.Errorf("serve: connect to PostgreSQL at %s: %w", config.RedactURL(cfg.StoreURL), err)
	}
	l := postgres.NewListener(pool, log)
	st, err := postgres.Open(octx, pool, sealer, postgres.Options{Listener: l, Logger: log})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("serve: open the event store in PostgreSQL: %w", err)
	}
	return &backends{store: st, kind: "postgres", cfg: cfg, pool: pool, l: l, log: log}, nil
}

// queue opens the delivery queue next to the store.
func (b *backends) queue(ctx context.Context) (serveQueue, error) {
	if b.pool == nil {
		q, err := queue.OpenLogQueue(filepath.Join(b.cfg.DataDir, webhookQueueDir))
		if err != nil {
			return nil, fmt.Errorf("serve: %w", err)
		}
		return spooled(q, b.cfg.DataDir, b.log)
	}
	q, err := queue.OpenPGQueue(ctx, b.pool, queue.PGQueueOptions{Owner: b.cfg.ReplicaID, Listener: b.l, Logger: b.log})
	if err != nil {
		return nil, fmt.Errorf("serve: open the delivery queue in PostgreSQL: %w", err)
	}
	return spooled(q, b.cfg.DataDir, b.log)
}

// leases returns the session leases of the PostgreSQL backend (nil for
// SQLite: one process, whose in-process locks suffice).
func (b *backends) leases(ctx context.Context, log *slog.Logger) (*postgres.Leases, error) {
	if b.pool == nil {
		return nil, nil
	}
	owner := b.cfg.ReplicaID
	if owner == "" {
		owner = defaultOwner()
	}
	l, err := postgres.OpenLeases(ctx, b.pool, postgres.LeaseOptions{Owner: owner, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("serve: open the session leases in PostgreSQL: %w", err)
	}
	return l, nil
}

// defaultOwner names a replica without AGENTOS_REPLICA_ID: host, pid and
// a random suffix, unique per process.
func defaultOwner() string {
	host, _ := os.Hostname()
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(r[:]))
}

// start begins listening for notifications once every handler is
// registered.
func (b *backends) start() {
	if b.l != nil {
		b.l.Start()
	}
}

// Close closes the store, the listener and the pool.
func (b *backends) Close() error {
	err := b.store.Close()
	if b.l != nil {
		b.l.Close()
	}
	if b.pool != nil {
		b.pool.Close()
	}
	return err
}

// urlPassword returns the password a database URL carries, to be redacted.
func urlPassword(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	if p, ok := u.User.Password(); ok {
		return p
	}
	return u.Query().Get("password")
}

// readPostgresSession reads a session from the PostgreSQL store at u
// (`agentos replay SESSION` with AGENTOS_DATABASE_URL set).
func readPostgresSession(ctx context.Context, u, sessionID string) ([]event.Event, error) {
	var evs []event.Event
	err := scanPostgresSession(ctx, u, sessionID, "replay", func(e *event.Event) error {
		evs = append(evs, *e)
		return nil
	})
	return evs, err
}

// sharedCache is the cache replicas on one PostgreSQL store share
// (permission answers, the App's login); nil on the embedded store, whose
// one process keeps its own.
func (b *backends) sharedCache(ctx context.Context) (dispatch.SharedCache, error) {
	if b.pool == nil {
		return nil, nil
	}
	c, err := postgres.OpenCache(ctx, b.pool)
	if err != nil {
		return nil, fmt.Errorf("serve: open the shared cache in PostgreSQL: %w", err)
	}
	return c, nil
}

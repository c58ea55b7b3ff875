package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Migration is one step of a component's schema: its SQL runs in one
// transaction together with the version bump, so a database is at one
// version or the next, never between.
type Migration struct {
	Version int
	SQL     string
}

// ErrNewerSchema is returned when the database holds a schema version newer
// than this binary knows: an older replica must not write into a layout it
// does not understand.
var ErrNewerSchema = errors.New("postgres: the database schema is newer than this agentos understands")

// migrateLockKey is the advisory lock every migrating replica takes, so
// that two replicas starting together apply each step once.
const migrateLockKey = int64(0x6167656e746f73) // "agentos"

// Migrate brings the schema of component (e.g. "events", "deliveries") up
// to the last of steps, under a session advisory lock held for the whole
// run. Steps must be numbered 1, 2, 3, … in order. A database at a newer
// version than the last step is refused with ErrNewerSchema.
func Migrate(ctx context.Context, pool *pgxpool.Pool, component string, steps []Migration) error {
	for i, m := range steps {
		if m.Version != i+1 {
			return fmt.Errorf("postgres: migrations of %s: step %d has version %d", component, i+1, m.Version)
		}
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate %s: %w", component, err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLockKey); err != nil {
		return fmt.Errorf("postgres: migrate %s: take the migration lock: %w", component, err)
	}
	defer func() {
		// A failed unlock (connection lost) releases the lock anyway:
		// session locks end with the session.
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrateLockKey)
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS agentos_schema (
		component  text PRIMARY KEY,
		version    integer NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("postgres: migrate %s: %w", component, err)
	}
	var have int
	err = conn.QueryRow(ctx, `SELECT version FROM agentos_schema WHERE component = $1`, component).Scan(&have)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres: migrate %s: %w", component, err)
	}
	if have > len(steps) {
		return fmt.Errorf("%w: %s is at version %d, this binary knows up to %d", ErrNewerSchema, component, have, len(steps))
	}
	for _, m := range steps[have:] {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO agentos_schema (component, version) VALUES ($1, $2)
				ON CONFLICT (component) DO UPDATE SET version = excluded.version, applied_at = now()`, component, m.Version)
			return err
		})
		if err != nil {
			return fmt.Errorf("postgres: migrate %s to version %d: %w", component, m.Version, err)
		}
	}
	return nil
}

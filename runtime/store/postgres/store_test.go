package postgres

import (
	"context"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
	"github.com/agentos/agentos/runtime/store/storetest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// openIn opens a store in a fresh schema of the database at dbURL, closed
// (with its pool) when the test ends.
func openIn(t testing.TB, dbURL string, sealer *event.Sealer, opts Options) *Store {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.Schema(t, dbURL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := Open(context.Background(), pool, sealer, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	db := pgtest.URL(t)
	storetest.Run(t, func(t *testing.T, sealer *event.Sealer) store.Store {
		return openIn(t, db, sealer, Options{})
	})
}

func TestConformanceNoGroupCommit(t *testing.T) {
	db := pgtest.URL(t)
	storetest.Run(t, func(t *testing.T, sealer *event.Sealer) store.Store {
		return openIn(t, db, sealer, Options{NoGroupCommit: true})
	})
}

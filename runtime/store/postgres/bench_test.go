package postgres

import (
	"context"
	"testing"

	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
	"github.com/agentos/agentos/runtime/store/sqlite"
	"github.com/agentos/agentos/runtime/store/storetest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkAppend64 compares durable append throughput of this store with
// the embedded SQLite store (group commit) in the same run: 64 sessions,
// one event per call, each append waiting for its commit. PostgreSQL
// groups concurrent WAL flushes itself (every commit waits for its
// flush, synchronous_commit=on); the pool size bounds how many appends are
// in flight. Read the ratio sqlite/postgres of events/s, not the absolute
// figures (the machine is shared).
//
//	go test -run '^$' -bench BenchmarkAppend64 -benchtime 20000x ./runtime/store/postgres/
func BenchmarkAppend64(b *testing.B) {
	db := pgtest.URL(b)
	b.Run("sqlite", func(b *testing.B) {
		s, err := sqlite.Open(b.TempDir(), storetest.NewSealer(b), sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		storetest.BenchAppend(b, s, 64, 1)
	})
	for _, c := range []struct {
		name  string
		conns int
		opts  Options
	}{
		{"group/committers=4", 8, Options{Committers: 4}},
		{"group/committers=2", 8, Options{Committers: 2}},
		{"group/committers=1", 8, Options{Committers: 1}},
		{"statement-per-append/conns=8", 8, Options{NoGroupCommit: true}},
		{"statement-per-append/conns=64", 64, Options{NoGroupCommit: true}},
	} {
		b.Run("postgres/"+c.name, func(b *testing.B) {
			s := openBench(b, pgtest.Schema(b, db), c.conns, c.opts)
			defer s.Close()
			storetest.BenchAppend(b, s, 64, 1)
		})
	}
}

func openBench(b *testing.B, u string, conns int, opts Options) store.Store {
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = int32(conns)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	s, err := Open(context.Background(), pool, storetest.NewSealer(b), opts)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

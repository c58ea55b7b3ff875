package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

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

// BenchmarkTakeover measures how long a session stays unworked after the
// replica working it dies: replica A holds the session's lease (TTL 1 s,
// renewed every TTL/3) and appends to it, then dies (renewal stops, no
// release); replica B tries the lease every 10 ms and, once it has it,
// resumes from the log (reads it). Reported: the median and the maximum
// over 20 kills, per b.N; the bound is the TTL (the lease expires at most
// TTL after A's last renewal) plus B's retry interval and the read.
//
//	go test -run '^$' -bench BenchmarkTakeover -benchtime 1x ./runtime/store/postgres/
func BenchmarkTakeover(b *testing.B) {
	u := pgtest.Schema(b, pgtest.URL(b))
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	ctx := context.Background()
	s, err := Open(ctx, pool, storetest.NewSealer(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const ttl = time.Second
	bLeases, err := OpenLeases(ctx, pool, LeaseOptions{Owner: "b", TTL: ttl})
	if err != nil {
		b.Fatal(err)
	}
	defer bLeases.Close()
	var times []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := 0; k < 20; k++ {
			sid := fmt.Sprintf("t-%d-%d", i, k)
			a, err := OpenLeases(ctx, pool, LeaseOptions{Owner: fmt.Sprint("a-", i, "-", k), TTL: ttl})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := a.Acquire(ctx, sid); err != nil {
				b.Fatal(err)
			}
			var seq int64
			// Work for a while (0.3–1.3 s), so the kill lands at any point
			// of the renewal cycle.
			until := time.Now().Add(300*time.Millisecond + time.Duration(k)*50*time.Millisecond)
			for time.Now().Before(until) {
				evs, err := s.Append(ctx, sid, seq, msg("work"))
				if err != nil {
					b.Fatal(err)
				}
				seq = evs[0].Seq
				time.Sleep(20 * time.Millisecond)
			}
			a.crash()
			killed := time.Now()
			for {
				release, err := bLeases.Acquire(ctx, sid)
				if err == nil {
					evs, err := s.Read(ctx, sid, 1)
					if err != nil || int64(len(evs)) != seq {
						b.Fatalf("resume read %d events, %v; want %d", len(evs), err, seq)
					}
					times = append(times, time.Since(killed))
					release()
					break
				}
				if !errors.Is(err, ErrLeased) {
					b.Fatal(err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Milliseconds()), "median-takeover-ms")
	b.ReportMetric(float64(times[len(times)-1].Milliseconds()), "max-takeover-ms")
	b.ReportMetric(float64(ttl.Milliseconds()), "lease-ttl-ms")
}

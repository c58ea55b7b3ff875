package riverqueue

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite"
)

// body is a delivery's body of the size of a real issue_comment
// delivery (@octokit/webhooks-examples' first one is about 7 KB).
var body = func() []byte {
	b := []byte(`{"action":"created","comment":{"body":"`)
	for len(b) < 7000 {
		b = append(b, "/agent look at the failing test please "...)
	}
	return append(b, `"}}`...)
}()

const producers, workers = 32, 8

// DeliveryArgs is a delivery as a River job; unique by its ID (the
// delivery GUID), as the queues dedupe by delivery ID.
type DeliveryArgs struct {
	ID     string `json:"id" river:"unique"`
	Event  string `json:"event"`
	Action string `json:"action"`
	Body   []byte `json:"body"`
}

func (DeliveryArgs) Kind() string { return "delivery" }

type deliveryWorker struct {
	river.WorkerDefaults[DeliveryArgs]
	done *atomic.Int64
	all  chan struct{}
	n    int64
}

func (w *deliveryWorker) Work(ctx context.Context, j *river.Job[DeliveryArgs]) error {
	if len(j.Args.Body) != len(body) {
		return fmt.Errorf("body %d bytes", len(j.Args.Body))
	}
	if w.done.Add(1) == w.n {
		close(w.all)
	}
	return nil
}

// produce runs n enqueues from 32 goroutines and returns deliveries/s.
func produce(b *testing.B, n int, enqueue func(ctx context.Context, id string) error) float64 {
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if err := enqueue(ctx, fmt.Sprint("d-", i)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

// ownQueue measures one of bot/queue's queues: enqueue, then 8 workers
// claim and complete every delivery.
func ownQueue(b *testing.B, q queue.Queue) {
	ctx := context.Background()
	b.ResetTimer()
	in := produce(b, b.N, func(ctx context.Context, id string) error {
		_, err := q.Enqueue(ctx, queue.Delivery{ID: id, Event: "issue_comment", Action: "created", Body: body})
		return err
	})
	var done atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Load() < int64(b.N) {
				d, ok, err := q.Claim(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				if !ok {
					time.Sleep(time.Millisecond)
					continue
				}
				if err := q.Done(ctx, d.ID, queue.OutcomeProcessed, ""); err != nil {
					b.Error(err)
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	out := float64(b.N) / time.Since(start).Seconds()
	b.StopTimer()
	b.ReportMetric(in, "enqueued/s")
	b.ReportMetric(out, "processed/s")
}

// riverRun measures River: enqueue with Insert (unique by delivery ID),
// then a client with 8 workers works every job.
func riverRun[TTx any](b *testing.B, newClient func(cfg *river.Config) (*river.Client[TTx], error), poll time.Duration) {
	ctx := context.Background()
	ins, err := newClient(&river.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	in := produce(b, b.N, func(ctx context.Context, id string) error {
		_, err := ins.Insert(ctx, DeliveryArgs{ID: id, Event: "issue_comment", Action: "created", Body: body}, nil)
		return err
	})
	var done atomic.Int64
	w := &deliveryWorker{done: &done, all: make(chan struct{}), n: int64(b.N)}
	ws := river.NewWorkers()
	river.AddWorker(ws, w)
	c, err := newClient(&river.Config{Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}}, Workers: ws, FetchPollInterval: poll, FetchCooldown: poll})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case <-w.all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("River worked %d of %d jobs in 5 minutes", done.Load(), b.N)
	}
	out := float64(b.N) / time.Since(start).Seconds()
	b.StopTimer()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_ = c.Stop(sctx)
	b.ReportMetric(in, "enqueued/s")
	b.ReportMetric(out, "processed/s")
}

// BenchmarkEmbedded: LogQueue (the SQLite deployment's queue, a segment
// log beside the SQLite store) against River on SQLite (riversqlite over
// modernc.org/sqlite, one connection as its driver asks, WAL).
func BenchmarkEmbedded(b *testing.B) {
	b.Run("logqueue", func(b *testing.B) {
		q, err := queue.OpenLogQueue(filepath.Join(b.TempDir(), "q"))
		if err != nil {
			b.Fatal(err)
		}
		defer q.Close()
		ownQueue(b, q)
	})
	b.Run("river-sqlite", func(b *testing.B) {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(b.TempDir(), "river.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)")
		if err != nil {
			b.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		defer db.Close()
		drv := riversqlite.New(db)
		m, err := rivermigrate.New(drv, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Migrate(context.Background(), rivermigrate.DirectionUp, nil); err != nil {
			b.Fatal(err)
		}
		riverRun(b, func(cfg *river.Config) (*river.Client[*sql.Tx], error) { return river.NewClient(drv, cfg) }, 50*time.Millisecond)
	})
}

// BenchmarkPostgres: PGQueue against River on PostgreSQL (riverpgxv5),
// each in a fresh schema of one database.
func BenchmarkPostgres(b *testing.B) {
	db := pgtest.URL(b)
	pool := func(b *testing.B) *pgxpool.Pool {
		p, err := pgxpool.New(context.Background(), pgtest.Schema(b, db))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(p.Close)
		return p
	}
	b.Run("pgqueue", func(b *testing.B) {
		q, err := queue.OpenPGQueue(context.Background(), pool(b), queue.PGQueueOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer q.Close()
		ownQueue(b, q)
	})
	b.Run("river-postgres", func(b *testing.B) {
		drv := riverpgxv5.New(pool(b))
		m, err := rivermigrate.New(drv, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Migrate(context.Background(), rivermigrate.DirectionUp, nil); err != nil {
			b.Fatal(err)
		}
		riverRun(b, func(cfg *river.Config) (*river.Client[pgx.Tx], error) { return river.NewClient(drv, cfg) }, 50*time.Millisecond)
	})
}

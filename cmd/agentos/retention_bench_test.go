package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/config"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/postgres"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
	"github.com/agentos/agentos/runtime/store/sqlite"
	"github.com/agentos/agentos/schemas"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The retention pass at scale: stores of many sessions, a share of them
// ended longer ago than retention.sessions.

// retentionAge is retention.sessions in these tests; old sessions are
// twice as old.
const retentionAge = 30 * 24 * time.Hour

// clockSealer is a sealer whose clock the test sets: the events of "old"
// sessions are stamped 60 days ago.
type clockSealer struct {
	*event.Sealer
	offset atomic.Int64 // nanoseconds added to now
}

func newClockSealer(tb testing.TB) *clockSealer {
	tb.Helper()
	c := &clockSealer{}
	s, err := event.NewSealer(schemas.MustDefault(), nil, func() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) })
	if err != nil {
		tb.Fatal(err)
	}
	c.Sealer = s
	return c
}

// openRetentionStore opens an empty store of the backend ("sqlite" or
// "postgres") stamping with c's clock.
func openRetentionStore(tb testing.TB, backend string, c *clockSealer) store.Store {
	tb.Helper()
	var st store.Store
	switch backend {
	case "sqlite":
		s, err := sqlite.Open(tb.TempDir(), c.Sealer, sqlite.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		st = s
	case "postgres":
		u := pgtest.Schema(tb, pgtest.URL(tb))
		pool, err := pgxpool.New(context.Background(), u)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(pool.Close)
		s, err := postgres.Open(context.Background(), pool, c.Sealer, postgres.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		st = s
	default:
		tb.Fatalf("unknown backend %q", backend)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// sessionDrafts are the events of one session: ended (closed after its
// terminal report) or paused for an approval.
func sessionDrafts(ended bool) []event.Draft {
	ds := []event.Draft{
		{RunID: "r1", Type: event.SessionStart, Actor: "runtime", Payload: map[string]any{"prompt": "fix the bug in auth.go"}},
		{RunID: "r1", Type: event.RunStarted, Actor: "runtime", Payload: map[string]any{"run_id": "r1", "prompt": "fix the bug in auth.go"}},
		{RunID: "r1", Type: event.ToolInvoke, Actor: "worker", Payload: map[string]any{"call_id": "c1", "tool": "repo.read", "args": map[string]any{"path": "auth.go"}}},
		{RunID: "r1", Type: event.ToolResult, Actor: "kernel", Payload: map[string]any{"call_id": "c1", "tool": "repo.read", "ok": true}},
	}
	if ended {
		return append(ds, event.Draft{RunID: "r1", Type: event.SessionClose, Actor: "runtime", Payload: map[string]any{"ok": true}})
	}
	return append(ds, event.Draft{RunID: "r1", Type: event.RunPaused, Actor: "runtime", Payload: map[string]any{"reason": "approval", "approval_ids": []string{"a1"}}})
}

// populate stores sessions prefix-0 … prefix-(n-1), 8 writers at a time,
// stamped age ago; every other one ended, the rest paused unless allEnded.
func populate(tb testing.TB, st store.Store, c *clockSealer, prefix string, n int, age time.Duration, allEnded bool) {
	tb.Helper()
	c.offset.Store(int64(-age))
	defer c.offset.Store(0)
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if _, err := st.Append(context.Background(), fmt.Sprintf("%s-%d", prefix, i), 0, sessionDrafts(allEnded || i%2 == 0)...); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
}

// listAll pages through every stored session, as the pass's first step
// does: the baseline the pass is measured against.
func listAll(tb testing.TB, st store.Store) int {
	tb.Helper()
	n := 0
	var after store.Cursor
	for {
		page, err := st.List(context.Background(), store.ListOptions{Limit: store.MaxListLimit, After: after})
		if err != nil {
			tb.Fatal(err)
		}
		n += len(page)
		if len(page) < store.MaxListLimit {
			return n
		}
		after = store.CursorOf(page[len(page)-1])
	}
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// BenchmarkRetentionPass: one retention pass over 10,000 stored sessions
// of 5 events, 1,000 of them ended 60 days ago (retention.sessions 30
// days), the other 9,000 recent (half ended, half paused), on SQLite and
// on PostgreSQL. The pass deletes the 1,000 (restored, untimed, before
// each further iteration). Its baseline, timed in the same iterations, is
// listing every session of the same store, the pass's first step:
// pass/list is the ratio, list-ns the baseline, and
// ns/deleted-beyond-list what the pass costs past its listing per
// session it deletes.
//
//	go test -run '^$' -bench BenchmarkRetentionPass -benchtime 3x ./cmd/agentos/
func BenchmarkRetentionPass(b *testing.B) {
	const total, old = 10_000, 1_000
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			c := newClockSealer(b)
			st := openRetentionStore(b, backend, c)
			populate(b, st, c, "old", old, 2*retentionAge, true)
			populate(b, st, c, "recent", total-old, time.Hour, false)
			r := &retention{cfg: config.Retention{Sessions: retentionAge}, store: st, log: discardLog(), now: time.Now}
			ctx := context.Background()
			var list, pass time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if i > 0 {
					populate(b, st, c, "old", old, 2*retentionAge, true)
				}
				t0 := time.Now()
				if n := listAll(b, st); n != total {
					b.Fatalf("%d sessions stored, want %d", n, total)
				}
				list += time.Since(t0)
				t0 = time.Now()
				b.StartTimer()
				res, err := r.pass(ctx)
				b.StopTimer()
				pass += time.Since(t0)
				if err != nil || res.sessions.Sessions != old || res.sessions.Events != 5*old {
					b.Fatalf("pass = %+v, %v; want %d sessions of 5 events deleted", res, err, old)
				}
			}
			b.ReportMetric(float64(list.Nanoseconds())/float64(b.N), "list-ns")
			b.ReportMetric(float64(pass)/float64(list), "pass/list")
			b.ReportMetric(float64((pass-list).Nanoseconds())/float64(b.N*old), "ns/deleted-beyond-list")
		})
	}
}

// hookedStore calls during before the second page of the listing and
// before the first and the middle deletions a pass makes.
type hookedStore struct {
	store.Store
	during  func(where string)
	lists   atomic.Int64
	deletes atomic.Int64
	middle  int64
}

func (h *hookedStore) List(ctx context.Context, o store.ListOptions) ([]store.SessionInfo, error) {
	if h.lists.Add(1) == 2 {
		h.during("listing")
	}
	return h.Store.List(ctx, o)
}

func (h *hookedStore) DeleteSession(ctx context.Context, sessionID string, lastSeq int64) (int64, error) {
	switch h.deletes.Add(1) {
	case 1:
		h.during("first deletion")
	case h.middle:
		// An append races the deletion itself.
		done := make(chan struct{})
		go func() { defer close(done); h.during("a deletion under way") }()
		n, err := h.Store.(store.Pruner).DeleteSession(ctx, sessionID, lastSeq)
		<-done
		return n, err
	}
	return h.Store.(store.Pruner).DeleteSession(ctx, sessionID, lastSeq)
}

// TestRetentionPassDoesNotStallAppends: a pass holds no lock that stalls
// the appends of live sessions: an append made while the pass lists the
// sessions, between its deletions, and racing a deletion completes, on
// SQLite and on PostgreSQL. (A stalled append fails the test after 30 s:
// a bound on liveness, not a measurement.)
func TestRetentionPassDoesNotStallAppends(t *testing.T) {
	const total, old = 2_500, 600
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			c := newClockSealer(t)
			st := openRetentionStore(t, backend, c)
			populate(t, st, c, "old", old, 2*retentionAge, true)
			populate(t, st, c, "recent", total-old, time.Hour, false)
			ctx := context.Background()
			live, err := st.Append(ctx, "live", 0, sessionDrafts(false)[:2]...)
			if err != nil {
				t.Fatal(err)
			}
			last := live[len(live)-1].Seq
			var where []string
			var mu sync.Mutex
			h := &hookedStore{Store: st, middle: old / 2}
			h.during = func(at string) {
				actx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				mu.Lock()
				defer mu.Unlock()
				evs, err := st.Append(actx, "live", last, event.Draft{RunID: "r1", Type: event.ToolInvoke, Actor: "worker", Payload: map[string]any{"call_id": "c" + fmt.Sprint(last), "tool": "repo.read", "args": map[string]any{}}})
				if err != nil {
					t.Errorf("an append %s: %v", at, err)
					return
				}
				last = evs[0].Seq
				where = append(where, at)
			}
			r := &retention{cfg: config.Retention{Sessions: retentionAge}, store: h, log: discardLog(), now: time.Now}
			res, err := r.pass(ctx)
			if err != nil || res.sessions.Sessions != old {
				t.Fatalf("pass = %+v, %v; want %d sessions deleted", res, err, old)
			}
			if fmt.Sprint(where) != "[listing first deletion a deletion under way]" {
				t.Errorf("appends completed %v; want one while listing, one between deletions, one racing a deletion", where)
			}
			if n := listAll(t, st); n != total-old+1 {
				t.Errorf("%d sessions after the pass, want %d", n, total-old+1)
			}
		})
	}
}

package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
	"github.com/agentos/agentos/runtime/store/storetest"
	"github.com/agentos/agentos/schemas"
	"github.com/jackc/pgx/v5/pgxpool"
)

// openProxied opens a store whose pool reaches the fresh schema only
// through a proxy.
func openProxied(t *testing.T, opts Options) (*Store, *pgtest.Proxy, string) {
	t.Helper()
	schemaURL := pgtest.Schema(t, pgtest.URL(t))
	px, via := pgtest.Proxied(t, schemaURL)
	u, err := url.Parse(via)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	pool, err := pgxpool.New(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	opts.PollInterval = -1
	s, err := Open(context.Background(), pool, storetest.NewSealer(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, px, schemaURL
}

// toolPair is one tool call of a run: its invoke, then its result.
func toolPair(run string, i int, invokeID string) (event.Draft, func(string) event.Draft) {
	call := fmt.Sprint("call-", i)
	inv := event.Draft{RunID: run, Type: event.ToolInvoke, Actor: "worker", Payload: map[string]any{"call_id": call, "tool": "repo.read", "args": map[string]any{"path": fmt.Sprint("f", i)}}}
	return inv, func(parent string) event.Draft {
		return event.Draft{RunID: run, Type: event.ToolResult, Actor: "kernel", ParentID: parent, Payload: map[string]any{"call_id": call, "tool": "repo.read", "ok": true, "result": map[string]any{"n": i}}}
	}
}

// TestAppendsRideOutBlip: a run appends tool.invoke and tool.result one
// by one while the database becomes unreachable for three seconds (every
// connection cut, new ones refused) and comes back. Every append
// succeeds, none is stored twice, and the log verifies strictly: no
// unpaired invoke, no gap, no fork.
func TestAppendsRideOutBlip(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{{"group", Options{}}, {"single", Options{NoGroupCommit: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			s, px, direct := openProxied(t, tc.opts)
			ctx := context.Background()
			const pairs = 60
			errc := make(chan error, 1)
			progress := make(chan int, pairs)
			go func() {
				var seq int64
				for i := 0; i < pairs; i++ {
					inv, result := toolPair("run-1", i, "")
					evs, err := s.Append(ctx, "blip", seq, inv)
					if err != nil {
						errc <- fmt.Errorf("invoke %d: %w", i, err)
						return
					}
					if evs, err = s.Append(ctx, "blip", evs[0].Seq, result(evs[0].ID)); err != nil {
						errc <- fmt.Errorf("result %d: %w", i, err)
						return
					}
					seq = evs[0].Seq
					progress <- i
					time.Sleep(20 * time.Millisecond)
				}
				errc <- nil
			}()
			for i := range progress {
				if i == 5 {
					break
				}
			}
			px.Down()
			time.Sleep(3 * time.Second)
			if err := px.Up(); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			// Read back without the proxy.
			pool, err := pgxpool.New(ctx, direct)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			evs, err := (&Store{pool: pool}).readPage(ctx, "blip", 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 2*pairs {
				t.Fatalf("%d events stored, want %d", len(evs), 2*pairs)
			}
			if rep := replay.VerifyEvents(schemas.MustDefault(), evs); !rep.Valid {
				t.Fatalf("the log does not verify: %v", rep.Problem)
			}
		})
	}
}

// TestAppendUnavailableAfterBound: a database that stays away past
// RetryFor fails the append with *store.UnavailableError, and the store
// works again once the database is back.
func TestAppendUnavailableAfterBound(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{{"group", Options{RetryFor: time.Second}}, {"single", Options{RetryFor: time.Second, NoGroupCommit: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			s, px, _ := openProxied(t, tc.opts)
			ctx := context.Background()
			if _, err := s.Append(ctx, "away", 0, storetestMsg("one")); err != nil {
				t.Fatal(err)
			}
			px.Down()
			_, err := s.Append(ctx, "away", 1, storetestMsg("two"))
			var ue *store.UnavailableError
			if !errors.As(err, &ue) || !errors.Is(err, store.ErrUnavailable) || ue.SessionID != "away" || ue.Attempts < 2 {
				t.Fatalf("append while the database is away: %v", err)
			}
			if err := px.Up(); err != nil {
				t.Fatal(err)
			}
			var got []event.Event
			for i := 0; i < 100; i++ { // the pool reconnects
				if got, err = s.Read(ctx, "away", 1); err == nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if len(got) == 2 && !ue.InDoubt {
				t.Fatalf("an append reported as not in doubt is stored: %v", got)
			}
			if _, err := s.Append(ctx, "away", int64(len(got)), storetestMsg("three")); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func storetestMsg(text string) event.Draft {
	return event.Draft{RunID: "r1", Type: event.OutputMessage, Actor: "worker", Payload: map[string]any{"text": text}}
}

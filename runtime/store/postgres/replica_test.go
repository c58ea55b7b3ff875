package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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

// openURL opens a store (own pool) on the schema at u.
func openURL(t testing.TB, u string, opts Options) *Store {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := Open(context.Background(), pool, storetest.NewSealer(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func msg(text string) event.Draft {
	return event.Draft{RunID: "r1", Type: event.OutputMessage, Actor: "worker", Payload: map[string]any{"text": text}}
}

// TestReplicasRaceOneChain: three stores (replicas) on one database append
// to the same session with stale views of it; every append either extends
// the one chain or gets a ConflictError naming the real last seq.
func TestReplicasRaceOneChain(t *testing.T) {
	u := pgtest.Schema(t, pgtest.URL(t))
	reps := []*Store{openURL(t, u, Options{}), openURL(t, u, Options{}), openURL(t, u, Options{})}
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	appended := 0
	for i, s := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var seq int64
			for n := 0; n < 40; n++ {
				evs, err := s.Append(ctx, "shared", seq, msg(fmt.Sprint(i, "/", n)))
				var ce *store.ConflictError
				switch {
				case err == nil:
					seq = evs[0].Seq
					mu.Lock()
					appended++
					mu.Unlock()
				case errors.As(err, &ce):
					if ce.Actual <= seq {
						t.Errorf("replica %d: conflict says last seq %d, but %d was appended", i, ce.Actual, seq)
						return
					}
					seq = ce.Actual
				default:
					t.Errorf("replica %d: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	evs, err := reps[0].Read(ctx, "shared", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != appended {
		t.Fatalf("%d events stored, %d appends acknowledged", len(evs), appended)
	}
	if rep := replay.VerifyEvents(schemas.MustDefault(), evs); !rep.Valid {
		t.Fatalf("chain: %v", rep.Problem)
	}
	ss, _ := reps[2].Sessions(ctx)
	if len(ss) != 1 || ss[0].LastSeq != int64(appended) {
		t.Fatalf("sessions %+v, want last seq %d", ss, appended)
	}
}

// TestFollowAcrossReplicas: a follower on one replica receives, in order
// and without gaps, events appended on another, woken by NOTIFY (polling
// is off, so only the notification can wake it); a second follower that
// resumes after a seq (Last-Event-ID) gets exactly the rest.
func TestFollowAcrossReplicas(t *testing.T) {
	u := pgtest.Schema(t, pgtest.URL(t))
	writer := openURL(t, u, Options{PollInterval: -1})
	reader := openURL(t, u, Options{PollInterval: -1})
	<-reader.Listener().Connected()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := writer.Append(ctx, "s", 0, msg("1")); err != nil {
		t.Fatal(err)
	}
	follow := func(after int64, upto int64) <-chan []int64 {
		out := make(chan []int64, 1)
		go func() {
			var got []int64
			err := store.Follow(ctx, reader, "s", after, func(e event.Event) (bool, error) {
				got = append(got, e.Seq)
				return e.Seq == upto, nil
			})
			if err != nil {
				t.Error(err)
			}
			out <- got
		}()
		return out
	}
	first := follow(0, 30)
	for seq := int64(1); seq < 30; seq++ {
		if _, err := writer.Append(ctx, "s", seq, msg(fmt.Sprint(seq+1))); err != nil {
			t.Fatal(err)
		}
		if seq == 15 {
			time.Sleep(50 * time.Millisecond) // let the follower catch up mid-stream
		}
	}
	got := <-first
	if len(got) != 30 || got[0] != 1 || got[29] != 30 {
		t.Fatalf("follower got %v", got)
	}
	for i, s := range got {
		if s != int64(i+1) {
			t.Fatalf("follower got %v", got)
		}
	}
	// Reconnect with Last-Event-ID 17, then more events arrive.
	second := follow(17, 35)
	for seq := int64(30); seq < 35; seq++ {
		if _, err := writer.Append(ctx, "s", seq, msg(fmt.Sprint(seq+1))); err != nil {
			t.Fatal(err)
		}
	}
	got = <-second
	if len(got) != 18 || got[0] != 18 || got[17] != 35 {
		t.Fatalf("resumed follower got %v", got)
	}
}

// TestPollingCoversLostNotifications: with no listener notifications
// reaching it (its listener never started), a follower still sees another
// replica's events through polling.
func TestPollingCoversLostNotifications(t *testing.T) {
	u := pgtest.Schema(t, pgtest.URL(t))
	writer := openURL(t, u, Options{PollInterval: -1})
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	deaf := NewListener(pool, nil) // never started: every notification is lost
	reader := openURL(t, u, Options{Listener: deaf, PollInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- store.Follow(ctx, reader, "p", 0, func(e event.Event) (bool, error) { return e.Seq == 3, nil })
	}()
	time.Sleep(100 * time.Millisecond)
	for seq := int64(0); seq < 3; seq++ {
		if _, err := writer.Append(ctx, "p", seq, msg("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestMigrations: replicas starting together apply the schema once; a
// database at a newer version is refused.
func TestMigrations(t *testing.T) {
	u := pgtest.Schema(t, pgtest.URL(t))
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pool, err := pgxpool.New(context.Background(), u)
			if err != nil {
				errs[i] = err
				return
			}
			defer pool.Close()
			s, err := Open(context.Background(), pool, storetest.NewSealer(t), Options{})
			if err == nil {
				s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx := context.Background()
	var v int
	if err := pool.QueryRow(ctx, `SELECT version FROM agentos_schema WHERE component = 'events'`).Scan(&v); err != nil || v != len(eventMigrations) {
		t.Fatalf("version %d, %v", v, err)
	}
	if _, err := pool.Exec(ctx, `UPDATE agentos_schema SET version = version + 1 WHERE component = 'events'`); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, pool, storetest.NewSealer(t), Options{}); !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("open against a newer schema: %v", err)
	}
	bad := []Migration{{Version: 1, SQL: "SELECT 1"}, {Version: 3, SQL: "SELECT 1"}}
	if err := Migrate(ctx, pool, "x", bad); err == nil {
		t.Fatal("misnumbered migrations were applied")
	}
}

// TestSecretsNeverStored: no seeded secret reaches any table.
func TestSecretsNeverStored(t *testing.T) {
	u := pgtest.Schema(t, pgtest.URL(t))
	s := openURL(t, u, Options{})
	storetest.SeedSecrets(t, s)
	ctx := context.Background()
	var dump string
	err := s.pool.QueryRow(ctx, `SELECT string_agg(convert_from(line, 'UTF8') || session_id || hash, E'\n') FROM agentos_events`).Scan(&dump)
	if err != nil {
		t.Fatal(err)
	}
	var heads string
	if err := s.pool.QueryRow(ctx, `SELECT string_agg(h::text, E'\n') FROM agentos_sessions h`).Scan(&heads); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dump, "nested") {
		t.Fatal("the dump does not hold the events")
	}
	for _, sec := range storetest.Secrets {
		if strings.Contains(dump+heads, sec) {
			t.Errorf("the database holds the secret %q", sec)
		}
	}
}

// TestListenerReconnects: the LISTEN connection is killed
// (pg_terminate_backend, as a failover or an idle-connection reaper
// would); the listener reconnects, resyncs its followers, and later
// notifications arrive again — with polling off, nothing else could wake
// the follower.
func TestListenerReconnects(t *testing.T) {
	u := pgtest.Schema(t, pgtest.URL(t))
	writer := openURL(t, u, Options{PollInterval: -1})
	reader := openURL(t, u, Options{PollInterval: -1})
	<-reader.Listener().Connected()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var n int
	if err := writer.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN %'`).Scan(&n); err != nil || n < 1 {
		t.Fatalf("terminated %d listeners: %v", n, err)
	}
	got := make(chan int64, 10)
	go func() {
		_ = store.Follow(ctx, reader, "r", 0, func(e event.Event) (bool, error) {
			got <- e.Seq
			return e.Seq == 3, nil
		})
	}()
	time.Sleep(200 * time.Millisecond) // the follower read the (empty) backlog and waits
	deadline := time.Now().Add(15 * time.Second)
	for seq := int64(0); seq < 3; seq++ {
		if _, err := writer.Append(ctx, "r", seq, msg("x")); err != nil {
			t.Fatal(err)
		}
		select {
		case s := <-got:
			if s != seq+1 {
				t.Fatalf("got seq %d, want %d", s, seq+1)
			}
		case <-time.After(time.Until(deadline)):
			t.Fatalf("seq %d never reached the follower after the listener was killed", seq+1)
		}
	}
}

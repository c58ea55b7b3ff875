package api

import (
	"context"
	"net/http"
	"testing"

	"github.com/agentos/agentos/runtime/store/postgres"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestEventsAcrossReplicas: two API replicas on one PostgreSQL store,
// with the API's own polling off so that only the store's NOTIFY can wake
// a stream. A run's events are appended through replica A while a client
// streams them from replica B, drops the connection every few events and
// reconnects with Last-Event-ID alternately to A and B: it sees every
// event exactly once, in order, until the stream ends at the terminal
// report.
func TestEventsAcrossReplicas(t *testing.T) {
	u := pgtest.Schema(t, pgtest.URL(t))
	open := func() *postgres.Store {
		pool, err := pgxpool.New(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		st, err := postgres.Open(context.Background(), pool, newSealer(t), postgres.Options{PollInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		<-st.Listener().Connected()
		return st
	}
	a := newTestEnv(t, Options{Store: open(), Poll: -1})
	b := newTestEnv(t, Options{Store: open(), Poll: -1})
	const sid, total = "across", 120
	mustAppend(t, a.store, sid, startDrafts("r1", "stream")...)
	writerDone := make(chan error, 1)
	go func() {
		ctx := context.Background()
		for i := 0; i < total; i++ {
			if err := appendDrafts(ctx, a.store, sid, deltaDraft("r1", i)); err != nil {
				writerDone <- err
				return
			}
		}
		writerDone <- appendDrafts(ctx, a.store, sid, endDrafts("r1")...)
	}()
	var seen []int64
	var last int64
	for conn := 0; ; conn++ {
		env := b
		if conn%2 == 1 {
			env = a
		}
		s := env.openStream(t, sid, last, "")
		if s.resp.StatusCode == http.StatusNoContent {
			break
		}
		if s.resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d: status %d", conn, s.resp.StatusCode)
		}
		for i := 0; i < 13; i++ {
			f, ok := s.next(t)
			if !ok {
				break
			}
			seen = append(seen, f.id)
			last = f.id
		}
		s.close()
	}
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}
	if want := 2 + total + 3; len(seen) != want {
		t.Fatalf("saw %d events, want %d", len(seen), want)
	}
	for i, id := range seen {
		if id != int64(i+1) {
			t.Fatalf("event %d has id %d: gap or duplicate", i+1, id)
		}
	}
}

package queue

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// openTestQueue opens a fresh LogQueue; path reopens the same queue.
func openTestQueue(t *testing.T) (*LogQueue, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "webhooks")
	return openQueueAt(t, path), path
}

// openQueueAt opens the LogQueue at path, closed when the test ends.
func openQueueAt(t *testing.T, path string) *LogQueue {
	t.Helper()
	q, err := OpenLogQueue(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// openPGQueueAt opens a PGQueue (own pool) on the schema at u, closed
// when the test ends.
func openPGQueueAt(t testing.TB, u string, o PGQueueOptions) *PGQueue {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	q, err := OpenPGQueue(context.Background(), pool, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// waitDrained waits until q holds no open delivery.
func waitDrained(t *testing.T, q Queue) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := q.Depth(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue depth still %d", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

package queue

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// flaky is a LogQueue whose Enqueue fails while down is set, as PGQueue's
// does while PostgreSQL is unreachable.
type flaky struct {
	*LogQueue
	down atomic.Bool
}

var errDown = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

func (f *flaky) Enqueue(ctx context.Context, d Delivery) (bool, error) {
	if f.down.Load() {
		return false, errDown
	}
	return f.LogQueue.Enqueue(ctx, d)
}

func openSpoolAt(t *testing.T, path string, q Durable, o SpoolOptions) *Spool {
	t.Helper()
	if o.Retry == 0 {
		o.Retry = 20 * time.Millisecond
	}
	s, err := OpenSpool(path, q, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func waitSpoolEmpty(t *testing.T, s *Spool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Spooled() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries still spooled", s.Spooled())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSpoolKeepsDeliveriesWhileTheQueueIsDown: deliveries the queue cannot
// take are accepted into the spool (a second copy of one is a duplicate,
// by ID and by payload key), survive a restart of the process, and reach
// the queue, once each and in order, when it is back; the spool file is
// then empty.
func TestSpoolKeepsDeliveriesWhileTheQueueIsDown(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	lq := openQueueAt(t, filepath.Join(dir, "q"))
	q := &flaky{LogQueue: lq}
	q.down.Store(true)
	path := filepath.Join(dir, "data", "webhooks.spool") // a data directory not made yet
	s := openSpoolAt(t, path, q, SpoolOptions{Retry: time.Hour})
	for i, d := range []Delivery{
		{ID: "a", Event: "issue_comment", Action: "created", Key: "k-a", Body: []byte(`{"n":1}`)},
		{ID: "b", Event: "issue_comment", Action: "created", Key: "k-b", Body: []byte(`{"n":2}`)},
		{ID: "a", Event: "issue_comment", Action: "created", Key: "k-a", Body: []byte(`{"n":1}`)},
		{ID: "c", Event: "issue_comment", Action: "created", Key: "k-b", Body: []byte(`{"n":2}`)},
	} {
		dup, err := s.Enqueue(ctx, d)
		if err != nil {
			t.Fatalf("enqueue %d (%s) with the queue down: %v", i, d.ID, err)
		}
		if want := i >= 2; dup != want {
			t.Errorf("enqueue %d (%s): dup %v, want %v", i, d.ID, dup, want)
		}
	}
	if n, _ := s.Depth(ctx); n != 2 {
		t.Errorf("Depth = %d, want the 2 spooled", n)
	}
	// The process stops with the queue still down; the next one finds the
	// deliveries in the file, plus a torn record it must cut.
	if err := s.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		t.Log(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{40, 0, 0, 0, 1, 2, 3, 4, 'x'})
	f.Close()
	lq2 := openQueueAt(t, filepath.Join(dir, "q2"))
	q2 := &flaky{LogQueue: lq2}
	q2.down.Store(true)
	s2 := openSpoolAt(t, path, q2, SpoolOptions{})
	if n := s2.Spooled(); n != 2 {
		t.Fatalf("after a restart %d spooled, want 2", n)
	}
	if dup, err := s2.Enqueue(ctx, Delivery{ID: "b", Event: "issue_comment", Body: []byte(`{}`)}); err != nil || !dup {
		t.Errorf("spooled ID again after a restart: dup %v err %v, want a duplicate", dup, err)
	}
	q2.down.Store(false)
	waitSpoolEmpty(t, s2)
	for _, want := range []string{"a", "b"} {
		d, ok, err := lq2.Claim(ctx)
		if err != nil || !ok || d.ID != want {
			t.Fatalf("claim: %+v %v %v, want %s", d, ok, err, want)
		}
		if d.ID == "b" && string(d.Body) != `{"n":2}` {
			t.Errorf("body of b = %s", d.Body)
		}
	}
	if _, ok, _ := lq2.Claim(ctx); ok {
		t.Error("a third delivery reached the queue")
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("spool file after the replay: %v %v, want empty", fi.Size(), err)
	}
	// With the queue up, deliveries go straight to it.
	if dup, err := s2.Enqueue(ctx, Delivery{ID: "d", Event: "issue_comment", Body: []byte(`{}`)}); err != nil || dup || s2.Spooled() != 0 {
		t.Fatalf("enqueue with the queue up: dup %v err %v spooled %d", dup, err, s2.Spooled())
	}
}

// TestSpoolFull: a full spool refuses the delivery (the handler answers
// 503) instead of growing without bound.
func TestSpoolFull(t *testing.T) {
	ctx := context.Background()
	q := &flaky{LogQueue: openQueueAt(t, filepath.Join(t.TempDir(), "q"))}
	q.down.Store(true)
	s := openSpoolAt(t, filepath.Join(t.TempDir(), "spool"), q, SpoolOptions{Max: 200, Retry: time.Hour})
	body := make([]byte, 80)
	if _, err := s.Enqueue(ctx, Delivery{ID: "one", Event: "e", Body: body}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Enqueue(ctx, Delivery{ID: "two", Event: "e", Body: body})
	_, err2 := s.Enqueue(ctx, Delivery{ID: "three", Event: "e", Body: body})
	if !errors.Is(err2, ErrSpoolFull) && !errors.Is(err, ErrSpoolFull) {
		t.Fatalf("third delivery into a 200-byte spool: %v, %v; want ErrSpoolFull", err, err2)
	}
}

package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
)

// suiteQueue is what the queue suite needs of an implementation.
type suiteQueue interface {
	Queue
	Get(ctx context.Context, id string) (Record, bool, error)
	Prune(ctx context.Context, before time.Time) (int64, error)
	OldestClaim(ctx context.Context) (time.Duration, error)
	Close() error
	setNow(func() time.Time)
}

func (q *LogQueue) setNow(f func() time.Time) { q.now = f }
func (q *PGQueue) setNow(f func() time.Time)  { q.now = f }

// queueImpl opens a fresh queue; reopen opens the same queue again, as a
// restarted process would.
type queueImpl struct {
	name string
	open func(t *testing.T) (q suiteQueue, reopen func() suiteQueue)
}

// queueSetup returns an implementation's opener; it runs once in the
// implementation's subtest (e.g. to create the test database).
type queueSetup struct {
	name  string
	setup func(t *testing.T) func(t *testing.T) (suiteQueue, func() suiteQueue)
}

// queueImpls are the Queue implementations every queue test runs against.
var queueImpls = []queueSetup{
	{"log", func(*testing.T) func(t *testing.T) (suiteQueue, func() suiteQueue) {
		return func(t *testing.T) (suiteQueue, func() suiteQueue) {
			q, path := openTestQueue(t)
			return q, func() suiteQueue { return openQueueAt(t, path) }
		}
	}},
	{"postgres", func(t *testing.T) func(t *testing.T) (suiteQueue, func() suiteQueue) {
		db := pgtest.URL(t)
		return func(t *testing.T) (suiteQueue, func() suiteQueue) {
			u := pgtest.Schema(t, db)
			q := openPGQueueAt(t, u, PGQueueOptions{Owner: "replica-a"})
			return q, func() suiteQueue { return openPGQueueAt(t, u, PGQueueOptions{Owner: "replica-a"}) }
		}
	}},
}

// TestQueue runs the queue suite against every implementation.
func TestQueue(t *testing.T) {
	tests := []struct {
		name string
		fn   func(*testing.T, queueImpl)
	}{
		{"Restart", testQueueRestart},
		{"RetryBackoff", testQueueRetryBackoff},
		{"DoneUnknown", testQueueDoneUnknown},
		{"ConcurrentEnqueue", testQueueConcurrentEnqueue},
		{"Closed", testQueueClosed},
		{"Prune", testQueuePrune},
		{"PruneRetention", testQueuePruneRetention},
		{"OldestClaim", testQueueOldestClaim},
	}
	for _, qs := range queueImpls {
		t.Run(qs.name, func(t *testing.T) {
			impl := queueImpl{qs.name, qs.setup(t)}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) { tc.fn(t, impl) })
			}
		})
	}
}

func enqueue(t *testing.T, q Queue, id string) {
	t.Helper()
	dup, err := q.Enqueue(context.Background(), Delivery{ID: id, Event: "issue_comment", Action: "created", Body: []byte(`{"id":"` + id + `"}`)})
	if err != nil || dup {
		t.Fatalf("Enqueue(%s) = %v, %v", id, dup, err)
	}
}

func claim(t *testing.T, q Queue) (Delivery, bool) {
	t.Helper()
	d, ok, err := q.Claim(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return d, ok
}

func testQueueRestart(t *testing.T, impl queueImpl) {
	q, reopen := impl.open(t)
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		enqueue(t, q, id)
	}
	// a is finished, b is claimed and never finished (the process dies), c
	// was never handed out.
	if d, _ := claim(t, q); d.ID != "a" || d.Attempts != 1 || string(d.Body) != `{"id":"a"}` || d.Event != "issue_comment" || d.Action != "created" {
		t.Fatalf("first claim = %+v", d)
	}
	if err := q.Done(ctx, "a", OutcomeProcessed, ""); err != nil {
		t.Fatal(err)
	}
	if d, _ := claim(t, q); d.ID != "b" {
		t.Fatalf("second claim = %s, want b", d.ID)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}

	q2 := reopen()
	for _, id := range []string{"a", "b", "c"} {
		dup, err := q2.Enqueue(ctx, Delivery{ID: id, Event: "issue_comment", Body: []byte(`{}`)})
		if err != nil || !dup {
			t.Errorf("after restart Enqueue(%s) = dup %v, %v; want duplicate", id, dup, err)
		}
	}
	if n, err := q2.Depth(ctx); err != nil || n != 2 {
		t.Errorf("Depth = %d, %v; want 2 (b and c)", n, err)
	}
	var got []string
	for {
		d, ok := claim(t, q2)
		if !ok {
			break
		}
		got = append(got, fmt.Sprintf("%s#%d", d.ID, d.Attempts))
	}
	if want := []string{"b#2", "c#1"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("claimed after restart %v, want %v", got, want)
	}
	if rec, ok, _ := q2.Get(ctx, "a"); !ok || rec.State != "done" || rec.Outcome != OutcomeProcessed {
		t.Errorf("a after restart: %+v", rec)
	}
}

func testQueueRetryBackoff(t *testing.T, impl queueImpl) {
	q, _ := impl.open(t)
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	q.setNow(func() time.Time { return now })
	enqueue(t, q, "r")
	for attempt := 1; attempt <= 3; attempt++ {
		d, ok := claim(t, q)
		if !ok || d.Attempts != attempt {
			t.Fatalf("attempt %d: claim = %+v, %v", attempt, d, ok)
		}
		if err := q.Done(ctx, "r", OutcomeRetry, "boom"); err != nil {
			t.Fatal(err)
		}
		backoff := time.Second << (attempt - 1)
		now = now.Add(backoff - time.Millisecond)
		if d, ok := claim(t, q); ok {
			t.Fatalf("attempt %d: claimed %s before its backoff of %v", attempt, d.ID, backoff)
		}
		now = now.Add(time.Millisecond)
	}
	if _, ok := claim(t, q); !ok {
		t.Fatal("not claimable after the backoff")
	}
	if err := q.Done(ctx, "r", OutcomeFailed, "gave up"); err != nil {
		t.Fatal(err)
	}
	rec, _, _ := q.Get(ctx, "r")
	if rec.State != "done" || rec.Outcome != OutcomeFailed || rec.Error != "gave up" || rec.Attempts != 4 {
		t.Errorf("record %+v", rec)
	}
	now = now.Add(time.Hour)
	if _, ok := claim(t, q); ok {
		t.Error("a failed delivery was claimed again")
	}
}

func testQueueDoneUnknown(t *testing.T, impl queueImpl) {
	q, _ := impl.open(t)
	enqueue(t, q, "x")
	for _, id := range []string{"x", "nope"} { // x is pending, not claimed
		if err := q.Done(context.Background(), id, OutcomeProcessed, ""); !errors.Is(err, ErrUnknownDelivery) {
			t.Errorf("Done(%s) = %v, want ErrUnknownDelivery", id, err)
		}
	}
}

func testQueueConcurrentEnqueue(t *testing.T, impl queueImpl) {
	q, _ := impl.open(t)
	ctx := context.Background()
	const n = 400
	var wg sync.WaitGroup
	dups := make([]bool, 2*n)
	errs := make([]error, 2*n)
	for i := range 2 * n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Every ID is sent twice, concurrently: exactly one is new.
			dups[i], errs[i] = q.Enqueue(ctx, Delivery{ID: fmt.Sprintf("id-%d", i%n), Event: "issue_comment", Body: []byte(`{}`)})
		}()
	}
	wg.Wait()
	newCount := 0
	for i := range dups {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !dups[i] {
			newCount++
		}
	}
	if newCount != n {
		t.Errorf("%d enqueues were new, want %d", newCount, n)
	}
	if d, err := q.Depth(ctx); err != nil || d != n {
		t.Errorf("Depth = %d, %v; want %d", d, err, n)
	}
}

func testQueueClosed(t *testing.T, impl queueImpl) {
	q, _ := impl.open(t)
	q.Close()
	if _, err := q.Enqueue(context.Background(), Delivery{ID: "x"}); !errors.Is(err, ErrQueueClosed) {
		t.Errorf("Enqueue on closed queue: %v", err)
	}
	if _, _, err := q.Claim(context.Background()); !errors.Is(err, ErrQueueClosed) {
		t.Errorf("Claim on closed queue: %v", err)
	}
}

func testQueuePrune(t *testing.T, impl queueImpl) {
	q, _ := impl.open(t)
	ctx := context.Background()
	enqueue(t, q, "old")
	enqueue(t, q, "open")
	claim(t, q)
	if err := q.Done(ctx, "old", OutcomeProcessed, ""); err != nil {
		t.Fatal(err)
	}
	n, err := q.Prune(ctx, time.Now().Add(time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want 1", n, err)
	}
	if _, ok, _ := q.Get(ctx, "old"); ok {
		t.Error("pruned delivery still stored")
	}
	if _, ok, _ := q.Get(ctx, "open"); !ok {
		t.Error("pending delivery pruned")
	}
	// A pruned ID is forgotten: a (very late) redelivery is new again.
	if dup, err := q.Enqueue(ctx, Delivery{ID: "old", Event: "issue_comment", Body: []byte(`{}`)}); err != nil || dup {
		t.Errorf("Enqueue after prune = dup %v, %v", dup, err)
	}
	if dup, err := q.Enqueue(ctx, Delivery{ID: "open", Event: "issue_comment", Body: []byte(`{}`)}); err != nil || !dup {
		t.Errorf("Enqueue of a kept delivery = dup %v, %v; want duplicate", dup, err)
	}
}

// testQueuePruneRetention: Prune forgets finished deliveries (processed
// and dead-lettered alike) finished before its time, and keeps those
// finished since and every open one.
func testQueuePruneRetention(t *testing.T, impl queueImpl) {
	q, _ := impl.open(t)
	ctx := context.Background()
	t0 := time.Now()
	now := t0
	q.setNow(func() time.Time { return now })
	for _, id := range []string{"old-done", "old-dead", "recent", "open"} {
		enqueue(t, q, id)
	}
	for range 3 {
		if _, ok := claim(t, q); !ok {
			t.Fatal("nothing to claim")
		}
	}
	if err := q.Done(ctx, "old-done", OutcomeProcessed, ""); err != nil {
		t.Fatal(err)
	}
	if err := q.Done(ctx, "old-dead", OutcomeFailed, "gave up"); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(10 * 24 * time.Hour)
	if err := q.Done(ctx, "recent", OutcomeIgnored, ""); err != nil {
		t.Fatal(err)
	}
	n, err := q.Prune(ctx, now.Add(-7*24*time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want 2", n, err)
	}
	for id, want := range map[string]bool{"old-done": false, "old-dead": false, "recent": true, "open": true} {
		if _, ok, err := q.Get(ctx, id); err != nil || ok != want {
			t.Errorf("Get(%s) after prune = stored %v, %v; want %v", id, ok, err, want)
		}
	}
	if d, err := q.Depth(ctx); err != nil || d != 1 {
		t.Errorf("Depth after prune = %d, %v; want 1", d, err)
	}
}

// testQueueOldestClaim: OldestClaim is the age of the oldest delivery
// claimed and not finished, 0 when none is.
func testQueueOldestClaim(t *testing.T, impl queueImpl) {
	q, _ := impl.open(t)
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Millisecond) // PostgreSQL keeps microseconds
	now := t0
	q.setNow(func() time.Time { return now })
	oldest := func(want time.Duration) {
		t.Helper()
		got, err := q.OldestClaim(ctx)
		if err != nil || got != want {
			t.Fatalf("OldestClaim = %v, %v; want %v", got, err, want)
		}
	}
	oldest(0)
	enqueue(t, q, "a")
	oldest(0) // pending is not claimed
	if d, ok := claim(t, q); !ok || d.ID != "a" {
		t.Fatalf("Claim = %v, %v", d.ID, ok)
	}
	// Within the claim's TTL: on PostgreSQL an expired claim is claimable.
	now = t0.Add(30 * time.Second)
	enqueue(t, q, "b")
	if d, ok := claim(t, q); !ok || d.ID != "b" {
		t.Fatalf("Claim = %v, %v", d.ID, ok)
	}
	now = t0.Add(45 * time.Second)
	oldest(45 * time.Second)
	if err := q.Done(ctx, "a", OutcomeProcessed, ""); err != nil {
		t.Fatal(err)
	}
	oldest(15 * time.Second)
	// A retry is pending again, not claimed.
	if err := q.Done(ctx, "b", OutcomeRetry, "try again"); err != nil {
		t.Fatal(err)
	}
	oldest(0)
}

package worker

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"

	"github.com/agentos/agentos/bot/webhook"
)

// busyDispatcher answers webhook.ErrBusy (the session is another replica's) for
// the first `busy` dispatches, then succeeds.
type busyDispatcher struct {
	mu    sync.Mutex
	calls int
	busy  int
}

func (b *busyDispatcher) Dispatch(ctx context.Context, t webhook.Trigger) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	if b.calls <= b.busy {
		return fmt.Errorf("session leased by replica-2: %w", webhook.ErrBusy)
	}
	return nil
}

// TestProcessorBusyIsNotFailure: a delivery that waits for another
// replica is retried past MaxAttempts and processed once the session is
// free, instead of being dead-lettered.
func TestProcessorBusyIsNotFailure(t *testing.T) {
	q, _ := openTestQueue(t)
	clock := &steppingClock{t: time.Unix(1_700_000_000, 0)}
	setNow(q, clock.now)
	e := newEngine(webhook.NewHandler(webhook.Config{Events: testEvents, Secrets: [][]byte{testSecret}}, q, nil))
	if w := post(t, e, signed("pull_request_review", "approve", exampleOf(t, "pull_request_review", "submitted", 1))); w.Code != http.StatusAccepted {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	disp := &busyDispatcher{busy: 6}
	p := &Processor{Events: testEvents, Queue: q, Dispatch: disp, BotLogin: "agentos[bot]", Workers: 2, MaxAttempts: 3, PollInterval: 5 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitDrained(t, q)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rec, _, _ := q.Get(context.Background(), "approve")
	if rec.Outcome != queue.OutcomeProcessed || rec.Attempts != 7 {
		t.Fatalf("%+v, want processed on attempt 7", rec)
	}
}

// TestBusyRetriesDoNotBackOff: a delivery that keeps finding its session
// busy (another replica works it, or a killed replica's lease has not run
// out) is claimable again BusyRetryDelay after each try, counts no
// failure, and so is answered within BusyRetryDelay of the session
// becoming free, however long it waited. Before, each busy try counted a
// failure: the tenth waited 256 s on the log queue, an hour's cap on
// PostgreSQL. A real failure after the busy tries waits the first
// backoff. On both queues.
func TestBusyRetriesDoNotBackOff(t *testing.T) {
	check := func(t *testing.T, q queue.Queue, setNow func(time.Time)) {
		ctx := context.Background()
		enqueue(t, q, "a")
		now := time.Now()
		for i := 1; i <= 10; i++ {
			setNow(now)
			d, ok := claim(t, q)
			if !ok || d.Failures != 0 {
				t.Fatalf("busy try %d: %+v %v; want claimable with no failure", i, d, ok)
			}
			if err := q.Done(ctx, "a", queue.OutcomeRetry, busyPrefix+"session leased by replica-2"); err != nil {
				t.Fatal(err)
			}
			setNow(now.Add(BusyRetryDelay - 100*time.Millisecond))
			if _, ok := claim(t, q); ok {
				t.Fatalf("busy try %d: claimed before BusyRetryDelay", i)
			}
			now = now.Add(BusyRetryDelay + 100*time.Millisecond)
		}
		setNow(now)
		d, ok := claim(t, q)
		if !ok || d.Failures != 0 || d.Attempts != 11 {
			t.Fatalf("after ten busy tries: %+v %v; want claimable, attempt 11, no failure", d, ok)
		}
		if err := q.Done(ctx, "a", queue.OutcomeRetry, "dispatch: GitHub answered 502"); err != nil {
			t.Fatal(err)
		}
		setNow(now.Add(900 * time.Millisecond))
		if _, ok := claim(t, q); ok {
			t.Fatal("claimed before the first backoff (1 s)")
		}
		setNow(now.Add(1100 * time.Millisecond))
		if d, ok := claim(t, q); !ok || d.Failures != 1 {
			t.Fatalf("after a failed dispatch: %+v %v; want claimable after 1 s with 1 failure", d, ok)
		}
	}
	t.Run("log", func(t *testing.T) {
		dir := t.TempDir()
		q := openLog(t, dir)
		check(t, q, func(n time.Time) { setNow(q, func() time.Time { return n }) })
		// The failures survive a reopen as counted: the busy tries none,
		// the failed dispatch one.
		dir = killed(t, dir)
		q = openLog(t, dir)
		if r, _, err := q.Get(context.Background(), "a"); err != nil || r.Failures != 1 || r.Attempts != 12 {
			t.Fatalf("after a reopen: %+v %v; want 12 attempts and 1 failure", noBody(r), err)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		q := openPGQueueAt(t, pgtest.Schema(t, pgtest.URL(t)), queue.PGQueueOptions{})
		check(t, q, func(n time.Time) { setNow(q, func() time.Time { return n }) })
	})
}

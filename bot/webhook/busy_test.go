package webhook

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// busyDispatcher answers ErrBusy (the session is another replica's) for
// the first `busy` dispatches, then succeeds.
type busyDispatcher struct {
	mu    sync.Mutex
	calls int
	busy  int
}

func (b *busyDispatcher) Dispatch(ctx context.Context, t Trigger) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	if b.calls <= b.busy {
		return fmt.Errorf("session leased by replica-2: %w", ErrBusy)
	}
	return nil
}

// TestProcessorBusyIsNotFailure: a delivery that waits for another
// replica is retried past MaxAttempts and processed once the session is
// free, instead of being dead-lettered.
func TestProcessorBusyIsNotFailure(t *testing.T) {
	q, _ := openTestQueue(t)
	clock := &steppingClock{t: time.Unix(1_700_000_000, 0)}
	q.now = clock.now
	e := newEngine(NewHandler(Config{Secrets: [][]byte{testSecret}}, q, nil))
	if w := post(t, e, signed("pull_request_review", "approve", exampleOf(t, "pull_request_review", "submitted", 1))); w.Code != http.StatusAccepted {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	disp := &busyDispatcher{busy: 6}
	p := &Processor{Queue: q, Dispatch: disp, BotLogin: "agentos[bot]", Workers: 2, MaxAttempts: 3, PollInterval: 5 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitDrained(t, q)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rec, _, _ := q.Get(context.Background(), "approve")
	if rec.Outcome != OutcomeProcessed || rec.Attempts != 7 {
		t.Fatalf("%+v, want processed on attempt 7", rec)
	}
}

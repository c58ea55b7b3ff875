package worker

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/bot/webhook"
)

// downQueue is a queue whose Done fails like a database that cannot be
// reached, a given number of times, then works.
type downQueue struct {
	*queue.LogQueue
	mu       sync.Mutex
	failures int   // Done calls left to fail
	err      error // what they fail with
	calls    int
}

func (q *downQueue) Done(ctx context.Context, id, outcome, msg string) error {
	q.mu.Lock()
	q.calls++
	fail := q.failures > 0
	if fail {
		q.failures--
	}
	q.mu.Unlock()
	if fail {
		return q.err
	}
	return q.LogQueue.Done(ctx, id, outcome, msg)
}

// TestOutcomeRecordedAfterTheQueueComesBack: a dispatch that hands its
// run back while the database is down ends with a retry whose Done fails
// too; the processor tries again until the queue answers, so the delivery
// is claimable again (and dispatched again) at once instead of staying
// claimed until its claim expires. A claim another replica took over is
// not retried.
func TestOutcomeRecordedAfterTheQueueComesBack(t *testing.T) {
	defer func(a, b time.Duration) { recordFirstWait, recordMaxWait = a, b }(recordFirstWait, recordMaxWait)
	recordFirstWait, recordMaxWait = 5*time.Millisecond, 20*time.Millisecond

	lq, _ := openTestQueue(t)
	q := &downQueue{LogQueue: lq, failures: 3, err: errors.New("queue: done d1: dial tcp 127.0.0.1:5432: connect: connection refused")}
	e := newEngine(webhook.NewHandler(webhook.Config{Events: testEvents, Secrets: [][]byte{testSecret}}, lq, nil))
	if w := post(t, e, signed("issue_comment", "d1", exampleOf(t, "issue_comment", "created", 3))); w.Code != http.StatusAccepted {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	d, ok, err := lq.Claim(context.Background())
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	p := &Processor{Events: testEvents, Queue: q, Dispatch: &fakeDispatcher{failWith: map[string]error{"d1": errors.New("store unavailable: " + webhook.ErrBusy.Error())}}, BotLogin: "agentos[bot]"}
	p.process(context.Background(), d)
	if q.calls != 4 {
		t.Fatalf("Done called %d times, want 4 (3 refused, then recorded)", q.calls)
	}
	// Recorded: the delivery is pending again, not stuck in a claim.
	if n, err := lq.Depth(context.Background()); err != nil || n != 1 {
		t.Fatalf("depth %d %v, want the delivery back in the queue", n, err)
	}

	// A claim that is gone is not tried again.
	q.mu.Lock()
	q.calls, q.failures = 0, 5
	q.err = errors.Join(queue.ErrUnknownDelivery, errors.New("its claim expired and was taken over"))
	q.mu.Unlock()
	p.process(context.Background(), queue.Delivery{ID: "gone", Event: "issue_comment", Body: exampleOf(t, "issue_comment", "created", 3)})
	if q.calls != 1 {
		t.Fatalf("Done of a lost claim called %d times, want 1", q.calls)
	}

	// At the end of a graceful stop's drain the processor stops trying.
	q.mu.Lock()
	q.calls, q.failures, q.err = 0, 1000, errors.New("connection refused")
	q.mu.Unlock()
	work, cut := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cut)
	p.processIn(context.Background(), work, queue.Delivery{ID: "drain", Event: "issue_comment", Body: exampleOf(t, "issue_comment", "created", 3)})
	if q.calls < 2 { // and it returned: the drain's end stopped it
		t.Fatalf("Done called %d times before the drain ended", q.calls)
	}
}

package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/queue"
)

// TestRestartsAreNoFailures: a delivery whose process was killed while it
// was dispatched, again and again (more often than MaxAttempts), is not
// given up on at its first failed dispatch after the restarts, and that
// failure waits the first backoff (1 s), not 2^(claims-1) s. Claims still
// count in Attempts, so the dispatcher knows the delivery was handled
// before. Before, the queue counted claims for both, and the serve chaos
// test's flows stuck after four kills and one busy answer.
func TestRestartsAreNoFailures(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	q := openLog(t, dir)
	if _, err := q.Enqueue(ctx, queue.Delivery{ID: "a", Event: "issue_comment", Action: "created", Body: exampleOf(t, "issue_comment", "created", 0), ReceivedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	const maxAttempts = 3
	kills := maxAttempts + 2
	for k := 1; k <= kills; k++ {
		d, ok, err := q.Claim(ctx)
		if err != nil || !ok {
			t.Fatalf("claim after %d kills: %v %v", k-1, ok, err)
		}
		if d.Attempts != k || d.Failures != 0 {
			t.Fatalf("claim after %d kills: attempts %d failures %d, want %d and 0", k-1, d.Attempts, d.Failures, k)
		}
		dir = killed(t, dir)
		q = openLog(t, dir)
	}
	d, ok, err := q.Claim(ctx)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	p := &Processor{Events: testEvents, Queue: q, Dispatch: &fakeDispatcher{failWith: map[string]error{"a": errors.New("busy")}}, BotLogin: "agentos[bot]", MaxAttempts: maxAttempts}
	start := time.Now()
	setNow(q, func() time.Time { return start })
	p.process(ctx, d)
	r, _, err := q.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if r.State != "pending" || r.Outcome != queue.OutcomeRetry || r.Failures != 1 || r.Attempts != kills+1 {
		t.Fatalf("after %d kills and one failed dispatch: %+v; want pending for a retry, 1 failure, %d attempts", kills, noBody(r), kills+1)
	}
	// The first backoff: not claimable before 1 s, claimable after.
	setNow(q, func() time.Time { return start.Add(999 * time.Millisecond) })
	if _, ok, _ := q.Claim(ctx); ok {
		t.Fatal("claimed before the first backoff (1 s) passed")
	}
	setNow(q, func() time.Time { return start.Add(1001 * time.Millisecond) })
	d, ok, err = q.Claim(ctx)
	if err != nil || !ok || d.Failures != 1 {
		t.Fatalf("claim after 1 s: %+v %v %v; want claimable with 1 failure", d, ok, err)
	}
	// Failures survive a reopen, and the MaxAttempts-th failure gives up.
	p.process(ctx, d)
	dir = killed(t, dir)
	q = openLog(t, dir)
	setNow(q, func() time.Time { return start.Add(time.Hour) })
	p.Queue = q
	d, ok, err = q.Claim(ctx)
	if err != nil || !ok || d.Failures != 2 {
		t.Fatalf("claim after a reopen: %+v %v %v; want 2 failures", d, ok, err)
	}
	p.process(ctx, d)
	if r, _, _ := q.Get(ctx, "a"); r.State != "done" || r.Outcome != queue.OutcomeFailed || r.Failures != 2 {
		t.Fatalf("after the %d-th failed dispatch: %+v; want failed for good", maxAttempts, noBody(r))
	}
}

// TestShutdownHandsTheDeliveryBack: a dispatch cut short by shutdown (the
// Processor's context ends) is no failure: the delivery is pending again
// at once, with no backoff and no failure counted, and the next process
// claims it as handled before (Attempts 2).
func TestShutdownHandsTheDeliveryBack(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	q := openLog(t, dir)
	if _, err := q.Enqueue(ctx, queue.Delivery{ID: "a", Event: "issue_comment", Action: "created", Body: exampleOf(t, "issue_comment", "created", 0), ReceivedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	d, ok, err := q.Claim(ctx)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	stopping, stop := context.WithCancel(ctx)
	stop()
	p := &Processor{Events: testEvents, Queue: q, Dispatch: &fakeDispatcher{failWith: map[string]error{"a": context.Canceled}}, BotLogin: "agentos[bot]", MaxAttempts: 1}
	p.process(stopping, d)
	r, _, err := q.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if r.State != "pending" || r.Failures != 0 || r.Attempts != 1 {
		t.Fatalf("after a shutdown: %+v; want pending, no failure, 1 attempt", noBody(r))
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q = openLog(t, dir)
	d, ok, err = q.Claim(ctx) // at once: no backoff
	if err != nil || !ok || d.Attempts != 2 || d.Failures != 0 {
		t.Fatalf("the next process's claim: %+v %v %v; want attempts 2, no failure", d, ok, err)
	}
	if err := q.Release(ctx, "nope"); !errors.Is(err, queue.ErrUnknownDelivery) {
		t.Errorf("release of an unknown delivery: %v, want queue.ErrUnknownDelivery", err)
	}
}

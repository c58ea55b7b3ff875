package webhook

import (
	"context"
	"errors"
	"time"
)

// Delivery is one webhook delivery as received: the routing fields and the
// raw, verified body.
type Delivery struct {
	ID     string // X-GitHub-Delivery; a redelivery keeps it
	Event  string // X-GitHub-Event
	Action string // the payload's top-level "action", "" if none
	// Key is PayloadKey of the body ("" if none): a delivery whose Key the
	// queue already holds is a duplicate (a replay under another ID).
	Key        string
	Body       []byte
	ReceivedAt time.Time
	// Attempts counts the claims of this delivery, this one included: a
	// claim a process died with, or handed back at shutdown, counts, so a
	// delivery handled again (Attempts > 1) is known to be one whose
	// earlier handling may have stopped half-way.
	Attempts int
	// Failures counts the dispatches of this delivery that failed
	// (OutcomeRetry) before this claim. The retry backoff and the
	// Processor's MaxAttempts count these, not Attempts: a process killed
	// or stopped while it dispatched did not fail the delivery, and a
	// delivery must not be given up on, or wait minutes, because the
	// process restarted.
	Failures int
}

// Releaser is implemented by queues that can take a claimed delivery back
// without an outcome: pending again at once, the claim counted in
// Attempts but not as a failure. The Processor releases a delivery whose
// dispatch a shutdown cut short.
type Releaser interface {
	Release(ctx context.Context, id string) error
}

// Queue is the durable hand-off between the handler and the Processor.
// Enqueue returns only once the delivery survives a crash; dup reports a
// delivery ID, or a non-empty Key, the queue already holds (it is not
// stored again). Claim hands
// out the oldest pending delivery (ok false when there is none); Done
// records how its processing ended: OutcomeRetry makes it claimable again
// later, any other outcome is final. A delivery claimed and never Done is
// claimed again after the queue is reopened (at-least-once processing).
// Enqueue must not keep d.Body once it returns: the handler reuses the
// buffer for later deliveries.
type Queue interface {
	Enqueue(ctx context.Context, d Delivery) (dup bool, err error)
	Claim(ctx context.Context) (Delivery, bool, error)
	Done(ctx context.Context, id string, outcome string, errMsg string) error
	Depth(ctx context.Context) (int, error)
}

// Notifier is implemented by queues that can wake an idle Processor when a
// delivery becomes claimable; without it the Processor polls.
type Notifier interface {
	Ready() <-chan struct{}
}

// Outcomes recorded by Done and reported to the Observer. OutcomeRetry is
// not final: the queue makes the delivery claimable again after a backoff.
const (
	OutcomeProcessed = "processed"
	OutcomeIgnored   = "ignored"
	OutcomeFailed    = "failed"
	OutcomeRetry     = "retry"
)

// ErrQueueClosed is returned by a closed queue.
var ErrQueueClosed = errors.New("webhook: queue closed")

// ErrUnknownDelivery is returned by Done for an ID the queue does not hold
// as claimed.
var ErrUnknownDelivery = errors.New("webhook: no such claimed delivery")

// Record is the stored state of one delivery, for inspection and tests.
type Record struct {
	Delivery
	State   string // pending | claimed | done
	Outcome string
	Error   string
}

// Package queue owns the durable hand-off between webhook intake and the
// workers that process deliveries: one Queue contract with two stores,
// LogQueue (an append-only, group-committed segment log in the data
// directory, beside the SQLite event store: one process) and PGQueue (a
// PostgreSQL table shared by replicas), checked by one suite of tests; a
// Spool that keeps deliveries on local disk while the store cannot take
// them. Both stores batch their writes with runtime/groupcommit, the
// batcher the event stores use too.
//
// A claim on PostgreSQL lasts ClaimTTL and is renewed only while the
// worker holding it shows progress (Beat): a replica whose run is stuck,
// or that cannot reach the database, lets the claim expire and another
// replica takes the delivery over (docs/operations-webhooks.md).
package queue

import (
	"context"
	"errors"
	"strings"
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
	// OutcomeWithdrawn is the outcome of a delivery a cancel withdrew
	// while it waited in the queue (Withdrawer): final, never claimed
	// again, and not a failure (no dead letter).
	OutcomeWithdrawn = "withdrawn"
)

// ErrQueueClosed is returned by a closed queue.
var ErrQueueClosed = errors.New("queue: closed")

// ErrUnknownDelivery is returned by Done for an ID the queue does not hold
// as claimed.
var ErrUnknownDelivery = errors.New("queue: no such claimed delivery")

// Record is the stored state of one delivery, for inspection and tests.
type Record struct {
	Delivery
	State   string // pending | claimed | done
	Outcome string
	Error   string
}

// BusyPrefix starts the message of a retry that waits for another replica
// (the dispatcher found the session leased elsewhere): such a retry counts
// no failure and waits BusyRetryDelay, whatever the backoff would be.
const BusyPrefix = "busy: "

// BusyRetryDelay is how long a delivery that found its session busy waits
// before it is claimable again. Waiting is not failing: such a retry
// counts no failure and does not grow the backoff, which would otherwise
// reach minutes (an hour on PostgreSQL) while another replica works the
// session (or a killed replica's lease runs out), and leave an approval
// unanswered that long after the session is free.
const BusyRetryDelay = 2 * time.Second

// waitsForLease reports whether a retry's message is a busy one.
func waitsForLease(outcome, msg string) bool {
	return outcome == OutcomeRetry && strings.HasPrefix(msg, BusyPrefix)
}

// Beater is implemented by queues whose claims expire unless the worker
// holding one shows progress (PGQueue). The Processor puts the claim in
// the dispatch's context (WithClaim); whatever makes progress on the
// delivery's behalf calls Beat(ctx) (BeatOnAppend: every event the run
// appends).
type Beater interface {
	Beat(id string)
}

type claimKey struct{}

type queueKey struct{}

// claimed is the queue and delivery a dispatch's context carries.
type claimed struct {
	q  Queue
	id string
}

// WithClaim returns ctx carrying the claim of delivery id on q: for Beat
// (a queue that is not a Beater needs no beats) and for Claimed, through
// which the dispatch of a cancel reaches the deliveries still queued.
func WithClaim(ctx context.Context, q Queue, id string) context.Context {
	ctx = context.WithValue(ctx, queueKey{}, claimed{q: q, id: id})
	b, ok := q.(Beater)
	if !ok {
		return ctx
	}
	return context.WithValue(ctx, claimKey{}, func() { b.Beat(id) })
}

// Claimed returns the queue and the delivery ID whose claim ctx carries
// (WithClaim); ok is false without one.
func Claimed(ctx context.Context) (q Queue, id string, ok bool) {
	c, ok := ctx.Value(queueKey{}).(claimed)
	return c.q, c.id, ok
}

// Withdrawal is one delivery Withdraw matched.
type Withdrawal struct {
	Delivery
	// Withdrawn: it was waiting (new, or for a retry) and is now done
	// with OutcomeWithdrawn. Otherwise a worker holds its claim: it is
	// being processed (or its worker died and its claim runs out) and is
	// left to it.
	Withdrawn bool
}

// Withdrawer is implemented by queues that can withdraw deliveries not
// yet processed: a cancel reaches the request that still waits.
//
// Withdraw looks at the deliveries not finished that arrived before the
// delivery before (all of them when before is "" or unknown), oldest
// first, and calls match on each (with its body). A matching delivery
// that waits — not claimed yet, or waiting for a retry — is finished at
// once with OutcomeWithdrawn and the error message reason, atomically
// with respect to Claim: it is never handed out afterwards. A matching
// delivery that is claimed is reported with Withdrawn false and left
// alone. match must not call the queue.
type Withdrawer interface {
	Withdraw(ctx context.Context, before string, match func(Delivery) bool, reason string) ([]Withdrawal, error)
}

// Beat reports progress on the delivery whose claim ctx carries
// (WithClaim); without one it does nothing.
func Beat(ctx context.Context) {
	if f, ok := ctx.Value(claimKey{}).(func()); ok {
		f()
	}
}

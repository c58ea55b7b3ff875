package queue

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// Lister is implemented by queues that can list their deliveries by state
// for GET /v1/deliveries: pending, claimed, done, or dead (done with
// outcome failed: the dead letters, which no retry will pick up).
type Lister interface {
	List(ctx context.Context, state string, limit int) ([]Record, error)
	Dead(ctx context.Context) (int, error)
}

// DeliveryStates are the states List accepts.
var DeliveryStates = []string{"pending", "claimed", "done", "dead"}

// MaxListed bounds one listing.
const MaxListed = 1000

func validListState(state string) error {
	for _, s := range DeliveryStates {
		if s == state {
			return nil
		}
	}
	return fmt.Errorf("queue: unknown delivery state %q (pending, claimed, done, dead)", state)
}

// List implements Lister: up to limit deliveries in state, oldest first,
// without bodies.
func (q *LogQueue) List(ctx context.Context, state string, limit int) ([]Record, error) {
	if err := validListState(state); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > MaxListed {
		limit = MaxListed
	}
	q.idxMu.Lock()
	var es []*logEntry
	for _, e := range q.index {
		if e.pendingSync {
			continue
		}
		st := [...]string{"pending", "claimed", "done"}[e.state%3]
		match := st == state || (state == "dead" && st == "done" && e.outcome == OutcomeFailed)
		if match {
			es = append(es, e)
		}
	}
	sort.Slice(es, func(i, j int) bool { return es[i].seq < es[j].seq })
	if len(es) > limit {
		es = es[:limit]
	}
	out := make([]Record, len(es))
	for i, e := range es {
		out[i] = Record{Delivery: Delivery{ID: e.id, Event: e.event, Action: e.action, Key: e.key, ReceivedAt: time.Unix(0, e.recv), Attempts: e.attempts, Failures: e.failures},
			State: [...]string{"pending", "claimed", "done"}[e.state%3], Outcome: e.outcome, Error: e.errMsg}
	}
	q.idxMu.Unlock()
	return out, nil
}

// Dead implements Lister: the number of dead-lettered deliveries.
func (q *LogQueue) Dead(ctx context.Context) (int, error) {
	q.idxMu.Lock()
	defer q.idxMu.Unlock()
	n := 0
	for _, e := range q.index {
		if !e.pendingSync && e.state%3 == 2 && e.outcome == OutcomeFailed {
			n++
		}
	}
	return n, nil
}

package webhook

import (
	"context"
	"sync"
)

// groupCommit funnels operations from many goroutines to one goroutine that
// commits whatever has queued — up to max at a time — as one batch: one
// transaction or one write, and one fsync, for all of them. Both queues
// persist this way; what a commit does is theirs.
type groupCommit[T any] struct {
	mu     sync.RWMutex // guards closed against sends on ops
	closed bool
	ops    chan T
	done   chan struct{}
	max    int
}

func newGroupCommit[T any](buffer, max int) *groupCommit[T] {
	return &groupCommit[T]{ops: make(chan T, buffer), done: make(chan struct{}), max: max}
}

// send hands op to the committing goroutine. It fails with ErrQueueClosed
// after close, or with ctx's error if ctx ends before op is taken; once
// sent, op will be committed (or fail) as part of a batch.
func (g *groupCommit[T]) send(ctx context.Context, op T) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return ErrQueueClosed
	}
	select {
	case g.ops <- op:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run commits batches until close; run it in its own goroutine.
func (g *groupCommit[T]) run(commit func(batch []T)) {
	defer close(g.done)
	batch := make([]T, 0, g.max)
	for op := range g.ops {
		batch = append(batch[:0], op)
	drain:
		for len(batch) < g.max {
			select {
			case op2, ok := <-g.ops:
				if !ok {
					break drain
				}
				batch = append(batch, op2)
			default:
				break drain
			}
		}
		commit(batch)
	}
}

// close stops accepting operations, waits until every sent one is
// committed, and reports whether this call closed it (false: it already
// was).
func (g *groupCommit[T]) close() bool {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false
	}
	g.closed = true
	close(g.ops)
	g.mu.Unlock()
	<-g.done
	return true
}

package api

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

var (
	errSessionBusy = errors.New("session has a run queued or executing")
	errQueueFull   = errors.New("run queue full")
	errStopped     = errors.New("not accepting runs")
)

// tracker owns the API's background runs: at most one per session, at
// most `slots` executing, at most `maxQueued` waiting, all stopped and
// waited for by stop.
type tracker struct {
	metrics *Metrics
	log     *slog.Logger
	slots   chan struct{}

	quit   chan struct{}   // closed by stop: queued runs do not start
	ctx    context.Context // cancelled to cancel the runs in flight
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	sessions  map[string]chan struct{} // queued or executing; closed when done
	queued    int
	maxQueued int
	stopped   bool
}

func newTracker(slots, maxQueued int, m *Metrics, log *slog.Logger) *tracker {
	ctx, cancel := context.WithCancel(context.Background())
	return &tracker{metrics: m, log: log, slots: make(chan struct{}, slots), quit: make(chan struct{}), ctx: ctx, cancel: cancel, sessions: map[string]chan struct{}{}, maxQueued: maxQueued}
}

// reserve claims the session for one run. A successful reserve must be
// followed by launch or release.
func (t *tracker) reserve(sessionID string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.stopped:
		return errStopped
	case t.sessions[sessionID] != nil:
		return errSessionBusy
	case t.queued >= t.maxQueued:
		return errQueueFull
	}
	t.sessions[sessionID] = make(chan struct{})
	t.queued++
	return nil
}

// reserveAfter is reserve, but waits for the session's current run to end
// first (until ctx ends).
func (t *tracker) reserveAfter(ctx context.Context, sessionID string) error {
	for {
		err := t.reserve(sessionID)
		if !errors.Is(err, errSessionBusy) {
			return err
		}
		t.mu.Lock()
		done := t.sessions[sessionID]
		t.mu.Unlock()
		if done == nil {
			continue
		}
		select {
		case <-done:
		case <-ctx.Done():
			return err
		}
	}
}

// free ends the session's reservation.
func (t *tracker) free(sessionID string) {
	if done := t.sessions[sessionID]; done != nil {
		close(done)
		delete(t.sessions, sessionID)
	}
}

// release gives up a reservation that was not launched.
func (t *tracker) release(sessionID string) {
	t.mu.Lock()
	t.free(sessionID)
	t.queued--
	t.mu.Unlock()
}

// done returns a channel closed when the session's current reservation
// (queued or executing run) ends, and false when it has none.
func (t *tracker) done(sessionID string) (<-chan struct{}, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ch := t.sessions[sessionID]
	return ch, ch != nil
}

// active reports whether the session has a run queued or executing here.
func (t *tracker) active(sessionID string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sessions[sessionID] != nil
}

// launch runs a reserved session's run in a tracked goroutine once a slot
// is free: prepared, or else what prepare returns (called with the run's
// context after the slot is taken).
func (t *tracker) launch(sessionID string, prepared Run, prepare func(ctx context.Context) (Run, error)) error {
	t.mu.Lock()
	if t.stopped {
		// stop is waiting for the goroutines: no new one may start.
		t.free(sessionID)
		t.queued--
		t.mu.Unlock()
		if prepared != nil {
			prepared.Close()
		}
		return errStopped
	}
	t.wg.Add(1)
	t.mu.Unlock()
	t.metrics.RunQueued()
	go func() {
		defer t.wg.Done()
		defer func() {
			t.mu.Lock()
			t.free(sessionID)
			t.mu.Unlock()
		}()
		started := false
		select {
		case t.slots <- struct{}{}:
			select {
			case <-t.quit:
				<-t.slots
			default:
				started = true
			}
		case <-t.quit:
		}
		t.mu.Lock()
		t.queued--
		t.mu.Unlock()
		if !started {
			t.metrics.RunDropped()
			if prepared != nil {
				prepared.Close()
			}
			t.log.Warn("api: run not started: the server is stopping", "session", sessionID)
			return
		}
		defer func() { <-t.slots }()
		t.metrics.RunStarted()
		if prepared == nil {
			var err error
			if prepared, err = prepare(t.ctx); err != nil {
				t.log.Error("api: cannot prepare the run", "session", sessionID, "error", err)
				t.metrics.RunFinished("error")
				return
			}
		}
		t.metrics.RunFinished(t.execute(sessionID, prepared))
	}()
	return nil
}

func (t *tracker) execute(sessionID string, run Run) string {
	defer func() {
		if err := run.Close(); err != nil {
			t.log.Warn("api: closing the run", "session", sessionID, "error", err)
		}
	}()
	out, err := run.Execute(t.ctx)
	if err != nil {
		t.log.Error("api: run stopped with an error", "session", sessionID, "run", out.RunID, "error", err)
		return "error"
	}
	t.log.Info("api: run stopped", "session", sessionID, "run", out.RunID, "status", out.Status)
	return string(out.Status)
}

// stop refuses new runs, waits up to grace for the runs in flight, then
// cancels them and waits until every run goroutine has returned.
func (t *tracker) stop(grace time.Duration) {
	t.mu.Lock()
	if !t.stopped {
		t.stopped = true
		close(t.quit)
	}
	t.mu.Unlock()
	done := make(chan struct{})
	go func() {
		t.wg.Wait()
		close(done)
	}()
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.log.Warn("api: cancelling the runs still in flight")
	}
	t.cancel()
	<-done
}

package run

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/agentos/agentos/runtime/replay"
)

// StatusCancelled is the terminal status of a cancelled run
// (terminal_report_v2).
const StatusCancelled = replay.RunCancelled

// ErrCancelled is the cause of a run context cancelled by Manager.Cancel.
var ErrCancelled = errors.New("the run was cancelled")

// DefaultCancelGrace is how long a cancel waits for a running tool call to
// end by itself before its context is cancelled, which kills the call's
// process tree.
const DefaultCancelGrace = 10 * time.Second

// control is a running run's cancel handle, shared by the engine (which
// reports the tool call in flight and checks for a cancel between steps)
// and Manager.Cancel.
type control struct {
	mu        sync.Mutex
	requested bool
	by        string
	reason    string
	cancel    context.CancelCauseFunc
	tool      *inFlight
	outcome   string // waited | killed, for a cancel during a tool call
	waitedMS  int64
	done      chan struct{} // closed when the run's drive returns
	decided   chan struct{} // closed when request has recorded its decision
	result    Outcome
	resultErr error
	// haltCause, set by Manager.Stop, makes the run stop at its next step
	// (haltAt); cut is set once it did, and from then on the run records
	// nothing more but its run.interrupted (stopGate).
	haltCause error
	cut       bool
	// storeErr is the first append of the run that failed because the
	// store was unavailable: from then on the run records nothing more
	// (stopGate) and is handed back (storefault.go).
	storeErr error
}

type inFlight struct {
	tool, callID string
	ended        chan struct{}
	// during is what run.cancelled records about this call.
	during map[string]any
}

func newControl(cancel context.CancelCauseFunc) *control {
	return &control{cancel: cancel, done: make(chan struct{}), decided: make(chan struct{})}
}

// stopped reports whether a cancel was requested (nil-safe).
func (c *control) stopped() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requested
}

// enterTool marks a tool call in flight; the returned func ends it.
func (c *control) enterTool(tool, callID string) func() {
	if c == nil {
		return func() {}
	}
	f := &inFlight{tool: tool, callID: callID, ended: make(chan struct{})}
	c.mu.Lock()
	c.tool = f
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		if c.tool == f {
			c.tool = nil
		}
		c.mu.Unlock()
		close(f.ended)
	}
}

// request asks the run to stop. Between steps it stops at once (a model
// call in progress is abandoned); during a tool call it waits up to grace
// for the call to end, then cancels the call's context, which kills its
// process tree. It returns once the decision is made, not when the run
// has ended.
func (c *control) request(by, reason string, grace time.Duration) {
	c.mu.Lock()
	if c.requested {
		c.mu.Unlock()
		return
	}
	c.requested, c.by, c.reason = true, by, reason
	f := c.tool
	c.mu.Unlock()
	defer close(c.decided)
	if f == nil {
		c.cancel(ErrCancelled)
		return
	}
	start := time.Now()
	t := time.NewTimer(grace)
	defer t.Stop()
	outcome := "waited"
	select {
	case <-f.ended:
	case <-t.C:
		outcome = "killed"
		c.cancel(ErrCancelled)
		<-f.ended
	}
	c.mu.Lock()
	c.outcome, c.waitedMS = outcome, time.Since(start).Milliseconds()
	f.during = map[string]any{"tool": f.tool, "call_id": f.callID, "outcome": outcome, "waited_ms": c.waitedMS}
	c.tool = f // remembered for run.cancelled
	c.mu.Unlock()
	if outcome == "waited" {
		// The call ended by itself: abandon whatever comes next.
		c.cancel(ErrCancelled)
	}
}

// cancelledPayload is run.cancelled's payload for a running run.
func (c *control) cancelledPayload() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := map[string]any{"by": c.by, "reason": c.reason, "from": StatusRunning}
	if c.tool != nil && c.tool.during != nil {
		p["during_tool"] = c.tool.during
	}
	return p
}

func (c *control) failure() *Failure {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cancelFailure(c.by, c.reason)
}

// cancelled waits for the cancel's decision and returns the run's
// cancelled Failure with its run.cancelled payload.
func (c *control) cancelled() *Failure {
	<-c.decided
	f := c.failure()
	f.cancelled = c.cancelledPayload()
	return f
}

func cancelFailure(by, reason string) *Failure {
	r := "cancelled by " + by
	if reason != "" {
		r += ": " + reason
	}
	return &Failure{Status: StatusCancelled, Code: "CANCELLED", Reason: r, NextAction: "start a new request if the work is still wanted; the work so far is kept"}
}

package run

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/journal"
)

// Graceful stop. A host that shuts down (agentos serve on SIGTERM) first
// lets its runs go on for a drain time; the runs it must cut then get a
// context cancelled with a cause that wraps ErrStopping. Such a run did
// not fail and did not time out: from the moment of the cut it records
// nothing more (no TIMEOUT from the killed command, no PROVIDER_ERROR from
// the dropped model call), then one run.interrupted that says which calls
// were left open, and it stays running in the log, so that the process
// that takes it over re-executes it from there (Takeover).

// ErrStopping is the cause (context.WithCancelCause) with which a host
// cuts the runs still running when it stops; wrap it to say why
// (fmt.Errorf("%w: ...", ErrStopping)).
var ErrStopping = errors.New("this process is stopping")

// ErrInterrupted is what Start, Resume and Takeover return for a run cut
// by ErrStopping: the log records run.interrupted and the run is still
// running there, for another process to take over.
var ErrInterrupted = errors.New("the run was interrupted: the process working it stopped before it ended; it is taken over from its log")

// stopping reports whether ctx was cancelled by a host that is stopping.
func stopping(ctx context.Context) bool { return errors.Is(context.Cause(ctx), ErrStopping) }

// errCut is what an append of a run cut by ErrStopping returns.
var errCut = errors.New("the run was cut: this process is stopping, nothing more is recorded")

// halt asks the run to stop at its next step (nil-safe).
func (c *control) halt(cause error) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.haltCause == nil {
		c.haltCause = cause
	}
}

// haltAt is the check between two steps of a live run: after Stop, the
// run stops here (the call before it was let finish), and its log is
// closed to everything but run.interrupted.
func (c *control) haltAt() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.haltCause == nil {
		return nil
	}
	c.cut = true
	return c.haltCause
}

// halted returns the cause of a halt the run stopped at (nil if it did
// not).
func (c *control) halted() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.cut {
		return nil
	}
	return c.haltCause
}

// haltRequested returns the cause of a halt asked for by Stop, whether or
// not the run stopped at a step yet (nil-safe).
func (c *control) haltRequested() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.haltCause
}

// cutBy returns why the run was cut (nil if it was not): it stopped at a
// step after Stop, or its context ended with a stopping cause, or ended
// for any reason after Stop (the host going away: an HTTP server's runs
// are cancelled plainly when its grace ends).
func (c *control) cutBy(ctx context.Context) error {
	if cause := c.halted(); cause != nil {
		return cause
	}
	if ctx.Err() == nil {
		return nil
	}
	if stopping(ctx) {
		return context.Cause(ctx)
	}
	return c.haltRequested()
}

// halt is haltAt for a live step of s (a replayed step decides nothing).
func (s *state) halt() error {
	if s.f.replaying() {
		return nil
	}
	return s.in.ctl.haltAt()
}

// Stop makes every run of this process, and every run it starts from now
// on, stop at its next step: a model call or tool call in progress is let
// finish (the host cuts it with a context cause wrapping ErrStopping if it
// does not finish in time). A stopped run records run.interrupted and
// returns ErrInterrupted; it is still running in the log, for another
// process to take over at once. cause (wrapping ErrStopping) says why.
func (m *Manager) Stop(cause error) {
	if !errors.Is(cause, ErrStopping) {
		cause = fmt.Errorf("%w: %w", ErrStopping, cause)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopCause == nil {
		m.stopCause = cause
	}
	for _, c := range m.active {
		c.halt(m.stopCause)
	}
}

// stopGate is the run's log as the engine writes it: once the run's
// context is cut by ErrStopping, every append fails (errCut). A command
// killed by the cut, or a model call dropped by it, would otherwise be
// recorded as a timeout or a provider error, which is not what happened;
// the call stays open and run.interrupted says so.
//
// It also stops a run whose log cannot be written (storefault.go): the
// first append that fails on a store fault is latched in the run's
// control, and every later append fails with it, so that nothing is
// recorded after a gap or on a tip an in-doubt append may have moved —
// even where a caller (a hook, the kernel's refusal path) carries on
// after the error.
type stopGate struct {
	eventLog
	ctx context.Context
	ctl *control
}

func (g stopGate) cut() bool { return g.ctl.cutBy(g.ctx) != nil }

// refuse is the error of an append the gate does not make (nil: make it).
func (g stopGate) refuse() error {
	if err := g.ctl.storeFailure(); err != nil {
		return err
	}
	if g.cut() {
		return errCut
	}
	return nil
}

// note latches err when it is a store fault.
func (g stopGate) note(err error) {
	if storeFault(err) {
		g.ctl.storeFailed(err)
	}
}

func (g stopGate) Append(ctx context.Context, typ, actor string, payload any, parentID string) (event.Event, error) {
	if err := g.refuse(); err != nil {
		return event.Event{}, err
	}
	e, err := g.eventLog.Append(ctx, typ, actor, payload, parentID)
	g.note(err)
	return e, err
}

func (g stopGate) Record(ctx context.Context, eventType, actor string, payload any, parentID string) (string, error) {
	if err := g.refuse(); err != nil {
		return "", err
	}
	id, err := g.eventLog.Record(ctx, eventType, actor, payload, parentID)
	g.note(err)
	return id, err
}

// interrupt records run.interrupted for run runID of j, stopped by cause
// (wrapping ErrStopping), and returns the run's outcome: still running.
func interrupt(ctx context.Context, j *journal.Journal, runID string, cause error) (Outcome, error) {
	wctx := context.WithoutCancel(ctx)
	evs, err := j.Events(wctx)
	if err != nil {
		return Outcome{}, err
	}
	open := []map[string]any{}
	for _, inv := range OpenToolCalls(evs, runID) {
		open = append(open, map[string]any{"kind": "tool", "seq": inv.Seq, "tool": event.FieldString(inv.Payload, "tool"), "call_id": event.FieldString(inv.Payload, "call_id")})
	}
	for _, req := range openModelCalls(evs, runID) {
		open = append(open, map[string]any{"kind": "model", "seq": req.Seq, "role": event.FieldString(req.Payload, "role")})
	}
	p := map[string]any{"reason": cause.Error() + "; the run is not over: the process that takes the session over continues it from its log", "by": "runtime", "open": open}
	if _, err := j.Append(wctx, event.RunInterrupted, "runtime", p, ""); err != nil {
		return Outcome{}, err
	}
	// No status: the run has no outcome yet, and a caller that publishes
	// outcomes must not publish this one.
	return Outcome{SessionID: j.SessionID(), RunID: runID}, fmt.Errorf("%w (%w)", ErrInterrupted, cause)
}

// openModelCalls are run runID's llm.request events without an
// llm.response.
func openModelCalls(evs []event.Event, runID string) []event.Event {
	answered := map[string]bool{}
	for _, e := range evs {
		if e.Type == event.LLMResponse {
			answered[e.Parent()] = true
		}
	}
	var out []event.Event
	for _, e := range evs {
		if e.Type == event.LLMRequest && e.RunID == runID && !answered[e.ID] {
			out = append(out, e)
		}
	}
	return out
}

package run

import (
	"errors"
	"fmt"

	"github.com/agentos/agentos/runtime/store"
)

// A run whose events cannot be written stops where it is. The store
// retries an append within its bound (the PostgreSQL store: Options.RetryFor)
// and then fails it with *store.UnavailableError; an append in doubt (it
// may have committed) is indistinguishable, from here, from one that did
// not. Either way the run's log cannot be extended on this process's idea
// of its tip, and an outcome written later (run.failed when the database
// is back, say) would be false: the run did not fail, its log could not
// be written. So from the first such error the run appends nothing more —
// no run.failed, no terminal report, no run.paused, not even
// run.interrupted (stopGate refuses every later append of the engine) —
// and Start, Resume and Takeover return an Outcome without a Status and
// an error wrapping both ErrStoreUnavailable and the store's error. The
// run is still "running" in the log: the host hands the session back (it
// releases the session's lease, and its delivery is retried), and the
// process that takes it over once the store answers re-opens the journal
// (an in-doubt append is read back, never written twice), closes the
// calls left open and continues the run from its log (Takeover).

// ErrStoreUnavailable is wrapped by the error of Start, Resume, Takeover,
// Cancel and Resolve when an append or a read of the run failed because
// the event store was unavailable (errors.Is(err, store.ErrUnavailable) holds
// too): nothing more was recorded, the run has no outcome yet and stays
// running in its log, for the process that holds the session once the
// store answers to take over. It is not a failure of the run: a host
// must not report it as one.
var ErrStoreUnavailable = errors.New("the run's events could not be written (the event store is unavailable): the run stopped where it was, recorded nothing more, and is taken over from its log once the store answers")

// storeFault reports whether err says the store could not be reached
// (*store.UnavailableError, however wrapped).
func storeFault(err error) bool { return errors.Is(err, store.ErrUnavailable) }

// handBack is err (a store fault) as Start, Resume and Takeover return
// it: wrapping ErrStoreUnavailable and the store's error.
func handBack(err error) error {
	if errors.Is(err, ErrStoreUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
}

// handedBack is the outcome of run runID of session sid that stopped on
// store fault err: no status (nothing to publish), and the error.
func handedBack(sid, runID string, err error) (Outcome, error) {
	return Outcome{SessionID: sid, RunID: runID}, handBack(err)
}

// storeFailed latches err, an append that failed on a store fault: the
// run records nothing more (nil-safe; the first fault is kept).
func (c *control) storeFailed(err error) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.storeErr == nil {
		c.storeErr = err
	}
}

// storeFailure is the store fault the run met (nil: none; nil-safe).
func (c *control) storeFailure() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.storeErr
}

// faulted is the store fault that ends a run the engine returned from
// with err: the one an append latched (even if the engine, or the kernel
// under it, dropped that error on the way), or err itself when it is one.
func (c *control) faulted(err error) error {
	if f := c.storeFailure(); f != nil {
		return f
	}
	if storeFault(err) {
		return err
	}
	return nil
}

// handBackOnFault makes a store fault returned by Start, Resume, Takeover
// or Cancel (an append before or after the engine, a read) the
// hand-back: the error wraps ErrStoreUnavailable and the outcome has no
// status.
func handBackOnFault(out *Outcome, err *error) {
	if *err == nil || !storeFault(*err) {
		return
	}
	*out = Outcome{SessionID: out.SessionID, RunID: out.RunID}
	*err = handBack(*err)
}

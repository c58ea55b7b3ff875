// Package worker consumes the webhook delivery queue (bot/queue) that
// bot/webhook's intake fills: its Processor claims each delivery, decodes
// it fully (go-github), drops the bot's own events and the actions the
// bot does not act on, normalises the rest into one webhook.Trigger and
// hands it to a Dispatcher (bot/dispatch), then records the outcome:
// processed, ignored, failed, or retry with backoff. Processing is
// at-least-once: a delivery claimed but not finished when the process
// died is claimed again.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/google/go-github/v62/github"
)

// Dispatcher receives the normalised Trigger of every delivery the bot
// acts on (*dispatch.Dispatcher). An error makes the Processor retry the
// delivery (see Processor) unless it wraps webhook.ErrPermanent.
type Dispatcher interface {
	Dispatch(ctx context.Context, t webhook.Trigger) error
}

// busyPrefix starts the message of a retry that waits for another
// replica (webhook.ErrBusy); BusyRetryDelay is how long such a delivery
// waits (queue.BusyRetryDelay: the queue applies it).
const (
	busyPrefix     = queue.BusyPrefix
	BusyRetryDelay = queue.BusyRetryDelay
)

// Defaults of the Processor.
const (
	DefaultWorkers      = 8
	DefaultMaxAttempts  = 5
	DefaultPollInterval = time.Second
)

// Processor claims deliveries from the Queue and processes each one:
//
//  1. the bot's own events (sender login equal to BotLogin, ignoring case)
//     are dropped first, outcome "ignored";
//  2. the body is decoded with go-github's ParseWebHook; a body it cannot
//     decode fails at once (outcome "failed");
//  3. actions the bot does not act on are dropped, outcome "ignored";
//  4. the Trigger goes to the Dispatcher: nil → "processed"; an error →
//     "retry" (claimable again after 2^(failures-1) s) until its
//     MaxAttempts-th failed dispatch, which is "failed" for good with the
//     error message. Errors wrapping webhook.ErrPermanent fail at once; errors
//     wrapping webhook.ErrBusy are retried after BusyRetryDelay, count no failure
//     and are never given up on. Failures
//     count dispatches that returned an error, not claims: a process
//     killed mid-dispatch, or stopped (the delivery is then handed back,
//     see queue.Releaser), used up nothing.
//
// Deliveries are processed concurrently by Workers goroutines, so two
// deliveries about the same issue can be dispatched in any order.
type Processor struct {
	Queue    queue.Queue
	Dispatch Dispatcher
	BotLogin string
	// Events are the events and actions the bot acts on (dispatch.Events);
	// other deliveries are "ignored" before they are decoded.
	Events   webhook.Events
	Observer webhook.Observer // may be nil
	Workers  int              // default DefaultWorkers
	Logger   *slog.Logger

	MaxAttempts  int           // default DefaultMaxAttempts
	PollInterval time.Duration // idle re-check (retries, queues without Notifier); default DefaultPollInterval

	// DrainTimeout is how long the deliveries in flight may go on once
	// Run's ctx ends (a graceful stop): no delivery is claimed any more,
	// and one still being dispatched after DrainTimeout has its context
	// cancelled with StopCause. 0 cancels them as soon as ctx ends.
	DrainTimeout time.Duration
	// StopCause is the cause (context.Cause) a dispatch cut at the end of
	// the drain sees; nil: context.Canceled.
	StopCause error
}

// Run processes deliveries until ctx ends, then waits for the deliveries in
// flight to finish (their Dispatch sees the ended ctx) and returns nil. It
// returns an error only if the Processor is misconfigured (Queue, Dispatch
// and BotLogin are required).
func (p *Processor) Run(ctx context.Context) error {
	if p.Queue == nil || p.Dispatch == nil {
		return errors.New("worker: Queue and Dispatch are required")
	}
	if p.BotLogin == "" {
		// Without it the bot would answer its own comments, forever.
		return errors.New("worker: BotLogin is required")
	}
	if len(p.Events) == 0 {
		// Without them every delivery would be ignored.
		return errors.New("worker: Events are required (dispatch.Events, from the route table)")
	}
	workers := p.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	// relay passes a wake-up from worker to worker: one signal from the
	// queue may stand for many deliveries.
	relay := make(chan struct{}, 1)
	// Deliveries are claimed under ctx and dispatched under work, which
	// outlives ctx by the drain time.
	work, cut := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cut(nil)
	drained := make(chan struct{})
	go func() {
		select {
		case <-drained:
			return
		case <-ctx.Done():
		}
		if p.DrainTimeout > 0 {
			p.logger().Info("webhook: stopping: no new deliveries; waiting for the ones in flight", "drain_timeout", p.DrainTimeout)
			t := time.NewTimer(p.DrainTimeout)
			defer t.Stop()
			select {
			case <-drained:
				return
			case <-t.C:
				p.logger().Warn("webhook: drain time over: cutting the deliveries still in flight", "drain_timeout", p.DrainTimeout)
			}
		}
		cause := p.StopCause
		if cause == nil {
			cause = context.Canceled
		}
		cut(cause)
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.work(ctx, work, relay)
		}()
	}
	wg.Wait()
	close(drained)
	return nil
}

func (p *Processor) logger() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (p *Processor) work(ctx, work context.Context, relay chan struct{}) {
	var ready <-chan struct{}
	if n, ok := p.Queue.(queue.Notifier); ok {
		ready = n.Ready()
	}
	poll := p.PollInterval
	if poll <= 0 {
		poll = DefaultPollInterval
	}
	timer := time.NewTimer(poll)
	defer timer.Stop()
	for ctx.Err() == nil {
		d, ok, err := p.Queue.Claim(ctx)
		if err != nil && ctx.Err() == nil {
			p.logger().Error("webhook: claim", "err", err)
		}
		if ok {
			select { // there may be more: wake an idle worker
			case relay <- struct{}{}:
			default:
			}
			p.processIn(ctx, work, d)
			continue
		}
		timer.Reset(poll)
		select {
		case <-ctx.Done():
		case <-ready:
		case <-relay:
		case <-timer.C:
		}
	}
}

// process handles one claimed delivery and records its outcome.
func (p *Processor) process(ctx context.Context, d queue.Delivery) { p.processIn(ctx, ctx, d) }

// processIn is process with the dispatch under work; ctx is the claiming
// context, which ends when the processor stops (the delivery is then
// handed back if its dispatch did not finish).
func (p *Processor) processIn(ctx, work context.Context, d queue.Delivery) {
	// The claim rides in the dispatch's context: progress made on the
	// delivery's behalf renews it (queue.Beat); a stuck dispatch lets it
	// expire, for another replica to take the delivery over.
	outcome, msg := p.handle(queue.WithClaim(work, p.Queue, d.ID), d)
	log := p.logger().With("delivery", d.ID, "event", d.Event, "action", d.Action, "attempt", d.Attempts)
	if outcome == queue.OutcomeRetry && ctx.Err() != nil {
		// A dispatch cut short by shutdown did not fail: the delivery is
		// handed back, claimable at once by the next process, with no
		// failure counted and no backoff.
		if r, ok := p.Queue.(queue.Releaser); ok {
			if err := r.Release(context.WithoutCancel(ctx), d.ID); err != nil {
				log.Error("webhook: hand back a delivery at shutdown", "err", err)
			} else {
				log.Info("webhook: delivery handed back at shutdown", "reason", msg)
			}
			return
		}
	}
	// The MaxAttempts-th failed dispatch gives up (Failures counts the
	// earlier ones); one that waits for another replica never does.
	if outcome == queue.OutcomeRetry && d.Failures+1 >= p.maxAttempts() && ctx.Err() == nil && !strings.HasPrefix(msg, busyPrefix) {
		outcome = queue.OutcomeFailed
		msg = fmt.Sprintf("%s (gave up after %d failed attempts)", msg, d.Failures+1)
	}
	switch {
	case outcome == queue.OutcomeRetry && strings.HasPrefix(msg, busyPrefix):
		// Waiting for another replica, or for the store: retried, never
		// given up on; not worth a warning every couple of seconds.
		log.Info("webhook: delivery waits", "reason", msg)
	case outcome == queue.OutcomeFailed || outcome == queue.OutcomeRetry:
		log.Warn("webhook: delivery "+outcome, "err", msg)
	default:
		log.Debug("webhook: delivery "+outcome, "reason", msg)
	}
	if p.Observer != nil {
		p.Observer.Delivery(p.Events.Label(d.Event), outcome)
	}
	// Record the outcome even when ctx has ended, or the work is redone.
	p.record(work, log, d.ID, outcome, msg)
}

// Retries of an outcome the queue could not record (its database was
// unreachable): the first wait, the longest, and how long to keep trying.
var (
	recordFirstWait = 500 * time.Millisecond
	recordMaxWait   = 10 * time.Second
	recordGiveUp    = 10 * time.Minute
)

// record records a delivery's outcome, trying again while the queue
// cannot be reached: a dispatch that handed its run back because the
// database was down ends with a retry that must reach the queue once the
// database answers, or the delivery stays claimed by this replica until
// its claim expires (minutes), with nothing happening. It stops at once
// when the claim is gone (another replica took the delivery over: its
// outcome is that replica's) or the queue is closed, and at the end of a
// graceful stop's drain (work ends): the claim then expires as a killed
// process's would.
func (p *Processor) record(work context.Context, log *slog.Logger, id, outcome, msg string) {
	wait, start := recordFirstWait, time.Now()
	for {
		err := p.Queue.Done(context.WithoutCancel(work), id, outcome, msg)
		switch {
		case err == nil:
			return
		case errors.Is(err, queue.ErrUnknownDelivery) || errors.Is(err, queue.ErrQueueClosed):
			log.Warn("webhook: record outcome", "err", err)
			return
		case work.Err() != nil || time.Since(start) > recordGiveUp:
			log.Error("webhook: record outcome: giving up; the claim expires and the delivery is claimed again", "err", err)
			return
		}
		log.Warn("webhook: record outcome: the queue is unreachable; trying again", "err", err, "in", wait)
		t := time.NewTimer(wait)
		select {
		case <-work.Done():
		case <-t.C:
		}
		t.Stop()
		wait = min(2*wait, recordMaxWait)
	}
}

func (p *Processor) maxAttempts() int {
	if p.MaxAttempts > 0 {
		return p.MaxAttempts
	}
	return DefaultMaxAttempts
}

// handle returns the outcome of one delivery and its reason or error.
func (p *Processor) handle(ctx context.Context, d queue.Delivery) (outcome, msg string) {
	// A panic on one delivery (a decoder or dispatcher bug meeting odd
	// input) fails that delivery, not the process.
	defer func() {
		if r := recover(); r != nil {
			outcome, msg = queue.OutcomeFailed, fmt.Sprintf("panic: %v", r)
			// The stack is what a maintainer needs to fix it; the
			// delivery's outcome keeps the one line.
			p.logger().Error("webhook: a delivery's handling panicked", "delivery", d.ID, "event", d.Event, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	// The bot's own events come first: nothing else is looked at.
	var head struct {
		Sender struct {
			Login string `json:"login"`
		} `json:"sender"`
	}
	if err := json.Unmarshal(d.Body, &head); err != nil {
		return queue.OutcomeFailed, "decode: " + err.Error()
	}
	if strings.EqualFold(head.Sender.Login, p.BotLogin) {
		return queue.OutcomeIgnored, "the bot's own event"
	}
	if !p.Events.Accepts(d.Event, d.Action) {
		return queue.OutcomeIgnored, fmt.Sprintf("%s action %q is not handled", d.Event, d.Action)
	}
	ev, err := github.ParseWebHook(d.Event, d.Body)
	if err != nil {
		return queue.OutcomeFailed, "decode: " + err.Error()
	}
	t, ok, err := webhook.NormalizeDecoded(d, ev)
	if err != nil {
		return queue.OutcomeFailed, err.Error()
	}
	if !ok {
		return queue.OutcomeIgnored, fmt.Sprintf("%s action %q is not handled", d.Event, t.Action)
	}
	t.FinalAttempt = d.Failures+1 >= p.maxAttempts()
	if err := p.Dispatch.Dispatch(ctx, t); err != nil {
		if errors.Is(err, webhook.ErrPermanent) {
			return queue.OutcomeFailed, "dispatch: " + err.Error()
		}
		if errors.Is(err, webhook.ErrBusy) {
			return queue.OutcomeRetry, busyPrefix + err.Error()
		}
		return queue.OutcomeRetry, "dispatch: " + err.Error()
	}
	return queue.OutcomeProcessed, ""
}

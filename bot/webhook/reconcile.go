package webhook

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"time"

	"github.com/google/go-github/v62/github"
)

// AppHooks is the App's webhook delivery log on GitHub (the App's JWT):
// *github.AppsService of a client built on ghinstallation's AppsTransport.
type AppHooks interface {
	ListHookDeliveries(ctx context.Context, opts *github.ListCursorOptions) ([]*github.HookDelivery, *github.Response, error)
	RedeliverHookDelivery(ctx context.Context, deliveryID int64) (*github.HookDelivery, *github.Response, error)
}

// Defaults of the Reconciler.
const (
	DefaultReconcileInterval = 5 * time.Minute
	DefaultReconcileLookback = 24 * time.Hour
	DefaultReconcilePages    = 10
	DefaultReconcileMax      = 20
	DefaultReconcilePerGUID  = 3
)

// Reconciler asks GitHub to redeliver the webhooks the bot did not take:
// GitHub does not retry a delivery that failed (a 503 while the store and
// its spool were down, a timeout, a refused connection while the server
// was restarting), but keeps a log of the App's deliveries. Each pass lists
// that log from the newest back to the last pass (Lookback on the first),
// groups the attempts by GUID, and for each GUID of a handled event with
// no successful attempt (status 2xx or 3xx), that the queue does not hold
// already (Known), asks for a redelivery of its latest attempt — at most
// Max per pass, oldest first, and at most PerGUID times per GUID in the
// life of the process. A redelivery keeps its GUID, so a delivery the bot
// has after all is answered as a duplicate. Run passes at start and then
// every Interval.
//
// Where replicas share a store, Lease makes the passes one replica's at a
// time: before each pass the reconciler takes, or keeps, the lease named
// ReconcilerLease, and skips the pass when another live replica holds it.
// The holder's lease is renewed while it lives; once it dies (or cannot
// reach the database) the lease expires and another replica's next tick
// takes it over. Without Lease every pass runs (one process).
type Reconciler struct {
	Hooks  AppHooks
	Events Events // deliveries of other events are left alone
	// Known reports whether the bot already holds the delivery (the
	// queue's Get); nil: ask GitHub for every failed one.
	Known    func(ctx context.Context, guid string) (bool, error)
	Interval time.Duration // default DefaultReconcileInterval
	Lookback time.Duration // first pass; default DefaultReconcileLookback
	MaxPages int           // pages of 100 per pass; default DefaultReconcilePages
	Max      int           // redeliveries per pass; default DefaultReconcileMax
	PerGUID  int           // redeliveries per GUID; default DefaultReconcilePerGUID
	Lease    Lessor        // nil: this process always reconciles
	Logger   *slog.Logger

	seen    time.Time      // the newest attempt seen by the last pass
	asked   map[string]int // GUID → redeliveries asked
	askAt   map[string]time.Time
	release func() // the lease's latest grant, while leading
}

// ReconcilerLease names the reconciler's lease among the session leases
// (it is no valid session ID, so it never meets one).
const ReconcilerLease = "agentos:webhook-reconciler"

// Lessor grants a named lease to one live replica at a time, renewed
// while it lives (postgres.Leases). Acquire fails while another replica
// holds it; this replica acquiring it again keeps it (with a new grant).
type Lessor interface {
	Acquire(ctx context.Context, name string) (release func(), err error)
}

// ReconcileResult is what one pass did.
type ReconcileResult struct {
	Listed      int      // attempts listed
	Failed      int      // GUIDs of handled events with no successful attempt
	Redelivered []string // GUIDs GitHub was asked to redeliver
}

// Run passes until ctx ends; a failed pass is logged and retried at the
// next interval.
func (r *Reconciler) Run(ctx context.Context) error {
	if r.Hooks == nil || len(r.Events) == 0 {
		return errors.New("webhook reconciler: Hooks and Events are required")
	}
	every := r.Interval
	if every <= 0 {
		every = DefaultReconcileInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	defer func() {
		if r.release != nil {
			r.release()
			r.release = nil
		}
	}()
	for {
		if r.turn(ctx) {
			res, err := r.Pass(ctx)
			switch {
			case err != nil && ctx.Err() == nil:
				r.logger().Warn("webhook reconciler: pass failed", "err", err)
			case len(res.Redelivered) > 0:
				r.logger().Info("webhook reconciler: asked GitHub to redeliver failed deliveries", "redelivered", len(res.Redelivered), "failed", res.Failed)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// turn reports whether this replica passes now: always without Lease;
// with it, when this replica took or kept the reconciler's lease. A
// replica that cannot (another holds it, or the database does not
// answer) skips the pass; the lease of one that stops leading is left to
// expire, or to the replica that took it.
func (r *Reconciler) turn(ctx context.Context) bool {
	if r.Lease == nil {
		return true
	}
	release, err := r.Lease.Acquire(ctx, ReconcilerLease)
	if err != nil {
		if r.release != nil {
			r.release = nil
			r.logger().Warn("webhook reconciler: this replica no longer holds the reconciler's lease; another replica reconciles", "err", err)
		}
		return false
	}
	if r.release == nil {
		r.logger().Info("webhook reconciler: this replica reconciles the webhook deliveries (it holds the reconciler's lease)")
	}
	r.release = release
	return true
}

func (r *Reconciler) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.New(slog.DiscardHandler)
}

type guidState struct {
	ok     bool
	latest *github.HookDelivery
	first  time.Time
}

// Pass lists the delivery log once and asks for the redeliveries.
func (r *Reconciler) Pass(ctx context.Context) (ReconcileResult, error) {
	var res ReconcileResult
	if r.asked == nil {
		r.asked, r.askAt = map[string]int{}, map[string]time.Time{}
	}
	lookback := r.Lookback
	if lookback <= 0 {
		lookback = DefaultReconcileLookback
	}
	pages := r.MaxPages
	if pages <= 0 {
		pages = DefaultReconcilePages
	}
	since := time.Now().Add(-lookback)
	if !r.seen.IsZero() {
		// Overlap the last pass: an attempt may be logged a little after
		// its delivery time.
		since = r.seen.Add(-time.Minute)
	}
	guids := map[string]*guidState{}
	newest := r.seen
	opts := &github.ListCursorOptions{PerPage: 100}
	for page := 0; page < pages; page++ {
		list, resp, err := r.Hooks.ListHookDeliveries(ctx, opts)
		if err != nil {
			return res, err
		}
		done := false
		for _, d := range list {
			at := d.GetDeliveredAt().Time
			if at.Before(since) {
				done = true
				break
			}
			res.Listed++
			if at.After(newest) {
				newest = at
			}
			g := guids[d.GetGUID()]
			if g == nil {
				g = &guidState{first: at}
				guids[d.GetGUID()] = g
			}
			if c := d.GetStatusCode(); c >= 200 && c < 400 {
				g.ok = true
			}
			if g.latest == nil || d.GetID() > g.latest.GetID() {
				g.latest = d
			}
			if at.Before(g.first) {
				g.first = at
			}
		}
		if done || resp == nil || resp.Cursor == "" {
			break
		}
		opts.Cursor = resp.Cursor
	}
	r.seen = newest
	var todo []string
	for guid, g := range guids {
		if g.ok || !r.Events.Has(g.latest.GetEvent()) {
			continue
		}
		res.Failed++
		if r.asked[guid] >= r.perGUID() {
			continue
		}
		if r.Known != nil {
			known, err := r.Known(ctx, guid)
			if err != nil {
				return res, err
			}
			if known {
				continue
			}
		}
		todo = append(todo, guid)
	}
	sort.Slice(todo, func(i, j int) bool { return guids[todo[i]].first.Before(guids[todo[j]].first) })
	max := r.Max
	if max <= 0 {
		max = DefaultReconcileMax
	}
	for _, guid := range todo {
		if len(res.Redelivered) >= max {
			break
		}
		_, _, err := r.Hooks.RedeliverHookDelivery(ctx, guids[guid].latest.GetID())
		var accepted *github.AcceptedError
		if err != nil && !errors.As(err, &accepted) {
			return res, err
		}
		r.asked[guid]++
		r.askAt[guid] = time.Now()
		res.Redelivered = append(res.Redelivered, guid)
	}
	// Forget GUIDs past the lookback: GitHub keeps its log only so long.
	for guid, at := range r.askAt {
		if time.Since(at) > lookback {
			delete(r.askAt, guid)
			delete(r.asked, guid)
		}
	}
	return res, nil
}

func (r *Reconciler) perGUID() int {
	if r.PerGUID > 0 {
		return r.PerGUID
	}
	return DefaultReconcilePerGUID
}

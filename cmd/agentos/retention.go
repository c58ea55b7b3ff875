package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/agentos/agentos/bot/config"
	"github.com/agentos/agentos/runtime/store"
)

// retentionEvery is how often serve applies the retention settings (and
// once at start).
const retentionEvery = time.Hour

// deliveryPruner is the delivery queue as retention sees it.
type deliveryPruner interface {
	Prune(ctx context.Context, before time.Time) (int64, error)
}

// retention deletes what the retention settings say is old enough
// (docs/operations.md, "Retention"): finished deliveries from the queue,
// and the events of sessions that ended, from the event store. Every
// replica runs it; the deletions are idempotent and a session is deleted
// only if it did not move since it was checked.
type retention struct {
	cfg   config.Retention
	store store.Store    // the backend itself (deletion bypasses the run metrics)
	queue deliveryPruner // nil without webhook intake
	log   *slog.Logger
	now   func() time.Time
	// deleted counts what was deleted (agentos_retention_deleted_total:
	// api.Metrics); nil: not counted.
	deleted retentionCounter

	warned bool // the store cannot delete sessions: said once
}

// retentionCounter counts what retention deleted, by kind (sessions,
// events, deliveries).
type retentionCounter interface {
	RetentionDeleted(kind string, n int64)
}

// retentionResult is what one pass deleted.
type retentionResult struct {
	deliveries int64
	sessions   store.PruneResult
}

// pass applies the settings once. A failure of one kind does not stop the
// other; the errors are returned together.
func (r *retention) pass(ctx context.Context) (retentionResult, error) {
	var res retentionResult
	var errs []error
	now := r.now()
	if r.queue != nil && r.cfg.Deliveries > 0 {
		n, err := r.queue.Prune(ctx, now.Add(-r.cfg.Deliveries))
		if err != nil {
			errs = append(errs, err)
		}
		res.deliveries = n
	}
	if r.cfg.Sessions > 0 {
		p, err := store.Prune(ctx, r.store, store.PruneOptions{Before: now.Add(-r.cfg.Sessions)})
		switch {
		case errors.Is(err, store.ErrNoPrune):
			if !r.warned {
				r.warned = true
				r.log.Warn("retention: the event store cannot delete sessions; retention.sessions is not applied")
			}
		case err != nil:
			errs = append(errs, err)
		}
		res.sessions = p
	}
	if r.deleted != nil {
		r.deleted.RetentionDeleted("deliveries", res.deliveries)
		r.deleted.RetentionDeleted("sessions", res.sessions.Sessions)
		r.deleted.RetentionDeleted("events", res.sessions.Events)
	}
	return res, errors.Join(errs...)
}

// run is serve's actor: a pass at start and one every retentionEvery
// until ctx ends. Each pass is logged at INFO with what it deleted.
func (r *retention) run(ctx context.Context) error {
	if r.cfg.Sessions == 0 && (r.queue == nil || r.cfg.Deliveries == 0) {
		return nil // nothing to delete, ever
	}
	r.log.Info("retention", "sessions", config.FormatRetention(r.cfg.Sessions), "deliveries", config.FormatRetention(r.cfg.Deliveries), "every", retentionEvery)
	for {
		start := time.Now()
		res, err := r.pass(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			r.log.Warn("retention: a pass failed; the next one tries again", "error", err, "deliveries", res.deliveries, "sessions", res.sessions.Sessions, "events", res.sessions.Events)
		} else {
			r.log.Info("retention: pruned", "deliveries", res.deliveries, "sessions", res.sessions.Sessions, "events", res.sessions.Events, "took", time.Since(start).Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retentionEvery):
		}
	}
}

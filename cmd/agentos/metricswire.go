package main

import (
	"context"
	"math"
	"time"

	"github.com/agentos/agentos/bot/api"
	"github.com/agentos/agentos/runtime/provider"
)

// observed wraps every provider reg builds so that each model call is
// reported to o (the server's model metrics: requests by outcome, latency,
// tokens). A nil o leaves reg as it is.
func observed(reg provider.Registry, o provider.ModelObserver) provider.Registry {
	if o == nil {
		return reg
	}
	out := make(provider.Registry, len(reg))
	for name, f := range reg {
		out[name] = func(ctx context.Context, p provider.Profile) (provider.Provider, error) {
			pr, err := f(ctx, p)
			if err != nil {
				return nil, err
			}
			return provider.Observed{P: pr, O: o}, nil
		}
	}
	return out
}

// claimAger is a queue that knows the age of its oldest claim (the durable
// queues, and the Spool in front of them).
type claimAger interface {
	OldestClaim(ctx context.Context) (time.Duration, error)
}

// wireOldestClaim makes agentos_queue_oldest_claim_age_seconds read q's
// oldest claim at each scrape (NaN when the queue cannot answer); a queue
// that cannot tell leaves the gauge at 0.
func wireOldestClaim(m *api.Metrics, q any) {
	a, ok := q.(claimAger)
	if !ok {
		return
	}
	m.SetOldestClaim(func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		d, err := a.OldestClaim(ctx)
		if err != nil {
			return math.NaN()
		}
		return d.Seconds()
	})
}

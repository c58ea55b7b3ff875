package provider

import (
	"context"
	"time"
)

// ModelObserver is told of every completion a provider made: which model,
// how long it took, the tokens it used and how it failed (nil when it did
// not). The server's metrics implement it.
type ModelObserver interface {
	ModelCall(provider, model string, took time.Duration, usage Usage, err error)
}

// Observed is P with each completion reported to O, after P's own retries
// (one call as the run sees it).
type Observed struct {
	P Provider
	O ModelObserver
}

// Name is P's name.
func (o Observed) Name() string { return o.P.Name() }

// Complete calls P and reports the call.
func (o Observed) Complete(ctx context.Context, req CompletionRequest) (CompletionResponse, error) {
	start := time.Now()
	resp, err := o.P.Complete(ctx, req)
	model := resp.Model
	if model == "" {
		model = req.Model
	}
	o.O.ModelCall(o.P.Name(), model, time.Since(start), resp.Usage, err)
	return resp, err
}

// Unwrap returns P, so that what P offers besides Complete (a preflight
// Checker) is still found.
func (o Observed) Unwrap() Provider { return o.P }

package main

import (
	"context"

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

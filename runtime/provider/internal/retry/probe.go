package retry

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/agentos/agentos/runtime/provider"
)

// ProbeTimeout bounds one preflight request.
const ProbeTimeout = 15 * time.Second

// Observing returns a context under which requests sent through Client
// record the last response's status, and a function that reads it (0 when
// no response arrived). Adapters use it for single requests outside Do,
// such as a preflight.
func Observing(ctx context.Context) (context.Context, func() int) {
	obs := &observed{}
	return context.WithValue(ctx, observedKey{}, obs), func() int { return obs.status }
}

// Probe classifies the outcome of an adapter's preflight request for a
// profile into a *provider.PreflightError naming what to set.
type Probe struct {
	Provider string
	Profile  provider.Profile
}

// Error builds the error of the given kind. The detail (the server's
// message, else err's text) is shown with the key removed: some servers
// echo the key they rejected.
func (p Probe) Error(kind error, status int, detail string, err error) *provider.PreflightError {
	if detail == "" && err != nil {
		detail = err.Error()
	}
	if k := p.Profile.APIKey; k != "" {
		detail = strings.ReplaceAll(detail, k, "[redacted]")
	}
	pe := &provider.PreflightError{Kind: kind, Provider: p.Provider, Endpoint: p.Profile.EndpointHost(), Model: p.Profile.Model, Status: status, Detail: detail, Err: err}
	switch kind {
	case provider.ErrKeyRejected:
		pe.Fix = p.Profile.KeyHint()
	case provider.ErrUnknownModel:
		pe.Fix = p.Profile.ModelHint()
	case provider.ErrUnreachable:
		pe.Fix = p.Profile.EndpointHint()
	}
	return pe
}

// Failed classifies a failed preflight request: status is the HTTP status
// the transport saw (0 for none) and notFound the kind a 404 means (the
// model, for a model look-up; the endpoint, for a list that should exist).
func (p Probe) Failed(ctx context.Context, status int, err error, notFound error, detail string) error {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return p.Error(provider.ErrKeyRejected, status, detail, err)
	case status == http.StatusNotFound:
		if notFound == provider.ErrUnreachable {
			hint := "no API at this URL (an OpenAI-compatible base URL usually ends in /v1)"
			if detail != "" {
				hint = detail + "; " + hint
			}
			detail = hint
		}
		return p.Error(notFound, status, detail, err)
	case RetryableStatus(status):
		return p.Error(provider.ErrUnavailable, status, detail, err)
	case status >= 400:
		// The endpoint answered and refused the request for a reason a
		// run might not share: do not stop the run over it.
		return p.Error(provider.ErrUnavailable, status, detail, err)
	case status != 0:
		return p.Error(provider.ErrUnreachable, status, "the answer is not the provider's API (check the base URL)", err)
	case ctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded):
		return p.Error(provider.ErrUnavailable, 0, "cancelled", err)
	default:
		return p.Error(provider.ErrUnreachable, 0, "", err)
	}
}

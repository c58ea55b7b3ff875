package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Checker is implemented by adapters that can check, before a run, that
// their endpoint answers, accepts the key and serves the model. Check
// returns a *PreflightError.
type Checker interface {
	Check(ctx context.Context) error
}

// Sentinels a *PreflightError matches with errors.Is.
var (
	// ErrUnreachable: nothing answered at the endpoint (connection refused,
	// DNS, timeout), or what answered is not the provider's API.
	ErrUnreachable = errors.New("model endpoint unreachable")
	// ErrKeyRejected: the endpoint refused the key (401/403).
	ErrKeyRejected = errors.New("API key rejected")
	// ErrUnknownModel: the endpoint does not serve the model (404, or not
	// in its model list).
	ErrUnknownModel = errors.New("unknown model")
	// ErrUnavailable: the endpoint answered but could not serve now (429,
	// 5xx); a run would retry, so callers may go on.
	ErrUnavailable = errors.New("model endpoint unavailable")
)

// PreflightError is a failed preflight: what is wrong and which variable
// to set to fix it.
type PreflightError struct {
	Kind     error  // one of the sentinels above
	Provider string // openai, anthropic, gemini
	Endpoint string // host[:port]
	Model    string
	Status   int    // HTTP status, 0 if none
	Fix      string // what to set, e.g. "OPENAI_API_KEY (or AGENTOS_API_KEY)"
	Detail   string // the server's message, redacted of nothing secret
	// Available are the models the endpoint lists, for an unknown model
	// (as many as its first page of the list holds).
	Available []string
	Err       error
}

// maxAvailableShown bounds the models an unknown-model error names.
const maxAvailableShown = 20

// WithAvailable adds the endpoint's models to an unknown-model
// *PreflightError (other errors are returned as they are).
func WithAvailable(err error, models []string) error {
	var pe *PreflightError
	if errors.As(err, &pe) && pe.Kind == ErrUnknownModel && len(models) > 0 {
		pe.Available = append([]string(nil), models...)
	}
	return err
}

func (e *PreflightError) Error() string {
	what := e.Kind.Error()
	switch e.Kind {
	case ErrUnknownModel:
		what = fmt.Sprintf("the endpoint does not serve model %q", e.Model)
	case ErrKeyRejected:
		what = "the endpoint rejected the API key"
	case ErrUnreachable:
		what = "the model endpoint is unreachable"
	case ErrUnavailable:
		what = "the model endpoint is unavailable right now"
	}
	s := fmt.Sprintf("provider %s at %s: %s", e.Provider, e.Endpoint, what)
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	} else if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if n := len(e.Available); n > 0 {
		shown := e.Available
		if n > maxAvailableShown {
			shown = shown[:maxAvailableShown]
		}
		s += "; the endpoint serves " + strings.Join(shown, ", ")
		if n > len(shown) {
			s += fmt.Sprintf(" and %d more", n-len(shown))
		}
	}
	if e.Fix != "" {
		s += "; set " + e.Fix
	}
	return s
}

// Is matches the error's Kind.
func (e *PreflightError) Is(target error) bool { return target == e.Kind }

// Unwrap returns the underlying failure.
func (e *PreflightError) Unwrap() error { return e.Err }

// Fatal reports whether err is a preflight failure that a run cannot get
// past (unreachable, key rejected, unknown model), as opposed to a
// momentary unavailability that the run's retries may ride out.
func Fatal(err error) bool {
	return errors.Is(err, ErrUnreachable) || errors.Is(err, ErrKeyRejected) || errors.Is(err, ErrUnknownModel)
}

// PreflightTTL is how long a successful check is trusted.
const PreflightTTL = 2 * time.Minute

// cacheKeyer is implemented by checkers whose identity (provider,
// endpoint, model, key digest) outlives one instance, so that adapters
// built per run share cached successes.
type cacheKeyer interface{ CacheKey() string }

var preflightCache = struct {
	sync.Mutex
	ok map[string]time.Time
}{ok: map[string]time.Time{}}

// Preflight checks p before a run: the endpoint answers, accepts the key,
// and serves the model. Wrappers (Checked, Priced) are looked through; a
// provider that cannot be checked (scripted) passes. A success is
// remembered for PreflightTTL per endpoint, model and key, so a busy bot
// checks once in a while, not before every run; failures are not
// remembered. The error is a *PreflightError.
func Preflight(ctx context.Context, p Provider) error {
	c := checkerOf(p)
	if c == nil {
		return nil
	}
	key := ""
	if k, ok := c.(cacheKeyer); ok {
		key = k.CacheKey()
	}
	now := time.Now()
	if key != "" {
		preflightCache.Lock()
		until, ok := preflightCache.ok[key]
		preflightCache.Unlock()
		if ok && now.Before(until) {
			return nil
		}
	}
	if err := c.Check(ctx); err != nil {
		return err
	}
	if key != "" {
		preflightCache.Lock()
		preflightCache.ok[key] = now.Add(PreflightTTL)
		for k, until := range preflightCache.ok {
			if now.After(until) {
				delete(preflightCache.ok, k)
			}
		}
		preflightCache.Unlock()
	}
	return nil
}

func checkerOf(p Provider) Checker {
	for p != nil {
		if c, ok := p.(Checker); ok {
			return c
		}
		u, ok := p.(interface{ Unwrap() Provider })
		if !ok {
			return nil
		}
		p = u.Unwrap()
	}
	return nil
}

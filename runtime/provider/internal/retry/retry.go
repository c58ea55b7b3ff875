// Package retry owns what the real provider adapters share: the retry loop
// (429, 408, 5xx and connection errors; Retry-After honoured, otherwise
// capped exponential backoff; sleeping through an injectable function), the
// classification of one failed attempt, and its conversion into the
// *provider.Error the runtime branches on.
//
// The SDKs' own retries are switched off by the adapters: an SDK that
// retries hides the Retry-After of the answers it swallowed, and every SDK
// reports failures differently. Instead each adapter sends its requests
// through Client, whose transport records the status and headers of every
// attempt, so classification does not depend on how an SDK wraps errors.
package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentos/agentos/runtime/provider"
)

// Defaults for a zero Policy field.
const (
	DefaultBase    = 500 * time.Millisecond
	DefaultCap     = 8 * time.Second
	DefaultMaxWait = 2 * time.Minute
)

// Policy says how often and how long to retry one completion.
type Policy struct {
	Provider string        // name in errors
	Retries  int           // retries after the first attempt; negative means none
	Timeout  time.Duration // per attempt, 0 for none
	Base     time.Duration // first backoff wait (DefaultBase)
	Cap      time.Duration // longest backoff wait (DefaultCap)
	// MaxWait is the longest server-directed wait (Retry-After) honoured;
	// a server asking for more ends the call with a retryable error rather
	// than block a run for longer (DefaultMaxWait).
	MaxWait time.Duration
	// Sleep waits d or until ctx ends; nil sleeps on a timer. Tests inject
	// a recorder here instead of sleeping.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock for HTTP-date Retry-After values; nil is time.Now.
	Now func() time.Time
	// Hint extracts a server-directed delay from a provider-specific error
	// body (Gemini's google.rpc.RetryInfo); nil for none.
	Hint func(err error) (time.Duration, bool)
}

// Options are an HTTP adapter's settings beyond its profile; each adapter
// package names them Options.
type Options struct {
	// Stream asks for a server-sent-event stream and assembles the answer
	// from its events; the default is one JSON response.
	Stream bool
	// HTTPClient is the base HTTP client (nil: a default one).
	HTTPClient *http.Client
	// Sleep replaces the retry wait (tests record the waits instead).
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock for HTTP-date Retry-After values.
	Now func() time.Time
}

// Policy is the retry policy of the adapter named name for profile p.
func (o Options) Policy(name string, p provider.Profile) Policy {
	return Policy{Provider: name, Retries: p.Retries, Timeout: p.Timeout.D(), Sleep: o.Sleep, Now: o.Now}
}

// Sleep is the default Policy.Sleep.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Backoff returns the wait before retry number n (1-based) when the server
// gave no Retry-After: Base·2^(n-1), capped at Cap.
func (p Policy) Backoff(n int) time.Duration {
	base, limit := p.Base, p.Cap
	if base <= 0 {
		base = DefaultBase
	}
	if limit <= 0 {
		limit = DefaultCap
	}
	if n < 1 {
		n = 1
	}
	f := float64(base) * math.Pow(2, float64(n-1))
	if f > float64(limit) {
		return limit
	}
	return time.Duration(f)
}

// Do runs call until it succeeds, fails in a way retrying cannot fix, or
// Retries retries have been spent. Every failure is a *provider.Error.
// call must finish reading the answer (including a whole stream) before it
// returns: the attempt's context ends when it does.
func Do[T any](ctx context.Context, p Policy, call func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	sleep := p.Sleep
	if sleep == nil {
		sleep = Sleep
	}
	maxWait := p.MaxWait
	if maxWait <= 0 {
		maxWait = DefaultMaxWait
	}
	retries := max(p.Retries, 0)
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return zero, &provider.Error{Code: provider.CodeProviderError, Provider: p.Provider, Attempts: attempt - 1, Message: "cancelled", Err: err}
		}
		obs := &observed{}
		actx := context.WithValue(ctx, observedKey{}, obs)
		cancel := context.CancelFunc(func() {})
		if p.Timeout > 0 {
			actx, cancel = context.WithTimeout(actx, p.Timeout)
		}
		v, err := call(actx)
		cancel()
		if err == nil {
			return v, nil
		}
		f := p.classify(ctx, err, obs)
		pe := &provider.Error{Code: provider.CodeProviderError, Provider: p.Provider, Status: f.status, Retryable: f.retryable, Attempts: attempt, Message: f.message, Err: err}
		if !f.retryable || attempt > retries {
			return zero, pe
		}
		wait := p.Backoff(attempt)
		if f.hasAfter {
			if f.after > maxWait {
				pe.Message = fmt.Sprintf("%s; the server asked to retry after %s, longer than the %s this adapter waits", f.message, f.after, maxWait)
				return zero, pe
			}
			wait = f.after
		}
		if err := sleep(ctx, wait); err != nil {
			pe.Message = f.message + "; cancelled while waiting to retry"
			pe.Retryable = false
			pe.Err = errors.Join(err, pe.Err)
			return zero, pe
		}
	}
}

// failure is one classified attempt.
type failure struct {
	status    int
	retryable bool
	message   string
	after     time.Duration
	hasAfter  bool
}

func (p Policy) classify(ctx context.Context, err error, obs *observed) failure {
	f := failure{status: obs.status}
	var m *malformedError
	var t *transientError
	switch {
	case ctx.Err() != nil:
		f.message = "cancelled"
	case obs.status >= 400:
		// The status decides, however the SDK reported it.
		f.retryable = RetryableStatus(obs.status)
		f.message = statusMessage(obs.status)
	case errors.As(err, &m):
		f.message = "malformed response: " + m.what
	case errors.As(err, &t):
		f.retryable, f.message = true, "error in the response stream"
	case errors.Is(err, io.ErrUnexpectedEOF):
		// Indistinguishable from a connection cut mid-body, which is
		// worth another attempt.
		f.retryable, f.message = true, "response cut short"
	case isTransport(err):
		// No answer, or the attempt's own timeout.
		f.retryable, f.message = true, "connection failed"
	case obs.status != 0:
		// A success status whose body the SDK could not decode.
		f.message = "malformed response"
	default:
		f.message = "request failed"
	}
	if f.retryable {
		now := time.Now
		if p.Now != nil {
			now = p.Now
		}
		if obs.header != nil {
			f.after, f.hasAfter = ParseRetryAfter(obs.header, now())
		}
		if !f.hasAfter && p.Hint != nil {
			f.after, f.hasAfter = p.Hint(err)
		}
	}
	return f
}

func statusMessage(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate limited"
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return "not authorized (check the API key)"
	case status == http.StatusRequestTimeout:
		return "request timed out"
	case status >= 500:
		return "server error"
	default:
		return "request rejected"
	}
}

// RetryableStatus reports whether an HTTP status is worth another attempt:
// 408, 429 and every 5xx (including Anthropic's 529 "overloaded").
func RetryableStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

func isTransport(err error) bool {
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded)
}

// ParseRetryAfter reads a server-directed delay: retry-after-ms (OpenAI and
// Anthropic send it), else Retry-After as delay-seconds or an HTTP date
// (RFC 9110 §10.2.3). A date in the past means "now".
func ParseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && !math.IsInf(ms, 0) {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 || math.IsInf(s, 0) || math.IsNaN(s) {
			return 0, false
		}
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// malformedError marks an answer that arrived but cannot be understood.
type malformedError struct {
	what string
	err  error
}

func (e *malformedError) Error() string {
	if e.err != nil {
		return e.what + ": " + e.err.Error()
	}
	return e.what
}

func (e *malformedError) Unwrap() error { return e.err }

// Malformed marks an answer whose body is not the provider's documented
// shape; retrying does not help. err may be nil.
func Malformed(what string, err error) error { return &malformedError{what: what, err: err} }

// transientError marks a failure reported inside a successful response,
// such as an error event in a stream ("overloaded_error"): retryable.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// Transient marks err as worth another attempt though the HTTP status was a
// success. An error status still decides on its own.
func Transient(err error) error { return &transientError{err: err} }

// observed is what the transport saw of one attempt's last response.
type observed struct {
	status int
	header http.Header
}

type observedKey struct{}

type transport struct{ next http.RoundTripper }

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.next.RoundTrip(req)
	if res != nil {
		if obs, ok := req.Context().Value(observedKey{}).(*observed); ok {
			obs.status, obs.header = res.StatusCode, res.Header.Clone()
		}
	}
	return res, err
}

// Client returns a copy of base (nil: a default client) whose transport
// records every response's status and headers for Do's classification.
func Client(base *http.Client) *http.Client {
	c := &http.Client{}
	if base != nil {
		cp := *base
		c = &cp
	}
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = transport{next: next}
	return c
}

package github

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryPolicy bounds how the client waits out rate limits and retries
// transient failures. The zero value means the defaults.
type RetryPolicy struct {
	// MaxWait is the longest single rate-limit wait; a limit that lifts
	// later is returned as ErrRateLimited at once. Default 90s.
	MaxWait time.Duration
	// MaxRateLimitWaits bounds how many rate-limit waits one request may
	// take. Default 3.
	MaxRateLimitWaits int
	// MaxRetries bounds retries of idempotent requests (GET, HEAD, PUT,
	// DELETE) after 502/503/504 or a connection error. Default 3; negative
	// disables them.
	MaxRetries int
	// Backoff is the first retry delay; it doubles per retry. Default 1s.
	Backoff time.Duration
	// SecondaryWait is how long to wait on a secondary rate limit that
	// gives no Retry-After (GitHub says "at least one minute"). Default 60s.
	SecondaryWait time.Duration
	// Sleep waits d or until ctx is done. Default: a timer. Tests record
	// waits here instead of sleeping.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock used to turn X-RateLimit-Reset into a wait.
	Now func() time.Time
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxWait <= 0 {
		p.MaxWait = 90 * time.Second
	}
	if p.MaxRateLimitWaits <= 0 {
		p.MaxRateLimitWaits = 3
	}
	if p.MaxRetries < 0 {
		p.MaxRetries = 0
	} else if p.MaxRetries == 0 {
		p.MaxRetries = 3
	}
	if p.Backoff <= 0 {
		p.Backoff = time.Second
	}
	if p.SecondaryWait <= 0 {
		p.SecondaryWait = time.Minute
	}
	if p.Sleep == nil {
		p.Sleep = sleep
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	return p
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryTransport waits out primary and secondary rate limits and retries
// transient failures of idempotent requests. It sits under the auth
// transports, so installation-token refreshes get the same treatment.
type retryTransport struct {
	next http.RoundTripper
	p    RetryPolicy
}

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions:
		return true
	}
	return false
}

// RoundTrip implements http.RoundTripper.
func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	rewindable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	retries, waits := 0, 0
	for attempt := 0; ; attempt++ {
		r := req
		if attempt > 0 {
			r = req.Clone(ctx)
			if req.GetBody != nil {
				body, err := req.GetBody()
				if err != nil {
					return nil, err
				}
				r.Body = body
			}
		}
		resp, err := t.next.RoundTrip(r)
		if err != nil {
			if ctx.Err() != nil || !idempotent(req.Method) || !rewindable || retries >= t.p.MaxRetries {
				return nil, err
			}
			if serr := t.p.Sleep(ctx, t.backoff(retries)); serr != nil {
				return nil, errors.Join(err, serr)
			}
			retries++
			continue
		}
		if wait, limited := t.rateLimitWait(resp); limited {
			if wait > t.p.MaxWait || waits >= t.p.MaxRateLimitWaits || !rewindable {
				return resp, nil // go-github turns it into a rate-limit error
			}
			discard(resp)
			if serr := t.p.Sleep(ctx, wait); serr != nil {
				return nil, serr
			}
			waits++
			continue
		}
		switch resp.StatusCode {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			if idempotent(req.Method) && rewindable && retries < t.p.MaxRetries {
				discard(resp)
				if serr := t.p.Sleep(ctx, t.backoff(retries)); serr != nil {
					return nil, serr
				}
				retries++
				continue
			}
		}
		return resp, nil
	}
}

func (t *retryTransport) backoff(n int) time.Duration {
	d := t.p.Backoff << n
	if d > t.p.MaxWait {
		d = t.p.MaxWait
	}
	return d
}

// rateLimitWait reports whether resp is a rate-limit answer and how long to
// wait: Retry-After first, then X-RateLimit-Remaining 0 with
// X-RateLimit-Reset, then a secondary limit named only in the body.
func (t *retryTransport) rateLimitWait(resp *http.Response) (time.Duration, bool) {
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
		return 0, false
	}
	h := resp.Header
	if ra := strings.TrimSpace(h.Get("Retry-After")); ra != "" {
		if secs, err := strconv.Atoi(ra); err == nil && secs >= 0 {
			return time.Duration(secs) * time.Second, true
		}
		if at, err := http.ParseTime(ra); err == nil {
			return nonNegative(at.Sub(t.p.Now())), true
		}
	}
	if h.Get("X-RateLimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			// The reset is a whole second; wait one more so the window has
			// really rolled over.
			return nonNegative(time.Unix(reset, 0).Sub(t.p.Now())) + time.Second, true
		}
		return t.p.SecondaryWait, true
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return t.p.SecondaryWait, true
	}
	// A 403 is a secondary limit only if the body says so; anything else is
	// a real "forbidden" and must not be retried.
	if resp.Body != nil {
		peek, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(peek), resp.Body), resp.Body}
		if bytes.Contains(bytes.ToLower(peek), []byte("secondary rate limit")) {
			return t.p.SecondaryWait, true
		}
	}
	return 0, false
}

func nonNegative(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d
}

func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
}

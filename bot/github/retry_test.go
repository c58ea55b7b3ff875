package github

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/internal/fakegithub"
)

// sleeps records the waits the client asks for instead of sleeping.
type sleeps struct {
	mu sync.Mutex
	ds []time.Duration
}

func (s *sleeps) sleep(_ context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ds = append(s.ds, d)
	return nil
}

func (s *sleeps) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.ds...)
}

func TestRateLimitsAndRetries(t *testing.T) {
	get := func(c *Client) error {
		_, err := c.Issue(context.Background(), Repo{Owner: "octo", Name: "app"}, 1)
		return err
	}
	post := func(c *Client) error {
		_, err := c.CreateComment(context.Background(), Repo{Owner: "octo", Name: "app"}, 1, "hi")
		return err
	}
	tests := []struct {
		name      string
		fail      fakegithub.Failure
		n         int
		call      func(*Client) error
		wantWaits []time.Duration
		wantErr   error // nil: success
		wantReqs  int
	}{
		{"secondary 429 with Retry-After", fakegithub.Failure{Status: 429, RetryAfter: "7"}, 1, get, []time.Duration{7 * time.Second}, nil, 2},
		{"secondary 403 with Retry-After", fakegithub.Failure{Status: 403, RetryAfter: "3"}, 2, get, []time.Duration{3 * time.Second, 3 * time.Second}, nil, 3},
		{"POST waits out a rate limit too", fakegithub.Failure{Status: 429, RetryAfter: "1"}, 1, post, []time.Duration{time.Second}, nil, 2},
		{"primary limit until reset", fakegithub.Failure{Status: 403, RateLimited: true, ResetIn: 30 * time.Second}, 1, get, []time.Duration{31 * time.Second}, nil, 2},
		{"429 without headers waits a minute", fakegithub.Failure{Status: 429}, 1, get, []time.Duration{time.Minute}, nil, 2},
		{"403 naming a secondary limit", fakegithub.Failure{Status: 403, Message: "You have exceeded a secondary rate limit."}, 1, get, []time.Duration{time.Minute}, nil, 2},
		{"wait beyond MaxWait", fakegithub.Failure{Status: 403, RetryAfter: "600"}, 1, get, nil, ErrRateLimited, 1},
		{"primary reset beyond MaxWait", fakegithub.Failure{Status: 403, RateLimited: true, ResetIn: time.Hour}, 1, get, nil, ErrRateLimited, 1},
		{"too many waits", fakegithub.Failure{Status: 429, RetryAfter: "1"}, 5, get, []time.Duration{time.Second, time.Second, time.Second}, ErrRateLimited, 4},
		{"plain 403 is not retried", fakegithub.Failure{Status: 403, Message: "Resource not accessible by integration"}, 1, get, nil, ErrForbidden, 1},
		{"503 GET retried with backoff", fakegithub.Failure{Status: 503}, 2, get, []time.Duration{time.Second, 2 * time.Second}, nil, 3},
		{"502 GET gives up after MaxRetries", fakegithub.Failure{Status: 502}, 10, get, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, errAny, 4},
		{"503 POST not retried", fakegithub.Failure{Status: 503}, 1, post, nil, errAny, 1},
		{"500 not retried", fakegithub.Failure{Status: 500}, 1, get, nil, errAny, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, base := seeded(t)
			now := time.Now().Truncate(time.Second)
			f.SetClock(func() time.Time { return now })
			var s sleeps
			c := tokenClient(t, base, botTok, RetryPolicy{Sleep: s.sleep, Now: func() time.Time { return now }})
			f.FailNext(tt.n, tt.fail)
			err := tt.call(c)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("err = %v, want success", err)
			case tt.wantErr == errAny && err == nil, tt.wantErr != nil && tt.wantErr != errAny && !errors.Is(err, tt.wantErr):
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got := s.got(); !reflect.DeepEqual(got, tt.wantWaits) {
				t.Errorf("waits = %v, want %v", got, tt.wantWaits)
			}
			if got := len(f.Requests()); got != tt.wantReqs {
				t.Errorf("requests = %d, want %d", got, tt.wantReqs)
			}
			if tt.wantErr == nil && len(f.Comments("octo/app", 1)) > 1 {
				t.Errorf("a retried POST created %d comments", len(f.Comments("octo/app", 1)))
			}
			f.CheckNoViolations(t)
		})
	}
}

// errAny stands for "some error" in the table.
var errAny = errors.New("any error")

// flaky fails the first n round trips with a connection error.
type flaky struct {
	mu   sync.Mutex
	n    int
	next http.RoundTripper
}

func (f *flaky) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	fail := f.n > 0
	f.n--
	f.mu.Unlock()
	if fail {
		return nil, errors.New("connection reset by peer")
	}
	return f.next.RoundTrip(r)
}

func TestConnectionErrors(t *testing.T) {
	tests := []struct {
		name     string
		failures int
		post     bool
		wantOK   bool
		waits    int
	}{
		{"GET retried", 2, false, true, 2},
		{"GET gives up", 4, false, false, 3},
		{"POST not retried", 1, true, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, base := seeded(t)
			var s sleeps
			c, err := New(Config{BaseURL: base, Token: botTok, Transport: &flaky{n: tt.failures, next: http.DefaultTransport}, Retry: RetryPolicy{Sleep: s.sleep}})
			if err != nil {
				t.Fatal(err)
			}
			if tt.post {
				_, err = c.CreateComment(context.Background(), Repo{Owner: "octo", Name: "app"}, 1, "x")
			} else {
				_, err = c.Issue(context.Background(), Repo{Owner: "octo", Name: "app"}, 1)
			}
			if (err == nil) != tt.wantOK {
				t.Errorf("err = %v, want ok=%v", err, tt.wantOK)
			}
			if err != nil && !strings.Contains(err.Error(), "connection reset") {
				t.Errorf("err = %v, want the connection error", err)
			}
			if got := len(s.got()); got != tt.waits {
				t.Errorf("waits = %d, want %d", got, tt.waits)
			}
			f.CheckNoViolations(t)
		})
	}
}

func TestRetryStopsWhenContextEnds(t *testing.T) {
	f, base := seeded(t)
	ctx, cancel := context.WithCancel(context.Background())
	c := tokenClient(t, base, botTok, RetryPolicy{Sleep: func(ctx context.Context, d time.Duration) error {
		cancel()
		return ctx.Err()
	}})
	f.FailNext(1, fakegithub.Failure{Status: 429, RetryAfter: "5"})
	_, err := c.Issue(ctx, Repo{Owner: "octo", Name: "app"}, 1)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if got := len(f.Requests()); got != 1 {
		t.Errorf("requests = %d, want 1", got)
	}
	f.CheckNoViolations(t)
}

package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/provider"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 22, 19, 30, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{"seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second, true},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond, true},
		{"zero", map[string]string{"Retry-After": "0"}, 0, true},
		{"http date", map[string]string{"Retry-After": "Sun, 22 Nov 2026 19:30:12 GMT"}, 12 * time.Second, true},
		{"date in the past", map[string]string{"Retry-After": "Sun, 22 Nov 2026 19:29:00 GMT"}, 0, true},
		{"milliseconds win", map[string]string{"Retry-After": "7", "Retry-After-Ms": "250"}, 250 * time.Millisecond, true},
		{"bad milliseconds fall back", map[string]string{"Retry-After": "3", "Retry-After-Ms": "soon"}, 3 * time.Second, true},
		{"negative", map[string]string{"Retry-After": "-4"}, 0, false},
		{"garbage", map[string]string{"Retry-After": "in a bit"}, 0, false},
		{"absent", nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			got, ok := ParseRetryAfter(h, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("got %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	var p Policy
	var got []time.Duration
	for n := 1; n <= 7; n++ {
		got = append(got, p.Backoff(n))
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	p = Policy{Base: time.Second, Cap: 3 * time.Second}
	if got := p.Backoff(3); got != 3*time.Second {
		t.Errorf("capped backoff = %v, want 3s", got)
	}
}

// script is a server answering with a list of statuses (the last repeats).
func script(t *testing.T, replies ...func(w http.ResponseWriter)) (*httptest.Server, *int) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		i := n
		n++
		mu.Unlock()
		replies[min(i, len(replies)-1)](w)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func status(code int, header ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		fmt.Fprint(w, `{"ok":true}`)
	}
}

// get is an SDK stand-in: it turns non-2xx answers into an error that
// carries no status, as some SDKs do, so the transport must observe it.
func get(client *http.Client, url string) func(ctx context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return "", err
		}
		res, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			return "", err
		}
		if res.StatusCode >= 300 {
			return "", errors.New("the call failed")
		}
		if string(b) != `{"ok":true}` {
			return "", Malformed("unexpected body", nil)
		}
		return string(b), nil
	}
}

type recorder struct {
	mu sync.Mutex
	d  []time.Duration
}

func (r *recorder) sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.d = append(r.d, d)
	return ctx.Err()
}

func TestDo(t *testing.T) {
	tests := []struct {
		name      string
		replies   []func(w http.ResponseWriter)
		retries   int
		wantErr   bool
		status    int
		attempts  int
		retryable bool
		waits     []time.Duration
		message   string
	}{
		{name: "success first time", replies: []func(http.ResponseWriter){status(200)}, retries: 3, attempts: 1},
		{name: "429 then success", replies: []func(http.ResponseWriter){status(429, "Retry-After", "3"), status(200)}, retries: 3, attempts: 2, waits: []time.Duration{3 * time.Second}},
		{name: "503 twice then success", replies: []func(http.ResponseWriter){status(503), status(503), status(200)}, retries: 3, attempts: 3, waits: []time.Duration{500 * time.Millisecond, time.Second}},
		{name: "500 exhausted", replies: []func(http.ResponseWriter){status(500)}, retries: 2, wantErr: true, status: 500, attempts: 3, retryable: true, waits: []time.Duration{500 * time.Millisecond, time.Second}, message: "server error"},
		{name: "no retries configured", replies: []func(http.ResponseWriter){status(502)}, retries: 0, wantErr: true, status: 502, attempts: 1, retryable: true, message: "server error"},
		{name: "negative retries mean none", replies: []func(http.ResponseWriter){status(502)}, retries: -1, wantErr: true, status: 502, attempts: 1, retryable: true, message: "server error"},
		{name: "404 not retried", replies: []func(http.ResponseWriter){status(404)}, retries: 3, wantErr: true, status: 404, attempts: 1, message: "request rejected"},
		{name: "401 not retried", replies: []func(http.ResponseWriter){status(401)}, retries: 3, wantErr: true, status: 401, attempts: 1, message: "not authorized"},
		{name: "retry-after beyond the cap gives up", replies: []func(http.ResponseWriter){status(429, "Retry-After", "3600")}, retries: 3, wantErr: true, status: 429, attempts: 1, retryable: true, message: "longer than"},
		{name: "malformed body not retried", replies: []func(http.ResponseWriter){func(w http.ResponseWriter) { fmt.Fprint(w, "<html>") }}, retries: 3, wantErr: true, status: 200, attempts: 1, message: "malformed response: unexpected body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, n := script(t, tt.replies...)
			rec := &recorder{}
			p := Policy{Provider: "test", Retries: tt.retries, Sleep: rec.sleep}
			got, err := Do(context.Background(), p, get(Client(nil), srv.URL))
			if !tt.wantErr {
				if err != nil || got != `{"ok":true}` {
					t.Fatalf("got %q, %v", got, err)
				}
			} else {
				var pe *provider.Error
				if !errors.As(err, &pe) {
					t.Fatalf("err = %v, want *provider.Error", err)
				}
				if pe.Code != provider.CodeProviderError || pe.Provider != "test" || pe.Status != tt.status || pe.Attempts != tt.attempts || pe.Retryable != tt.retryable || !strings.Contains(pe.Message, tt.message) {
					t.Errorf("got %+v, want status=%d attempts=%d retryable=%v message~%q", pe, tt.status, tt.attempts, tt.retryable, tt.message)
				}
			}
			if *n != tt.attempts {
				t.Errorf("requests = %d, want %d", *n, tt.attempts)
			}
			if !reflect.DeepEqual(rec.d, tt.waits) {
				t.Errorf("waits = %v, want %v", rec.d, tt.waits)
			}
		})
	}
}

func TestConnectionErrorsAreRetried(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	rec := &recorder{}
	_, err := Do(context.Background(), Policy{Provider: "test", Retries: 2, Sleep: rec.sleep}, get(Client(nil), url))
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != 0 || pe.Attempts != 3 || !pe.Retryable || pe.Message != "connection failed" {
		t.Fatalf("err = %v, want a retryable connection failure after 3 attempts", err)
	}
}

func TestAttemptTimeoutIsRetried(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	calls := 0
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			// Hang until the client gives up on this attempt.
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(func() { once.Do(func() { close(release) }); srv.Close() })
	rec := &recorder{}
	got, err := Do(context.Background(), Policy{Provider: "test", Retries: 1, Timeout: 50 * time.Millisecond, Sleep: rec.sleep}, get(Client(nil), srv.URL))
	if err != nil || got != `{"ok":true}` {
		t.Fatalf("got %q, %v; want success on the second attempt", got, err)
	}
	if len(rec.d) != 1 {
		t.Errorf("waits = %v, want one", rec.d)
	}
}

func TestCancelledContext(t *testing.T) {
	srv, n := script(t, status(500))
	ctx, cancel := context.WithCancel(context.Background())
	sleep := func(ctx context.Context, d time.Duration) error {
		cancel()
		return ctx.Err()
	}
	_, err := Do(ctx, Policy{Provider: "test", Retries: 5, Sleep: sleep}, get(Client(nil), srv.URL))
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Retryable || pe.Attempts != 1 || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a non-retryable error wrapping context.Canceled", err)
	}
	if *n != 1 {
		t.Errorf("requests = %d, want 1", *n)
	}
	// Already cancelled: no request at all.
	_, err = Do(ctx, Policy{Provider: "test"}, get(Client(nil), srv.URL))
	if !errors.As(err, &pe) || pe.Attempts != 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want a cancelled error with 0 attempts", err)
	}
}

func TestTransientOnlyOnSuccessStatus(t *testing.T) {
	for _, tt := range []struct {
		code      int
		retryable bool
	}{{200, true}, {400, false}} {
		srv, _ := script(t, status(tt.code))
		call := func(ctx context.Context) (string, error) {
			if _, err := get(Client(nil), srv.URL)(ctx); err != nil && tt.code >= 300 {
				return "", Transient(err)
			}
			return "", Transient(errors.New("stream error event"))
		}
		_, err := Do(context.Background(), Policy{Provider: "test", Sleep: (&recorder{}).sleep}, call)
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Retryable != tt.retryable {
			t.Errorf("status %d: err = %v, want retryable=%v", tt.code, err, tt.retryable)
		}
	}
}

func TestHint(t *testing.T) {
	srv, _ := script(t, status(429), status(200))
	rec := &recorder{}
	hint := func(error) (time.Duration, bool) { return 34 * time.Second, true }
	if _, err := Do(context.Background(), Policy{Provider: "test", Retries: 1, Sleep: rec.sleep, Hint: hint}, get(Client(nil), srv.URL)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rec.d, []time.Duration{34 * time.Second}) {
		t.Errorf("waits = %v, want [34s]", rec.d)
	}
}

func TestSleepHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on a cancelled context = %v", err)
	}
	if err := Sleep(context.Background(), 0); err != nil {
		t.Errorf("Sleep(0) = %v", err)
	}
}

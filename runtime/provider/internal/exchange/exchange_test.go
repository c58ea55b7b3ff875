package exchange

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/provider"
)

func TestMatch(t *testing.T) {
	want := decode(t, `{"model":"m","stream":null,"messages":[{"role":"user"}],"n":1}`)
	tests := []struct {
		got      string
		problems []string
	}{
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"n":1,"extra":true}`, nil},
		{`{"model":"m","stream":null,"messages":[{"role":"user"}],"n":1}`, nil},
		{`{"model":"other","messages":[{"role":"user"}],"n":1}`, []string{`body.model: got "other", want "m"`}},
		{`{"model":"m","stream":true,"messages":[{"role":"user"}],"n":1}`, []string{"body.stream: got true, want it absent"}},
		{`{"model":"m","messages":[{"role":"user"},{"role":"user"}],"n":1}`, []string{"body.messages: got"}},
		{`{"model":"m","messages":[{"role":"assistant"}]}`, []string{`body.messages[0].role: got "assistant"`, "body.n: missing"}},
		{`[]`, []string{"body: got [], want an object"}},
	}
	for _, tt := range tests {
		got := Match(want, decode(t, tt.got), "body")
		if len(got) != len(tt.problems) {
			t.Errorf("%s: problems %q, want %d like %q", tt.got, got, len(tt.problems), tt.problems)
			continue
		}
		for i := range got {
			if !strings.HasPrefix(got[i], tt.problems[i]) {
				t.Errorf("%s: problem %q, want prefix %q", tt.got, got[i], tt.problems[i])
			}
		}
	}
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// recorder is a testing.TB that records what a check reports; Fatal
// stops the check by panicking with the recorder, which run recovers.
type recorder struct {
	testing.TB
	errs  []string
	fatal string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatal(args ...any) { r.fatal = fmt.Sprint(args...); panic(r) }
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	panic(r)
}

func (r *recorder) run(check func(t testing.TB)) (self *recorder) {
	self = r
	defer func() {
		if p := recover(); p != nil && p != any(r) {
			panic(p)
		}
	}()
	check(r)
	return r
}

// wantReport fails t unless r got exactly one report starting with report,
// or none if report is empty.
func (r *recorder) wantReport(t *testing.T, report string) {
	t.Helper()
	if report == "" {
		if len(r.errs) > 0 {
			t.Errorf("reported %q, want nothing", r.errs)
		}
		return
	}
	if len(r.errs) != 1 || !strings.HasPrefix(r.errs[0], report) {
		t.Errorf("reported %q, want one report starting %q", r.errs, report)
	}
}

func TestCheckError(t *testing.T) {
	failed := fmt.Errorf("complete: %w", &provider.Error{Code: provider.CodeProviderError, Provider: "p", Status: 500, Attempts: 3, Retryable: true, Message: "server error (HTTP 500)"})
	w := &Waits{}
	for _, d := range []time.Duration{time.Second, 2 * time.Second} {
		_ = w.Sleep(context.Background(), d)
	}
	ok := WantError{Provider: "p", Status: 500, Attempts: 3, Retryable: true, Message: "server error", Waits: []time.Duration{time.Second, 2 * time.Second}}
	if r := new(recorder).run(func(t testing.TB) { CheckError(t, failed, w, ok) }); len(r.errs) > 0 || r.fatal != "" {
		t.Fatalf("a matching error reported %q, fatal %q", r.errs, r.fatal)
	}
	tests := []struct {
		name   string
		err    error
		change func(*WantError)
		report string // the start of the one report
		fatal  string
	}{
		{"code", &provider.Error{Code: "SCHEMA_VIOLATION", Provider: "p", Status: 500, Attempts: 3, Retryable: true, Message: "server error"}, nil, "code = SCHEMA_VIOLATION, want PROVIDER_ERROR\nerr = ", ""},
		{"provider", failed, func(w *WantError) { w.Provider = "q" }, "provider = p, want q\nerr = ", ""},
		{"status", failed, func(w *WantError) { w.Status = 502 }, "status = 500, want 502\nerr = ", ""},
		{"attempts", failed, func(w *WantError) { w.Attempts = 4 }, "attempts = 3, want 4\nerr = ", ""},
		{"retryable", failed, func(w *WantError) { w.Retryable = false }, "retryable = true, want false\nerr = ", ""},
		{"message", failed, func(w *WantError) { w.Message = "rejected" }, `message = "server error (HTTP 500)", want it to mention "rejected"`, ""},
		{"waits", failed, func(w *WantError) { w.Waits = []time.Duration{2 * time.Second, time.Second} }, "waits = [1s 2s], want [2s 1s]", ""},
		{"no waits", failed, func(w *WantError) { w.Waits = nil }, "waits = [1s 2s], want []", ""},
		{"not a provider error", errors.New("boom"), nil, "", "err = boom (*errors.errorString), want *provider.Error"},
		{"no message wanted", failed, func(w *WantError) { w.Message = "" }, "", "WantError.Message is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := ok
			if tt.change != nil {
				tt.change(&want)
			}
			r := new(recorder).run(func(t testing.TB) { CheckError(t, tt.err, w, want) })
			if !strings.HasPrefix(r.fatal, tt.fatal) || (tt.fatal == "") != (r.fatal == "") {
				t.Errorf("fatal %q, want %q", r.fatal, tt.fatal)
			}
			r.wantReport(t, tt.report)
		})
	}
}

func TestCheckRequestError(t *testing.T) {
	refused := &provider.Error{Code: "SCHEMA_VIOLATION", Provider: "p", Message: `unknown role "robot"`}
	tests := []struct {
		name   string
		err    error
		report string
	}{
		{"refused", refused, ""},
		{"retryable", &provider.Error{Retryable: true, Message: refused.Message}, "retryable = true, want false\nerr = "},
		{"attempted", &provider.Error{Attempts: 1, Message: refused.Message}, "attempts = 1, want 0\nerr = "},
		{"other message", &provider.Error{Message: "no model"}, `message = "no model", want it to mention "unknown role"`},
		{"not a provider error", errors.New("boom"), `err = boom (*errors.errorString), want a *provider.Error mentioning "unknown role"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := new(recorder).run(func(t testing.TB) { CheckRequestError(t, tt.err, "unknown role") })
			if r.fatal != "" {
				t.Fatalf("fatal %q", r.fatal)
			}
			r.wantReport(t, tt.report)
		})
	}
}

func TestCheckRequests(t *testing.T) {
	s := &Server{bodies: make([]map[string]any, 2)}
	if r := new(recorder).run(func(t testing.TB) { s.CheckRequests(t, 2) }); len(r.errs) > 0 {
		t.Errorf("2 requests, want 2: reported %q", r.errs)
	}
	r := new(recorder).run(func(t testing.TB) { s.CheckRequests(t, 3) })
	if len(r.errs) != 1 || r.errs[0] != "requests = 2, want 3" {
		t.Errorf("reported %q, want one report %q", r.errs, "requests = 2, want 3")
	}
}

package exchange

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/provider"
)

// WantError is the failure an adapter's Complete must end in: a
// *provider.Error with Code provider.CodeProviderError and these fields,
// after these retry waits.
type WantError struct {
	Provider  string
	Status    int
	Attempts  int
	Retryable bool
	Message   string          // must occur in the error's Message
	Waits     []time.Duration // the waits recorded, none for none
}

// CheckError checks that err is a *provider.Error as want describes (it
// stops the test if err is no *provider.Error at all) and that w recorded
// want.Waits. Every field that differs is named. It returns the error.
func CheckError(t testing.TB, err error, w *Waits, want WantError) *provider.Error {
	t.Helper()
	if want.Message == "" {
		t.Fatal("WantError.Message is empty: it would match any message")
	}
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v (%T), want *provider.Error", err, err)
	}
	var diffs []string
	field := func(name string, got, want any) {
		if got != want {
			diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", name, got, want))
		}
	}
	field("code", pe.Code, provider.CodeProviderError)
	field("provider", pe.Provider, want.Provider)
	field("status", pe.Status, want.Status)
	field("attempts", pe.Attempts, want.Attempts)
	field("retryable", pe.Retryable, want.Retryable)
	if !strings.Contains(pe.Message, want.Message) {
		diffs = append(diffs, fmt.Sprintf("message = %q, want it to mention %q", pe.Message, want.Message))
	}
	if len(diffs) > 0 {
		t.Errorf("%s\nerr = %v", strings.Join(diffs, "\n"), err)
	}
	w.Check(t, want.Waits...)
	return pe
}

// CheckRequestError checks that err is the *provider.Error of a request the
// adapter refused before sending it: not retryable, no attempt made, and
// its Message mentions message.
func CheckRequestError(t testing.TB, err error, message string) {
	t.Helper()
	if message == "" {
		t.Fatal("CheckRequestError: empty message would match any message")
	}
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Errorf("err = %v (%T), want a *provider.Error mentioning %q", err, err, message)
		return
	}
	var diffs []string
	if pe.Retryable {
		diffs = append(diffs, "retryable = true, want false")
	}
	if pe.Attempts != 0 {
		diffs = append(diffs, fmt.Sprintf("attempts = %d, want 0", pe.Attempts))
	}
	if !strings.Contains(pe.Message, message) {
		diffs = append(diffs, fmt.Sprintf("message = %q, want it to mention %q", pe.Message, message))
	}
	if len(diffs) > 0 {
		t.Errorf("%s\nerr = %v, want a non-retryable request error", strings.Join(diffs, "\n"), err)
	}
}

// Check reports unless the waits recorded are exactly want, in order.
func (w *Waits) Check(t testing.TB, want ...time.Duration) {
	t.Helper()
	if got := w.Got(); !slices.Equal(got, want) {
		t.Errorf("waits = %v, want %v", got, want)
	}
}

// CheckRequests reports unless exactly want requests arrived.
func (s *Server) CheckRequests(t testing.TB, want int) {
	t.Helper()
	if n := s.Requests(); n != want {
		t.Errorf("requests = %d, want %d", n, want)
	}
}

package github

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	gh "github.com/google/go-github/v62/github"
)

// Error kinds callers branch on with errors.Is.
var (
	ErrNotFound     = errors.New("github: not found")
	ErrUnauthorized = errors.New("github: bad or missing credentials")
	ErrForbidden    = errors.New("github: forbidden")
	ErrValidation   = errors.New("github: validation failed")
	// ErrRateLimited means a rate limit outlasted the client's maximum wait
	// (or its number of waits); the request was not retried further.
	ErrRateLimited = errors.New("github: rate limited")
)

// APIError is a failed GitHub call. It unwraps to one of the Err* kinds
// (when it is one) and to go-github's error, so both errors.Is(err,
// ErrValidation) and errors.As(err, &*gh.ErrorResponse) work.
type APIError struct {
	Op      string   // the client method, e.g. "CreateComment"
	Status  int      // HTTP status, 0 if no response
	Message string   // GitHub's message
	Details []string // GitHub's per-field messages (422)
	// RetryAt is when a rate limit lifts, if GitHub said so.
	RetryAt time.Time
	Kind    error // one of the Err* values, or nil
	Err     error // the underlying go-github or transport error
}

func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	b.WriteString(": ")
	if e.Kind != nil {
		b.WriteString(e.Kind.Error())
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the kind and the underlying error.
func (e *APIError) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

// wrap classifies a go-github error as "op: %w".
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	e := &APIError{Op: op, Err: err}
	var (
		rl    *gh.RateLimitError
		abuse *gh.AbuseRateLimitError
		er    *gh.ErrorResponse
	)
	switch {
	case errors.As(err, &rl):
		e.Kind, e.Message, e.RetryAt = ErrRateLimited, rl.Message, rl.Rate.Reset.Time
		if rl.Response != nil {
			e.Status = rl.Response.StatusCode
		}
	case errors.As(err, &abuse):
		e.Kind, e.Message = ErrRateLimited, abuse.Message
		if abuse.Response != nil {
			e.Status = abuse.Response.StatusCode
		}
		if abuse.RetryAfter != nil {
			e.RetryAt = time.Now().Add(*abuse.RetryAfter)
		}
	case errors.As(err, &er):
		e.Message = er.Message
		for _, d := range er.Errors {
			if d.Message != "" {
				e.Details = append(e.Details, d.Message)
			} else if d.Code != "" {
				e.Details = append(e.Details, fmt.Sprintf("%s %s %s", d.Resource, d.Field, d.Code))
			}
		}
		if er.Response != nil {
			e.Status = er.Response.StatusCode
		}
		switch e.Status {
		case http.StatusNotFound:
			e.Kind = ErrNotFound
		case http.StatusUnauthorized:
			e.Kind = ErrUnauthorized
		case http.StatusForbidden:
			e.Kind = ErrForbidden
		case http.StatusUnprocessableEntity:
			e.Kind = ErrValidation
		case http.StatusTooManyRequests:
			e.Kind = ErrRateLimited
		}
	}
	return e
}

// invalid is a validation error raised before any request is sent.
func invalid(op, msg string) error {
	return &APIError{Op: op, Status: 0, Message: msg, Kind: ErrValidation, Err: errors.New(msg)}
}

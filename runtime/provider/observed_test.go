package provider

import (
	"context"
	"errors"
	"testing"
	"time"
)

type stubProvider struct {
	resp CompletionResponse
	err  error
}

func (s stubProvider) Name() string { return "stub" }
func (s stubProvider) Complete(context.Context, CompletionRequest) (CompletionResponse, error) {
	return s.resp, s.err
}

type callLog struct {
	calls []string
	usage Usage
	errs  []error
}

func (c *callLog) ModelCall(provider, model string, took time.Duration, u Usage, err error) {
	c.calls = append(c.calls, provider+"/"+model)
	c.usage = c.usage.Add(u)
	c.errs = append(c.errs, err)
	if took < 0 {
		c.calls = append(c.calls, "negative duration")
	}
}

func TestObservedReportsEachCall(t *testing.T) {
	var log callLog
	ok := Observed{P: stubProvider{resp: CompletionResponse{Model: "m-2", Usage: Usage{InputTokens: 10, OutputTokens: 3}}}, O: &log}
	fail := Observed{P: stubProvider{err: &Error{Code: CodeProviderError, Provider: "stub", Status: 429}}, O: &log}
	if _, err := ok.Complete(context.Background(), CompletionRequest{Model: "m"}); err != nil {
		t.Fatal(err)
	}
	if _, err := fail.Complete(context.Background(), CompletionRequest{Model: "m"}); err == nil {
		t.Fatal("the provider's error is lost")
	}
	if got, want := log.calls, []string{"stub/m-2", "stub/m"}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("calls %v, want %v", got, want)
	}
	if log.usage.InputTokens != 10 || log.usage.OutputTokens != 3 {
		t.Errorf("usage %+v", log.usage)
	}
	var pe *Error
	if log.errs[0] != nil || !errors.As(log.errs[1], &pe) || pe.Status != 429 {
		t.Errorf("errors %v", log.errs)
	}
	if u, ok := any(fail).(interface{ Unwrap() Provider }); !ok || u.Unwrap().Name() != "stub" {
		t.Error("Observed does not unwrap")
	}
}

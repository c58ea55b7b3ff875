package scripted

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/schemas"
)

const demo = `
model: m
roles:
  lead:
    - text: '{"intent":"x","constraints":[],"schema_version":"v1"}'
      usage: {input_tokens: 10, output_tokens: 5}
  worker:
    - tool_calls: [{id: t1, name: repo.read, args: {path: auth.go, range: [1, 20]}}]
    - error: {message: overloaded, status: 529, retryable: true}
`

func TestPlaysPerRoleAndTurn(t *testing.T) {
	s, err := Parse(strings.NewReader(demo))
	if err != nil {
		t.Fatal(err)
	}
	p := provider.Checked{P: New(s), Reg: schemas.MustDefault()}
	ctx := context.Background()
	msgs := []provider.Message{{Role: "user", Content: "fix"}}
	resp, err := p.Complete(ctx, provider.CompletionRequest{Role: "lead", Messages: msgs, Model: "m"})
	if err != nil || resp.Usage.InputTokens != 10 || resp.FinishReason != "stop" {
		t.Fatalf("%+v %v", resp, err)
	}
	resp, err = p.Complete(ctx, provider.CompletionRequest{Role: "worker", Messages: msgs, Model: "m"})
	if err != nil || resp.FinishReason != "tool_use" || string(resp.ToolCalls[0].Args) != `{"path":"auth.go","range":[1,20]}` {
		t.Fatalf("%+v %v", resp, err)
	}
	if resp.Usage.InputTokens == 0 {
		t.Error("usage not estimated for an entry without usage")
	}
	_, err = p.Complete(ctx, provider.CompletionRequest{Role: "worker", Turn: 1, Messages: msgs, Model: "m"})
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != 529 || !pe.Retryable {
		t.Fatalf("scripted error: %v", err)
	}
	for _, req := range []provider.CompletionRequest{{Role: "worker", Turn: 2}, {Role: "planner"}} {
		req.Messages, req.Model = msgs, "m"
		if _, err := p.Complete(ctx, req); !errors.As(err, &pe) || pe.Code != provider.CodeProviderError {
			t.Errorf("%+v: %v", req, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for doc, want := range map[string]string{
		`roles: {}`:           "no roles",
		`roles: {lead: [{}]}`: "needs text, tool_calls or error",
		`roles: {lead: [{tool_calls: [{name: x}]}]}`: "id and name are required",
		`roles: {lead: [{txt: hi}]}`:                 "field txt not found",
		`roles: [`:                                   "parse script",
	} {
		if _, err := Parse(strings.NewReader(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", doc, err, want)
		}
	}
}

func TestRecorderRoundTrip(t *testing.T) {
	s, _ := Parse(strings.NewReader(demo))
	rec := NewRecorder(New(s))
	ctx := context.Background()
	msgs := []provider.Message{{Role: "user", Content: "fix"}}
	if _, err := rec.Complete(ctx, provider.CompletionRequest{Role: "lead", Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Complete(ctx, provider.CompletionRequest{Role: "worker", Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := rec.WriteYAML(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := Parse(&buf)
	if err != nil {
		t.Fatalf("recorded script does not parse: %v\n%s", err, buf.String())
	}
	resp, err := New(back).Complete(ctx, provider.CompletionRequest{Role: "worker", Messages: msgs})
	if err != nil || resp.ToolCalls[0].Name != "repo.read" {
		t.Fatalf("replayed recording: %+v %v", resp, err)
	}
}

package provider_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentos/agentos/kernel/guard"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/schemas"
)

type fixed struct{ resp provider.CompletionResponse }

func (f fixed) Name() string { return "fixed" }
func (f fixed) Complete(context.Context, provider.CompletionRequest) (provider.CompletionResponse, error) {
	return f.resp, nil
}

// A model's malformed arguments must pass the response schema (so they can
// be logged) and still reach the kernel's guard as the model's own text.
func TestCheckedKeepsMalformedArgsForTheGuard(t *testing.T) {
	tests := []struct {
		name, args string
		wantClass  string // "" = parses (possibly repaired)
		wantRepair bool
	}{
		{"object", `{"path":"auth.go"}`, "", false},
		{"empty", ``, "", false},
		{"single quotes and trailing comma", `{'path': 'auth.go',}`, "", true},
		{"array", `["auth.go"]`, guard.UnparsableArguments, false},
		{"garbage", `path=auth.go`, guard.UnparsableArguments, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := provider.Checked{P: fixed{provider.CompletionResponse{ToolCalls: []provider.ToolCall{{ID: "c1", Name: "repo.read", Args: json.RawMessage(tt.args)}}, FinishReason: provider.FinishToolUse, Model: "m"}}, Reg: schemas.MustDefault()}
			resp, err := p.Complete(context.Background(), provider.CompletionRequest{Model: "m", Messages: []provider.Message{{Role: "user", Content: "x"}}})
			if err != nil {
				t.Fatalf("Checked refused the response: %v", err)
			}
			if !json.Valid(resp.ToolCalls[0].Args) {
				t.Fatalf("args %q are not valid JSON", resp.ToolCalls[0].Args)
			}
			_, repairs, diag := guard.Parse(resp.ToolCalls[0].Args)
			switch {
			case tt.wantClass == "" && diag != nil:
				t.Errorf("guard: %v", diag)
			case tt.wantClass != "" && (diag == nil || diag.Class != tt.wantClass):
				t.Errorf("guard diag = %v, want %s", diag, tt.wantClass)
			case (len(repairs) > 0) != tt.wantRepair:
				t.Errorf("repairs = %v", repairs)
			}
		})
	}
}

package provider

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestUnknownModelNamesAvailable: an unknown model's error names the
// models the endpoint serves, at most maxAvailableShown of them; other
// preflight errors are left as they are.
func TestUnknownModelNamesAvailable(t *testing.T) {
	var many []string
	for i := 0; i < maxAvailableShown+5; i++ {
		many = append(many, fmt.Sprintf("m%d", i))
	}
	err := WithAvailable(&PreflightError{Kind: ErrUnknownModel, Provider: "openai", Endpoint: "localhost:11434", Model: "qwen3", Fix: "AGENTOS_MODEL"}, many)
	msg := err.Error()
	if !strings.Contains(msg, "the endpoint serves m0, m1, ") || !strings.Contains(msg, "m19 and 5 more; set AGENTOS_MODEL") || strings.Contains(msg, "m20") {
		t.Errorf("message %q", msg)
	}
	rejected := WithAvailable(&PreflightError{Kind: ErrKeyRejected, Provider: "openai"}, many)
	var pe *PreflightError
	if !errors.As(rejected, &pe) || pe.Available != nil {
		t.Errorf("a rejected key got the model list: %v", rejected)
	}
}

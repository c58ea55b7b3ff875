package hooks

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
)

var cardRe = regexp.MustCompile(`\b\d{16}\b`)

// RedactCardNumbers is the seed's redact_pii UserPromptSubmit hook: a
// 16-digit sequence in a prompt becomes [REDACTED-CC].
func RedactCardNumbers() Func {
	return Func{Name: "redact_pii", Prio: 80, Fn: func(ctx context.Context, in Input) (Decision, error) {
		red := cardRe.ReplaceAllString(in.Prompt, "[REDACTED-CC]")
		if red == in.Prompt {
			return Decision{Decision: Allow}, nil
		}
		out, err := json.Marshal(map[string]string{"prompt": red})
		if err != nil {
			return Decision{}, err
		}
		return Decision{Decision: Transform, Output: out, Reason: "redacted suspected card number"}, nil
	}}
}

// DefaultDangerousTools is the seed's deny list.
var DefaultDangerousTools = []string{"rm", "delete", "drop_table"}

// DenyDangerousTools is the seed's deny_dangerous_tools PreToolUse hook.
func DenyDangerousTools(names []string) Func {
	deny := map[string]bool{}
	for _, n := range names {
		deny[n] = true
	}
	return Func{Name: "deny_dangerous_tools", Prio: 100, Fn: func(ctx context.Context, in Input) (Decision, error) {
		if deny[in.ToolName] {
			return Decision{Decision: Deny, Reason: fmt.Sprintf("tool %s on denylist", in.ToolName)}, nil
		}
		return Decision{Decision: Allow}, nil
	}}
}

// StopWhenReviewed is the built-in Stop hook: the loop may stop once the
// reviewer passed the work (the engine fires Stop only then). It records
// the stop decision; a repository's Stop hooks can still block it.
func StopWhenReviewed() Func {
	return Func{Name: "stop_when_reviewed", Prio: 10, Fn: func(ctx context.Context, in Input) (Decision, error) {
		return Decision{Decision: Allow, Reason: "review passed; loop reached its terminal state"}, nil
	}}
}

// Builtins registers the built-in hooks: the seed's card-number redaction
// and dangerous-tools deny list, and the Stop decision.
func (r *Registry) Builtins() {
	// The events exist; Register cannot fail for them.
	_ = r.Register(UserPromptSubmit, RedactCardNumbers())
	_ = r.Register(PreToolUse, DenyDangerousTools(DefaultDangerousTools))
	_ = r.Register(Stop, StopWhenReviewed())
}

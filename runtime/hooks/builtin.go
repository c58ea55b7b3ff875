package hooks

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
)

// cardRes match card numbers: 16 digits in a row, four groups of four
// separated by a space or a dash (4111 1111 1111 1111, as people write
// them in issue bodies), and the 4-6-5 grouping of 15-digit cards.
var cardRes = []*regexp.Regexp{
	regexp.MustCompile(`\b\d{16}\b`),
	regexp.MustCompile(`\b\d{4}([ -])\d{4}([ -])\d{4}([ -])\d{4}\b`),
	regexp.MustCompile(`\b\d{4}([ -])\d{6}([ -])\d{5}\b`),
}

// RedactPrompt is what the redact_pii hook does to a prompt: every card
// number becomes [REDACTED-CC]. The RunManager applies it before it
// records the prompt (session.start, run.started), so the raw text never
// reaches the log; the hook applies it for any other caller.
func RedactPrompt(prompt string) string {
	for _, re := range cardRes {
		prompt = re.ReplaceAllString(prompt, "[REDACTED-CC]")
	}
	return prompt
}

// RedactCardNumbers is the built-in redact_pii UserPromptSubmit hook: a
// card number in a prompt (RedactPrompt) becomes [REDACTED-CC].
func RedactCardNumbers() Func {
	return Func{Name: "redact_pii", Prio: 80, Fn: func(ctx context.Context, in Input) (Decision, error) {
		red := RedactPrompt(in.Prompt)
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

// DefaultDangerousTools is the built-in deny list of tool names.
var DefaultDangerousTools = []string{"rm", "delete", "drop_table"}

// DenyDangerousTools is the built-in deny_dangerous_tools PreToolUse hook.
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

// Builtins registers the built-in hooks: the card-number redaction
// and dangerous-tools deny list, and the Stop decision.
func (r *Registry) Builtins() {
	// The events exist; Register cannot fail for them.
	_ = r.Register(UserPromptSubmit, RedactCardNumbers())
	_ = r.Register(PreToolUse, DenyDangerousTools(DefaultDangerousTools))
	_ = r.Register(Stop, StopWhenReviewed())
}

package command

import "strings"

// Description is what a command says about itself. Who may use it is the
// dispatcher's route table's to say (bot/dispatch routes.go), which
// renders `/agent help` from these descriptions.
type Description struct {
	Name Name
	// Args is the argument synopsis after the command word, e.g. "<id> [reason]".
	Args    string
	Summary string
	// Examples are written with the trigger as "{trigger}".
	Examples []string
}

// descriptions lists the commands of this package's grammar (free text,
// approve, deny, help) and of the default bare words (Parse), in help
// order. Each entry sits beside the parse rule it documents (parseCommand,
// parseApprove, parseDeny). A bare word a caller adds (ParseWith) is
// described by that caller: bot/dispatch's route entry for it.
var descriptions = []Description{
	{
		Name: Run, Args: "<what to do>",
		Summary:  "Start a run that works on the request in free text (the rest of the line and the lines of the same paragraph). A comment on an issue or pull request is enough context.",
		Examples: []string{"{trigger} fix the failing test in auth.ts", "{trigger} add a --json flag to `agentos replay`"},
	},
	{
		Name: Approve, Args: "[<id>|all]",
		Summary:  "Approve one pending action by its id, or all pending actions of the run (no id or `all`). The run resumes.",
		Examples: []string{"{trigger} approve ap-3f9c2a1b7d4e", "{trigger} approve"},
	},
	{
		Name: Deny, Args: "<id> [reason]",
		Summary:  "Deny one pending action; the reason, if given, is passed to the agent.",
		Examples: []string{"{trigger} deny ap-3f9c2a1b7d4e do not touch the lockfile"},
	},
	{
		Name: Review, Summary: "On a pull request: review the diff with the review cycle (security, correctness and tests personas) and post one review with line comments; findings outside the diff go in the review's body. The bot only comments: it never approves or requests changes.",
		Examples: []string{"{trigger} review"},
	},
	{
		Name: Triage, Summary: "On an issue: propose labels (only ones the repository has) and a summary comment with the triage cycle; they are applied as far as the policy allows.",
		Examples: []string{"{trigger} triage"},
	},
	{
		Name: Status, Summary: "Show the state of the run for this issue or pull request and its pending approvals.",
		Examples: []string{"{trigger} status"},
	},
	{
		Name: Cancel, Summary: "Cancel the active run for this issue or pull request; pending approvals are cancelled too.",
		Examples: []string{"{trigger} cancel"},
	},
	{
		Name: HelpCmd, Summary: "Show this help. A bare `{trigger}` does the same.",
		Examples: []string{"{trigger} help"},
	},
}

// Descriptions returns the descriptions of this package's commands, in
// help order.
func Descriptions() []Description {
	out := make([]Description, len(descriptions))
	copy(out, descriptions)
	return out
}

func lookup(n Name) Description {
	for _, d := range descriptions {
		if d.Name == n {
			return d
		}
	}
	return Description{Name: n}
}

// usage renders the usage line of a command for a trigger.
func (d Description) usage(trigger string) string {
	var b strings.Builder
	b.WriteString(trigger)
	if d.Name != Run {
		b.WriteString(" " + string(d.Name))
	}
	if d.Args != "" {
		b.WriteString(" " + d.Args)
	}
	return b.String()
}

// Usage returns the usage line of the command for trigger ("" means
// DefaultTrigger), e.g. "/agent deny <id> [reason]".
func (d Description) Usage(trigger string) string {
	if trigger == "" {
		trigger = DefaultTrigger
	}
	return d.usage(trigger)
}

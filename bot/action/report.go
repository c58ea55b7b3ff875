package action

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Workflow commands (::group::, ::error::, ::add-mask::). Data is escaped as
// the runner expects so a message cannot inject another command.

func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// Mask tells the runner to hide secret in the job's log.
func Mask(w io.Writer, secret string) {
	if secret != "" {
		fmt.Fprintf(w, "::add-mask::%s\n", escapeData(secret))
	}
	// The runner matches a multi-line mask poorly (a line printed on its
	// own slips through), so each line of one (a PEM key) is masked too.
	if strings.Contains(secret, "\n") {
		for _, l := range strings.Split(secret, "\n") {
			if l = strings.TrimSpace(l); len(l) >= 8 {
				fmt.Fprintf(w, "::add-mask::%s\n", escapeData(l))
			}
		}
	}
}

// Group starts a collapsible group; call the returned func to end it.
func Group(w io.Writer, title string) func() {
	fmt.Fprintf(w, "::group::%s\n", escapeData(title))
	return func() { fmt.Fprintln(w, "::endgroup::") }
}

// Errorf writes an error annotation.
func Errorf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "::error::%s\n", escapeData(fmt.Sprintf(format, args...)))
}

// Warningf writes a warning annotation.
func Warningf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "::warning::%s\n", escapeData(fmt.Sprintf(format, args...)))
}

// Outputs are the action's outputs (action.yml).
type Outputs struct {
	SessionID string
	// Status is every status the step reports: completed, paused,
	// failed, denied, cancelled, reviewed, triaged, refused, ignored or
	// not_started.
	Status       string
	PRNumber     int
	Branch       string
	InputTokens  int64
	OutputTokens int64
	CostUSD      float64
	// Verdict is a cycle's verdict (done, halted, abort); "" for a run.
	Verdict string
	// LogCommit is the commit that holds the session's log, "" if none
	// was written.
	LogCommit string
	// ExitReason says why the step fails (ExitFailed, ExitDenied, ...);
	// "" when it succeeds.
	ExitReason string
}

// Pairs returns the outputs as name/value pairs in a stable order.
func (o Outputs) Pairs() [][2]string {
	pr := ""
	if o.PRNumber != 0 {
		pr = fmt.Sprint(o.PRNumber)
	}
	return [][2]string{
		{"session_id", o.SessionID},
		{"status", o.Status},
		{"pr_number", pr},
		{"branch", o.Branch},
		{"input_tokens", fmt.Sprint(o.InputTokens)},
		{"output_tokens", fmt.Sprint(o.OutputTokens)},
		{"cost_usd", fmt.Sprintf("%.6f", o.CostUSD)},
		{"verdict", o.Verdict},
		{"tokens", fmt.Sprint(o.InputTokens + o.OutputTokens)},
		{"log_commit", o.LogCommit},
		{"exit_reason", o.ExitReason},
	}
}

// WriteOutputs appends outputs to the GITHUB_OUTPUT file. Multi-line
// values use the runner's heredoc form with a random delimiter, so a value
// cannot forge another output.
func WriteOutputs(path string, pairs [][2]string) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("write outputs: %w", err)
	}
	var b strings.Builder
	for _, kv := range pairs {
		if !strings.ContainsAny(kv[1], "\r\n") {
			fmt.Fprintf(&b, "%s=%s\n", kv[0], kv[1])
			continue
		}
		delim, err := delimiter()
		if err != nil {
			f.Close()
			return err
		}
		fmt.Fprintf(&b, "%s<<%s\n%s\n%s\n", kv[0], delim, kv[1], delim)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return fmt.Errorf("write outputs: %w", err)
	}
	return f.Close()
}

func delimiter() (string, error) {
	var r [12]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	return "ghadelimiter_" + hex.EncodeToString(r[:]), nil
}

// AppendSummary appends Markdown to the GITHUB_STEP_SUMMARY file.
func AppendSummary(path, markdown string) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("step summary: %w", err)
	}
	if _, err := f.WriteString(markdown); err != nil {
		f.Close()
		return fmt.Errorf("step summary: %w", err)
	}
	return f.Close()
}

// SummaryInput is what the step summary shows.
type SummaryInput struct {
	Outputs   Outputs
	Event     string
	Plan      []string
	Tools     map[string]int // tool → calls
	Tests     []string       // test.run outcomes, one line each
	Approvals []string       // one line each: id, tool, decision, by
	Reason    string         // the terminal report's reason, if any
	LogURL    string
	// Unpriced says some model calls of the session had no known price:
	// the cost cell then says what it does not count.
	Unpriced string
}

// Summary renders the step summary.
func Summary(in SummaryInput) string {
	var b strings.Builder
	o := in.Outputs
	fmt.Fprintf(&b, "## agentos: %s\n\n", orDefault(o.Status, "nothing to do"))
	if o.SessionID != "" {
		fmt.Fprintf(&b, "| | |\n|---|---|\n| session | `%s` |\n| trigger | `%s` |\n", o.SessionID, in.Event)
		if o.Branch != "" {
			fmt.Fprintf(&b, "| branch | `%s` |\n", o.Branch)
		}
		if o.PRNumber != 0 {
			fmt.Fprintf(&b, "| pull request | #%d |\n", o.PRNumber)
		}
		cost := fmt.Sprintf("$%.4f", o.CostUSD)
		if in.Unpriced != "" {
			cost += "; " + in.Unpriced
		}
		fmt.Fprintf(&b, "| tokens | %d in / %d out |\n| cost | %s |\n\n", o.InputTokens, o.OutputTokens, cost)
	}
	if in.Reason != "" {
		fmt.Fprintf(&b, "%s\n\n", in.Reason)
	}
	if len(in.Plan) > 0 {
		b.WriteString("### Plan\n\n")
		for i, s := range in.Plan {
			fmt.Fprintf(&b, "%d. %s\n", i+1, s)
		}
		b.WriteString("\n")
	}
	if len(in.Tools) > 0 {
		b.WriteString("### Actions taken\n\n| tool | calls |\n|---|---|\n")
		names := make([]string, 0, len(in.Tools))
		for n := range in.Tools {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(&b, "| `%s` | %d |\n", n, in.Tools[n])
		}
		b.WriteString("\n")
	}
	if len(in.Approvals) > 0 {
		b.WriteString("### Approvals\n\n")
		for _, a := range in.Approvals {
			fmt.Fprintf(&b, "- %s\n", a)
		}
		b.WriteString("\n")
	}
	if len(in.Tests) > 0 {
		b.WriteString("### Tests run\n\n")
		for _, t := range in.Tests {
			fmt.Fprintf(&b, "- %s\n", t)
		}
		b.WriteString("\n")
	}
	if in.LogURL != "" {
		fmt.Fprintf(&b, "Event log: [events.jsonl](%s)\n", in.LogURL)
	}
	return b.String()
}

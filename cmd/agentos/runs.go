package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/agentos/agentos/runtime/replay"
)

// agentos runs and agentos view --server read a server's sessions with
// the token agentos login stored: the sessions of repositories the user
// may read, nothing else (the server answers 404 for the others).

type runsOptions struct {
	server, repo, state, since *string
	limit                      *int
	asJSON                     *bool
}

func runsFlags(fs *flag.FlagSet) runsOptions {
	return runsOptions{
		server: loginFlags(fs),
		repo:   fs.String("repo", "", "only sessions of this repository (owner/name)"),
		state:  fs.String("state", "", "only sessions in this state: running, paused, completed, failed, denied, cancelled"),
		since:  fs.String("since", "", "only sessions updated at or after this RFC 3339 time"),
		limit:  fs.Int("limit", 50, "at most this many sessions (1-1000), newest activity first"),
		asJSON: fs.Bool("json", false, "print the sessions as JSON lines"),
	}
}

// runSummary is one row of GET /v1/runs (api.RunSummary).
type runSummary struct {
	SessionID  string  `json:"session_id"`
	Repository string  `json:"repository"`
	State      string  `json:"state"`
	Prompt     string  `json:"prompt"`
	Events     int64   `json:"events"`
	UpdatedAt  string  `json:"updated_at"`
	Pending    int     `json:"pending_approvals"`
	CostUSD    float64 `json:"cost_usd"`
	PageURL    string  `json:"page_url"`
}

func cmdRuns(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("runs", flag.ContinueOnError)
	o := runsFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErrorf("usage: agentos runs [--server URL] [--repo OWNER/NAME] [--state STATE] [--since TIME] [--limit N] [--json]")
	}
	if *o.limit < 1 || *o.limit > 1000 {
		return usageErrorf("runs: --limit must be 1-1000, not %d", *o.limit)
	}
	base, cred, err := serverToken(*o.server)
	if err != nil {
		return err
	}
	q := url.Values{}
	for k, v := range map[string]string{"repository": *o.repo, "state": *o.state, "since": *o.since} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var rows []runSummary
	for len(rows) < *o.limit {
		q.Set("limit", fmt.Sprint(min(*o.limit-len(rows), 200)))
		var page struct {
			Runs       []runSummary `json:"runs"`
			NextCursor string       `json:"next_cursor"`
			Message    string       `json:"message"`
		}
		status, err := getJSON(ctx, base+"/v1/runs?"+q.Encode(), cred.Token, &page)
		if err != nil {
			return fmt.Errorf("runs: %s: %w", base, err)
		}
		if status == http.StatusBadRequest {
			return usageErrorf("runs: %s", termSafe(page.Message, 300))
		}
		if status != http.StatusOK {
			return serverRefusal(base, status, "the session list")
		}
		rows = append(rows, page.Runs...)
		if page.NextCursor == "" {
			break
		}
		q.Set("cursor", page.NextCursor)
	}
	if *o.asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	if len(rows) == 0 {
		fmt.Fprintf(stderr, "No session on %s that %s may read matches.\n", base, cred.Login)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tSTATE\tREPOSITORY\tEVENTS\tPENDING\tCOST\tUPDATED\tPROMPT")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t$%.4f\t%s\t%s\n", termSafe(r.SessionID, 80), termSafe(r.State, 20), termSafe(r.Repository, 100), r.Events, r.Pending, r.CostUSD, termSafe(r.UpdatedAt, 40), termSafe(r.Prompt, 60))
	}
	return tw.Flush()
}

// viewRemote prints a session of a server (agentos view --server).
func viewRemote(ctx context.Context, server, sid string, asJSON bool, stdout io.Writer) error {
	base, cred, err := serverToken(server)
	if err != nil {
		return err
	}
	if sid == "" || strings.ContainsAny(sid, "/?#") {
		return usageErrorf("view: %q is not a session id", sid)
	}
	var raw json.RawMessage
	status, err := getJSON(ctx, base+"/v1/runs/"+url.PathEscape(sid), cred.Token, &raw)
	if err != nil {
		return fmt.Errorf("view: %s: %w", base, err)
	}
	if status != http.StatusOK {
		return serverRefusal(base, status, "session "+sid)
	}
	if asJSON {
		_, err := fmt.Fprintf(stdout, "%s\n", raw)
		return err
	}
	var s replay.Snapshot
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("view: the server's snapshot: %w", err)
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	state := s.RunStatus
	if state == "" {
		state = "idle"
	}
	fmt.Fprintf(w, "Session\t%s\n", termSafe(s.SessionID, 120))
	fmt.Fprintf(w, "State\t%s\n", termSafe(string(state), 40))
	fmt.Fprintf(w, "Prompt\t%s\n", termSafe(s.Prompt, 200))
	fmt.Fprintf(w, "Events\t%d\n", s.LastSeq)
	cost := fmt.Sprintf("%s (%d input, %d output tokens; %d model calls)", s.Usage.CostText(s.LLMCalls), s.Usage.InputTokens, s.Usage.OutputTokens, s.LLMCalls)
	if b := s.Budget; b != nil && b.MaxCostUSD > 0 {
		cost += fmt.Sprintf(" of a $%.4g budget", b.MaxCostUSD)
		if s.Usage.CostUSD > b.MaxCostUSD {
			cost += ": over budget"
		}
	}
	fmt.Fprintf(w, "Cost\t%s\n", cost)
	fmt.Fprintf(w, "Tools\t%d called, %d rejected\n", len(s.ToolsInvoked), s.Rejected)
	for _, a := range s.PendingApprovals {
		fmt.Fprintf(w, "Pending\t%s %s (digest %s)\n", termSafe(a.ID, 80), termSafe(a.Tool, 80), termSafe(a.Digest, 16))
	}
	if t := s.Terminal; t != nil {
		fmt.Fprintf(w, "Terminal\t%s %s\n", termSafe(t.Status, 40), termSafe(t.Reason, 300))
		if t.NextAction != "" {
			fmt.Fprintf(w, "Next\t%s\n", termSafe(t.NextAction, 300))
		}
	}
	fmt.Fprintf(w, "Page\t%s/runs/%s\n", base, url.PathEscape(s.SessionID))
	return w.Flush()
}

// termSafe makes server text (prompts, model output, names) safe to print
// on a terminal: control characters, escape sequences included, become
// "?", and the text is cut at n runes.
func termSafe(s string, n int) string {
	var b strings.Builder
	i := 0
	for _, r := range s {
		if i == n {
			b.WriteString("…")
			break
		}
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(' ')
		case unicode.IsControl(r) || r == unicode.ReplacementChar || unicode.In(r, unicode.Cf):
			b.WriteRune('?')
		default:
			b.WriteRune(r)
		}
		i++
	}
	return b.String()
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/schemas"
)

// parseFlags parses flags that may appear before or after positional
// arguments ("verify FILE --json" as well as "verify --json FILE").
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp
			}
			return nil, usageErrorf("%s: %v (agentos %s -h lists the flags)", fs.Name(), err, fs.Name())
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func verifyFlags(fs *flag.FlagSet) (asJSON, lenient *bool) {
	return fs.Bool("json", false, "print the report as JSON"),
		fs.Bool("lenient", false, "report a successful session's missing audit event types as advice, not an error (for logs written before the rule)")
}

func cmdVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	asJSON, lenient := verifyFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("usage: agentos verify <events.jsonl> [--json] [--lenient]")
	}
	f, err := os.Open(pos[0])
	if err != nil {
		return usageErrorf("verify: %v", err)
	}
	defer f.Close()
	rep, err := replay.VerifyReaderOptions(schemas.MustDefault(), f, replay.Options{Lenient: *lenient})
	if err != nil {
		return fmt.Errorf("verify %s: %w", pos[0], err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else if rep.Valid {
		fmt.Fprintf(stdout, "OK %s: session %s, %d events, chain head %s\n", pos[0], rep.SessionID, rep.Events, rep.LastHash)
		if a := rep.Audit; a != nil && a.Complete {
			fmt.Fprintln(stdout, "audit completeness: every event type of a successful session is present")
		} else if a != nil {
			fmt.Fprintf(stdout, "audit completeness: this successful session has no %s events (advice under --lenient; an error without it)\n", strings.Join(a.Missing, ", "))
		}
	} else {
		fmt.Fprintf(stdout, "INVALID %s: %v\n", pos[0], rep.Problem)
	}
	if !rep.Valid {
		return &exitError{code: exitFailure, err: fmt.Errorf("%s is not a valid session log", pos[0])}
	}
	return nil
}

func replayFlags(fs *flag.FlagSet) (asJSON *bool, data *string) {
	return fs.Bool("json", false, "print the snapshot as JSON"),
		fs.String("data", defaultDataDir(), "embedded store directory, for a session id argument")
}

func cmdReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	asJSON, data := replayFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("usage: agentos replay <events.jsonl | session-id> [--json] [--data DIR]")
	}
	evs, err := loadEvents(ctx, pos[0], *data)
	if err != nil {
		return err
	}
	snap, err := replay.Replay(evs)
	if err != nil {
		return fmt.Errorf("replay %s: %w", pos[0], err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(snap)
	}
	printTrace(stdout, evs)
	fmt.Fprintln(stdout)
	printSnapshot(stdout, snap)
	return nil
}

// loadEvents reads a session from a JSONL file, or from the embedded store
// when the argument is not a file.
func loadEvents(ctx context.Context, arg, dataDir string) ([]event.Event, error) {
	if _, err := os.Stat(arg); err == nil {
		return readJSONL(arg)
	}
	if !event.ValidSessionID(arg) {
		return nil, usageErrorf("replay: %s: no such file, and not a session id", arg)
	}
	return readStoreSession(ctx, dataDir, arg)
}

func readJSONL(path string) ([]event.Event, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var evs []event.Event
	for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		e, err := event.ParseLineFast([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("%s: line %d: %w (run agentos verify)", path, i+1, err)
		}
		evs = append(evs, e)
	}
	return evs, nil
}

// printTrace prints one line per event, the way the seed shows a trace.
func printTrace(w io.Writer, evs []event.Event) {
	for i := range evs {
		fmt.Fprintf(w, "%4d  %-20s %-10s %s\n", evs[i].Seq, evs[i].Type, evs[i].Actor, traceDetail(&evs[i]))
	}
}

func traceDetail(e *event.Event) string {
	var p map[string]any
	_ = json.Unmarshal(e.Payload, &p)
	str := func(k string) string { s, _ := p[k].(string); return s }
	switch e.Type {
	case event.SessionStart:
		return fmt.Sprintf("%q", str("prompt"))
	case event.HookFired:
		return strings.TrimSpace(str("hook") + " " + str("decision") + " " + str("reason"))
	case event.SkillInvoke, event.SkillComplete:
		if by := str("selected_by"); by != "" {
			return str("skill") + " (chosen by the " + by + ")"
		}
		return str("skill")
	case event.SkillSelected:
		return "chose " + list(p["chosen"]) + " of " + list(p["offered"]) + unknownNames(p["unknown"])
	case event.AgentTransition:
		return str("from") + " → " + str("to")
	case event.ToolInvoke, event.ToolResult, event.ToolRejected:
		s := str("tool")
		if ok, isBool := p["ok"].(bool); isBool && !ok {
			s += " failed"
		}
		if c := str("code"); c != "" {
			s += " " + c
		}
		return s
	case event.ApprovalRequested:
		return str("approval_id") + " " + str("tool")
	case event.ApprovalResolved:
		return str("approval_id") + " " + str("decision") + " by " + str("by")
	case event.TurnTerminal:
		return strings.TrimSpace(str("status") + " " + str("error_class") + " " + str("reason"))
	case event.RunPaused, event.RunResumed:
		return str("reason")
	case event.SessionClose:
		return fmt.Sprintf("ok=%v", p["ok"])
	case event.WorkerReport:
		return fmt.Sprintf("%q", str("output"))
	}
	return ""
}

func printSnapshot(w io.Writer, s replay.Snapshot) {
	fmt.Fprintf(w, "session   %s (%d events, last seq %d)\n", s.SessionID, s.Events, s.LastSeq)
	status := s.RunStatus
	if status == "" {
		status = "unknown"
	}
	fmt.Fprintf(w, "status    %s, closed=%v\n", status, s.Closed)
	if s.TurnState != "" {
		fmt.Fprintf(w, "turn      %s\n", s.TurnState)
	}
	if t := s.Terminal; t != nil {
		fmt.Fprintf(w, "terminal  %s", t.Status)
		if t.ErrorClass != "" {
			fmt.Fprintf(w, " (%s)", t.ErrorClass)
		}
		if t.Reason != "" {
			fmt.Fprintf(w, ": %s", t.Reason)
		}
		fmt.Fprintf(w, "; next: %s\n", t.NextAction)
	}
	if s.Output != "" {
		fmt.Fprintf(w, "output    %q\n", s.Output)
	}
	cached := ""
	if s.Usage.CachedInputTokens > 0 {
		cached = fmt.Sprintf(" (%d of them from the prompt cache)", s.Usage.CachedInputTokens)
	}
	fmt.Fprintf(w, "usage     %d input%s + %d output tokens over %d model calls, %s\n", s.Usage.InputTokens, cached, s.Usage.OutputTokens, s.LLMCalls, s.Usage.CostText(s.LLMCalls))
	fmt.Fprintf(w, "tools     %d invoked, %d rejected\n", len(s.ToolsInvoked), s.Rejected)
	fmt.Fprintf(w, "approvals %d pending, %d resolved\n", len(s.PendingApprovals), len(s.ResolvedApprovals))
	for _, a := range s.PendingApprovals {
		fmt.Fprintf(w, "          pending %s: %s (digest %.12s…)\n", a.ID, a.Tool, a.Digest)
	}
}

// list renders a JSON array of names: "[a, b]".
func list(v any) string {
	items, _ := v.([]any)
	names := make([]string, 0, len(items))
	for _, it := range items {
		if s, ok := it.(string); ok {
			names = append(names, s)
		}
	}
	return "[" + strings.Join(names, ", ") + "]"
}

func unknownNames(v any) string {
	if items, _ := v.([]any); len(items) > 0 {
		return "; no such skill: " + list(v)
	}
	return ""
}

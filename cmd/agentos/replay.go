package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentos/agentos/bot/config"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/store/postgres"
	"github.com/agentos/agentos/runtime/store/sqlite"
	"github.com/agentos/agentos/schemas"
	"github.com/jackc/pgx/v5/pgxpool"
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

func verifyFlags(fs *flag.FlagSet) (asJSON, lenient *bool, data *string) {
	return fs.Bool("json", false, "print the report as JSON"),
		fs.Bool("lenient", false, "report a successful session's missing audit event types as advice, not an error (for logs written before the rule)"),
		fs.String("data", defaultDataDir(), "embedded store directory, for a session id argument")
}

func cmdVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	asJSON, lenient, data := verifyFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("usage: agentos verify <events.jsonl | session-id> [--json] [--lenient] [--data DIR]")
	}
	opts := replay.Options{Lenient: *lenient}
	var rep replay.Report
	if _, serr := os.Stat(pos[0]); serr != nil && event.ValidSessionID(pos[0]) {
		// A stored session, verified as it streams from the store.
		v := replay.NewVerifierOptions(schemas.MustDefault(), opts)
		var problem *replay.Problem
		err := scanStoreSession(ctx, *data, pos[0], "verify", func(e *event.Event) error {
			if problem = v.Line(0, e.Line(), false); problem != nil {
				if problem.Seq == 0 {
					problem.Seq = e.Seq
				}
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			return err
		}
		if problem != nil {
			rep = v.Report()
			rep.Problem = problem
		} else {
			rep = v.Finish()
		}
	} else {
		f, err := os.Open(pos[0])
		if err != nil {
			return usageErrorf("verify: %v", err)
		}
		defer f.Close()
		// VerifyReaderOptions reads the file a line at a time.
		if rep, err = replay.VerifyReaderOptions(schemas.MustDefault(), f, opts); err != nil {
			return fmt.Errorf("verify %s: %w", pos[0], err)
		}
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
	// The log streams through the fold (and the trace) a line or a
	// chunk at a time: memory holds the snapshot, not the log.
	out := bufio.NewWriterSize(stdout, 64<<10)
	f := replay.NewFolder()
	err = eachEvent(ctx, pos[0], *data, func(e *event.Event) error {
		if !*asJSON {
			printTraceLine(out, e)
		}
		return f.Apply(e)
	})
	if err != nil {
		out.Flush()
		var pe *parseError
		if errors.As(err, &pe) || isUsage(err) {
			return err
		}
		return fmt.Errorf("replay %s: %w", pos[0], err)
	}
	snap := f.Snapshot()
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(snap); err != nil {
			return err
		}
		return out.Flush()
	}
	fmt.Fprintln(out)
	printSnapshot(out, snap)
	return out.Flush()
}

// errStop ends a scan early without an error of its own.
var errStop = errors.New("stop")

// parseError is a line of a log file that does not decode.
type parseError struct {
	path string
	line int
	err  error
}

func (e *parseError) Error() string {
	return fmt.Sprintf("%s: line %d: %v (run agentos verify)", e.path, e.line, e.err)
}

func (e *parseError) Unwrap() error { return e.err }

func isUsage(err error) bool {
	var ee *exitError
	return errors.As(err, &ee)
}

// eachEvent calls fn for every event of a session, read from a JSONL file
// a line at a time, or from the store when the argument is not a file.
func eachEvent(ctx context.Context, arg, dataDir string, fn func(*event.Event) error) error {
	if _, err := os.Stat(arg); err == nil {
		return scanJSONL(arg, fn)
	}
	if !event.ValidSessionID(arg) {
		return usageErrorf("replay: %s: no such file, and not a session id", arg)
	}
	return scanStoreSession(ctx, dataDir, arg, "replay", fn)
}

// scanJSONL calls fn for each event of a JSONL log, one line at a time.
func scanJSONL(path string, fn func(*event.Event) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	var long []byte
	for n := 1; ; n++ {
		l, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long[:0], l...)
			for err == bufio.ErrBufferFull {
				l, err = br.ReadSlice('\n')
				long = append(long, l...)
			}
			l = long
		}
		if err != nil && err != io.EOF {
			return err
		}
		if line := strings.TrimRight(string(l), "\r\n"); line != "" {
			e, perr := event.ParseLineFast([]byte(line))
			if perr != nil {
				return &parseError{path: path, line: n, err: perr}
			}
			if ferr := fn(&e); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

// scanStoreSession streams a stored session, a page at a time
// (store.Store's Scan): from PostgreSQL when AGENTOS_DATABASE_URL is set, else
// from the embedded store in dataDir. Memory stays bounded by a page, not
// the session's length.
func scanStoreSession(ctx context.Context, dataDir, sessionID, cmd string, fn func(*event.Event) error) error {
	if u := os.Getenv(config.EnvDatabaseURL); u != "" {
		return scanPostgresSession(ctx, u, sessionID, cmd, fn)
	}
	if _, err := os.Stat(filepath.Join(dataDir, sqlite.FileName)); err != nil {
		return usageErrorf("%s: %s is not a file, and there is no store in %s (--data)", cmd, sessionID, dataDir)
	}
	sealer, err := newSealer(nil)
	if err != nil {
		return err
	}
	s, err := openStore(dataDir, sealer)
	if err != nil {
		return err
	}
	defer s.Close()
	n := 0
	err = s.Scan(ctx, sessionID, 1, func(e *event.Event) error {
		n++
		return fn(e)
	})
	if err == nil && n == 0 {
		return &exitError{code: exitFailure, err: fmt.Errorf("%s: no session %s in %s", cmd, sessionID, dataDir)}
	}
	return err
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
		printTraceLine(w, &evs[i])
	}
}

func printTraceLine(w io.Writer, e *event.Event) {
	fmt.Fprintf(w, "%4d  %-20s %-10s %s\n", e.Seq, e.Type, e.Actor, traceDetail(e))
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

// scanPostgresSession streams session sessionID from the PostgreSQL store
// at u (postgres.Store.Scan: keyset pages of events); an unknown session
// is a failure naming the database.
func scanPostgresSession(ctx context.Context, u, sessionID, cmd string, fn func(*event.Event) error) error {
	if !config.IsPostgresURL(u) {
		return usageErrorf("%s: %s=%s is not a postgres:// URL", cmd, config.EnvDatabaseURL, config.RedactURL(u))
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(octx, u)
	if err != nil {
		return usageErrorf("%s: %s=%s is not a valid PostgreSQL URL", cmd, config.EnvDatabaseURL, config.RedactURL(u))
	}
	defer pool.Close()
	sealer, err := newSealer(nil)
	if err != nil {
		return err
	}
	st, err := postgres.Open(octx, pool, sealer, postgres.Options{PollInterval: -1})
	if err != nil {
		return fmt.Errorf("%s: PostgreSQL at %s: %w", cmd, config.RedactURL(u), err)
	}
	defer st.Close()
	n := 0
	err = st.Scan(ctx, sessionID, 1, func(e *event.Event) error {
		n++
		return fn(e)
	})
	if err == nil && n == 0 {
		return &exitError{code: exitFailure, err: fmt.Errorf("%s: no session %s in PostgreSQL at %s", cmd, sessionID, config.RedactURL(u))}
	}
	return err
}

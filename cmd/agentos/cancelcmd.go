package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	agentrun "github.com/agentos/agentos/runtime/run"
)

type cancelOpts struct {
	data, by, reason string
	asJSON           bool
}

func cancelFlags(fs *flag.FlagSet) *cancelOpts {
	o := &cancelOpts{}
	fs.StringVar(&o.data, "data", defaultDataDir(), "embedded store directory")
	fs.StringVar(&o.by, "by", os.Getenv("USER"), "who cancels (recorded in run.cancelled)")
	fs.StringVar(&o.reason, "reason", "", "why (recorded in run.cancelled and the terminal report)")
	fs.BoolVar(&o.asJSON, "json", false, "print the outcome as JSON")
	return o
}

// cmdCancel ends a paused session's run as cancelled: the RunManager's one
// cancel path, the same as the API's POST /v1/runs/:id/cancel, /agent
// cancel and closing the PR. It needs only the store (or the session's
// exported log, when the store has lost it).
func cmdCancel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cancel", flag.ContinueOnError)
	o := cancelFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("usage: agentos cancel SESSION [--reason TEXT] [--by NAME] [--data DIR] [--json]")
	}
	if o.by == "" {
		o.by = "cli"
	}
	sid := pos[0]
	sealer, err := newSealer(nil)
	if err != nil {
		return err
	}
	st, err := openStore(o.data, sealer)
	if err != nil {
		return err
	}
	defer st.Close()
	mgr := agentrun.NewManager(st)
	mgr.Logs = agentrun.DirLogs(o.data)
	out, err := mgr.Cancel(ctx, sid, o.by, o.reason)
	if errors.Is(err, agentrun.ErrNotPaused) {
		return &exitError{code: exitFailure, err: fmt.Errorf("session %s has no paused run to cancel (a run executing in another process stops with Ctrl-C there)", sid)}
	}
	if err != nil {
		return &exitError{code: exitFailure, err: err}
	}
	path, err := exportSession(ctx, st, o.data, sid)
	if err != nil {
		return err
	}
	if o.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(runReport{SessionID: out.SessionID, RunID: out.RunID, Status: string(out.Status), LogPath: path, Terminal: out.Terminal})
	}
	printOutcome(stdout, out, path)
	return nil
}

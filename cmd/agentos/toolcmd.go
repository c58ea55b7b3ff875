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
	"sort"
	"strings"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/kernel/tools"
	"github.com/agentos/agentos/kernel/workspace"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/hooks"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/setup"
	"github.com/agentos/agentos/schemas"
)

// eventFile is a Recorder appending to one events.jsonl file (the session
// artifact format), chained onto whatever the file already holds.
type eventFile struct {
	path   string
	sealer *event.Sealer
	sid    string
	tip    event.Tip
	evs    []event.Event
}

func openEventFile(path string, sealer *event.Sealer) (*eventFile, error) {
	ef := &eventFile{path: path, sealer: sealer}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		ef.sid = "tool-" + strings.ToLower(newSessionID()[4:])
		return ef, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	for n := 1; ; n++ {
		l, err := br.ReadBytes('\n')
		if len(l) > 0 {
			if l[len(l)-1] != '\n' {
				return nil, fmt.Errorf("%s: line %d: %w", path, n, event.ErrTornLine)
			}
			l = l[:len(l)-1]
			if _, err := event.CheckLineHash(l); err != nil {
				return nil, fmt.Errorf("%s: line %d: %w", path, n, err)
			}
			e, err := event.ParseLine(l)
			if err != nil {
				return nil, fmt.Errorf("%s: line %d: %w", path, n, err)
			}
			if e.Seq != ef.tip.Seq+1 || e.PrevHash != ef.tip.Hash {
				return nil, fmt.Errorf("%s: line %d: the hash chain is broken (run agentos verify)", path, n)
			}
			ef.sid, ef.tip = e.SessionID, event.Tip{Seq: e.Seq, Hash: e.Hash}
			ef.evs = append(ef.evs, e)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if ef.sid == "" {
		ef.sid = "tool-" + strings.ToLower(newSessionID()[4:])
	}
	return ef, nil
}

// Record implements kernel.Recorder.
func (ef *eventFile) Record(ctx context.Context, typ, actor string, payload any, parent string) (string, error) {
	ps, perr := ef.sealer.PrepareAll(ef.sid, []event.Draft{{RunID: "tool-cli", Type: typ, Actor: actor, Payload: payload, ParentID: parent}})
	if ps == nil {
		return "", perr
	}
	evs := ef.sealer.Chain(ef.tip, ps)
	f, err := os.OpenFile(ef.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return "", err
	}
	if _, err := f.Write(append(evs[0].Line(), '\n')); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	ef.tip = event.Tip{Seq: evs[0].Seq, Hash: evs[0].Hash}
	ef.evs = append(ef.evs, evs[0])
	if perr != nil {
		return "", perr
	}
	return evs[0].ID, nil
}

// withSession tells the kernel's hooks which session and transcript a
// call belongs to (Claude Code's session_id and transcript_path).
func withSession(k *kernel.Kernel, sessionID, transcript string) {
	if h, ok := k.Hooks.(hooks.ForKernel); ok {
		h.SessionID, h.Transcript = sessionID, transcript
		k.Hooks = h
	}
}

// discard records nothing (tool call without --events).
type discard struct{}

func (discard) Record(context.Context, string, string, any, string) (string, error) { return "", nil }

// toolKernel builds the kernel for agentos tool and agentos mcp serve
// with setup.Kernel, as a run's is built: the repository's hooks and
// Claude Code permissions apply to every call. The events file, when it
// lies inside the workspace, is excluded from it: the tools must not read
// or rewrite the log, and its growth must not make an approval stale.
func toolKernel(workspaceDir, policyFile, events string) (*kernel.Kernel, *workspace.Root, *redact.Redactor, error) {
	var exclude []string
	if events != "" {
		abs, err := filepath.Abs(events)
		if err != nil {
			return nil, nil, nil, usageErrorf("--events: %v", err)
		}
		exclude = append(exclude, abs)
		// The events file's directory holds its lock and the files beside
		// it (mcp serve's data directory): commands see none of it, and
		// write none of it. Not when the events file sits at the
		// workspace's top, whose directory is the workspace itself.
		if wsAbs, err := filepath.Abs(workspaceDir); err == nil {
			if d := filepath.Dir(abs); d != wsAbs && strings.HasPrefix(d, wsAbs+string(filepath.Separator)) {
				exclude = append(exclude, d)
			}
		}
	}
	env, err := setup.Kernel(context.Background(), setup.Options{Dir: workspaceDir, PolicyFile: policyFile, Exclude: exclude})
	if err != nil {
		var ue *setup.UsageError
		if errors.As(err, &ue) {
			return nil, nil, nil, usageErrorf("%v", ue.Err)
		}
		return nil, nil, nil, err
	}
	return env.Kernel, env.Workspace, env.Redactor, nil
}

func cmdTool(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageErrorf("usage: agentos tool list|call|approve ...")
	}
	switch args[0] {
	case "list":
		return toolList(args[1:], stdout)
	case "call":
		return toolCall(ctx, args[1:], stdout)
	case "approve":
		return toolApprove(ctx, args[1:], stdout)
	}
	return usageErrorf("agentos tool: unknown subcommand %q (list, call, approve)", args[0])
}

func toolListFlags(fs *flag.FlagSet) (asJSON *bool) {
	return fs.Bool("json", false, "print JSON, with each tool's input and output schemas")
}

func toolList(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tool list", flag.ContinueOnError)
	asJSON := toolListFlags(fs)
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "agentos-tools-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ws, err := workspace.Open(dir, workspace.Options{})
	if err != nil {
		return err
	}
	defer ws.Close()
	defs := tools.Defs(ws, tools.Options{})
	sort.Slice(defs, func(i, j int) bool { return defs[i].Name < defs[j].Name })
	if *asJSON {
		type item struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Category    string          `json:"category"`
			Input       json.RawMessage `json:"input_schema"`
			Output      json.RawMessage `json:"output_schema"`
		}
		var out []item
		for _, d := range defs {
			out = append(out, item{d.Name, d.Description, string(d.Category), d.Input, d.Output})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	for _, d := range defs {
		fmt.Fprintf(stdout, "%-12s %-6s %s\n", d.Name, d.Category, d.Description)
	}
	return nil
}

type toolCallOpts struct {
	args, workspace, policy, events string
	asJSON                          bool
}

func toolCallFlags(fs *flag.FlagSet) *toolCallOpts {
	var o toolCallOpts
	fs.StringVar(&o.args, "args", "{}", "the tool's arguments as a JSON object")
	fs.StringVar(&o.workspace, "workspace", "", "workspace directory the tool is jailed in (required)")
	fs.StringVar(&o.policy, "policy", "", "operator policy.yaml (default: the built-in policy; the workspace's .agent/policy.yaml may only tighten it)")
	fs.StringVar(&o.events, "events", "", "events.jsonl to append the call's events to (needed to approve it later)")
	fs.BoolVar(&o.asJSON, "json", false, "print the result as compact JSON")
	return &o
}

func toolCall(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tool call", flag.ContinueOnError)
	o := toolCallFlags(fs)
	argJSON, wsDir, pol, events, asJSON := &o.args, &o.workspace, &o.policy, &o.events, &o.asJSON
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *wsDir == "" {
		return usageErrorf("usage: agentos tool call NAME --args JSON --workspace DIR [--policy FILE] [--events FILE] [--json]")
	}
	k, ws, red, err := toolKernel(*wsDir, *pol, *events)
	if err != nil {
		return err
	}
	defer ws.Close()
	var rec kernel.Recorder = discard{}
	if *events != "" {
		sealer, err := event.NewSealer(schemas.MustDefault(), red, nil)
		if err != nil {
			return err
		}
		ef, err := openEventFile(*events, sealer)
		if err != nil {
			return err
		}
		rec = ef
		withSession(k, ef.sid, *events)
	}
	out, err := k.Dispatch(ctx, rec, kernel.Call{ID: "cli-1", Name: pos[0], Args: json.RawMessage(*argJSON), Caller: "cli"})
	return printToolOutcome(stdout, out, err, *asJSON)
}

func printToolOutcome(stdout io.Writer, out kernel.Outcome, err error, asJSON bool) error {
	var ke *kernel.Error
	switch {
	case errors.As(err, &ke):
		b, _ := json.MarshalIndent(map[string]any{"error": ke}, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return &exitError{code: exitBlocked, err: errors.New("")}
	case err != nil:
		return err
	case out.Pending != nil:
		b, _ := json.MarshalIndent(map[string]any{"approval_required": out.Pending}, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return &exitError{code: exitApproval, err: errors.New("")}
	}
	if asJSON {
		fmt.Fprintln(stdout, string(out.Result))
		return nil
	}
	var pretty any
	_ = json.Unmarshal(out.Result, &pretty)
	b, _ := json.MarshalIndent(pretty, "", "  ")
	fmt.Fprintln(stdout, string(b))
	return nil
}

type toolApproveOpts struct{ workspace, policy, events, by string }

func toolApproveFlags(fs *flag.FlagSet) *toolApproveOpts {
	var o toolApproveOpts
	fs.StringVar(&o.workspace, "workspace", "", "workspace directory (required)")
	fs.StringVar(&o.policy, "policy", "", "operator policy.yaml (default: the built-in policy)")
	fs.StringVar(&o.events, "events", "", "events.jsonl holding the pending action (required)")
	fs.StringVar(&o.by, "by", os.Getenv("USER"), "who approves (recorded in the log)")
	return &o
}

func toolApprove(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tool approve", flag.ContinueOnError)
	o := toolApproveFlags(fs)
	wsDir, pol, events, by := &o.workspace, &o.policy, &o.events, &o.by
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *wsDir == "" || *events == "" {
		return usageErrorf("usage: agentos tool approve ID --workspace DIR --events FILE")
	}
	if *by == "" {
		*by = "cli"
	}
	k, ws, red, err := toolKernel(*wsDir, *pol, *events)
	if err != nil {
		return err
	}
	defer ws.Close()
	sealer, err := event.NewSealer(schemas.MustDefault(), red, nil)
	if err != nil {
		return err
	}
	ef, err := openEventFile(*events, sealer)
	if err != nil {
		return err
	}
	withSession(k, ef.sid, *events)
	snap, err := replay.Replay(ef.evs)
	if err != nil {
		return err
	}
	var p *replay.Approval
	for i := range snap.PendingApprovals {
		if snap.PendingApprovals[i].ID == pos[0] {
			p = &snap.PendingApprovals[i]
		}
	}
	if p == nil {
		return &exitError{code: exitBlocked, err: fmt.Errorf("no pending approval %s in %s", pos[0], *events)}
	}
	if _, err := ef.Record(ctx, event.ApprovalResolved, "maintainer", map[string]any{"approval_id": p.ID, "decision": "approve", "by": *by, "digest": p.Digest}, ""); err != nil {
		return err
	}
	var rev kernel.Revision
	_ = json.Unmarshal(p.Revision, &rev)
	out, err := k.ExecuteApproved(ctx, ef, kernel.Call{ID: p.CallID, Name: p.Tool, Args: p.Args, Caller: "cli"}, p.ID, p.Digest, rev)
	return printToolOutcome(stdout, out, err, false)
}

package run

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/agentos/agentos/kernel/patch"
	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/kernel/workspace"
	"github.com/agentos/agentos/runtime/event"
)

// UndoInterrupted prepares a worktree that a dead process changed in place
// (the CLI's: the repository itself, not a worktree rebuilt from a branch)
// for Takeover, which closes run runID's open tool calls as interrupted
// and never repeats them: an interrupted call must then have left no
// trace. For each open call (tool.invoke without tool.result):
//
//   - a read-only tool changed nothing;
//   - a repo.patch landed or not, file by file (each file is written
//     whole, by a rename): a file the diff applies to in reverse and not
//     forward has the change and gets its content before the patch back; a
//     file the diff applies to forward and not in reverse never had it;
//     anything else (both, neither, a delete or a rename) cannot be told;
//   - a repo.write whose file does not hold the written content never
//     landed; one that does cannot be undone (the log does not hold the
//     content before it);
//   - any other tool (a command, an MCP tool) may have changed anything.
//
// What cannot be told or undone is a *NotRebuildableError, and the run
// must not continue (the caller closes it with its report_missing
// terminal report, saying why). It returns the number of files restored.
func UndoInterrupted(dir string, evs []event.Event, runID string) (int, error) {
	open := OpenToolCalls(evs, runID)
	if len(open) == 0 {
		return 0, nil
	}
	ws, err := workspace.Open(dir, workspace.Options{})
	if err != nil {
		return 0, err
	}
	defer ws.Close()
	type restore struct {
		path string
		data []byte
	}
	var plan []restore
	for _, inv := range open {
		tool := event.FieldString(inv.Payload, "tool")
		fail := func(format string, a ...any) error {
			return &NotRebuildableError{Seq: inv.Seq, Tool: tool, Reason: fmt.Sprintf(format, a...)}
		}
		args := event.Field(inv.Payload, "args")
		switch {
		case readOnlyTools[tool]:
			continue
		case tool != "repo.patch" && tool != "repo.write":
			return 0, fail("was running when the process stopped; what it did to the worktree is not in the log")
		case strings.Contains(string(args), redact.Mask):
			return 0, fail("was running when the process stopped and has redacted arguments")
		}
		if tool == "repo.write" {
			var a struct{ Path, Content string }
			if err := json.Unmarshal(args, &a); err != nil {
				return 0, fail("has unreadable arguments: %v", err)
			}
			cur, err := ws.ReadFile(a.Path)
			if errors.Is(err, fs.ErrNotExist) || (err == nil && !bytes.Equal(cur, []byte(a.Content))) {
				continue // not written
			}
			if err != nil {
				return 0, fail("left %s unreadable: %v", a.Path, err)
			}
			return 0, fail("was running when the process stopped and wrote %s; the log does not hold its content before", a.Path)
		}
		var a struct {
			UnifiedDiff string `json:"unifiedDiff"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return 0, fail("has unreadable arguments: %v", err)
		}
		fps, err := patch.Parse(a.UnifiedDiff)
		if err != nil {
			continue // the tool refuses a diff that does not parse: nothing changed
		}
		for i := range fps {
			f := &fps[i]
			switch f.Op {
			case patch.Modify:
				cur, err := ws.ReadFile(f.OldPath)
				if err != nil {
					return 0, fail("left %s unreadable: %v", f.OldPath, err)
				}
				_, ferr := f.Apply(cur)
				back, rerr := reversed(f).Apply(cur)
				switch {
				case ferr == nil && rerr != nil:
					// not applied
				case ferr != nil && rerr == nil:
					plan = append(plan, restore{f.OldPath, back})
				default:
					return 0, fail("left %s in a state the log cannot tell (the diff applies %s)", f.OldPath, map[bool]string{true: "both ways", false: "neither way"}[ferr == nil])
				}
			case patch.Create:
				if _, err := ws.Stat(f.NewPath); err == nil {
					return 0, fail("created %s; the log cannot tell it from a file made before", f.NewPath)
				}
			default:
				return 0, fail("may have %sd %s; not undone", f.Op, f.Path())
			}
		}
	}
	for _, r := range plan {
		if err := ws.WriteFile(r.path, r.data, 0o644); err != nil {
			return 0, fmt.Errorf("undo an interrupted change: %s: %w", r.path, err)
		}
	}
	return len(plan), nil
}

// reversed is the patch that undoes f (a modification): old and new sides
// swapped.
func reversed(f *patch.File) *patch.File {
	r := &patch.File{OldPath: f.NewPath, NewPath: f.OldPath, Op: f.Op, Hunks: make([]patch.Hunk, len(f.Hunks))}
	for i, h := range f.Hunks {
		rh := patch.Hunk{OldStart: h.NewStart, OldLines: h.NewLines, NewStart: h.OldStart, NewLines: h.OldLines, Header: h.Header, Lines: make([]patch.Line, len(h.Lines))}
		for j, l := range h.Lines {
			switch l.Kind {
			case '+':
				l.Kind = '-'
			case '-':
				l.Kind = '+'
			}
			rh.Lines[j] = l
		}
		r.Hunks[i] = rh
	}
	return r
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
)

func followPrint(ctx context.Context, env *runtimeEnv, sessionID string, after int64, w io.Writer) error {
	return store.Follow(ctx, env.store, sessionID, after, func(e event.Event) (bool, error) {
		switch e.Type {
		case event.AgentTransition, event.ToolInvoke, event.ToolResult, event.ToolRejected, event.ApprovalRequested, event.ApprovalResolved, event.RunPaused, event.TurnTerminal, event.SkillInvoke, event.SkillSelected, event.HookFired:
			if e.Type == event.HookFired && event.FieldString(e.Payload, "decision") == "allow" {
				return false, nil
			}
			fmt.Fprintf(w, "  %4d %-18s %s\n", e.Seq, e.Type, progressDetail(&e))
		}
		return e.Type == event.TurnTerminal || e.Type == event.RunPaused, nil
	})
}

// progressDetail is traceDetail with what a tool's result shows: a
// command's exit code and whether it passed (a test.run the tool ran
// whose tests failed is ok to the tool, and failed here), the files a
// change touched.
func progressDetail(e *event.Event) string {
	d := traceDetail(e)
	if e.Type != event.ToolResult {
		return d
	}
	p := e.Payload
	tool := event.FieldString(p, "tool")
	ok := event.FieldBool(p, "ok")
	raw := event.Field(p, "result")
	if !ok {
		raw = event.Field(event.Field(p, "error"), "details")
	}
	var r struct {
		Command  string `json:"command"`
		ExitCode *int64 `json:"exit_code"`
		Passed   *bool  `json:"passed"`
		Path     string `json:"path"`
		Files    []struct {
			Path string `json:"path"`
		} `json:"files"`
	}
	_ = json.Unmarshal(raw, &r)
	switch tool {
	case "test.run", "lint.run", "process.run":
		if r.ExitCode == nil {
			if !ok {
				return d + ": " + oneLineText(event.FieldString(event.Field(p, "error"), "message"))
			}
			return d
		}
		passed := ok && *r.ExitCode == 0 && (r.Passed == nil || *r.Passed)
		verdict := "failed"
		if passed {
			verdict = "passed"
		}
		return fmt.Sprintf("%s %s: exit %d, %s", tool, oneLineText(r.Command), *r.ExitCode, verdict)
	case "repo.write", "repo.patch":
		if !ok {
			return d
		}
		var paths []string
		if r.Path != "" {
			paths = append(paths, r.Path)
		}
		for _, f := range r.Files {
			paths = append(paths, f.Path)
		}
		if len(paths) > 0 {
			return d + " " + strings.Join(paths, ", ")
		}
	}
	return d
}

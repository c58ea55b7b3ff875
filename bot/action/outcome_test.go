package action

import (
	"testing"

	"github.com/agentos/agentos/runtime/replay"
)

func call(tool, command string, exit int64) replay.ToolCall {
	return replay.ToolCall{Tool: tool, Command: command, Completed: true, OK: true, ExitCode: &exit}
}

// Which outcomes fail the step, and why.
func TestJudge(t *testing.T) {
	notFound := &replay.Snapshot{ToolsInvoked: []replay.ToolCall{call("test.run", "go test ./...", 127), call("test.run", "go test ./...", 127)}}
	recovered := &replay.Snapshot{ToolsInvoked: []replay.ToolCall{call("test.run", "go test ./...", 127), call("test.run", "go test ./...", 0)}}
	failingTests := &replay.Snapshot{ToolsInvoked: []replay.ToolCall{call("test.run", "go test ./...", 1)}}
	denied := &replay.Snapshot{ResolvedApprovals: []replay.Approval{{ID: "ap-1", Decision: "deny", By: "alice", ResolvedSeq: 10}}}
	for _, c := range []struct {
		name, status, changesBy string
		snap                    *replay.Snapshot
		want                    string
	}{
		{"completed", "completed", "", &replay.Snapshot{}, ""},
		{"paused", "paused", "", &replay.Snapshot{}, ""},
		{"reviewed", "reviewed", "", nil, ""},
		{"ignored", "ignored", "", nil, ""},
		{"refused", "refused", "", nil, ""},
		{"failed", "failed", "", nil, ExitFailed},
		{"denied", "denied", "", nil, ExitDenied},
		{"cancelled", "cancelled", "", nil, ExitCancelled},
		{"not started", "not_started", "", nil, ExitNotStarted},
		{"command not found", "completed", "", notFound, ExitTestsNotRun},
		{"command not found while paused", "paused", "", notFound, ExitTestsNotRun},
		{"not found, then ran", "completed", "", recovered, ""},
		{"tests ran and failed", "completed", "", failingTests, ""},
		{"no change after request changes", "completed", "alice", denied, ExitNoChange},
		{"request changes by someone else", "completed", "bob", denied, ""},
		{"not a request-changes event", "completed", "", denied, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := Outputs{Status: c.status}
			why := judge(&out, nil, c.snap, c.changesBy)
			if out.ExitReason != c.want {
				t.Errorf("exit reason %q, want %q", out.ExitReason, c.want)
			}
			if c.want != "" && c.want != ExitFailed && why == "" {
				t.Error("no sentence saying why")
			}
		})
	}
}

func TestChangesRequestedBy(t *testing.T) {
	body := []byte(`{"review":{"state":"changes_requested","user":{"login":"alice"}}}`)
	if got := changesRequestedBy("pull_request_review", body); got != "alice" {
		t.Errorf("got %q", got)
	}
	if got := changesRequestedBy("pull_request_review", []byte(`{"review":{"state":"approved","user":{"login":"alice"}}}`)); got != "" {
		t.Errorf("approved: %q", got)
	}
	if got := changesRequestedBy("issue_comment", body); got != "" {
		t.Errorf("issue_comment: %q", got)
	}
}

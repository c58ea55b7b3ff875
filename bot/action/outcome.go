package action

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
)

// Why a step fails although agentos did its job: the status a workflow
// must not take for success. docs/action-reference.md lists them with the
// exit code each gets.
const (
	// ExitFailed: the run ended with a failed terminal report.
	ExitFailed = "failed"
	// ExitDenied: a maintainer denied an action the run needed, so it
	// ended without doing what was asked.
	ExitDenied = "denied"
	// ExitCancelled: a maintainer cancelled the run.
	ExitCancelled = "cancelled"
	// ExitTestsNotRun: a command the run depended on could not start
	// (exit 126 or 127: not found or not executable, typically a
	// toolchain the runner does not have) and never ran later.
	ExitTestsNotRun = "tests_not_run"
	// ExitNoChange: the run completed after a "Request changes" review
	// without changing a file since.
	ExitNoChange = "no_change_after_request_changes"
	// ExitPRsNotPermitted: GitHub refused to let the workflow token open
	// the pull request.
	ExitPRsNotPermitted = "pull_requests_not_permitted"
	// ExitNotStarted: the model could not be reached; nothing ran.
	ExitNotStarted = "not_started"
)

// commandTools run a command whose exit code the log records.
var commandTools = map[string]bool{"test.run": true, "lint.run": true, "process.run": true}

// judge sets out.ExitReason (and returns a sentence saying why) from the
// status and, for a run that did not fail outright, the session's log:
// a command that could not start (exit 126/127) and was not run
// successfully afterwards, or no change after a Request-changes review
// (changesBy is that review's author, "" when the event was not one).
func judge(out *Outputs, evs []event.Event, snap *replay.Snapshot, changesBy string) string {
	switch out.Status {
	case "failed":
		out.ExitReason = ExitFailed
		return ""
	case "denied":
		out.ExitReason = ExitDenied
		return "a maintainer denied an action the run needed, so it did not do what was asked"
	case "cancelled":
		out.ExitReason = ExitCancelled
		return "the run was cancelled"
	case "not_started":
		out.ExitReason = ExitNotStarted
		return "the model could not be reached; nothing ran"
	case "completed", "paused":
	default:
		return ""
	}
	if snap == nil {
		return ""
	}
	if cmd, code, ok := commandNotRun(snap.ToolsInvoked); ok {
		out.ExitReason = ExitTestsNotRun
		return fmt.Sprintf("`%s` could not run (exit %d: the command or a tool it needs is not installed on the runner, or not executable); add the toolchain with a setup step before agentos (docs/action-setup.md)", cmd, code)
	}
	if out.Status == "completed" && changesBy != "" {
		var after int64 = -1
		for _, a := range snap.ResolvedApprovals {
			if strings.EqualFold(a.By, changesBy) && a.ResolvedSeq > after && !strings.HasPrefix(strings.ToLower(a.Decision), "approve") {
				after = a.ResolvedSeq
			}
		}
		if after >= 0 && len(replay.WorkspaceChanges(evs, after)) == 0 {
			out.ExitReason = ExitNoChange
			return fmt.Sprintf("the run completed after @%s requested changes without changing any file", changesBy)
		}
	}
	return ""
}

// commandNotRun finds a command that exited 126 or 127 and was not run to
// a zero exit code later in the log.
func commandNotRun(calls []replay.ToolCall) (string, int64, bool) {
	var lost []replay.ToolCall
	for _, c := range calls {
		if !commandTools[c.Tool] || !c.Completed || c.ExitCode == nil {
			continue
		}
		if *c.ExitCode == 126 || *c.ExitCode == 127 {
			lost = append(lost, c)
			continue
		}
		if *c.ExitCode == 0 {
			kept := lost[:0]
			for _, l := range lost {
				if l.Command != c.Command {
					kept = append(kept, l)
				}
			}
			lost = kept
		}
	}
	if len(lost) == 0 {
		return "", 0, false
	}
	return lost[0].Command, *lost[0].ExitCode, true
}

// changesRequestedBy returns the author of a pull_request_review event
// whose review requests changes, "" for any other event.
func changesRequestedBy(eventName string, body []byte) string {
	if eventName != "pull_request_review" {
		return ""
	}
	var ev struct {
		Review struct {
			State string `json:"state"`
			User  struct {
				Login string `json:"login"`
			} `json:"user"`
		} `json:"review"`
	}
	if json.Unmarshal(body, &ev) != nil || !strings.EqualFold(ev.Review.State, "changes_requested") {
		return ""
	}
	return ev.Review.User.Login
}

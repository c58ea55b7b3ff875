// Package tracking renders what the bot shows on GitHub about a session:
// the tracking comment (one per session, edited in place as the run
// advances) and the body of the approval review (event COMMENT) that lists
// each pending action with its preview.
//
// Both are projections of the runtime's replay snapshot: ViewFromSnapshot
// builds a View, Render and RenderApprovalReview turn it into Markdown that
// stays under GitHub's 65,536-character limit (sections are shortened with
// a note; a code fence is never cut open). The tracking comment starts with
// a hidden marker, <!-- agentos:session=<id> -->, so the bot can find its
// own comment again (FindSessionID).
package tracking

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/runtime/replay"
)

// View is everything the tracking comment and the approval review show.
type View struct {
	SessionID string
	RunID     string
	// Status is the latest run's state: "" (queued), running, paused,
	// completed, failed or denied.
	Status    string
	Prompt    string
	Phase     string // workflow phase, if any
	Plan      []Step
	Approvals []Approval // pending, oldest first
	Tests     []TestRun
	Artifacts []Artifact
	Usage     Usage
	Review    *ReviewVerdict
	Output    string // the worker's final report
	Terminal  *Terminal
	// EventsURL links to the run's events (the run viewer or the
	// committed events.jsonl).
	EventsURL string
	// ViewerURL links to the session's run viewer page (no secret in it:
	// the page asks the reader to sign in); "" when the server has no
	// public URL.
	ViewerURL string
	// Trigger is the command word, "/agent" by default.
	Trigger string
	// HeadSHA is the pull request head the approvals were computed against.
	HeadSHA string
	// Sandbox is the mechanism commands run under (sandbox.Mechanism):
	// "none" and "unavailable" put a warning line in the comment.
	Sandbox string
}

// Step is one plan step.
type Step struct {
	ID, Description string
	Done            bool
}

// Approval is a pending action.
type Approval struct {
	ID, Tool, Digest string
	Command, Cwd     string
	Diff             string
	DiffTruncated    bool // the kernel already cut the diff
	Files            []kernel.FileChange
	Added, Removed   int
	Commit           string // revision the preview was computed against
}

// TestRun is one command the agent ran and how it ended.
type TestRun struct {
	Command string
	// Result is passed, failed, running or interrupted (the process
	// running it stopped before its result was recorded).
	Result string
	Detail string // error code of a failure
}

// Artifact is an artifact the run emitted.
type Artifact struct {
	Kind, Name, Digest string
	Size               int64
}

// Usage is tokens and cost so far.
type Usage struct {
	InputTokens, OutputTokens int64
	CostUSD                   float64
	LLMCalls                  int
	// Cost is the cost as said everywhere ("not tracked" without a
	// price: replay.Usage.CostText).
	Cost string
}

// ReviewVerdict is the reviewer persona's verdict.
type ReviewVerdict struct {
	Verdict  string // pass or fail
	Feedback string
}

// Terminal is the run's terminal report.
type Terminal struct {
	Status, Reason, NextAction, TraceID string
}

// Options carries what the snapshot does not know.
type Options struct {
	EventsURL string
	ViewerURL string
	Trigger   string // default "/agent"
	HeadSHA   string
	// Sandbox is the server's sandbox mechanism (sandbox.Mechanism).
	Sandbox string
}

// commandTools are the tools whose calls are listed as tests and commands.
var commandTools = map[string]bool{"process.run": true, "test.run": true, "lint.run": true}

// ViewFromSnapshot builds the View of a replay snapshot. Malformed JSON in
// the snapshot (a plan, a preview) drops that part, it never fails.
func ViewFromSnapshot(s replay.Snapshot, o Options) View {
	v := View{
		SessionID: s.SessionID, RunID: s.RunID, Status: string(s.RunStatus), Prompt: s.Prompt,
		Output: s.Output, EventsURL: o.EventsURL, ViewerURL: o.ViewerURL, Trigger: o.Trigger, HeadSHA: o.HeadSHA, Sandbox: o.Sandbox,
		Usage: Usage{InputTokens: s.Usage.InputTokens, OutputTokens: s.Usage.OutputTokens, CostUSD: s.Usage.CostUSD, LLMCalls: s.LLMCalls, Cost: s.Usage.CostText(s.LLMCalls)},
	}
	if s.Workflow != nil {
		v.Phase = s.Workflow.Phase
	}
	v.Plan = planSteps(s)
	for _, a := range s.PendingApprovals {
		v.Approvals = append(v.Approvals, approvalView(a))
	}
	v.Tests = testRuns(s)
	for _, a := range s.Artifacts {
		if a.Kind == "plan" || a.Kind == "review" {
			continue // shown as the plan and the verdict
		}
		if strings.HasPrefix(a.Kind, "github.") {
			continue // the bot's own bookkeeping (where the session lives)
		}
		v.Artifacts = append(v.Artifacts, Artifact{Kind: a.Kind, Name: firstNonEmpty(a.Name, a.Path), Digest: a.Digest, Size: a.Size})
	}
	if len(s.Review) > 0 {
		var r struct{ Verdict, Feedback string }
		if json.Unmarshal(s.Review, &r) == nil && r.Verdict != "" {
			v.Review = &ReviewVerdict{Verdict: r.Verdict, Feedback: r.Feedback}
		}
	}
	if t := s.Terminal; t != nil {
		v.Terminal = &Terminal{Status: t.Status, Reason: t.Reason, NextAction: t.NextAction, TraceID: t.TraceID}
	}
	return v
}

func planSteps(s replay.Snapshot) []Step {
	if len(s.Plan) == 0 {
		return nil
	}
	var p struct {
		Steps []struct {
			ID          string `json:"id"`
			Description string `json:"description"`
		} `json:"steps"`
	}
	if json.Unmarshal(s.Plan, &p) != nil {
		return nil
	}
	done := map[string]bool{}
	if len(s.Report) > 0 {
		var r struct {
			StepsCompleted []string `json:"steps_completed"`
		}
		if json.Unmarshal(s.Report, &r) == nil {
			for _, id := range r.StepsCompleted {
				done[id] = true
			}
		}
	}
	all := s.RunStatus == replay.RunCompleted
	out := make([]Step, 0, len(p.Steps))
	for _, st := range p.Steps {
		out = append(out, Step{ID: st.ID, Description: st.Description, Done: all || done[st.ID]})
	}
	return out
}

func approvalView(a replay.Approval) Approval {
	v := Approval{ID: a.ID, Tool: a.Tool, Digest: a.Digest}
	var p kernel.Preview
	if len(a.Preview) > 0 && json.Unmarshal(a.Preview, &p) == nil {
		v.Command, v.Cwd, v.Diff, v.DiffTruncated = p.Command, p.Cwd, p.Diff, p.DiffTrunc
		v.Files, v.Added, v.Removed = p.Files, p.LinesAdded, p.LinesRemoved
	}
	if v.Command == "" && len(a.Args) > 0 {
		var args struct {
			Command string `json:"command"`
			Cwd     string `json:"cwd"`
		}
		if json.Unmarshal(a.Args, &args) == nil {
			v.Command, v.Cwd = args.Command, firstNonEmpty(v.Cwd, args.Cwd)
		}
	}
	if len(a.Revision) > 0 {
		var r struct{ Commit string }
		if json.Unmarshal(a.Revision, &r) == nil {
			v.Commit = r.Commit
		}
	}
	return v
}

// testRuns lists the calls of tools that run a command (tests, linters,
// process.run) and whether the command succeeded — not merely whether the
// tool ran: a failing test suite is a tool call that worked.
func testRuns(s replay.Snapshot) []TestRun {
	cmds := map[string]string{}
	for _, list := range [][]replay.Approval{s.ResolvedApprovals, s.PendingApprovals} {
		for _, a := range list {
			if a.CallID != "" {
				if av := approvalView(a); av.Command != "" {
					cmds[a.CallID] = av.Command
				}
			}
		}
	}
	var out []TestRun
	// A call run again after its interruption (runtime/run's Takeover)
	// is one row, showing the attempt after the interruption.
	row := map[string]int{}
	for _, tc := range s.ToolsInvoked {
		if !commandTools[tc.Tool] {
			continue
		}
		t := TestRun{Command: firstNonEmpty(tc.Command, cmds[tc.CallID])}
		switch {
		case !tc.Completed && s.RunStatus == replay.RunRunning:
			t.Result = "running"
		case !tc.Completed, tc.ErrorCode == interruptedCode:
			// No result, and the run is not running (paused, ended), or
			// closed as interrupted: it will not finish.
			t.Result = "interrupted"
		case !tc.OK:
			t.Result, t.Detail = "failed", tc.ErrorCode
		case tc.Passed != nil && !*tc.Passed, tc.Passed == nil && tc.ExitCode != nil && *tc.ExitCode != 0:
			t.Result = "failed"
			if tc.ExitCode != nil {
				t.Detail = fmt.Sprintf("exit %d", *tc.ExitCode)
			}
		default:
			t.Result = "passed"
		}
		if i, ok := row[tc.CallID]; ok && tc.CallID != "" && out[i].Result == "interrupted" {
			if t.Command == "" {
				t.Command = out[i].Command
			}
			out[i] = t
			continue
		}
		row[tc.CallID] = len(out)
		out = append(out, t)
	}
	return out
}

// interruptedCode is the error code of a tool call whose process stopped
// before its result was recorded (runtime/run.CodeInterrupted).
const interruptedCode = "INTERRUPTED"

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if strings.TrimSpace(x) != "" {
			return x
		}
	}
	return ""
}

package action_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
)

// committedUsage is the session's usage in the log on the artifact
// branch.
func (a *actions) committedUsage(sid string) replay.Usage {
	a.t.Helper()
	raw := gittest.Git(a.t, a.bare, "show", "agent-sessions:sessions/"+sid+"/events.jsonl")
	var evs []event.Event
	for _, l := range strings.Split(strings.TrimSpace(raw), "\n") {
		e, err := event.ParseLine([]byte(l))
		if err != nil {
			a.t.Fatal(err)
		}
		evs = append(evs, e)
	}
	snap, err := replay.Replay(evs)
	if err != nil {
		a.t.Fatal(err)
	}
	return snap.Usage
}

func usageLine(u replay.Usage) string {
	return fmt.Sprintf("input_tokens=%d\noutput_tokens=%d\n", u.InputTokens, u.OutputTokens)
}

// The usage outputs are this job's: a job that continues a session (a
// re-run attempt that resumes what the first attempt began, an approval's
// resume) reports the session's usage at its end minus its usage when the
// job found it on the artifact branch, never the session's total.
func TestActionUsageIsThisJobs(t *testing.T) {
	a := newActions(t)
	first, outputs, _, err := a.run("issue_comment", a.commentEvent("alice", "/agent "+demo.Prompt))
	if err != nil || first.Status != "paused" {
		t.Fatalf("job 1: %+v %v\n%s", first, err, a.log)
	}
	paused := a.committedUsage(first.SessionID)
	if paused.InputTokens == 0 || first.InputTokens != paused.InputTokens || first.OutputTokens != paused.OutputTokens || !strings.Contains(outputs, usageLine(paused)) {
		t.Fatalf("job 1 began the session: usage %+v, want the log's %+v\n%s", first, paused, outputs)
	}
	// A re-run of job 1 resumes the session from the artifact branch
	// (the recovery path) and calls no model: it spent nothing.
	a.inputs = map[string]string{"GITHUB_RUN_ATTEMPT": "2"}
	again, outputs, summary, err := a.run("issue_comment", a.commentEvent("alice", "/agent "+demo.Prompt))
	if err != nil || again.SessionID != first.SessionID {
		t.Fatalf("re-run: %+v %v\n%s", again, err, a.log)
	}
	if again.InputTokens != 0 || again.OutputTokens != 0 || again.CostUSD != 0 || !strings.Contains(outputs, usageLine(replay.Usage{})) {
		t.Errorf("the re-run reports %d/%d tokens, $%f; it made no model call\n%s", again.InputTokens, again.OutputTokens, again.CostUSD, outputs)
	}
	if !strings.Contains(summary, "paused") {
		t.Errorf("re-run summary:\n%s", summary)
	}
	// The approval's job resumes the session and finishes it: its usage
	// is the calls it made.
	a.inputs = map[string]string{"GITHUB_RUN_ID": "43"}
	done, outputs, _, err := a.run("pull_request_review", a.reviewEvent(first.PRNumber, "alice", "approved"))
	if err != nil || done.Status != "completed" {
		t.Fatalf("approve: %+v %v\n%s", done, err, a.log)
	}
	total := a.committedUsage(first.SessionID)
	want := replay.Usage{InputTokens: total.InputTokens - paused.InputTokens, OutputTokens: total.OutputTokens - paused.OutputTokens}
	if want.InputTokens <= 0 {
		t.Fatalf("the resumed run made no model call (session usage %+v → %+v): the test proves nothing", paused, total)
	}
	if done.InputTokens != want.InputTokens || done.OutputTokens != want.OutputTokens || !strings.Contains(outputs, usageLine(want)) {
		t.Errorf("approve job: %d/%d tokens, want %d/%d (session %+v, paused at %+v)\n%s", done.InputTokens, done.OutputTokens, want.InputTokens, want.OutputTokens, total, paused, outputs)
	}
	if d := done.CostUSD - (total.CostUSD - paused.CostUSD); d > 1e-9 || d < -1e-9 {
		t.Errorf("approve job cost %f, want %f", done.CostUSD, total.CostUSD-paused.CostUSD)
	}
	// Its re-run finds the session finished: nothing spent.
	a.inputs["GITHUB_RUN_ATTEMPT"] = "2"
	rerun, _, _, err := a.run("pull_request_review", a.reviewEvent(first.PRNumber, "alice", "approved"))
	if err != nil {
		t.Fatalf("approve re-run: %v\n%s", err, a.log)
	}
	if rerun.InputTokens != 0 || rerun.OutputTokens != 0 || rerun.CostUSD != 0 {
		t.Errorf("approve re-run reports %+v", rerun)
	}
}

package tracking

import (
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/replay"
)

// TestInterruptedRows: a command whose process stopped before its result
// was recorded is "running" only while the run runs; once the run is
// paused or over, or the call was closed INTERRUPTED, the row says
// interrupted (never a "⏳ running" left behind). A call run again after
// its interruption is one row with the latest attempt's result.
func TestInterruptedRows(t *testing.T) {
	zero := int64(0)
	yes := true
	open := replay.ToolCall{Tool: "test.run", CallID: "t1", Command: "go test ./..."}
	closed := replay.ToolCall{Tool: "test.run", CallID: "t1", Command: "go test ./...", Completed: true, ErrorCode: "INTERRUPTED"}
	rerun := replay.ToolCall{Tool: "test.run", CallID: "t1", Completed: true, OK: true, Command: "go test ./...", ExitCode: &zero, Passed: &yes}
	for _, c := range []struct {
		name   string
		status replay.RunStatus
		calls  []replay.ToolCall
		want   string
	}{
		{"open while running", replay.RunRunning, []replay.ToolCall{open}, "running"},
		{"open after the run failed", replay.RunFailed, []replay.ToolCall{open}, "interrupted"},
		{"closed interrupted (report_missing)", replay.RunFailed, []replay.ToolCall{closed}, "interrupted"},
		{"closed, run again", replay.RunRunning, []replay.ToolCall{closed, rerun}, "passed"},
		{"closed, running again", replay.RunRunning, []replay.ToolCall{closed, open}, "running"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := testRuns(replay.Snapshot{RunStatus: c.status, ToolsInvoked: c.calls})
			if len(got) != 1 || got[0].Result != c.want || got[0].Command != "go test ./..." {
				t.Fatalf("rows %+v, want one %s row", got, c.want)
			}
		})
	}
	body := Render(View{SessionID: "s", Status: "failed", Tests: []TestRun{{Command: "go test ./...", Result: "interrupted"}}})
	if !strings.Contains(body, "⚠️ interrupted") || strings.Contains(body, "⏳") {
		t.Fatalf("rendered row:\n%s", body)
	}
}

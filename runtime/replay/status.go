package replay

// RunStatus is a run's state as its log says it: the latest run.* or
// turn.terminal event. Every layer that branches on a run's state uses
// these, never the bare words.
type RunStatus string

// Run states.
const (
	// RunNone: no run.* or turn.terminal event yet.
	RunNone      RunStatus = ""
	RunRunning   RunStatus = "running"
	RunPaused    RunStatus = "paused"
	RunCompleted RunStatus = "completed"
	RunFailed    RunStatus = "failed"
	RunDenied    RunStatus = "denied"
	RunCancelled RunStatus = "cancelled"
)

// RunStatuses are every state a run can be in, in lifecycle order.
var RunStatuses = []RunStatus{RunRunning, RunPaused, RunCompleted, RunFailed, RunDenied, RunCancelled}

// Terminal reports whether the run has ended.
func (s RunStatus) Terminal() bool {
	switch s {
	case RunCompleted, RunFailed, RunDenied, RunCancelled:
		return true
	}
	return false
}

package dispatch

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/runtime/run"
)

// editRecorder is a GitHub whose only call here is EditComment.
type editRecorder struct {
	GitHub
	bodies []string
}

func (e *editRecorder) EditComment(_ context.Context, _ github.Repo, _ int64, body string) error {
	e.bodies = append(e.bodies, body)
	return nil
}

// A start that failed says so on the tracking comment; a run cut by a
// graceful stop did start and is taken over, so its comment is left alone.
func TestFailEarlyLeavesAnInterruptedRunToItsTakeover(t *testing.T) {
	gh := &editRecorder{}
	d := newTestDispatcher(t, Config{GitHub: gh})
	l := link{TrackingComment: 7, Branch: "agentos/s-1"}
	repo := github.Repo{Owner: "octo", Name: "app"}

	cut := fmt.Errorf("%w (%w)", run.ErrInterrupted, context.Canceled)
	if err := d.failEarly(context.Background(), repo, l, cut); !errors.Is(err, run.ErrInterrupted) {
		t.Fatalf("failEarly(interrupted) = %v, want the interruption", err)
	}
	if len(gh.bodies) != 0 {
		t.Fatalf("an interrupted run's tracking comment was edited: %q", gh.bodies)
	}

	broken := errors.New("prepare the worktree: clone refused")
	if err := d.failEarly(context.Background(), repo, l, broken); !errors.Is(err, broken) {
		t.Fatalf("failEarly = %v, want the cause", err)
	}
	if len(gh.bodies) != 1 {
		t.Fatalf("a start that failed edited the comment %d times, want 1", len(gh.bodies))
	}
}

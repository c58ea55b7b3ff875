package run

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/journal"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/store"
)

// errLive marks an attempt to call a model or a tool during re-execution.
var errLive = errors.New("re-execution asked for a live effect")

type replayOnlyTools struct{ Tools }

func (replayOnlyTools) Dispatch(context.Context, kernel.Recorder, Call) error { return errLive }
func (replayOnlyTools) ExecuteApproved(context.Context, kernel.Recorder, Call, Pending, string) error {
	return errLive
}

type replayOnlyProvider struct{}

func (replayOnlyProvider) Name() string { return "replay-only" }
func (replayOnlyProvider) Complete(context.Context, provider.CompletionRequest) (provider.CompletionResponse, error) {
	return provider.CompletionResponse{}, errLive
}

// Reexecute runs the engine's current code against a recorded run (its
// events from run.started on) without calling any model or tool: every
// effect must be answered by the log. It fails with *NonDeterminismError if
// the code decides anything differently, needs a decision the log does not
// hold, or leaves recorded decisions unmade. Recorded sessions under
// testdata/ use it as regression tests (Temporal's replayer idea).
func Reexecute(ctx context.Context, eng *Engine, prompt string, history []event.Event) (Result, error) {
	history = withoutHost(history)
	if len(history) == 0 {
		return Result{}, errors.New("reexecute: empty history")
	}
	sealer, err := event.NewSealer(eng.Schemas, nil, nil)
	if err != nil {
		return Result{}, err
	}
	// Live effects would append to this scratch session; any append means
	// the code went past the end of the log.
	j, err := journal.Open(ctx, store.NewMemory(sealer), "reexecute")
	if err != nil {
		return Result{}, err
	}
	if sd, ok := eng.Tools.(HistorySeeder); ok {
		if err := sd.Seed(history); err != nil {
			return Result{}, err
		}
	}
	shadow := *eng
	shadow.Tools = replayOnlyTools{eng.Tools}
	shadow.Provider = replayOnlyProvider{}
	in := Input{Prompt: prompt, Source: "startup"}
	if history[0].Type == event.RunStarted {
		// A workflow run re-executes its recorded cycle (eng.Plane).
		in.Workflow = recordedWorkflow(history, history[0].RunID)
	}
	s := newState(&shadow, j, in, history)
	res, runErr := s.run(ctx)
	var nd *NonDeterminismError
	switch {
	case errors.As(runErr, &nd):
		return res, runErr
	case j.Seq() > 0 || errors.Is(runErr, errLive):
		what := "a live model or tool call"
		if evs, _ := j.Events(ctx); len(evs) > 0 {
			what = evs[0].Type
		}
		return res, &NonDeterminismError{Seq: history[len(history)-1].Seq, Want: what + " (a decision the log does not hold)", Got: "the end of the recorded run"}
	}
	s.f.skipManaged()
	if s.f.pos < len(history) {
		left := history[s.f.pos]
		return res, &NonDeterminismError{Seq: left.Seq, Want: "no further decision", Got: fmt.Sprintf("%s by %s", left.Type, left.Actor)}
	}
	return res, runErr
}

package run

import (
	"encoding/json"
	"fmt"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/schemas"
)

// AuditHonest is the invariant of honest outcomes over one session's
// log: every run it reports completed passes strict verify (the log as it
// stood when the run ended) and the claims of its last worker report are
// supported by its events. The engine enforces it when a run ends; tests
// sweep the logs they write with it.
func AuditHonest(evs []event.Event) error {
	reg := schemas.MustDefault()
	for i, e := range evs {
		if e.Type != event.TurnTerminal || event.FieldString(e.Payload, "status") != string(StatusCompleted) {
			continue
		}
		end := i + 1
		for end < len(evs) && evs[end-1].Type != event.SessionClose {
			end++
		}
		if rep := replay.VerifyEvents(reg, evs[:end]); !rep.Valid {
			return fmt.Errorf("run %s is completed but its log does not pass strict verify: %v", e.RunID, rep.Problem)
		}
		var run []event.Event
		for _, x := range evs[:i] {
			if x.RunID == e.RunID {
				run = append(run, x)
			}
		}
		// The session's prompt blocks: a request reads back whole
		// whichever earlier request defined them.
		if err := claimsSupported(run, event.NewPrompts(evs[:i])); err != nil {
			return fmt.Errorf("run %s is completed but %w", e.RunID, err)
		}
	}
	return nil
}

// claimsSupported checks the run's last worker report against its events
// up to it, the way the engine does, and that the engine recorded its
// check. A run without a worker report (a workflow of persona fan-outs
// only) claims nothing.
func claimsSupported(run []event.Event, prompts *event.Prompts) error {
	last := -1
	for i, e := range run {
		if e.Type == event.WorkerReport {
			last = i
		}
	}
	if last < 0 {
		return nil
	}
	if last+1 >= len(run) || run[last+1].Type != event.ArtifactEmitted || event.FieldString(run[last+1].Payload, "kind") != evidenceKind {
		return fmt.Errorf("its last worker.report (seq %d) has no evidence check after it", run[last].Seq)
	}
	var plan json.RawMessage
	offered := false
	for _, e := range run[:last] {
		switch {
		case e.Type == event.ArtifactEmitted && event.FieldString(e.Payload, "kind") == "plan":
			plan = json.RawMessage(event.FieldString(e.Payload, "content"))
		case e.Type == event.LLMRequest && event.FieldString(e.Payload, "role") == "worker":
			var p struct {
				Tools []struct{ Name string } `json:"tools"`
			}
			req, _ := prompts.Request(&e) // read back whole: its tool specs may be prompt blocks
			_ = json.Unmarshal(req, &p)
			offered = false
			for _, t := range p.Tools {
				offered = offered || t.Name == "test.run"
			}
		}
	}
	ev := checkEvidence(run[:last+1], run[last].Payload, plan, offered)
	if ev.EnvCause != "" {
		return fmt.Errorf("a command could not run: %s", ev.EnvCause)
	}
	if len(ev.Problems) > 0 {
		return fmt.Errorf("its report is not supported: %v", ev.Problems)
	}
	return nil
}

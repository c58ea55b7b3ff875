// Package cycle executes the workflow plane's cycles:
// it resolves a cycle in a runtime/workflow Registry, fires
// the WorkflowStart hook, runs the cycle's phases in order — each one a
// Plan-Work-Review pass or a persona fan-out with a fan-in — applies the
// phases' and the cycle's policies, fires PhaseAdvance before every phase
// and WorkflowComplete after the verdict (done | halted | abort), and
// records workflow.started, workflow.phase_advanced, workflow.policy_gated
// and workflow.completed or workflow.aborted in the session's log.
//
// A cycle is a run: the RunManager starts it, and it pauses for an
// approval and resumes from the log in any process exactly like a
// Plan-Work-Review run (the Executor is the run engine's Plane, and every
// step goes through the engine's re-executable effects).
//
// What a cycle produced is a projection of the log (the workflow_result
// artifact the cycle emits when it ends), so Run and Resume return the same
// Result whichever process ran which part.
//
// Example (the bot's /agent review on a pull request):
//
//	x := &cycle.Executor{Registry: reg, Manager: mgr, Engine: eng, Schemas: schemas.MustDefault()}
//	res, err := x.Run(ctx, cycle.Request{
//		SessionID: sid, Cycle: "review", Prompt: "review this pull request",
//		Mode: cycle.ModeInteractive, Inputs: map[string]string{"diff": prDiff},
//	})
//	if err != nil { ... } // unknown cycle, mode the cycle does not allow, store errors
//	for _, d := range res.Decisions {
//		switch d.Gate {
//		case cycle.GatePosted:   // a line comment at d.Finding.Path, d.Finding.Line
//		case cycle.GateBodyOnly: // in the review body
//		case cycle.GateDropped:  // not posted; d.Reason says which policy
//		}
//	}
//	// res.Verdict is done | halted | abort; res.Delivery is the
//	// mode-dispatch decision (allow: post; advisory: report only).
package cycle

package viewer

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/agentos/agentos/kernel/patch"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
)

// Evidence is what the session's log shows the run did: the commands the
// tools ran with their exit codes, the changes the file tools applied,
// the approvals with what they showed, the review's verdict and its
// coverage. It is read from the tools' results, the approvals and the
// review artifacts, never from a model's prose: a worker that says "tests
// pass" after a test.run that exited 1 shows as failed here.
type Evidence struct {
	Commands []CommandRun
	// Files are the paths the applied changes touched, sorted.
	Files []ChangedFile
	// Changes are the applied changes in order, each with its diff.
	Changes []Change
	// Diff is the applied changes' diffs, in order: the run's final diff
	// as far as the log records it (see Change.NoDiff).
	Diff   []DiffLine
	Review *ReviewEvidence
}

// CommandRun is one test.run, lint.run or process.run.
type CommandRun struct {
	Seq     int64
	CallID  string
	Tool    string
	Command string
	// Exit is the exit code as text, "" when the command did not run.
	Exit string
	// Outcome is passed, failed, not run (the tool refused or could not
	// start it) or running.
	Outcome string
	Detail  string // the error when it did not run; "timed out"
}

// Class is the outcome as a CSS class name.
func (c CommandRun) Class() string { return strings.ReplaceAll(c.Outcome, " ", "-") }

// ChangedFile is one path the run changed.
type ChangedFile struct {
	Path             string
	Op               string // create | modify | delete | rename, as the tool reported it
	Added, Removed   int
	Calls            int // applied changes that touched it
	LinesKnown       bool
	FromApprovedCall bool
}

// Change is one applied repo.write or repo.patch.
type Change struct {
	Seq      int64
	CallID   string
	Tool     string
	Paths    []string
	Approval string // the approval it ran under, "" for none
	Diff     []DiffLine
	// NoDiff says why the log holds no diff of the change (a whole-file
	// write of a file whose earlier content the log does not have).
	NoDiff string
}

// ReviewEvidence is the review's outcome as its events record it.
type ReviewEvidence struct {
	// Verdict is the Reviewer's (review_result_v1: pass or fail), ""
	// when there was none.
	Verdict string
	Seq     int64
	// Aggregate is the workflow fan-in's verdict (pass or fail) and
	// coverage, when reviewer personas ran.
	Aggregate string
	Coverage  float64
	HasAgg    bool
	// Personas are the fan-out's personas and how each fared.
	Personas []PersonaOutcome
	// Cycle is the workflow verdict (done, halted, abort), "" for none.
	Cycle string
}

// PersonaOutcome is how one reviewer persona fared.
type PersonaOutcome struct {
	Persona, Phase string
	Status         string // ran | failed | forbidden
	Reason         string
	Findings       int
}

// Reviewed reports whether the persona reviewed (it ran and reported).
func (p PersonaOutcome) Reviewed() bool { return p.Status == "ran" }

// NotReviewed lists the personas that did not review.
func (r *ReviewEvidence) NotReviewed() []PersonaOutcome {
	var out []PersonaOutcome
	for _, p := range r.Personas {
		if !p.Reviewed() {
			out = append(out, p)
		}
	}
	return out
}

// isCommand: a tool that runs a command in the sandbox.
func isCommand(tool string) bool {
	return tool == "test.run" || tool == "lint.run" || tool == "process.run"
}

func isFileChange(tool string) bool { return tool == "repo.write" || tool == "repo.patch" }

// commandResult reads a command tool's result (or a failure's details):
// the command, its exit code, whether it passed.
type commandResult struct {
	Command  string `json:"command"`
	ExitCode *int64 `json:"exit_code"`
	Passed   *bool  `json:"passed"`
	TimedOut bool   `json:"timed_out"`
}

// commandOutcome is how a tool.result of a command tool ended: "" when
// the payload is no command's result, else passed or failed with the
// exit code ("" when the command did not run).
func commandOutcome(p []byte) (outcome, exit string, cr commandResult) {
	ok := event.FieldBool(p, "ok")
	raw := event.Field(p, "result")
	if !ok {
		raw = event.Field(event.Field(p, "error"), "details")
	}
	_ = json.Unmarshal(raw, &cr)
	if cr.ExitCode != nil {
		exit = fmt.Sprint(*cr.ExitCode)
	}
	switch {
	case !ok && cr.ExitCode == nil:
		return "not run", "", cr
	case !ok:
		return "failed", exit, cr
	case cr.Passed != nil:
		if *cr.Passed && (cr.ExitCode == nil || *cr.ExitCode == 0) {
			return "passed", exit, cr
		}
		return "failed", exit, cr
	case cr.ExitCode != nil && *cr.ExitCode == 0:
		return "passed", exit, cr
	case cr.ExitCode != nil:
		return "failed", exit, cr
	}
	return "", "", cr
}

// buildEvidence reads the evidence from a session's events.
func buildEvidence(evs []event.Event, snap replay.Snapshot) Evidence {
	var ev Evidence
	type invoke struct {
		tool, approval string
		args           json.RawMessage
	}
	invokes := map[string]invoke{}     // call id → its latest tool.invoke
	cmdAt := map[string]int{}          // call id → its open CommandRun
	previews := map[string]string{}    // approval id → the diff it showed
	contents := map[string]*string{}   // path → content a repo.write left
	files := map[string]*ChangedFile{} // path → its entry
	for _, a := range append(append([]replay.Approval{}, snap.ResolvedApprovals...), snap.PendingApprovals...) {
		previews[a.ID] = approvalDiff(a)
	}
	for i := range evs {
		e := &evs[i]
		p := e.Payload
		switch e.Type {
		case event.ToolInvoke:
			id, tool := event.FieldString(p, "call_id"), event.FieldString(p, "tool")
			invokes[id] = invoke{tool: tool, approval: event.FieldString(p, "approval_id"), args: event.Field(p, "args")}
			if isCommand(tool) {
				cmd := event.FieldString(event.Field(p, "args"), "command")
				ev.Commands = append(ev.Commands, CommandRun{Seq: e.Seq, CallID: id, Tool: tool, Command: cmd, Outcome: "running"})
				cmdAt[id] = len(ev.Commands) - 1
			}
		case event.ToolRejected:
			if tool := event.FieldString(p, "tool"); isCommand(tool) {
				ev.Commands = append(ev.Commands, CommandRun{Seq: e.Seq, CallID: event.FieldString(p, "call_id"), Tool: tool,
					Command: event.FieldString(event.Field(p, "args"), "command"), Outcome: "not run",
					Detail: "rejected: " + event.FieldString(event.Field(p, "error"), "code")})
			}
		case event.ToolResult:
			id := event.FieldString(p, "call_id")
			inv := invokes[id]
			tool := event.FieldString(p, "tool")
			if tool == "" {
				tool = inv.tool
			}
			if isCommand(tool) {
				i, open := cmdAt[id]
				if !open {
					ev.Commands = append(ev.Commands, CommandRun{CallID: id, Tool: tool})
					i = len(ev.Commands) - 1
				}
				delete(cmdAt, id)
				c := &ev.Commands[i]
				c.Seq = e.Seq
				outcome, exit, cr := commandOutcome(p)
				if outcome == "" {
					outcome = "passed" // ran, and its result names no exit code: the tool says ok
				}
				c.Outcome, c.Exit = outcome, exit
				if cr.Command != "" {
					c.Command = cr.Command
				}
				switch {
				case cr.TimedOut:
					c.Detail = "timed out"
				case !event.FieldBool(p, "ok"):
					errObj := event.Field(p, "error")
					c.Detail = clip(oneLine(event.FieldString(errObj, "code")+": "+event.FieldString(errObj, "message")), 300)
				}
				continue
			}
			if !isFileChange(tool) || !event.FieldBool(p, "ok") {
				continue
			}
			ev.Changes = append(ev.Changes, change(e.Seq, id, tool, inv.approval, inv.args, event.Field(p, "result"), previews, contents, files))
		}
	}
	for _, f := range files {
		ev.Files = append(ev.Files, *f)
	}
	sort.Slice(ev.Files, func(i, j int) bool { return ev.Files[i].Path < ev.Files[j].Path })
	var all strings.Builder
	for _, c := range ev.Changes {
		for _, l := range c.Diff {
			all.WriteString(l.Text + "\n")
		}
		if c.NoDiff != "" {
			fmt.Fprintf(&all, "# %s %s: %s\n", c.Tool, strings.Join(c.Paths, ", "), c.NoDiff)
		}
	}
	ev.Diff = diffLines(all.String())
	ev.Review = review(evs)
	return ev
}

// change reads one applied change: the files its result names and its
// diff (the approval's preview, a patch's unified diff, or a whole-file
// write against the content the log last recorded for the path).
func change(seq int64, id, tool, approval string, args, result json.RawMessage, previews map[string]string, contents map[string]*string, files map[string]*ChangedFile) Change {
	c := Change{Seq: seq, CallID: id, Tool: tool, Approval: approval}
	var res struct {
		Path  string `json:"path"`
		Files []struct {
			Path    string `json:"path"`
			OldPath string `json:"old_path"`
			Op      string `json:"op"`
			Added   int    `json:"added"`
			Removed int    `json:"removed"`
		} `json:"files"`
	}
	_ = json.Unmarshal(result, &res)
	var a struct {
		Path         string  `json:"path"`
		Content      *string `json:"content"`
		ExpectedHash *string `json:"expected_hash"`
		UnifiedDiff  string  `json:"unifiedDiff"`
	}
	_ = json.Unmarshal(args, &a)
	diff := previews[approval]
	touch := func(path, op string, added, removed int, known bool) {
		if path == "" {
			return
		}
		f := files[path]
		if f == nil {
			f = &ChangedFile{Path: clip(path, 300), Op: op, LinesKnown: true}
			files[path] = f
		} else if op != "" && f.Op != "create" {
			f.Op = op // a file created and then modified stays created
		}
		f.Calls++
		f.Added += added
		f.Removed += removed
		f.LinesKnown = f.LinesKnown && known
		f.FromApprovedCall = f.FromApprovedCall || approval != ""
		c.Paths = append(c.Paths, path)
	}
	switch tool {
	case "repo.patch":
		if diff == "" {
			diff = a.UnifiedDiff
		}
		for _, f := range res.Files {
			if f.OldPath != "" && f.OldPath != f.Path {
				touch(f.OldPath, "rename", 0, 0, true)
			}
			touch(f.Path, f.Op, f.Added, f.Removed, true)
			delete(contents, f.Path) // its content is no longer the last write's
		}
	case "repo.write":
		path := res.Path
		if path == "" {
			path = a.Path
		}
		var old *string
		created := a.ExpectedHash != nil && *a.ExpectedHash == ""
		if created {
			empty := ""
			old = &empty
		} else {
			old = contents[path]
		}
		if diff == "" && a.Content != nil && old != nil {
			diff, _, _ = patch.WholeFile(path, *old, *a.Content)
		}
		op := "modify"
		if created {
			op = "create"
		}
		added, removed, known := 0, 0, false
		if diff != "" {
			added, removed, known = countLines(diff)
		}
		touch(path, op, added, removed, known)
		if a.Content != nil {
			contents[path] = a.Content
		}
		if diff == "" {
			c.NoDiff = "a whole-file write; the log does not hold the file's earlier content, so no diff is shown"
		}
	}
	c.Diff = diffLines(diff)
	return c
}

func countLines(diff string) (added, removed int, ok bool) {
	for _, l := range strings.Split(diff, "\n") {
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
		case strings.HasPrefix(l, "+"):
			added++
		case strings.HasPrefix(l, "-"):
			removed++
		}
	}
	return added, removed, true
}

// approvalDiff is the diff an approval showed: its preview's, else the
// patch it was asked for.
func approvalDiff(a replay.Approval) string {
	var pv struct {
		Diff string `json:"diff"`
	}
	_ = json.Unmarshal(a.Preview, &pv)
	if pv.Diff != "" {
		return pv.Diff
	}
	var args struct {
		UnifiedDiff string `json:"unifiedDiff"`
	}
	_ = json.Unmarshal(a.Args, &args)
	return args.UnifiedDiff
}

// review reads the review's events: the Reviewer's review_result_v1
// (artifact kind review), the workflow fan-in's review_aggregate and the
// cycle's result with each persona's outcome.
func review(evs []event.Event) *ReviewEvidence {
	var r ReviewEvidence
	found, fromResult := false, false
	for i := range evs {
		e := &evs[i]
		switch e.Type {
		case event.AgentTransition:
			// A fan-out persona's pass ends with PERSONA → PERSONA_DONE,
			// naming why when it failed: the outcome is in the log before
			// the cycle's result is (and when the cycle never ends).
			if event.FieldString(e.Payload, "from") != "PERSONA" || event.FieldString(e.Payload, "to") != "PERSONA_DONE" || fromResult {
				continue
			}
			p := PersonaOutcome{Persona: clip(event.FieldString(e.Payload, "role"), 80), Status: "ran"}
			if why := event.FieldString(e.Payload, "reason"); why != "" {
				p.Status, p.Reason = "failed", clip(oneLine(why), 300)
			}
			replaced := false
			for j := range r.Personas {
				if r.Personas[j].Persona == p.Persona {
					r.Personas[j], replaced = p, true
				}
			}
			if !replaced {
				r.Personas = append(r.Personas, p)
			}
			found = true
		case event.ArtifactEmitted:
			var doc json.RawMessage
			if s := event.FieldString(e.Payload, "content"); s != "" {
				doc = json.RawMessage(s)
			}
			switch event.FieldString(e.Payload, "kind") {
			case "review":
				var v struct {
					Verdict string `json:"verdict"`
				}
				if json.Unmarshal(doc, &v) == nil && v.Verdict != "" {
					r.Verdict, r.Seq, found = clip(v.Verdict, 40), e.Seq, true
				}
			case "review_aggregate":
				var a struct {
					Verdict  string  `json:"verdict"`
					Coverage float64 `json:"coverage"`
				}
				if json.Unmarshal(doc, &a) == nil && a.Verdict != "" {
					r.Aggregate, r.Coverage, r.HasAgg, found = clip(a.Verdict, 40), a.Coverage, true, true
				}
			case "workflow_result":
				var res struct {
					Verdict  string `json:"verdict"`
					Personas []struct {
						Persona  string `json:"persona"`
						Phase    string `json:"phase"`
						Status   string `json:"status"`
						Reason   string `json:"reason"`
						Findings int    `json:"findings"`
					} `json:"personas"`
				}
				if json.Unmarshal(doc, &res) != nil {
					continue
				}
				r.Cycle = clip(res.Verdict, 40)
				if len(res.Personas) > 0 {
					// The cycle's own account wins: it also names the
					// personas a policy forbade, which never ran.
					r.Personas, fromResult = nil, true
				}
				for _, p := range res.Personas {
					r.Personas = append(r.Personas, PersonaOutcome{Persona: clip(p.Persona, 80), Phase: clip(p.Phase, 80), Status: clip(p.Status, 40),
						Reason: clip(oneLine(p.Reason), 300), Findings: p.Findings})
				}
				found = found || len(r.Personas) > 0
			}
		}
	}
	if !found {
		return nil
	}
	return &r
}

package viewer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentos/agentos/bot/access"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
)

// maxBody bounds the payload text shown for one event (the whole payload
// is in the event stream and the JSONL file); maxLine bounds one line of
// it, so that a minified megabyte does not stretch the page.
const (
	maxBody = 64 << 10
	maxLine = 2000
)

// Session is the model of the run page.
type Session struct {
	ID        string
	Repo      string
	State     string
	Prompt    string
	TraceID   string
	LastSeq   int64
	Events    []Row
	Timeline  Timeline
	Pending   []Pending
	Resolved  []Resolved
	Costs     Costs
	Evidence  Evidence
	Terminal  *replay.TerminalReport
	Output    string
	Usage     replay.Usage
	LLMCalls  int
	ToolCalls int
	Started   string
	Updated   string
	// Hidden is how many earlier events the table leaves out.
	Hidden int
}

// Row is one event in the event table.
type Row struct {
	Seq     int64
	TS      string
	Actor   string
	Type    string
	Summary string
	Body    string // the payload, indented, bounded
	Class   string // ok | fail | wait | "" (CSS hook; the text says it too)
}

// Timeline is the lane chart: one lane per role, a bar per model or tool
// call sized by its duration.
type Timeline struct {
	Lanes    []Lane
	Width    float64 // of the drawing, in SVG units
	Height   float64
	Duration string // the span drawn
	Ticks    []Tick
}

// Lane is one role's row.
type Lane struct {
	Name string
	Y    float64
	Bars []Bar
}

// Bar is one call.
type Bar struct {
	X, W, Y float64
	Kind    string // llm | tool
	Outcome string // ok | fail | running
	Label   string // shown when the bar is wide enough
	Title   string // the tooltip: what, how long, outcome
	Seq     int64  // the event the bar links to
}

// Tick is a time mark on the axis.
type Tick struct {
	X     float64
	Label string
	End   bool // the last tick: its label ends at the edge
}

// Pending is an approval waiting for an answer.
type Pending struct {
	ID, Tool, Digest, Head string
	Summary                string
	Diff                   []DiffLine
	Split                  []SplitRow // the same diff side by side (wide screens)
	Command                string
	Seq                    int64
	// Cut says the kernel cut the preview's diff (the call's arguments
	// hold the whole change).
	Cut bool
}

// Resolved is an answered approval with what it showed when it was
// answered: the diff (or command) that was approved or denied.
type Resolved struct {
	ID, Tool, Decision, By, Reason string
	Digest                         string
	Summary                        string
	Command                        string
	Diff                           []DiffLine
	Seq, ResolvedSeq               int64
}

// SplitRow is one row of the side-by-side diff: the old line on the left,
// the new on the right (Kind "hunk" or "file" spans both).
type SplitRow struct {
	Kind        string
	Left, Right DiffLine
}

// split pairs a unified diff's removed and added lines side by side.
func split(lines []DiffLine) []SplitRow {
	var out []SplitRow
	var dels, adds []DiffLine
	flush := func() {
		for i := 0; i < max(len(dels), len(adds)); i++ {
			var r SplitRow
			if i < len(dels) {
				r.Left = DiffLine{Kind: "del", Text: dels[i].Text[1:]}
			}
			if i < len(adds) {
				r.Right = DiffLine{Kind: "add", Text: adds[i].Text[1:]}
			}
			out = append(out, r)
		}
		dels, adds = nil, nil
	}
	for _, l := range lines {
		switch l.Kind {
		case "del":
			if len(adds) > 0 {
				flush()
			}
			dels = append(dels, l)
		case "add":
			adds = append(adds, l)
		case "ctx":
			flush()
			t := strings.TrimPrefix(l.Text, " ")
			out = append(out, SplitRow{Left: DiffLine{Kind: "ctx", Text: t}, Right: DiffLine{Kind: "ctx", Text: t}})
		default:
			flush()
			out = append(out, SplitRow{Kind: l.Kind, Left: l})
		}
	}
	flush()
	return out
}

// DiffLine is one line of a unified diff with its kind.
type DiffLine struct {
	Kind string // add | del | hunk | file | ctx
	Text string
}

// Costs is tokens and cost per role and per model. A call whose
// response carries no cost had no known price: its cost is not tracked,
// which is not the same as free.
type Costs struct {
	Roles  []CostBar
	Models []CostBar
	Total  float64
	Chart  Chart
	// Unpriced are the models of the calls no price was known for.
	Unpriced []string
	// Priced says some call was priced (Total covers only those).
	Priced bool
}

// TotalText is the total cost as the page says it.
func (c Costs) TotalText() string {
	switch {
	case !c.Priced:
		return "cost not tracked (no price is known for " + strings.Join(c.Unpriced, ", ") + ")"
	case len(c.Unpriced) > 0:
		return fmt.Sprintf("$%.4f for the priced calls; cost not tracked for %s (no price is known)", c.Total, strings.Join(c.Unpriced, ", "))
	}
	return fmt.Sprintf("$%.4f", c.Total)
}

// CostBar is one row of the cost chart.
type CostBar struct {
	Name         string
	Calls        int
	InputTokens  int64
	OutputTokens int64
	CostUSD      float64
	// Unpriced counts the calls without a known price.
	Unpriced int
}

// Cost is the bar's cost as the page says it: dollars, "not tracked"
// when none of its calls had a price, and the dollars of the priced
// ones plus a note when only some had.
func (b CostBar) Cost() string {
	switch {
	case b.Unpriced == 0:
		return fmt.Sprintf("$%.4f", b.CostUSD)
	case b.Unpriced == b.Calls:
		return "not tracked"
	}
	return fmt.Sprintf("$%.4f (%d of %d calls not tracked)", b.CostUSD, b.Unpriced, b.Calls)
}

// Chart is the server-rendered SVG bar chart of cost (or tokens, when no
// cost was priced) per role. With a budget in the chart's unit it adds a
// total bar and a vertical budget line on the same scale.
type Chart struct {
	Unit   string
	Height float64
	Bars   []ChartBar
	Budget *BudgetLine
}

// BudgetLine is the run's budget drawn on the cost chart, and said in
// words (Text) so that over budget is not told by colour alone.
type BudgetLine struct {
	X      float64 // of the line, in the chart's units (label column included)
	Label  string  // "budget $0.25"
	Over   bool    // the total passed the budget
	Text   string  // "$0.31 of a $0.25 budget: over budget"
	TotalY float64 // the total bar's row
}

// ChartBar is one bar of Chart.
type ChartBar struct {
	Y, W  float64
	Label string
	Value string
}

// Build folds a session's events into the page model.
func Build(sessionID string, evs []event.Event, now time.Time) (Session, error) {
	return BuildRows(sessionID, evs, now, 0)
}

// DefaultMaxRows is how many of the latest events the page lists unless
// asked for all (?all=1): a 5,000-event session's table is most of its
// page's bytes and time, and the timeline and cost cover every event.
const DefaultMaxRows = 1000

// BuildRows is Build listing only the latest maxRows events (0: all).
func BuildRows(sessionID string, evs []event.Event, now time.Time, maxRows int) (Session, error) {
	snap, err := replay.Replay(evs)
	if err != nil {
		return Session{}, err
	}
	s := Session{
		ID: sessionID, Repo: access.RepoOf(evs), State: string(snap.RunStatus), Prompt: snap.Prompt,
		LastSeq: snap.LastSeq, Terminal: snap.Terminal, Output: snap.Output, Usage: snap.Usage,
		LLMCalls: snap.LLMCalls, ToolCalls: len(snap.ToolsInvoked),
	}
	if s.State == "" {
		s.State = "idle"
	}
	for i := range evs {
		if evs[i].Type == event.SessionStart {
			s.TraceID = event.FieldString(evs[i].Payload, "trace_id")
			break
		}
	}
	if len(evs) > 0 {
		s.Started, s.Updated = evs[0].TS, evs[len(evs)-1].TS
	}
	first := 0
	if maxRows > 0 && len(evs) > maxRows {
		first = len(evs) - maxRows
		s.Hidden = first
	}
	s.Events = make([]Row, 0, len(evs)-first)
	var prompts *event.Prompts // the session's prompt blocks, read on the first model call shown
	for i := first; i < len(evs); i++ {
		r := RowOf(&evs[i])
		if evs[i].Type == event.LLMRequest {
			if prompts == nil {
				prompts = event.NewPrompts(evs)
			}
			r.Body = requestBody(prompts, &evs[i])
		}
		s.Events = append(s.Events, r)
	}
	s.Timeline = timeline(evs, string(snap.RunStatus), now)
	for _, p := range snap.PendingApprovals {
		s.Pending = append(s.Pending, pendingOf(p))
	}
	for _, r := range snap.ResolvedApprovals {
		pv := pendingOf(r)
		s.Resolved = append(s.Resolved, Resolved{ID: r.ID, Tool: r.Tool, Decision: r.Decision, By: r.By, Reason: r.Reason,
			Digest: r.Digest, Summary: pv.Summary, Command: pv.Command, Diff: pv.Diff, Seq: r.RequestedSeq, ResolvedSeq: r.ResolvedSeq})
	}
	s.Costs = costs(evs, snap.Budget)
	s.Evidence = buildEvidence(evs, snap)
	return s, nil
}

// RowOf renders one event for the table.
func RowOf(e *event.Event) Row {
	r := Row{Seq: e.Seq, TS: e.TS, Actor: e.Actor, Type: e.Type, Body: body(e.Payload)}
	p := e.Payload
	switch e.Type {
	case event.SessionStart, event.RunStarted:
		r.Summary = event.FieldString(p, "prompt")
	case event.LLMRequest:
		r.Summary = "model call, attempt " + fmt.Sprint(event.FieldInt(p, "attempt"))
	case event.LLMResponse:
		resp := event.Field(p, "response")
		u := event.Field(resp, "usage")
		r.Summary = fmt.Sprintf("%s · %s · %d in / %d out tokens", event.FieldString(resp, "model"), event.FieldString(resp, "finish_reason"), event.FieldInt(u, "input_tokens"), event.FieldInt(u, "output_tokens"))
	case event.ToolInvoke:
		r.Summary = event.FieldString(p, "tool") + " " + event.FieldString(p, "call_id")
	case event.ToolResult:
		outcome, exit, _ := commandOutcome(p)
		switch {
		case isCommand(event.FieldString(p, "tool")) && outcome == "failed" && exit != "":
			// The tool ran the command, and the command failed: the
			// exit code, not the tool's ok, says how the step went.
			r.Summary, r.Class = "failed: exit "+exit, "fail"
		case isCommand(event.FieldString(p, "tool")) && outcome == "passed" && exit != "":
			r.Summary, r.Class = "passed: exit "+exit, "ok"
		case event.FieldBool(p, "ok"):
			r.Summary, r.Class = "ok", "ok"
		default:
			r.Summary, r.Class = "failed: "+event.FieldString(event.Field(p, "error"), "code"), "fail"
		}
		if d := event.FieldFloat(p, "duration_ms"); d > 0 {
			r.Summary += fmt.Sprintf(" in %.0f ms", d)
		}
	case event.ToolRejected:
		r.Summary, r.Class = "rejected: "+event.FieldString(p, "tool")+" "+event.FieldString(event.Field(p, "error"), "code"), "fail"
	case event.ApprovalRequested:
		r.Summary, r.Class = "approval "+event.FieldString(p, "approval_id")+" for "+event.FieldString(p, "tool"), "wait"
	case event.ApprovalResolved:
		r.Summary = event.FieldString(p, "decision") + " by " + event.FieldString(p, "by")
		if why := event.FieldString(p, "reason"); why != "" {
			r.Summary += " (" + why + ")"
		}
	case event.AgentTransition:
		r.Summary = event.FieldString(p, "from") + " → " + event.FieldString(p, "to")
	case event.RunPaused:
		r.Summary, r.Class = "paused: "+event.FieldString(p, "reason"), "wait"
	case event.TurnTerminal:
		r.Summary = event.FieldString(p, "status")
		if why := event.FieldString(p, "reason"); why != "" {
			r.Summary += ": " + why
		}
		if event.FieldString(p, "status") == "completed" {
			r.Class = "ok"
		} else {
			r.Class = "fail"
		}
	case event.HookFired:
		r.Summary = event.FieldString(p, "hook") + " " + event.FieldString(p, "handler") + ": " + event.FieldString(p, "decision")
	case event.WorkerReport:
		r.Summary = event.FieldString(p, "output")
	case event.ArtifactEmitted:
		r.Summary = event.FieldString(p, "kind") + " " + event.FieldString(p, "name")
	}
	r.Summary = clip(oneLine(r.Summary), 200)
	return r
}

// requestBody is an llm.request's payload with its request read back
// whole: the prompt blocks it references, defined once per session by
// earlier requests (docs/decisions.md), shown where they were sent. A
// request that does not read back is shown as stored.
func requestBody(prompts *event.Prompts, e *event.Event) string {
	full, err := prompts.Payload(e)
	if err != nil {
		return body(e.Payload)
	}
	return body(full)
}

// body is the payload indented for reading, bounded; invalid UTF-8 is
// replaced (the template escapes the rest).
func body(p []byte) string {
	var b bytes.Buffer
	if err := json.Indent(&b, p, "", "  "); err != nil {
		b.Reset()
		b.Write(p)
	}
	s := b.String()
	truncated := false
	if len(s) > maxBody {
		s, truncated = s[:maxBody], true
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.Contains(s, "\\n") || longLine(s) {
		s = splitLong(s)
	}
	if truncated {
		s += fmt.Sprintf("\n… (%d more bytes: see the event stream or events.jsonl)", len(p)-maxBody)
	}
	return s
}

func longLine(s string) bool {
	for _, l := range strings.Split(s, "\n") {
		if len(l) > maxLine {
			return true
		}
	}
	return false
}

// splitLong hard-wraps lines longer than maxLine (on rune boundaries).
func splitLong(s string) string {
	var out strings.Builder
	for i, l := range strings.Split(s, "\n") {
		if i > 0 {
			out.WriteByte('\n')
		}
		for len(l) > maxLine {
			cut := maxLine
			for cut > 0 && !utf8.RuneStart(l[cut]) {
				cut--
			}
			out.WriteString(l[:cut])
			out.WriteString("⏎\n")
			l = l[cut:]
		}
		out.WriteString(l)
	}
	return out.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// laneOrder puts the Plan-Work-Review roles first, in their order.
var laneOrder = map[string]int{"lead": 0, "planner": 1, "worker": 2, "reviewer": 3}

const (
	chartW   = 1000.0
	labelW   = 90.0
	laneH    = 26.0
	barH     = 18.0
	minBarW  = 3.0
	axisH    = 18.0
	maxLabel = 18
)

type span struct {
	lane, kind, label, title string
	start, end               time.Time
	outcome                  string
	seq                      int64
}

func timeline(evs []event.Event, status string, now time.Time) Timeline {
	var spans []*span
	open := map[string]*span{} // request/invoke event id → span
	byCall := map[string]*span{}
	lastLLM := map[string]*span{} // actor → its latest model call (a response without parent_id)
	var t0, t1 time.Time
	for i := range evs {
		e := &evs[i]
		ts, err := time.Parse(event.TimeFormat, e.TS)
		if err != nil {
			continue
		}
		if t0.IsZero() {
			t0 = ts
		}
		t1 = ts
		switch e.Type {
		case event.LLMRequest:
			sp := &span{lane: e.Actor, kind: "llm", label: "model", start: ts, outcome: "running", seq: e.Seq}
			open[e.ID] = sp
			lastLLM[e.Actor] = sp
			spans = append(spans, sp)
		case event.LLMResponse:
			sp := open[e.Parent()]
			if sp == nil {
				sp = lastLLM[e.Actor]
			}
			if sp != nil && sp.outcome == "running" {
				sp.end, sp.outcome = ts, "ok"
				resp := event.Field(e.Payload, "response")
				sp.label = event.FieldString(resp, "model")
				u := event.Field(resp, "usage")
				sp.title = fmt.Sprintf("%s: model call to %s, %d in / %d out tokens", e.Actor, sp.label, event.FieldInt(u, "input_tokens"), event.FieldInt(u, "output_tokens"))
				delete(open, e.Parent())
			}
		case event.ToolInvoke:
			lane := event.FieldString(e.Payload, "caller")
			if lane == "" {
				lane = e.Actor
			}
			tool := event.FieldString(e.Payload, "tool")
			sp := &span{lane: lane, kind: "tool", label: tool, start: ts, outcome: "running", seq: e.Seq, title: lane + ": " + tool}
			open[e.ID] = sp
			byCall[event.FieldString(e.Payload, "call_id")] = sp
			spans = append(spans, sp)
		case event.ToolResult:
			sp := open[e.Parent()]
			if sp == nil {
				sp = byCall[event.FieldString(e.Payload, "call_id")]
			}
			if sp != nil && sp.outcome == "running" {
				sp.end = ts
				outcome, exit, _ := commandOutcome(e.Payload)
				switch {
				case isCommand(sp.label) && outcome == "failed" && exit != "":
					sp.outcome = "fail"
					sp.title += " failed: exit " + exit
				case isCommand(sp.label) && exit != "":
					sp.outcome = "ok"
					sp.title += ": exit " + exit
				case event.FieldBool(e.Payload, "ok"):
					sp.outcome = "ok"
				default:
					sp.outcome = "fail"
					sp.title += " failed: " + event.FieldString(event.Field(e.Payload, "error"), "code")
				}
				delete(open, e.Parent())
			}
		case event.ToolRejected:
			tool := event.FieldString(e.Payload, "tool")
			spans = append(spans, &span{lane: e.Actor, kind: "tool", label: tool, start: ts, end: ts, outcome: "fail", seq: e.Seq, title: e.Actor + ": " + tool + " rejected: " + event.FieldString(event.Field(e.Payload, "error"), "code")})
		}
	}
	end := t1
	if status == "running" && now.After(end) {
		end = now
	}
	for _, sp := range spans {
		if sp.end.IsZero() {
			sp.end = end
			if status != "running" {
				sp.outcome = "fail"
				sp.title += " (never finished)"
			}
		}
	}
	lanes := map[string]*Lane{}
	var names []string
	for _, sp := range spans {
		if lanes[sp.lane] == nil {
			lanes[sp.lane] = &Lane{Name: sp.lane}
			names = append(names, sp.lane)
		}
	}
	sort.SliceStable(names, func(i, j int) bool {
		oi, iok := laneOrder[names[i]]
		oj, jok := laneOrder[names[j]]
		switch {
		case iok && jok:
			return oi < oj
		case iok != jok:
			return iok
		}
		return false
	})
	total := end.Sub(t0)
	if total <= 0 {
		total = time.Millisecond
	}
	scale := (chartW - labelW) / float64(total)
	tl := Timeline{Width: chartW, Duration: roundDur(total)}
	for i, n := range names {
		l := lanes[n]
		l.Name = clip(n, maxLabel)
		l.Y = axisH + float64(i)*laneH
		tl.Lanes = append(tl.Lanes, *l)
	}
	index := map[string]int{}
	for i, n := range names {
		index[n] = i
	}
	for _, sp := range spans {
		d := sp.end.Sub(sp.start)
		x := labelW + float64(sp.start.Sub(t0))*scale
		w := float64(d) * scale
		if w < minBarW {
			w = minBarW
		}
		if x+w > chartW {
			x = chartW - w
		}
		title := sp.title
		if title == "" {
			title = sp.lane + ": " + sp.label
		}
		title = fmt.Sprintf("%s — %s, %s (event %d)", clip(oneLine(title), 300), roundDur(d), outcomeWord(sp.outcome), sp.seq)
		label := ""
		if w > 60 {
			label = clip(sp.label, int(w/7))
		}
		li := index[sp.lane]
		tl.Lanes[li].Bars = append(tl.Lanes[li].Bars, Bar{X: x, W: w, Y: tl.Lanes[li].Y + (laneH-barH)/2, Kind: sp.kind, Outcome: sp.outcome, Label: label, Title: title, Seq: sp.seq})
	}
	tl.Height = axisH + float64(len(names))*laneH + 4
	for i := 0; i <= 4; i++ {
		tl.Ticks = append(tl.Ticks, Tick{X: labelW + float64(i)*(chartW-labelW)/4, Label: roundDur(total * time.Duration(i) / 4), End: i == 4})
	}
	return tl
}

func outcomeWord(o string) string {
	switch o {
	case "ok":
		return "succeeded"
	case "fail":
		return "failed"
	}
	return "still running"
}

func roundDur(d time.Duration) string {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Microsecond).String()
}

func pendingOf(p replay.Approval) Pending {
	out := Pending{ID: p.ID, Tool: p.Tool, Digest: p.Digest, Seq: p.RequestedSeq}
	var rev struct {
		Commit string `json:"commit"`
	}
	if json.Unmarshal(p.Revision, &rev) == nil {
		out.Head = rev.Commit
	}
	var pv struct {
		Diff    string `json:"diff"`
		Cut     bool   `json:"diff_truncated"`
		Command string `json:"command"`
		Summary string `json:"summary"`
	}
	_ = json.Unmarshal(p.Preview, &pv)
	out.Summary, out.Command, out.Cut = clip(pv.Summary, 500), clip(pv.Command, 2000), pv.Cut
	diff := pv.Diff
	if diff == "" {
		var args struct {
			UnifiedDiff string `json:"unifiedDiff"`
		}
		_ = json.Unmarshal(p.Args, &args)
		diff = args.UnifiedDiff
	}
	out.Diff = diffLines(diff)
	out.Split = split(out.Diff)
	return out
}

// diffLines classifies a unified diff's lines for highlighting; it bounds
// the diff shown like the event bodies.
func diffLines(d string) []DiffLine {
	if d == "" {
		return nil
	}
	if len(d) > maxBody {
		d = d[:maxBody] + "\n… (diff truncated)"
	}
	d = splitLong(strings.ToValidUTF8(d, "\uFFFD"))
	var out []DiffLine
	for _, l := range strings.Split(strings.TrimSuffix(d, "\n"), "\n") {
		k := "ctx"
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"), strings.HasPrefix(l, "diff "):
			k = "file"
		case strings.HasPrefix(l, "@@"):
			k = "hunk"
		case strings.HasPrefix(l, "+"):
			k = "add"
		case strings.HasPrefix(l, "-"):
			k = "del"
		}
		out = append(out, DiffLine{Kind: k, Text: l})
	}
	return out
}

func costs(evs []event.Event, budget *replay.Budget) Costs {
	roles := map[string]*CostBar{}
	models := map[string]*CostBar{}
	var c Costs
	add := func(m map[string]*CostBar, name string, in, out int64, usd float64) {
		b := m[name]
		if b == nil {
			b = &CostBar{Name: clip(name, 60)}
			m[name] = b
		}
		b.Calls++
		b.InputTokens += in
		b.OutputTokens += out
		b.CostUSD += usd
		if usd <= 0 {
			b.Unpriced++
		}
	}
	unpriced := map[string]bool{}
	for i := range evs {
		e := &evs[i]
		if e.Type != event.LLMResponse {
			continue
		}
		resp := event.Field(e.Payload, "response")
		u := event.Field(resp, "usage")
		in, out, usd := event.FieldInt(u, "input_tokens"), event.FieldInt(u, "output_tokens"), event.FieldFloat(u, "cost_usd")
		role := event.FieldString(e.Payload, "role")
		if role == "" {
			role = e.Actor
		}
		model := event.FieldString(resp, "model")
		if model == "" {
			model = "(unknown model)"
		}
		add(roles, role, in, out, usd)
		add(models, model, in, out, usd)
		c.Total += usd
		if usd > 0 {
			c.Priced = true
		} else if !unpriced[model] {
			unpriced[model] = true
			c.Unpriced = append(c.Unpriced, clip(model, 60))
		}
	}
	sort.Strings(c.Unpriced)
	c.Roles, c.Models = sorted(roles), sorted(models)
	c.Chart = chart(c.Roles, c.Total > 0, budget)
	return c
}

func sorted(m map[string]*CostBar) []CostBar {
	out := make([]CostBar, 0, len(m))
	for _, b := range m {
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool {
		oi, iok := laneOrder[out[i].Name]
		oj, jok := laneOrder[out[j].Name]
		if iok && jok {
			return oi < oj
		}
		if iok != jok {
			return iok
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Chart geometry: a label column, then bars up to barW.
const (
	chartLabelW = 110.0
	chartBarW   = 260.0
	chartRowH   = 24.0
)

func chart(bars []CostBar, priced bool, budget *replay.Budget) Chart {
	ch := Chart{Unit: "tokens"}
	if priced {
		ch.Unit = "USD"
	}
	value := func(b CostBar) float64 {
		if priced {
			return b.CostUSD
		}
		return float64(b.InputTokens + b.OutputTokens)
	}
	format := func(v float64) string {
		// A recorded budget can be any finite number: past a million
		// the value is written in exponent form, never 300 digits.
		switch {
		case priced && v >= 1e6:
			return fmt.Sprintf("$%.4g", v)
		case priced:
			return fmt.Sprintf("$%.4f", v)
		case v >= 1e15:
			return fmt.Sprintf("%.4g tokens", v)
		}
		return fmt.Sprintf("%.0f tokens", v)
	}
	// The budget in the chart's unit: the cost limit when the calls were
	// priced, the token limit when they were not. replay keeps only
	// finite, positive limits.
	var limit, total float64
	if budget != nil {
		if priced {
			limit = budget.MaxCostUSD
		} else {
			limit = float64(budget.MaxTokens)
		}
	}
	maxV := limit
	for _, b := range bars {
		maxV = max(maxV, value(b))
		total += value(b)
	}
	if limit > 0 {
		maxV = max(maxV, total)
	}
	width := func(v float64) float64 {
		if maxV <= 0 || v <= 0 {
			return 1
		}
		return max(v/maxV*chartBarW, 1)
	}
	for i, b := range bars {
		ch.Bars = append(ch.Bars, ChartBar{Y: float64(i) * chartRowH, W: width(value(b)), Label: b.Name, Value: format(value(b))})
	}
	rows := len(bars)
	if limit > 0 {
		over := total > limit
		bl := &BudgetLine{X: chartLabelW + limit/maxV*chartBarW, Label: "budget " + format(limit), Over: over, TotalY: float64(rows) * chartRowH}
		pct := fmt.Sprintf("%.0f%%", total/limit*100)
		if total/limit > 10 {
			pct = "more than 1000%"
		}
		bl.Text = fmt.Sprintf("%s of a %s budget (%s)", format(total), format(limit), pct)
		v := format(total)
		if over {
			bl.Text += ": over budget"
			v += " — over budget"
		}
		ch.Bars = append(ch.Bars, ChartBar{Y: bl.TotalY, W: width(total), Label: "total", Value: v})
		ch.Budget = bl
		rows++
	}
	ch.Height = float64(rows)*chartRowH + 4
	if ch.Budget != nil {
		ch.Height += 14 // the line's label under the bars
	}
	return ch
}

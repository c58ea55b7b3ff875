package viewer

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
)

// hostileSession is a session whose model output, tool output and prompt
// try to break out of the page.
func hostileSession(t testing.TB) []event.Event {
	t.Helper()
	s := store.NewMemory(newSealer(t))
	run := "run-h"
	huge := strings.Repeat("A", 300_000)
	invalid := "bad \xff\xfe utf8 \xc3"
	appendTo(t, s, "h",
		event.Draft{RunID: run, Type: event.SessionStart, Actor: "user", Payload: map[string]any{"prompt": "<script>alert('prompt')</script>"}},
		event.Draft{RunID: run, Type: event.RunStarted, Actor: "runtime", Payload: map[string]any{"run_id": run, "prompt": "<script>alert('prompt')</script>", "trigger": map[string]any{"repo": "octo/app"}}},
		event.Draft{RunID: run, Type: event.LLMRequest, Actor: "worker", Payload: map[string]any{"attempt": 1, "request": map[string]any{"model": "m", "schema_version": "v1", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, "role": "worker"}},
		event.Draft{RunID: run, Type: event.LLMResponse, Actor: "worker", Payload: map[string]any{"role": "worker", "response": map[string]any{"model": "<img src=x onerror=alert(1)>", "finish_reason": "stop", "schema_version": "v1", "text": "[click](javascript:alert(1)) <a href=\"javascript:alert(2)\">x</a> " + invalid, "tool_calls": []any{}, "usage": map[string]any{"input_tokens": 10, "output_tokens": 5}}}},
		event.Draft{RunID: run, Type: event.ToolInvoke, Actor: "worker", Payload: map[string]any{"args": map[string]any{"path": "</pre><script>alert(3)</script>"}, "call_id": "c1", "caller": "worker", "tool": "repo.read"}},
		event.Draft{RunID: run, Type: event.ToolResult, Actor: "kernel", Payload: map[string]any{"call_id": "c1", "ok": true, "tool": "repo.read", "result": map[string]any{"content": huge}}},
		event.Draft{RunID: run, Type: event.WorkerReport, Actor: "worker", Payload: map[string]any{"output": "</textarea><script>alert(4)</script>" + invalid, "schema_version": "v1", "steps_completed": []string{}, "tool_calls_made": []string{}}},
		event.Draft{RunID: run, Type: event.ApprovalRequested, Actor: "kernel", Payload: map[string]any{"approval_id": "ap-1", "tool": "repo.patch", "digest": digest, "preview": map[string]any{"diff": "+<script>alert(5)</script>\n-" + invalid + "\n+" + huge[:5000]}}},
		event.Draft{RunID: run, Type: event.RunPaused, Actor: "runtime", Payload: map[string]any{"reason": "approval", "approval_ids": []string{"ap-1"}}},
	)
	evs, err := s.Read(context.Background(), "h", 1)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func TestHostileTextIsEscaped(t *testing.T) {
	evs := hostileSession(t)
	s, err := Build("h", evs, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := Templates()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tmpl.ExecuteTemplate(&b, "run", page{Title: "x", S: s, Live: true, CanApprove: true, CSRF: "tok", Login: "wes"}); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, bad := range []string{"<script>alert", "<img src=x", `href="javascript:`, "</pre><script>", "</textarea><script>"} {
		if strings.Contains(html, bad) {
			i := strings.Index(html, bad)
			t.Errorf("the page contains %q unescaped: …%s…", bad, html[max(0, i-80):min(len(html), i+80)])
		}
	}
	// The only scripts are the embedded file; no inline handlers.
	if n := strings.Count(html, "<script"); n != 1 || !strings.Contains(html, `<script src="/assets/viewer.js" defer></script>`) {
		t.Errorf("%d <script> tags, want only the embedded viewer.js", n)
	}
	if strings.Contains(html, " style=") || strings.Contains(html, "<style") {
		t.Error("inline style: the CSP forbids it")
	}
	if !strings.Contains(html, "&lt;script&gt;alert(&#39;prompt&#39;)&lt;/script&gt;") {
		t.Error("the prompt is not shown escaped")
	}
	// Invalid UTF-8 is replaced, never passed through.
	if !bytes.Equal([]byte(strings.ToValidUTF8(html, "?")), []byte(html)) {
		t.Error("the page is not valid UTF-8")
	}
	// A 300 kB tool result is bounded on the page and says so.
	if len(html) > 400_000 {
		t.Errorf("the page is %d bytes: a huge payload is not bounded", len(html))
	}
	if !strings.Contains(html, "more bytes: see the event stream or events.jsonl") {
		t.Error("a truncated payload does not say so")
	}
	// Every line of text (a diff's lines are block spans) is bounded.
	for _, line := range strings.Split(strings.NewReplacer("</span>", "\n", "</td>", "\n").Replace(html), "\n") {
		if len(line) > maxLine+200 {
			t.Errorf("a line of %d bytes reaches the page", len(line))
			break
		}
	}
}

func TestTimelineAndCost(t *testing.T) {
	evs := hostileSession(t)
	s, err := Build("h", evs, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Timeline.Lanes) != 1 || s.Timeline.Lanes[0].Name != "worker" {
		t.Fatalf("lanes = %+v, want one worker lane", s.Timeline.Lanes)
	}
	bars := s.Timeline.Lanes[0].Bars
	if len(bars) != 2 || bars[0].Kind != "llm" || bars[1].Kind != "tool" || bars[1].Outcome != "ok" {
		t.Fatalf("bars = %+v, want a model call then a tool call", bars)
	}
	for _, b := range bars {
		if b.X < labelW || b.X+b.W > chartW+0.01 || b.W < minBarW {
			t.Errorf("bar %+v outside the chart", b)
		}
	}
	if len(s.Costs.Roles) != 1 || s.Costs.Roles[0].InputTokens != 10 || s.Costs.Roles[0].OutputTokens != 5 {
		t.Errorf("costs = %+v", s.Costs.Roles)
	}
	if len(s.Pending) != 1 || len(s.Pending[0].Diff) < 2 || s.Pending[0].Diff[0].Kind != "add" || s.Pending[0].Diff[1].Kind != "del" {
		t.Errorf("pending = %+v", s.Pending)
	}
}

func TestRecordedSessionRenders(t *testing.T) {
	f, err := readEvents("../../testdata/sessions/approval.events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Build("recorded-approval", f, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, l := range s.Timeline.Lanes {
		names = append(names, l.Name)
	}
	if got := strings.Join(names, ","); got != "lead,planner,worker,reviewer" {
		t.Errorf("lanes = %s, want lead,planner,worker,reviewer", got)
	}
	if s.State != "completed" || s.Terminal == nil || len(s.Resolved) != 1 {
		t.Errorf("state %s, terminal %v, resolved %v", s.State, s.Terminal, s.Resolved)
	}
}

func TestSplitDiff(t *testing.T) {
	rows := split(diffLines("--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n keep\n-old1\n-old2\n+new1\n tail\n"))
	var got []string
	for _, r := range rows {
		got = append(got, r.Kind+"|"+r.Left.Kind+":"+r.Left.Text+"|"+r.Right.Kind+":"+r.Right.Text)
	}
	want := []string{
		"file|file:--- a/x|:", "file|file:+++ b/x|:", "hunk|hunk:@@ -1,3 +1,3 @@|:",
		"|ctx:keep|ctx:keep", "|del:old1|add:new1", "|del:old2|:", "|ctx:tail|ctx:tail",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("split =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

package tracking

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	goldenfile "github.com/agentos/agentos/bot/internal/golden"
	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/runtime/replay"
)

// golden compares got with testdata/name.golden (rewritten with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenfile.Check(t, name+".golden", got)
}

func raw(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func digest(c byte) string { return strings.Repeat(string(c), 64) }

const patchDiff = `diff --git a/src/auth.ts b/src/auth.ts
--- a/src/auth.ts
+++ b/src/auth.ts
@@ -10,7 +10,7 @@ export function login(user: string) {
-  if (token == null) {
+  if (token === undefined || token === null) {
     throw new Error("no token")
   }`

func plan(t testing.TB, steps ...string) json.RawMessage {
	var ss []map[string]string
	for i, s := range steps {
		ss = append(ss, map[string]string{"id": fmt.Sprintf("s%d", i+1), "description": s})
	}
	return raw(t, map[string]any{"steps": ss, "risks": []string{}, "needs_advisor": false, "schema_version": "v1"})
}

func pausedSnapshot(t testing.TB) replay.Snapshot {
	return replay.Snapshot{
		SessionID: "sess-01J", RunID: "run-2", RunStatus: "paused", Prompt: "fix the null check in auth.ts",
		Plan:     plan(t, "Read src/auth.ts", "Patch the null check", "Run the tests"),
		Report:   raw(t, map[string]any{"output": "", "steps_completed": []string{"s1"}, "schema_version": "v1"}),
		Workflow: &replay.Workflow{CycleID: "default", Phase: "work"},
		Usage:    replay.Usage{InputTokens: 12345, OutputTokens: 678, CostUSD: 0.0123}, LLMCalls: 4,
		ToolsInvoked: []replay.ToolCall{{Seq: 7, CallID: "c1", Tool: "repo.read", Completed: true, OK: true}},
		PendingApprovals: []replay.Approval{
			{ID: "ap-1", Tool: "repo.patch", CallID: "c2", Digest: digest('a'), RequestedSeq: 9,
				Preview:  raw(t, kernel.Preview{Files: []kernel.FileChange{{Path: "src/auth.ts", Op: "modify", Hunks: 1, Added: 1, Removed: 1}}, Hunks: 1, LinesAdded: 1, LinesRemoved: 1, Diff: patchDiff}),
				Revision: raw(t, map[string]string{"commit": strings.Repeat("1", 40)})},
			{ID: "ap-2", Tool: "process.run", CallID: "c3", Digest: digest('b'), RequestedSeq: 10,
				Preview: raw(t, kernel.Preview{Command: "npm test -- --runInBand", Cwd: "web", Timeout: "5m0s"})},
		},
	}
}

func TestGolden(t *testing.T) {
	opts := Options{EventsURL: "https://agentos.example.com/sessions/sess-01J/events", HeadSHA: strings.Repeat("1", 40)}
	ok := true
	completed := pausedSnapshot(t)
	completed.RunStatus, completed.PendingApprovals = "completed", nil
	completed.ResolvedApprovals = pausedSnapshot(t).PendingApprovals
	completed.ToolsInvoked = []replay.ToolCall{
		{Seq: 12, CallID: "c3", Tool: "process.run", Completed: true, OK: false, ErrorCode: "EXIT_STATUS"},
		{Seq: 15, CallID: "c3", Tool: "process.run", Completed: true, OK: true},
		{Seq: 16, CallID: "c9", Tool: "process.run", Completed: true, OK: true},
	}
	completed.Usage = replay.Usage{InputTokens: 1234567, OutputTokens: 45678, CostUSD: 1.2345}
	completed.LLMCalls = 17
	completed.Output = "Fixed the null check.\n\n```ts\nif (token === undefined || token === null) {\n```\n\nAll tests pass."
	completed.Review = raw(t, map[string]any{"verdict": "pass", "feedback": "Small, correct change.", "schema_version": "v1"})
	completed.Artifacts = []replay.Artifact{{Seq: 3, Kind: "plan", Digest: digest('c')}, {Seq: 20, Kind: "patch", Name: "change.diff", Digest: digest('d'), Size: 2048}}
	completed.Terminal = &replay.TerminalReport{Status: "completed", Reason: "the change is committed on agent/sess-01J", NextAction: "review and merge the pull request", TraceID: "tr-9", CorrelationID: "co-1", SchemaVersion: "v1"}
	completed.CloseOK = &ok

	failed := pausedSnapshot(t)
	failed.RunStatus, failed.PendingApprovals = "failed", nil
	failed.Terminal = &replay.TerminalReport{Status: "failed", Reason: "provider error: 529 overloaded | retry budget spent", NextAction: "run `/agent retry` later", TraceID: "tr-10", ErrorClass: "provider_error", SchemaVersion: "v1"}

	running := pausedSnapshot(t)
	running.RunStatus, running.PendingApprovals = "running", nil
	running.ToolsInvoked = append(running.ToolsInvoked, replay.ToolCall{Seq: 11, CallID: "c5", Tool: "process.run"})

	tests := []struct {
		name   string
		snap   replay.Snapshot
		review bool
	}{
		{"running", running, false},
		{"paused", pausedSnapshot(t), true},
		{"completed", completed, false},
		{"failed", failed, false},
		{"oversized", oversized(t), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := ViewFromSnapshot(tt.snap, opts)
			got := Render(v)
			checkBody(t, got)
			if id, ok := FindSessionID(got); !ok || id != tt.snap.SessionID {
				t.Errorf("FindSessionID = %q, %v; want %q", id, ok, tt.snap.SessionID)
			}
			golden(t, tt.name, got)
			if tt.review {
				r := RenderApprovalReview(v)
				checkBody(t, r)
				golden(t, tt.name+"_review", r)
			}
		})
	}
}

// oversized has far more plan, approvals and diff than fit in a comment.
func oversized(t testing.TB) replay.Snapshot {
	s := pausedSnapshot(t)
	var steps []string
	for i := 0; i < 3000; i++ {
		steps = append(steps, fmt.Sprintf("Step %d: %s", i, strings.Repeat("refactor the module ", 10)))
	}
	s.Plan = plan(t, steps...)
	var big strings.Builder
	big.WriteString("diff --git a/big.txt b/big.txt\n--- a/big.txt\n+++ b/big.txt\n@@ -1,0 +1,4000 @@\n")
	for i := 0; i < 4000; i++ {
		fmt.Fprintf(&big, "+line %d with ``` backticks inside\n", i)
	}
	s.PendingApprovals = nil
	for i := 0; i < 60; i++ {
		s.PendingApprovals = append(s.PendingApprovals, replay.Approval{
			ID: fmt.Sprintf("ap-%02d", i), Tool: "repo.patch", Digest: digest('e'), RequestedSeq: int64(100 + i),
			Preview: raw(t, kernel.Preview{Files: []kernel.FileChange{{Path: "big.txt", Op: "create", Added: 4000}}, LinesAdded: 4000, Diff: big.String()}),
		})
	}
	s.Output = strings.Repeat("A long report line.\n", 300) + "```\n" + strings.Repeat("code line\n", 400) + "```\n"
	return s
}

// checkBody asserts what GitHub needs of any body the bot posts.
func checkBody(t *testing.T, body string) {
	t.Helper()
	if n := chars(body); n > MaxChars {
		t.Errorf("body is %d characters, over GitHub's %d", n, MaxChars)
	}
	if open := openFence(body); open != "" {
		t.Errorf("body leaves the code fence %q open", open)
	}
}

// openFence returns the fence left open at the end of md, "" if none.
func openFence(md string) string {
	open := ""
	for _, l := range strings.Split(md, "\n") {
		t := strings.TrimSpace(l)
		if !strings.HasPrefix(t, "```") && !strings.HasPrefix(t, "~~~") {
			continue
		}
		run := t[:len(t)-len(strings.TrimLeft(t, t[:1]))]
		switch {
		case open == "":
			open = run
		case run[0] == open[0] && len(run) >= len(open) && strings.TrimLeft(t, t[:1]) == "":
			open = ""
		}
	}
	return open
}

func TestOversizedIsTruncatedGracefully(t *testing.T) {
	v := ViewFromSnapshot(oversized(t), Options{EventsURL: "https://x.example/events"})
	body := Render(v)
	for _, want := range []string{"more steps not shown", "Report shortened", "[the run's events](https://x.example/events)", "#### Waiting for approval (60)"} {
		if !strings.Contains(body, want) {
			t.Errorf("tracking comment lacks %q", want)
		}
	}
	if chars(body) < MaxChars/2 {
		t.Errorf("tracking comment is %d characters; truncation threw away too much", chars(body))
	}
	r := RenderApprovalReview(v)
	for _, want := range []string{"The diff is shortened here", "How to answer", "`ap-59`"} {
		if !strings.Contains(r, want) {
			t.Errorf("review lacks %q", want)
		}
	}
	if strings.Count(r, "````diff") == 0 {
		t.Errorf("a diff containing ``` must be fenced with a longer fence")
	}
	// Hundreds of approvals: the list itself is cut, with the ids left out.
	many := v
	for i := 60; i < 400; i++ {
		many.Approvals = append(many.Approvals, Approval{ID: fmt.Sprintf("ap-%03d", i), Tool: "process.run", Command: "make test", Digest: digest('f')})
	}
	r = RenderApprovalReview(many)
	checkBody(t, r)
	if !strings.Contains(r, "more actions not shown") || !strings.Contains(r, "How to answer") {
		t.Errorf("review of 400 approvals lacks the truncation note or the instructions")
	}
}

func TestFindSessionID(t *testing.T) {
	tests := []struct {
		body   string
		want   string
		wantOK bool
	}{
		{Marker("s-1") + "\nhello", "s-1", true},
		{Render(View{SessionID: "abc.DEF_1:2"}), "abc.DEF_1:2", true},
		{"quoted:\n" + Marker("s-1"), "", false},
		{"<!-- agentos:session= -->", "", false},
		{"", "", false},
		{Render(View{SessionID: "real", Prompt: Marker("fake")}), "real", true},
	}
	for _, tt := range tests {
		got, ok := FindSessionID(tt.body)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("FindSessionID(%q) = %q, %v; want %q, %v", cutRunes(tt.body, 60), got, ok, tt.want, tt.wantOK)
		}
	}
	// A prompt cannot smuggle a second marker into the comment.
	if body := Render(View{SessionID: "real", Prompt: Marker("fake")}); strings.Count(body, "<!--") != 1 {
		t.Errorf("rendered comment has %d HTML comments, want 1:\n%s", strings.Count(body, "<!--"), body)
	}
}

func TestCutMarkdown(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"fits", "a\nb\n", 10, "a\nb\n"},
		{"line boundary", "aaa\nbbb\nccc\n", 9, "aaa\nbbb\n|"},
		{"never inside a fence", "intro\n```\ncode\ncode\n```\nafter\n", 20, "intro\n|"},
		{"whole fence kept", "intro\n```\ncode\n```\nafter line\n", 20, "intro\n```\ncode\n```\n|"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cutMarkdown(tt.in, tt.max, "\n|")
			if got != tt.want {
				t.Errorf("cutMarkdown(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
			}
			if openFence(got) != "" {
				t.Errorf("fence left open in %q", got)
			}
		})
	}
}

func TestInlineHelpers(t *testing.T) {
	tests := []struct{ got, want string }{
		{code("go test ./..."), "`go test ./...`"},
		{code("echo `x`"), "`` echo `x` ``"},
		{code("a``b"), "```a``b```"},
		{thousands(1234567), "1,234,567"},
		{thousands(12), "12"},
		{thousands(-1000), "-1,000"},
		{oneLine("a |  b\n c", 100), `a \| b c`},
		{oneLine("abcdef", 4), "abc…"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestViewFromSnapshot(t *testing.T) {
	s := pausedSnapshot(t)
	s.Plan = json.RawMessage(`{"steps": "not a list"}`)
	s.PendingApprovals[0].Preview = json.RawMessage(`[1,2]`)
	v := ViewFromSnapshot(s, Options{})
	if len(v.Plan) != 0 {
		t.Errorf("malformed plan gave steps %v", v.Plan)
	}
	if a := v.Approvals[0]; a.ID != "ap-1" || a.Diff != "" || a.Commit != strings.Repeat("1", 40) {
		t.Errorf("approval with a malformed preview = %+v", a)
	}
	good := ViewFromSnapshot(pausedSnapshot(t), Options{})
	if got := good.Plan; len(got) != 3 || !got[0].Done || got[1].Done {
		t.Errorf("plan = %+v, want s1 done (from steps_completed), s2 not", got)
	}
	if a := good.Approvals[1]; a.Command != "npm test -- --runInBand" || a.Cwd != "web" {
		t.Errorf("process.run approval = %+v", a)
	}
}

// A test suite that ran and failed is a failed test, not a passed tool
// call; the command comes from the result.
func TestTestRunsUseTheCommandsOutcome(t *testing.T) {
	one, zero := int64(1), int64(0)
	no, yes := false, true
	s := replay.Snapshot{ToolsInvoked: []replay.ToolCall{
		{Tool: "test.run", CallID: "a", Completed: true, OK: true, Command: "go test ./...", ExitCode: &one, Passed: &no},
		{Tool: "test.run", CallID: "b", Completed: true, OK: true, Command: "go test ./...", ExitCode: &zero, Passed: &yes},
		{Tool: "lint.run", CallID: "c", Completed: true, OK: true, Command: "golangci-lint run", ExitCode: &one},
		{Tool: "test.run", CallID: "d", Completed: true, OK: false, ErrorCode: "TIMEOUT"},
		{Tool: "repo.read", CallID: "e", Completed: true, OK: true},
	}}
	got := testRuns(s)
	want := []TestRun{
		{Command: "go test ./...", Result: "failed", Detail: "exit 1"},
		{Command: "go test ./...", Result: "passed"},
		{Command: "golangci-lint run", Result: "failed", Detail: "exit 1"},
		{Result: "failed", Detail: "TIMEOUT"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d runs, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("run %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestFitKeepsBodiesUnderTheLimitWithoutOpenFences(t *testing.T) {
	short := "a short body\n"
	if Fit(short) != short {
		t.Error("a short body was changed")
	}
	long := "intro\n```diff\n" + strings.Repeat("+ line of a very long diff\n", 4000) + "```\nafter\n"
	got := Fit(long)
	if chars(got) > MaxChars {
		t.Fatalf("%d characters, limit %d", chars(got), MaxChars)
	}
	if strings.Count(got, "```")%2 != 0 {
		t.Error("the cut left a code fence open")
	}
	if !strings.HasSuffix(got, fitNote) {
		t.Error("no truncation note")
	}
}

// TestSandboxWarning: every tracking comment says when commands run
// without a sandbox, or cannot run at all; a working sandbox adds nothing.
func TestSandboxWarning(t *testing.T) {
	for _, c := range []struct {
		mechanism, want string
	}{
		{"none", "Commands run without a sandbox"},
		{"unavailable", "Commands are refused"},
		{"bwrap", ""},
		{"landlock", ""},
		{"", ""},
	} {
		for _, status := range []replay.RunStatus{"", "running", "paused", "completed", "failed"} {
			got := Render(ViewFromSnapshot(replay.Snapshot{SessionID: "s1", RunStatus: status}, Options{Sandbox: c.mechanism}))
			has := strings.Contains(got, "⚠️")
			if c.want == "" && has || c.want != "" && !strings.Contains(got, c.want) {
				t.Errorf("%s, status %q: warning present %v, want %q\n%s", c.mechanism, status, has, c.want, got)
			}
		}
	}
}

// The tracking comment links the run viewer page when the server has a
// public https URL; the link names only the session.
func TestTrackingLinksTheViewerPage(t *testing.T) {
	s := replay.Snapshot{SessionID: "sess-01J", RunStatus: "paused"}
	got := Render(ViewFromSnapshot(s, Options{EventsURL: "https://github.com/o/r/blob/x/events.jsonl", ViewerURL: "https://agentos.example.com/runs/sess-01J"}))
	if !strings.Contains(got, "[Live run page](https://agentos.example.com/runs/sess-01J)") || !strings.Contains(got, "[run events](https://github.com/o/r/blob/x/events.jsonl)") {
		t.Errorf("no viewer link:\n%s", got)
	}
	// Not over plain http (the page's cookie would travel in clear).
	got = Render(ViewFromSnapshot(s, Options{ViewerURL: "http://agentos.example.com/runs/sess-01J"}))
	if strings.Contains(got, "Live run page") {
		t.Errorf("an http viewer link is rendered:\n%s", got)
	}
}

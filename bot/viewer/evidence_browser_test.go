package viewer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/access"
	"github.com/agentos/agentos/bot/api"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/chromedp/chromedp"
	"github.com/gin-gonic/gin"
)

// artifact is an artifact.emitted payload carrying doc.
func artifact(kind, name string, doc any) map[string]any {
	b, _ := json.Marshal(doc)
	sum := sha256.Sum256(b)
	return map[string]any{"kind": kind, "name": name, "digest": hex.EncodeToString(sum[:]), "size": len(b), "media_type": "application/json", "content": string(b)}
}

// reviewSession is a review whose three reviewer personas ran on a model
// with no known price: one reported, one's reply failed its schema, one
// was forbidden.
func reviewSession(t *testing.T, st store.Store, sid string) {
	run := "run-" + sid
	resp := func(role string) event.Draft {
		return event.Draft{RunID: run, Type: event.LLMResponse, Actor: role, Payload: map[string]any{"role": role, "response": map[string]any{"model": "local-llama", "finish_reason": "stop", "schema_version": "v1", "text": "{}", "tool_calls": []any{}, "usage": map[string]any{"input_tokens": 1000, "output_tokens": 50}}}}
	}
	appendTo(t, st, sid,
		event.Draft{RunID: run, Type: event.SessionStart, Actor: "user", Payload: map[string]any{"prompt": "review pull request #7"}},
		event.Draft{RunID: run, Type: event.RunStarted, Actor: "runtime", Payload: map[string]any{"run_id": run, "prompt": "review pull request #7", "trigger": map[string]any{"repo": "octo/app", "number": 7}}},
		resp("correctness"), resp("security"),
		event.Draft{RunID: run, Type: event.ArtifactEmitted, Actor: "workflow", Payload: artifact("review_aggregate", "review", map[string]any{"findings": []any{}, "suppressed": []any{}, "pre_existing": []any{}, "verdict": "fail", "coverage": 1.0 / 3, "p0_unresolved": 0, "schema_version": "v1"})},
		event.Draft{RunID: run, Type: event.ArtifactEmitted, Actor: "workflow", Payload: artifact("workflow_result", "review", map[string]any{"cycle_id": "review", "mode": "headless", "verdict": "done", "personas": []any{
			map[string]any{"persona": "correctness", "phase": "review", "status": "ran", "findings": 0},
			map[string]any{"persona": "security", "phase": "review", "status": "failed", "reason": "reply does not match persona_findings_v2: /findings/0: missing property \"severity\"", "findings": 0},
			map[string]any{"persona": "tests", "phase": "review", "status": "forbidden", "reason": "role-permissions: no rule matched", "findings": 0},
		}})},
		event.Draft{RunID: run, Type: event.RunCompleted, Actor: "runtime", Payload: map[string]any{"output": "no findings"}},
		event.Draft{RunID: run, Type: event.TurnTerminal, Actor: "runtime", Payload: map[string]any{"status": "completed", "next_action": "read the review", "trace_id": "t", "correlation_id": "c", "schema_version": "v1"}},
		event.Draft{RunID: run, Type: event.SessionClose, Actor: "runtime", Payload: map[string]any{"ok": true}},
	)
}

// TestBrowserEvidence opens, as `agentos view` serves them, the log the
// demo recorded (agentos demo --out DIR: DIR/events.jsonl, copied to
// testdata/demo.events.jsonl), a review whose personas did not all report,
// and a paused session, and reads in Chromium what the evidence sections
// say: each test.run's command, exit code and outcome (the demo's first,
// failing go test is failed, exit 1, whatever the tool's ok said), the
// changed files and the final diff, the approval with the diff it
// approved, the reviewer's verdict and the personas not reviewed, cost
// "not tracked" for a model without a price, and a paused session not
// called finished.
func TestBrowserEvidence(t *testing.T) {
	exe := chromium(t)
	f, err := os.Open(filepath.Join("testdata", "demo.events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	demoEvs, err := ReadEvents(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The demo's log and two sessions of this test in one store: the
	// demo's events as recorded, the others sealed here.
	st := store.NewMemory(newSealer(t))
	reviewSession(t, st, "review-1")
	githubSession(t, st, "paused-1", "octo/app", "fix the token check")
	fs, err := NewFileStore(demoEvs)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ck, _ := access.New(access.Options{Open: true})
	gin.SetMode(gin.ReleaseMode)
	serve := func(s store.Store) string {
		a, err := api.New(api.Options{Store: s, Access: ck, Poll: -1, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		v, err := New(Options{Store: s, Access: ck, Lister: a, ReadOnly: true, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		e := gin.New()
		a.Register(e)
		v.Register(e)
		srv := &restartable{addr: "127.0.0.1:0", h: e}
		srv.start(t)
		t.Cleanup(srv.kill)
		return "http://" + srv.addr
	}
	demoURL, otherURL := serve(fs), serve(st)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	defer cancelT()

	open := func(url string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#events-body"))); err != nil {
			t.Fatal(err)
		}
	}
	// texts is what the rows of a table (or any elements) say, as the
	// browser lays them out (innerText: what a reader sees).
	texts := func(sel string) []string {
		t.Helper()
		out, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](fmt.Sprintf(`Array.from(document.querySelectorAll(%q)).map(e => (e.innerText ?? e.textContent).replace(/\s+/g, " ").trim())`, sel)))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	text := func(sel string) string {
		t.Helper()
		all := texts(sel)
		if len(all) != 1 {
			t.Fatalf("%d elements match %s: %q", len(all), sel, all)
		}
		return all[0]
	}
	same := func(what string, got, want []string) {
		t.Helper()
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n got %q\nwant %q", what, got, want)
		}
	}

	// The demo: go test failed (exit 1), the patch was approved and
	// applied, go test passed, the reviewer passed it.
	open(demoURL + "/runs/demo-fix-auth")
	same("the commands", texts("table.commands tbody tr"), []string{
		"20 test.run go test -count=1 ./... 1 failed",
		"40 test.run go test -count=1 ./... 0 passed",
	})
	same("the events' summaries of the two test.run results", texts("#ev-20 summary, #ev-40 summary"), []string{"failed: exit 1 in 21304 ms", "passed: exit 0 in 463 ms"})
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#ev-20.row-fail").length`)); n != 1 {
		t.Error("the failing go test's row is not marked failed")
	}
	bars := texts("svg.timeline rect.bar-fail title")
	if len(bars) != 1 || !strings.Contains(bars[0], "test.run failed: exit 1") || !strings.Contains(bars[0], "failed (event 19)") {
		t.Errorf("the timeline's failed bars: %q", bars)
	}
	same("the changed files", texts("table.files tbody tr"), []string{"auth.go modify (approved) +2 −2 1"})
	diff := text("pre.final-diff")
	for _, want := range []string{"--- a/auth.go", "-\treturn strings.HasPrefix(expected, given)", "+\treturn subtle.ConstantTimeCompare([]byte(given), []byte(expected)) == 1"} {
		if !strings.Contains(diff, strings.Join(strings.Fields(want), " ")) {
			t.Errorf("the final diff lacks %q:\n%s", want, diff)
		}
	}
	answered := text("#answered-ap-ff17f37ce852")
	for _, want := range []string{"repo.patch ap-ff17f37ce852: approve by demo-maintainer", "981dcf422845c8877623777532edd58e26bbc8c3060850bc6d645c112b6dfff6",
		"-import \"strings\" +import \"crypto/subtle\"", "+ return subtle.ConstantTimeCompare([]byte(given), []byte(expected)) == 1"} {
		if !strings.Contains(answered, want) {
			t.Errorf("the answered approval lacks %q:\n%s", want, answered)
		}
	}
	if got := text("dl.review"); !strings.Contains(got, "Reviewer's verdict pass") {
		t.Errorf("the review says %q", got)
	}
	if got := text("#live-status"); got != "replay of a finished session (completed)" {
		t.Errorf("the demo's status line says %q", got)
	}
	if got := text("p.cost-total"); got != "Total: 14673 input + 629 output tokens; $0.0535." {
		t.Errorf("the demo's total says %q", got)
	}
	shot(t, ctx, "viewer-evidence.png")

	// The review: one persona of three reported; the model has no price.
	open(otherURL + "/runs/review-1")
	same("the personas", texts("table.personas tbody tr"), []string{
		"correctness review reviewed 0",
		"security review not reviewed: failed (reply does not match persona_findings_v2: /findings/0: missing property \"severity\") —",
		"tests review not reviewed: forbidden (role-permissions: no rule matched) —",
	})
	if got := text("p.review-incomplete"); got != "The review is incomplete: 2 personas did not review." {
		t.Errorf("the coverage line says %q", got)
	}
	if got := text("dl.review"); !strings.Contains(got, "Reviewer personas' verdict fail, coverage 33%") {
		t.Errorf("the review says %q", got)
	}
	same("the per-model cost", texts("table.costs:nth-of-type(2) tbody td:last-child"), []string{"not tracked"})
	if got := text("p.cost-total"); got != "Total: 2000 input + 100 output tokens; cost not tracked (no price is known for local-llama)." {
		t.Errorf("the unpriced total says %q", got)
	}
	if strings.Contains(text("#part-cost"), "$0.0000") {
		t.Error("an unpriced model's cost shows as $0.0000")
	}
	same("the commands of a run without any", texts("#part-evidence p.muted"), []string{
		"Read from the tools' results, the approvals and the review events of this log, not from the models' words.",
		"No command was run (no test.run, lint.run or process.run).",
		"No file was changed (no successful repo.write or repo.patch).",
	})

	// A paused session is not a finished one.
	open(otherURL + "/runs/paused-1")
	if got := text("#live-status"); got != "replay of a paused session: the run is waiting for an answer to an approval" {
		t.Errorf("the paused session's status line says %q", got)
	}
}

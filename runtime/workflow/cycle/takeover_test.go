package cycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/scripted"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/workflow/cycle"
	"github.com/agentos/agentos/schemas"
)

// errKilled is what a killed process's store answers.
var errKilled = errors.New("the process was killed")

// killStore is a process's view of a shared store that dies after its
// process has appended a given number of events: every later append fails
// (and the process's context is cancelled), as when the process is killed
// right after the store acknowledged its n-th event.
type killStore struct {
	store.Store
	mu     sync.Mutex
	left   int
	cancel context.CancelFunc
}

func (k *killStore) Append(ctx context.Context, sid string, expected int64, drafts ...event.Draft) ([]event.Event, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.left < len(drafts) {
		k.cancel()
		return nil, errKilled
	}
	evs, err := k.Store.Append(ctx, sid, expected, drafts...)
	k.left -= len(evs)
	return evs, err
}

// Close leaves the shared store open for the next process.
func (k *killStore) Close() error { return nil }

// callCounter counts the model calls a process makes, by role.
type callCounter struct {
	provider.Provider
	mu sync.Mutex
	n  map[string]int
}

func (c *callCounter) Complete(ctx context.Context, req provider.CompletionRequest) (provider.CompletionResponse, error) {
	c.mu.Lock()
	c.n[req.Role]++
	c.mu.Unlock()
	return c.Provider.Complete(ctx, req)
}

func (c *callCounter) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// comparable is a Result without what differs between two runs of the
// same request (its run's id, status and timing).
func comparable(t *testing.T, r cycle.Result) string {
	t.Helper()
	r.Outcome, r.Paused = run.Outcome{}, nil
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCycleKilledMidPhaseIsTakenOver kills the process running a review
// cycle after each n-th event it appended (in the fan-out, while its
// three persona lanes run in parallel, and in every other phase), and
// takes the run over in a new process from the log (Manager.Takeover).
// Every time: the result is the uninterrupted run's, the log verifies
// (workflow audit included) and replays to the same workflow state, every
// model call the log recorded is not made again, and no lane makes more
// calls in both processes together than uninterrupted plus the one that
// was in flight when the process died.
func TestCycleKilledMidPhaseIsTakenOver(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"db.go": dbGo})
	sc, err := scripted.Parse(strings.NewReader(reviewScript))
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := cycle.Request{SessionID: "review-k", Cycle: "review", Prompt: "review this pull request", Inputs: map[string]string{"diff": prDiff}, Cwd: dir}

	// The uninterrupted run.
	whole := store.NewMemory(sealer)
	count := &callCounter{n: map[string]int{}}
	w := openWorldOn(t, dir, t.TempDir(), whole, true, sc, "", func(p provider.Provider) provider.Provider { count.Provider = p; return count })
	want, err := w.x.Run(ctx, req)
	if err != nil || want.Outcome.Status != "completed" || want.Verdict != "done" {
		t.Fatalf("uninterrupted: %v %+v", err, want)
	}
	wantCalls := count.counts()
	evs := w.events(t, req.SessionID)
	w.close()
	if wantCalls["security"] != 2 || wantCalls["tests"] != 2 || wantCalls["correctness"] != 1 {
		t.Fatalf("the script's lanes made %v calls", wantCalls)
	}
	from := 0
	for i, e := range evs {
		if e.Type == event.RunStarted {
			from = i + 1
		}
	}
	inFanOut := 0
	for n := from; n < len(evs); n++ {
		shared := store.NewMemory(sealer)
		pctx, cancel := context.WithCancel(ctx)
		killed := &killStore{Store: shared, left: n, cancel: cancel}
		c1 := &callCounter{n: map[string]int{}}
		w1 := openWorldOn(t, dir, t.TempDir(), killed, true, sc, "", func(p provider.Provider) provider.Provider { c1.Provider = p; return c1 })
		_, err := w1.x.Run(pctx, req)
		cancel()
		w1.close()
		cut, rerr := shared.Read(ctx, req.SessionID, 1)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err == nil || len(cut) != n {
			t.Fatalf("kill after %d events: the run went on (%v, %d events)", n, err, len(cut))
		}
		snap, rerr := replay.Replay(cut)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if snap.RunStatus != "running" {
			break // killed after the run ended: nothing to take over
		}
		recorded := map[string]int{} // responses in the log, by role
		lanes := map[string]bool{}
		for _, e := range cut {
			switch e.Type {
			case event.LLMResponse:
				recorded[e.Actor]++
			case event.AgentTransition:
				if event.FieldString(e.Payload, "to") == "PERSONA" {
					lanes[e.Actor] = true
				} else if event.FieldString(e.Payload, "to") == "PERSONA_DONE" {
					delete(lanes, e.Actor)
				}
			}
		}
		if len(lanes) > 0 {
			inFanOut++
		}

		c2 := &callCounter{n: map[string]int{}}
		w2 := openWorldOn(t, dir, t.TempDir(), shared, true, sc, "", func(p provider.Provider) provider.Provider { c2.Provider = p; return c2 })
		out, err := w2.x.Manager.Takeover(ctx, w2.x.PlaneEngine(), req.SessionID, dir, "", "")
		if err != nil || out.Status != "completed" {
			t.Fatalf("kill after %d events (%s by %s): takeover %+v %v", n, cut[n-1].Type, cut[n-1].Actor, out, err)
		}
		after := w2.events(t, req.SessionID)
		w2.close()
		if !replay.VerifyEvents(schemas.MustDefault(), after).Valid {
			for _, e := range after {
				t.Logf("%d %s by %s id=%s parent=%s %.100s", e.Seq, e.Type, e.Actor, e.ID, e.Parent(), e.Payload)
			}
		}
		verify(t, after)
		got := cycle.ResultFromLog(after, out.RunID)
		if g, w := comparable(t, got), comparable(t, cycle.ResultFromLog(evs, want.Outcome.RunID)); g != w {
			t.Fatalf("kill after %d events: result\n%s\nwant\n%s", n, g, w)
		}
		if snap, err := replay.Replay(after); err != nil || snap.Workflow == nil || snap.Workflow.Verdict != "done" || strings.Join(snap.Workflow.Visited, ",") != "review-fan-out,review-gate" {
			t.Fatalf("kill after %d events: replayed workflow %+v %v", n, snap.Workflow, err)
		}
		first, second := c1.counts(), c2.counts()
		for role, total := range wantCalls {
			if second[role] != total-recorded[role] {
				t.Errorf("kill after %d events: %s made %d calls after the takeover, want %d (%d recorded of %d)", n, role, second[role], total-recorded[role], recorded[role], total)
			}
			if extra := first[role] + second[role] - total; extra < 0 || extra > 1 {
				t.Errorf("kill after %d events: %s made %d+%d calls, %d uninterrupted: %d repeated", n, role, first[role], second[role], total, extra)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	if inFanOut < 5 {
		t.Fatalf("only %d kills landed while a persona lane was open", inFanOut)
	}
}

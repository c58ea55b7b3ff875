//go:build chaos

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store/postgres"
)

// An outage point is when in the /agent fix flow the database goes away.
type outagePoint string

const (
	// duringRun: a model call of the run is in flight (held by the gate
	// in front of the fake model) when the database is cut; the model
	// answers into the outage, so the run's llm.response waits on the
	// store.
	duringRun outagePoint = "run"
	// duringIntake: the database is cut before the /agent fix comment is
	// posted, and again (once the bot asked for the approval and every
	// delivery is done) before the Approve review is posted: both
	// deliveries reach the replicas while it is down.
	duringIntake outagePoint = "intake"
)

// outageCuts are the outage lengths. serve has no setting for the store's
// retry bound (postgres.DefaultRetryFor, 30 s), so the cuts are 10 s,
// ridden out, and 45 s, well past the bound: a run in progress is handed
// back and taken over once the database answers.
var outageCuts = []time.Duration{10 * time.Second, 45 * time.Second}

// outageResult is one case's figures.
type outageResult struct {
	point outagePoint
	cut   time.Duration
	// taken: the run was handed back and taken over (a run.resumed "taken
	// over…" in the log).
	taken bool
	// toPause is the first restore to the bot's approval request on
	// GitHub; toDone the last restore to the flow completed (PR ready,
	// tracking comment completed, every delivery done).
	toPause, toDone time.Duration
	// spooled is the deliveries that arrived during the outages, each
	// answered 202 and spooled.
	spooled int
	total   time.Duration
}

// TestOutageMatrix is the database-outage half of the kill/stop/outage
// matrix with three replicas (docs/reliability.md, "A database outage"):
// the stop matrix's three `agentos serve --store postgres://…` replicas
// behind the balancer, with a pgtest.Proxy between all of them and the
// database (the test's own checks connect directly), cut for 10 s and for
// 45 s during a run (a model call in flight) and during intake (the
// request and, later, the approval delivered while the database is down:
// every replica's intake must answer 202 and spool them). Then the
// database is restored and the flow must end as an unstopped one does,
// with the stop matrix's end checks; a run cut for longer than the store's
// retry bound must have been taken over, a shorter cut and the intake
// cases none. Each case logs the time from the restore to the flow's end.
// Built with -tags chaos; -short skips it; -run
// 'TestOutageMatrix/<point>/<cut>' runs one.
func TestOutageMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("cuts the database of agentos serve replicas")
	}
	testenv.LookPath(t, "git")
	bin := agentosBinary(t)
	var (
		mu      sync.Mutex
		results []outageResult
	)
	for _, p := range []outagePoint{duringRun, duringIntake} {
		t.Run(string(p), func(t *testing.T) {
			for _, cut := range outageCuts {
				t.Run(cut.String(), func(t *testing.T) {
					r := outageCase(t, bin, p, cut)
					mu.Lock()
					results = append(results, r)
					mu.Unlock()
				})
			}
		})
	}
	var b strings.Builder
	b.WriteString("\n| during | cut | taken over | deliveries spooled (202) | restore → approval request | last restore → flow completed | whole flow |\n|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %v | %v | %d | %v | %v | %v |\n", r.point, r.cut, r.taken, r.spooled, r.toPause.Round(100*time.Millisecond), r.toDone.Round(100*time.Millisecond), r.total.Round(100*time.Millisecond))
	}
	t.Logf("outage matrix (3 replicas on PostgreSQL through a proxy, store retry bound %v):%s", postgres.DefaultRetryFor, b.String())
}

// outageCase runs one flow with the database cut for cut at p.
func outageCase(t *testing.T, bin string, p outagePoint, cut time.Duration) outageResult {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res := outageResult{point: p, cut: cut}
	f := startMatrixFlow(ctx, t, bin, true)

	var (
		restored time.Time // the last restore
		attempts int       // hook attempts before the current outage
		spoolErr []string
	)
	// outage cuts the database for cut; during runs while it is down
	// (posting what must arrive in the outage) and must return well
	// within it.
	outage := func(what string, during func()) {
		t.Helper()
		attempts = len(f.fake.HookAttempts())
		f.proxy.Down()
		down := time.Now()
		t.Logf("database cut %s", what)
		during()
		select {
		case <-time.After(time.Until(down.Add(cut))):
		case <-ctx.Done():
			f.fail("the case's time ran out during the outage %s", what)
		}
		// Every delivery that arrived in the outage was answered 202 and
		// spooled by the replica that took it.
		logs := f.rs.allLogs()
		for _, a := range f.fake.HookAttempts()[attempts:] {
			res.spooled++
			if a.StatusCode != http.StatusAccepted {
				spoolErr = append(spoolErr, fmt.Sprintf("%s %s answered %d (%s) in the outage, want 202", a.Delivery.Event, a.Delivery.Action(), a.StatusCode, a.Status))
			}
			if !strings.Contains(logs, "spooling it on local disk\" delivery="+a.Delivery.ID) {
				spoolErr = append(spoolErr, fmt.Sprintf("%s %s (%s) was not spooled", a.Delivery.Event, a.Delivery.Action(), a.Delivery.ID))
			}
		}
		if err := f.proxy.Up(); err != nil {
			t.Fatal(err)
		}
		restored = time.Now()
		t.Logf("database restored after %v", restored.Sub(down).Round(time.Millisecond))
	}
	// arrived waits until n hook attempts were made in the current
	// outage (the delivery went through the balancer to a replica).
	arrived := func(n int, what string) {
		t.Helper()
		for len(f.fake.HookAttempts())-attempts < n {
			select {
			case <-ctx.Done():
				f.fail("%s never reached a replica; delivery errors %v", what, f.fake.DeliveryErrors())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	// waitPause waits for the bot's approval request on GitHub.
	paused := func() bool { _, n := f.requests(); return n > 0 }
	waitPause := func() {
		t.Helper()
		for !paused() {
			select {
			case <-ctx.Done():
				f.fail("the run never asked for the approval after the outage; delivery errors %v", f.fake.DeliveryErrors())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}

	switch p {
	case duringRun:
		f.startMaintainer()
		hit := armModelCall(f.modelGate)
		defer f.modelGate.let()
		f.ask()
		select {
		case <-hit:
		case <-ctx.Done():
			f.fail("the run never made its second model call")
		}
		f.modelGate.mu.Lock()
		held := f.modelGate.held
		f.modelGate.mu.Unlock()
		outage("with "+held+" in flight", func() {
			// The model answers into the outage: the run's
			// llm.response waits on the store.
			f.modelGate.let()
		})
		waitPause()
		res.toPause = time.Since(restored)
	case duringIntake:
		var approve sync.Once
		cutForApproval := make(chan struct{})
		f.holdApproval = func() bool {
			select {
			case <-cutForApproval:
				return false
			default:
				return true
			}
		}
		f.startMaintainer()
		outage("before the request", func() {
			f.ask()
			arrived(1, "the /agent fix comment's delivery")
		})
		waitPause()
		res.toPause = time.Since(restored)
		for !f.idle() { // the pause fully published
			select {
			case <-ctx.Done():
				f.fail("the pause's deliveries never finished")
			case <-time.After(50 * time.Millisecond):
			}
		}
		outage("before the approval", func() {
			approve.Do(func() { close(cutForApproval) })
			arrived(1, "the Approve review's delivery")
		})
	}
	f.waitCompleted(fmt.Sprintf("a %v database outage during %s", cut, p))
	res.toDone = time.Since(restored)
	res.total = time.Since(f.began)
	for _, e := range spoolErr {
		t.Error(e)
	}
	if p == duringIntake && res.spooled < 2 {
		t.Errorf("%d deliveries arrived during the outages, want the request's and the approval's", res.spooled)
	}

	sid, evs := f.events()
	sum := f.check(sid)
	res.taken = takenOver(evs)
	// Only a run in progress past the store's retry bound is handed back
	// and taken over; a shorter outage is ridden out, and a delivery
	// spooled during one starts or resumes the run after it.
	wantTaken := p == duringRun && cut > postgres.DefaultRetryFor
	if res.taken != wantTaken {
		t.Errorf("taken over: %v, want %v (a %v outage during %s, retry bound %v)", res.taken, wantTaken, cut, p, postgres.DefaultRetryFor)
	}
	if sum.interrupted != 0 {
		t.Errorf("%d run.interrupted: no process was stopped", sum.interrupted)
	}
	if sum.requests != sum.responses {
		t.Errorf("%d model requests, %d responses", sum.requests, sum.responses)
	}
	for i, r := range sum.testRuns {
		if r != "ran" && (i == len(sum.testRuns)-1 || sum.testRuns[i+1] != "ran") {
			t.Errorf("test.run results %v: %s not followed by a re-run", sum.testRuns, r)
		}
	}
	f.keepIfFailed()
	t.Logf("%v outage during %s: taken over %v, %d deliveries spooled, restore → approval request %v, last restore → flow completed %v, whole flow %v",
		cut, p, res.taken, res.spooled, res.toPause.Round(time.Millisecond), res.toDone.Round(time.Millisecond), res.total.Round(time.Millisecond))
	return res
}

// takenOver reports whether the run was handed back and taken over: a
// run.resumed that is not the approval's.
func takenOver(evs []event.Event) bool {
	for _, e := range evs {
		if e.Type == event.RunResumed && strings.HasPrefix(event.FieldString(e.Payload, "reason"), "taken over") {
			return true
		}
	}
	return false
}

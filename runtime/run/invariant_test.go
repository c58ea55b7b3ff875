package run

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
)

// The invariant of honest outcomes: a run that agentos reports completed
// passes strict verify (the log as it stood when the run ended) and the
// claims of its last worker report are supported by its log. Every log the
// package's tests write is checked: the stores they create are tracked
// (trackStore, called by newFixture) and swept after the tests ran
// (TestMain); the verify helper checks it too.

var tracked struct {
	sync.Mutex
	stores []store.Store
	seen   map[store.Store]bool
}

// trackStore adds a test's store to the sweep.
func trackStore(st store.Store) store.Store {
	tracked.Lock()
	defer tracked.Unlock()
	if tracked.seen == nil {
		tracked.seen = map[store.Store]bool{}
	}
	if !tracked.seen[st] {
		tracked.seen[st] = true
		tracked.stores = append(tracked.stores, st)
	}
	return st
}

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if n, err := sweepHonest(); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: honest-outcome invariant over the tests' logs: %v\n", err)
			code = 1
		} else if testing.Verbose() {
			fmt.Fprintf(os.Stderr, "honest-outcome invariant: %d sessions checked\n", n)
		}
	}
	os.Exit(code)
}

// sweepHonest checks every session of every tracked store.
func sweepHonest() (int, error) {
	tracked.Lock()
	stores := append([]store.Store(nil), tracked.stores...)
	tracked.Unlock()
	ctx := context.Background()
	n := 0
	for _, st := range stores {
		infos, err := st.Sessions(ctx)
		if err != nil {
			// A store a test closed: nothing to read.
			continue
		}
		for _, info := range infos {
			evs, err := st.Read(ctx, info.SessionID, 1)
			if err != nil {
				continue
			}
			n++
			if err := AuditHonest(evs); err != nil {
				return n, fmt.Errorf("session %s: %w", info.SessionID, err)
			}
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("no session was checked: the tests' stores are not tracked")
	}
	return n, nil
}

// TestInvariantCatchesDishonestLog: the invariant rejects a log that
// calls a run completed although its only tool call was rejected and its
// report claims it, and accepts the same log once the run says failed.
func TestInvariantCatchesDishonestLog(t *testing.T) {
	for _, status := range []string{"completed", "failed"} {
		t.Run(status, func(t *testing.T) {
			// A store of its own, outside the sweep: the forged log must
			// not fail the package.
			sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
			must(t, err)
			f := &fixture{store: store.NewMemory(sealer)}
			ctx := context.Background()
			j := startedRun(t, f, "forged-"+status, "run-forged")
			app := func(typ, actor string, p any) {
				t.Helper()
				_, err := j.Append(ctx, typ, actor, p, "")
				must(t, err)
			}
			app(event.ToolRejected, "kernel", map[string]any{"call_id": "w1", "tool": "repo.write", "code": "INVALID_ARGUMENTS", "message": "missing_required: path"})
			app(event.WorkerReport, "worker", json.RawMessage(`{"output":"wrote a.txt","steps_completed":["s1"],"tool_calls_made":["repo.write:w1"],"schema_version":"v1"}`))
			content := `{}`
			app(event.ArtifactEmitted, "runtime", map[string]any{"kind": evidenceKind, "digest": digestOf([]byte(content)), "content": content})
			if status == "completed" {
				app(event.RunCompleted, "runtime", map[string]any{"output": "wrote a.txt"})
				app(event.TurnTerminal, "runtime", Report{Status: StatusCompleted, NextAction: "review the change", TraceID: "run-forged", CorrelationID: "c", SchemaVersion: "v1"})
			} else {
				app(event.RunFailed, "runtime", map[string]any{"reason": "EVIDENCE_MISMATCH: x", "error_class": "provider_error"})
				app(event.TurnTerminal, "runtime", Report{Status: StatusFailed, Reason: "EVIDENCE_MISMATCH: x", NextAction: "n", TraceID: "run-forged", CorrelationID: "c", ErrorClass: ClassProviderError, SchemaVersion: "v1"})
			}
			app(event.SessionClose, "runtime", map[string]any{"ok": status == "completed"})
			evs := f.events(t, "forged-"+status)
			err = AuditHonest(evs)
			if status == "completed" && err == nil {
				t.Fatal("a completed run whose claimed call was rejected passed the invariant")
			}
			// Strict verify alone rejects the forged log (it lacks the
			// audit events); the claims check rejects it on its own too.
			if cerr := claimsSupported(evs, event.NewPrompts(evs)); status == "completed" && (cerr == nil || !strings.Contains(cerr.Error(), "repo.write:w1")) {
				t.Fatalf("claims check: %v", cerr)
			}
			if status == "failed" && err != nil {
				t.Fatalf("a failed run was held to the completed invariant: %v", err)
			}
		})
	}
}

package cycle_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel/sandbox/sandboxtest"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/hooks"
	"github.com/agentos/agentos/runtime/journal"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/scripted"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/setup"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/sqlite"
	"github.com/agentos/agentos/runtime/workflow"
	"github.com/agentos/agentos/runtime/workflow/cycle"
	"github.com/agentos/agentos/schemas"
)

// world is one "process": a store opened on dataDir, the runtime built
// over the repository, and an executor. Two worlds over the same dataDir
// are two processes sharing the store.
type world struct {
	dir, dataDir string
	st           store.Store
	env          *setup.Env
	x            *cycle.Executor
	hooks        *hooks.Registry
	ownsStore    bool
}

// writeFiles writes files (relative path → content) under dir.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// openWorld builds the runtime over dir with the script, the store in
// dataDir, and the operator policy file (optional).
func openWorld(t testing.TB, dir, dataDir, script, policyFile string) *world {
	return openWorldWith(t, dir, dataDir, script, policyFile, nil)
}

// openWorldWith is openWorld with the scripted provider wrapped (nil: as is).
func openWorldWith(t testing.TB, dir, dataDir, script, policyFile string, wrap func(provider.Provider) provider.Provider) *world {
	t.Helper()
	sc, err := scripted.Parse(strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(dataDir, sealer, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return openWorldOn(t, dir, dataDir, st, true, sc, policyFile, wrap)
}

// openWorldOn builds the runtime over dir on the store st (closed with the
// world when owned).
func openWorldOn(t testing.TB, dir, dataDir string, st store.Store, owned bool, sc *scripted.Script, policyFile string, wrap func(provider.Provider) provider.Provider) *world {
	t.Helper()
	closeStore := func() {
		if owned {
			st.Close()
		}
	}
	p := provider.DefaultProfile()
	p.Provider, p.Script = "scripted", "embedded"
	env, err := setup.Build(context.Background(), setup.Options{Dir: dir, Profile: p, SessionID: "s-1", Store: st, PolicyFile: policyFile,
		Sandbox: sandboxtest.Sandbox(t), DataDir: dataDir,
		Providers: provider.Registry{"scripted": func(context.Context, provider.Profile) (provider.Provider, error) {
			var p provider.Provider = scripted.New(sc)
			if wrap != nil {
				p = wrap(p)
			}
			return p, nil
		}}})
	if err != nil {
		closeStore()
		t.Fatal(err)
	}
	reg, err := workflow.LoadRepo(schemas.MustDefault(), dir)
	if err != nil {
		env.Close()
		closeStore()
		t.Fatal(err)
	}
	w := &world{dir: dir, dataDir: dataDir, st: st, ownsStore: owned, env: env, hooks: env.Hooks,
		x: &cycle.Executor{Registry: reg, Manager: run.NewManager(st), Engine: env.Engine, Schemas: schemas.MustDefault()}}
	t.Cleanup(w.close)
	return w
}

func (w *world) close() {
	if w.env != nil {
		w.env.Close()
		w.env = nil
	}
	if w.st != nil && w.ownsStore {
		w.st.Close()
	}
	w.st = nil
}

func (w *world) events(t *testing.T, sid string) []event.Event {
	t.Helper()
	evs, err := w.st.Read(context.Background(), sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// verify checks the session's log strictly (hash chain, payload schemas,
// pairs, terminal reports, audit completeness, the workflow audit).
func verify(t *testing.T, evs []event.Event) {
	t.Helper()
	rep := replay.VerifyEvents(schemas.MustDefault(), evs)
	if !rep.Valid {
		t.Fatalf("verify: %v\n%s", rep.Problem, types(evs))
	}
}

func types(evs []event.Event) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(e.Type + " by " + e.Actor + "\n")
	}
	return b.String()
}

func count(evs []event.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func byType(evs []event.Event, typ string) []event.Event {
	var out []event.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// rechain writes evs again into a fresh store, so that the result has an
// intact hash chain (a log that was written without some event, rather
// than edited afterwards).
func rechain(t *testing.T, evs []event.Event) []event.Event {
	t.Helper()
	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := store.NewMemory(sealer)
	j, err := journal.Open(ctx, st, evs[0].SessionID)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, e := range evs {
		j.SetRun(e.RunID)
		parent := e.Parent()
		if n, ok := ids[parent]; ok {
			parent = n
		}
		ne, err := j.Append(ctx, e.Type, e.Actor, json.RawMessage(e.Payload), parent)
		if err != nil {
			t.Fatal(err)
		}
		ids[e.ID] = ne.ID
	}
	out, err := st.Read(ctx, evs[0].SessionID, 1)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

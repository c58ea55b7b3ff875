package setup_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/scripted"
	"github.com/agentos/agentos/runtime/setup"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
)

// BenchmarkBuildWarningsOnce: what reading the session's log for the
// config.warning events it holds adds to a Build of testdata/claude-project
// (4 warnings): no store (nothing read), an empty session, and a session
// of 10,000 events (4 of them the warnings). Compare the ns/op of the
// three in one run.
func BenchmarkBuildWarningsOnce(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "testdata", "claude-project"))); err != nil {
		b.Fatal(err)
	}
	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	st := store.NewMemory(sealer)
	probe, err := setup.Build(ctx, benchOptions(b, dir))
	if err != nil {
		b.Fatal(err)
	}
	var drafts []event.Draft
	for _, w := range probe.Warnings {
		drafts = append(drafts, event.Draft{Type: event.ConfigWarning, Actor: "runtime", Payload: w})
	}
	probe.Close()
	for i := 0; len(drafts) < 10000; i++ {
		drafts = append(drafts, event.Draft{Type: event.ToolInvoke, Actor: "worker", Payload: map[string]any{"call_id": fmt.Sprintf("c%d", i), "tool": "repo.read", "args": map[string]any{"path": "calc.py"}}})
	}
	var seq int64
	for len(drafts) > 0 {
		n := min(len(drafts), 500)
		evs, err := st.Append(ctx, "long", seq, drafts[:n]...)
		if err != nil {
			b.Fatal(err)
		}
		seq = evs[len(evs)-1].Seq
		drafts = drafts[n:]
	}
	for _, c := range []struct {
		name    string
		store   store.Store
		session string
	}{{"no-store", nil, ""}, {"empty-session", st, "empty"}, {"10k-events", st, "long"}} {
		b.Run(c.name, func(b *testing.B) {
			o := benchOptions(b, dir)
			o.Store, o.SessionID = c.store, c.session
			for i := 0; i < b.N; i++ {
				env, err := setup.Build(ctx, o)
				if err != nil {
					b.Fatal(err)
				}
				env.Close()
			}
		})
	}
}

// benchOptions is options for a benchmark.
func benchOptions(b *testing.B, dir string) setup.Options {
	b.Helper()
	s, err := demo.Script()
	if err != nil {
		b.Fatal(err)
	}
	p := provider.DefaultProfile()
	p.Provider, p.Script = "scripted", "embedded"
	return setup.Options{Dir: dir, Profile: p, SessionID: "s-1",
		Providers: provider.Registry{"scripted": func(context.Context, provider.Profile) (provider.Provider, error) { return scripted.New(s), nil }}}
}

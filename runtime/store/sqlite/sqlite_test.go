package sqlite

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/storetest"
)

func open(t *testing.T, sealer *event.Sealer) store.Store {
	s, err := Open(t.TempDir(), sealer, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mustOpen opens the store in dir, closed when the test ends (closing it
// earlier is fine).
func mustOpen(tb testing.TB, dir string, sealer *event.Sealer) *Store {
	tb.Helper()
	return openStore(tb, dir, sealer, Options{})
}

// openStore is mustOpen with options.
func openStore(tb testing.TB, dir string, sealer *event.Sealer, opts Options) *Store {
	tb.Helper()
	s, err := Open(dir, sealer, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) { storetest.Run(t, open) }

func TestConformanceNoGroupCommit(t *testing.T) {
	storetest.Run(t, func(t *testing.T, sealer *event.Sealer) store.Store {
		s, err := Open(t.TempDir(), sealer, Options{NoGroupCommit: true})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestHelperProcess(t *testing.T) {
	if os.Getenv(storetest.CrashChildEnv) == "" {
		t.Skip("crash child only")
	}
	storetest.CrashChild(func(dir string) (store.Store, error) { return Open(dir, storetest.NewSealer(t), Options{}) })
}

func TestCrash(t *testing.T) {
	storetest.Crash(t, 50, func(dir string) (store.Store, error) { return Open(dir, storetest.NewSealer(t), Options{}) })
}

func TestSecretsNeverOnDisk(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, storetest.NewSealer(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	storetest.SeedSecrets(t, s)
	// Scan while open too: the WAL holds the write before a checkpoint.
	storetest.AssertNoSecrets(t, dir)
	s.Close()
	storetest.AssertNoSecrets(t, dir)
}

// TestTwoStoresOneFile: two stores (two processes, in effect) append to
// the same database file. Each caches session heads; a store that sees the
// other wrote since its last commit (PRAGMA data_version) reads them
// afresh, so the stale append gets a ConflictError naming the real last
// seq, the other appends in the same batch commit, and every session's log
// stays one unbroken hash chain.
func TestTwoStoresOneFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sealer := storetest.NewSealer(t)
	a := mustOpen(t, dir, sealer)
	b := mustOpen(t, dir, sealer)
	for _, sid := range []string{"shared", "a-only", "a-too"} {
		if _, err := a.Append(ctx, sid, 0, msg(sid+" 1")); err != nil {
			t.Fatal(err)
		}
	}
	// b moves "shared" behind a's back; a's cached tip is now stale.
	if _, err := b.Append(ctx, "shared", 1, msg("from b")); err != nil {
		t.Fatal(err)
	}
	// One batch in a: two appends that are fine and one on the stale tip.
	reqs := []*appendReq{}
	for _, c := range []struct {
		sid      string
		expected int64
	}{{"a-only", 1}, {"shared", 1}, {"a-too", 1}} {
		ps, err := sealer.PrepareAll(c.sid, []event.Draft{msg(c.sid + " 2")})
		if err != nil {
			t.Fatal(err)
		}
		r := newReq()
		r.sessionID, r.expected, r.prepared = c.sid, c.expected, ps
		reqs = append(reqs, r)
	}
	a.commitAndSync(reqs)
	var ce *store.ConflictError
	if !errors.As(reqs[1].err, &ce) || ce.Actual != 2 {
		t.Fatalf("stale append: got %v, want a conflict with actual seq 2", reqs[1].err)
	}
	for _, i := range []int{0, 2} {
		if reqs[i].err != nil || len(reqs[i].out) != 1 || reqs[i].out[0].Seq != 2 {
			t.Fatalf("%s: got %v %v, want seq 2 appended", reqs[i].sessionID, reqs[i].out, reqs[i].err)
		}
	}
	// a continues "shared" after b's event once it knows the real tip.
	if _, err := a.Append(ctx, "shared", 2, msg("from a")); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"shared": {"shared 1", "from b", "from a"},
		"a-only": {"a-only 1", "a-only 2"},
		"a-too":  {"a-too 1", "a-too 2"},
	}
	for _, s := range []*Store{a, b} {
		for sid, texts := range want {
			evs, err := s.Read(ctx, sid, 1)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			prev := ""
			for i, e := range evs {
				var p struct{ Text string }
				if err := e.DecodePayload(&p); err != nil {
					t.Fatal(err)
				}
				got = append(got, p.Text)
				if e.Seq != int64(i+1) || e.PrevHash != prev {
					t.Fatalf("%s seq %d: chain broken (prev_hash %q, want %q)", sid, e.Seq, e.PrevHash, prev)
				}
				if h, err := event.CheckLineHash(e.Line()); err != nil || h != e.Hash {
					t.Fatalf("%s seq %d: %v", sid, e.Seq, err)
				}
				prev = e.Hash
			}
			if strings.Join(got, "|") != strings.Join(texts, "|") {
				t.Fatalf("%s: got %q, want %q", sid, got, texts)
			}
		}
	}
}

// commitAndSync commits a batch and makes it durable before returning:
// the whole of the loop's work for one batch, for tests and benchmarks
// that drive it directly.
func (s *Store) commitAndSync(batch []*appendReq) {
	s.commit(batch)
	if s.wal != nil {
		if err := s.syncWAL(); err != nil {
			for _, r := range batch {
				r.err, r.out = err, nil
			}
		}
	}
	s.advance(batch)
	ack(batch)
}

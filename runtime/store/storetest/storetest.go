// Package storetest is the conformance suite every Store backend passes.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
)

// Literal is the secret the suite registers with the redactor; backends'
// on-disk checks look for it and the other seeded secrets.
const Literal = "installation-token-literal-XYZ123"

// Secrets are seeded into payloads; none may reach disk.
var Secrets = []string{
	"ghp_" + strings.Repeat("a1B2", 9),
	"gho_" + strings.Repeat("c3D4", 9),
	"ghs_" + strings.Repeat("e5F6", 9),
	"ghu_" + strings.Repeat("g7H8", 9),
	"github_pat_11AAAAAAA0" + strings.Repeat("z", 60),
	"sk-proj-" + strings.Repeat("Q", 40),
	"AKIAIOSFODNN7EXAMPLE",
	"MIIEpAIBAAKCAQEA7bq",
	"envsecretvalue42",
	"apikeymembervalue77",
	"bearertokenvalue12345",
	Literal,
	"ghp_" + strings.Repeat("u9V8", 9), // written with JSON \u escapes
	"98765432123",                      // a number under a secret env name
	"arraysecretvalue31",               // an array under a secret env name
	"ghs_" + strings.Repeat("p4Q5", 9), // in parent_id
	"xoxb-literal-in-list-5566",        // a registered literal deep in nested arrays
}

// NewSealer returns the sealer the suite's stores must use: the default
// redaction keys plus the registered literal.
func NewSealer(t testing.TB) *event.Sealer {
	t.Helper()
	r := redact.New(nil)
	r.AddLiteral(Literal)
	r.AddLiteral("xoxb-literal-in-list-5566")
	s, err := event.NewSealer(schemas.MustDefault(), r, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Factory opens a fresh store over sealer.
type Factory func(t *testing.T, sealer *event.Sealer) store.Store

// Run runs the conformance suite.
func Run(t *testing.T, open Factory) {
	t.Run("AppendRead", func(t *testing.T) { testAppendRead(t, open(t, NewSealer(t))) })
	t.Run("Conflict", func(t *testing.T) { testConflict(t, open(t, NewSealer(t))) })
	t.Run("FailClosed", func(t *testing.T) { testFailClosed(t, open(t, NewSealer(t))) })
	t.Run("Follow", func(t *testing.T) { testFollow(t, open(t, NewSealer(t))) })
	t.Run("Sessions", func(t *testing.T) { testSessions(t, open(t, NewSealer(t))) })
	t.Run("ConcurrentSessions", func(t *testing.T) { testConcurrentSessions(t, open(t, NewSealer(t))) })
	t.Run("ImportExport", func(t *testing.T) { testImportExport(t, open) })
	t.Run("List", func(t *testing.T) { testList(t, open) })
	t.Run("Scan", func(t *testing.T) { testScan(t, open(t, NewSealer(t))) })
	t.Run("Prune", func(t *testing.T) { testPrune(t, open(t, NewSealer(t))) })
}

func msg(text string) event.Draft {
	return event.Draft{RunID: "r1", Type: event.OutputMessage, Actor: "worker", Payload: map[string]any{"text": text}}
}

func testAppendRead(t *testing.T, s store.Store) {
	defer s.Close()
	ctx := context.Background()
	evs, err := s.Append(ctx, "sess", 0, msg("a"), msg("b"))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Seq != 1 || evs[1].Seq != 2 || evs[1].PrevHash != evs[0].Hash {
		t.Fatalf("appended %+v", evs)
	}
	if _, err := s.Append(ctx, "sess", 2, msg("c")); err != nil {
		t.Fatal(err)
	}
	all, err := s.Read(ctx, "sess", 1)
	if err != nil || len(all) != 3 {
		t.Fatalf("read %d %v", len(all), err)
	}
	if rep := replay.VerifyEvents(schemas.MustDefault(), all); rep.Problem != nil && rep.Problem.Code != replay.ProblemEmpty {
		t.Fatalf("chain: %v", rep.Problem)
	}
	for i, e := range all {
		if string(e.Line()) != string(evs0(all)[i].Line()) {
			t.Fatal("unstable encoding")
		}
		if _, err := event.CheckLineHash(e.Line()); err != nil {
			t.Fatalf("seq %d: %v", e.Seq, err)
		}
	}
	tail, _ := s.Read(ctx, "sess", 3)
	if len(tail) != 1 || tail[0].Seq != 3 {
		t.Fatalf("read from 3: %+v", tail)
	}
	none, err := s.Read(ctx, "unknown-session", 1)
	if err != nil || len(none) != 0 {
		t.Fatalf("unknown session: %v %v", none, err)
	}
}

func evs0(e []event.Event) []event.Event { return e }

func testConflict(t *testing.T, s store.Store) {
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Append(ctx, "c", 0, msg("first")); err != nil {
		t.Fatal(err)
	}
	_, err := s.Append(ctx, "c", 0, msg("stale"))
	var ce *store.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrConflict) || ce.Actual != 1 {
		t.Fatalf("stale append: %v", err)
	}
	// Concurrent writers with the same expectation: exactly one wins.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if _, err := s.Append(ctx, "c", 1, msg(fmt.Sprint("w", i))); err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			} else if !errors.Is(err, store.ErrConflict) {
				t.Errorf("writer %d: %v", i, err)
			}
		}(i)
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d writers won", wins)
	}
	all, _ := s.Read(ctx, "c", 1)
	if len(all) != 2 {
		t.Fatalf("%d events", len(all))
	}
}

// testConcurrentSessions appends from many goroutines at once, each to its
// own session, with batches of 1 to 3 events, and checks that every call
// got back its own events and that the store holds exactly what was
// appended, each event intact: stores that share batches, buffers or
// requests between callers must not mix them up.
func testConcurrentSessions(t *testing.T, s store.Store) {
	defer s.Close()
	ctx := context.Background()
	const writers, calls = 16, 60
	var wg sync.WaitGroup
	got := make([][]event.Event, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			sid := fmt.Sprintf("conc-%d", w)
			var seq int64
			for c := 0; c < calls; c++ {
				drafts := make([]event.Draft, 1+(w+c)%3)
				for i := range drafts {
					drafts[i] = msg(fmt.Sprintf("%s/%d/%d", sid, c, i))
				}
				evs, err := s.Append(ctx, sid, seq, drafts...)
				if err != nil {
					t.Errorf("%s call %d: %v", sid, c, err)
					return
				}
				if len(evs) != len(drafts) {
					t.Errorf("%s call %d: %d events back, want %d", sid, c, len(evs), len(drafts))
					return
				}
				for i, e := range evs {
					if e.SessionID != sid || e.Seq != seq+int64(i)+1 || event.FieldString(e.Payload, "text") != fmt.Sprintf("%s/%d/%d", sid, c, i) {
						t.Errorf("%s call %d: got back %s seq %d %s", sid, c, e.SessionID, e.Seq, e.Payload)
						return
					}
				}
				got[w] = append(got[w], evs...)
				seq = evs[len(evs)-1].Seq
			}
		}(w)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for w := 0; w < writers; w++ {
		stored, err := s.Read(ctx, fmt.Sprintf("conc-%d", w), 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(stored) != len(got[w]) {
			t.Fatalf("conc-%d: %d events stored, %d appended", w, len(stored), len(got[w]))
		}
		for i, e := range stored {
			want := got[w][i]
			if e.ID != want.ID || e.Hash != want.Hash || string(e.Payload) != string(want.Payload) {
				t.Fatalf("conc-%d event %d: stored %s %s, appended %s %s", w, i, e.ID, e.Payload, want.ID, want.Payload)
			}
			if _, err := event.CheckLineHash(e.Line()); err != nil {
				t.Fatalf("conc-%d event %d: %v", w, i, err)
			}
			if i > 0 && e.PrevHash != stored[i-1].Hash {
				t.Fatalf("conc-%d event %d: chain broken", w, i)
			}
		}
	}
}

func testFailClosed(t *testing.T, s store.Store) {
	defer s.Close()
	ctx := context.Background()
	_, err := s.Append(ctx, "f", 0, msg("ok"), event.Draft{Type: event.ToolInvoke, Actor: "w", Payload: map[string]any{"call_id": "c", "tool": "t", "args": "not an object"}})
	var sv *event.SchemaViolationError
	if !errors.As(err, &sv) || sv.Violation == nil || sv.Violation.Type != event.SchemaViolation {
		t.Fatalf("schema violation: %v", err)
	}
	all, _ := s.Read(ctx, "f", 1)
	if len(all) != 1 || all[0].Type != event.SchemaViolation {
		t.Fatalf("want only the schema.violation, got %+v", all)
	}
	if _, err := s.Append(ctx, "f", 1, event.Draft{Type: "tool.call", Actor: "w", Payload: map[string]any{}}); !errors.As(err, &sv) {
		t.Fatalf("unknown type: %v", err)
	}
	if _, err := s.Append(ctx, "../escape", 0, msg("x")); !errors.Is(err, event.ErrInvalidSession) {
		t.Fatalf("bad session id: %v", err)
	}
}

func testFollow(t *testing.T, s store.Store) {
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Append(ctx, "w", 0, msg("1"), msg("2")); err != nil {
		t.Fatal(err)
	}
	got := make(chan int64, 100)
	errc := make(chan error, 1)
	go func() {
		errc <- store.Follow(ctx, s, "w", 1, func(e event.Event) (bool, error) {
			got <- e.Seq
			return e.Seq == 20, nil
		})
	}()
	for seq := int64(2); seq < 20; seq++ {
		if _, err := s.Append(ctx, "w", seq, msg(fmt.Sprint(seq+1))); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	close(got)
	want := int64(2)
	for seq := range got {
		if seq != want {
			t.Fatalf("follow delivered %d, want %d", seq, want)
		}
		want++
	}
	if want != 21 {
		t.Fatalf("follow stopped at %d", want)
	}
}

func testSessions(t *testing.T, s store.Store) {
	defer s.Close()
	ctx := context.Background()
	for _, id := range []string{"b", "a"} {
		if _, err := s.Append(ctx, id, 0, msg(id)); err != nil {
			t.Fatal(err)
		}
	}
	ss, err := s.Sessions(ctx)
	if err != nil || len(ss) != 2 || ss[0].SessionID != "a" || ss[1].LastSeq != 1 || ss[0].LastType != event.OutputMessage {
		t.Fatalf("%+v %v", ss, err)
	}
}

func testImportExport(t *testing.T, open Factory) {
	ctx := context.Background()
	sealer := NewSealer(t)
	a := open(t, sealer)
	defer a.Close()
	for i := 0; i < 5; i++ {
		if _, err := a.Append(ctx, "x", int64(i), msg(fmt.Sprint("m", i))); err != nil {
			t.Fatal(err)
		}
	}
	var first strings.Builder
	if _, err := store.Export(ctx, a, "x", &first); err != nil {
		t.Fatal(err)
	}
	b := open(t, sealer)
	defer b.Close()
	if _, _, err := store.Import(ctx, strings.NewReader(first.String()), b); err != nil {
		t.Fatal(err)
	}
	var second strings.Builder
	if _, err := store.Export(ctx, b, "x", &second); err != nil {
		t.Fatal(err)
	}
	if first.String() != second.String() {
		t.Fatal("export → import → export is not byte-identical")
	}
	// Importing the same events again does not continue the chain.
	if _, _, err := store.Import(ctx, strings.NewReader(first.String()), b); !errors.Is(err, store.ErrChain) {
		t.Fatalf("re-import: %v", err)
	}
	tampered := strings.Replace(first.String(), "m3", "mX", 1)
	c := open(t, sealer)
	defer c.Close()
	if _, _, err := store.Import(ctx, strings.NewReader(tampered), c); err == nil {
		t.Fatal("a tampered log was imported")
	}
}

// SeedSecrets appends events carrying every seeded secret in every payload
// field kind (string value, object key, array element, nested object,
// value of a secret env-style name whatever its JSON type, JSON-escaped
// text in a raw payload), plus run_id, actor and parent_id.
func SeedSecrets(t *testing.T, s store.Store) {
	t.Helper()
	sec := Secrets
	payload := map[string]any{
		"text": "token " + sec[0] + " and " + sec[1],
		"role": "nested",
		"nested": map[string]any{
			"deeper":          []any{sec[2], map[string]any{"k": sec[3]}},
			"GITHUB_TOKEN":    sec[8],
			"API_KEY":         sec[9],
			sec[4]:            "a secret as an object key",
			"auth":            "Authorization: Bearer " + sec[10],
			"aws":             "id=" + sec[6],
			"pem":             "-----BEGIN RSA PRIVATE KEY-----\n" + sec[7] + "\n-----END RSA PRIVATE KEY-----",
			"env":             "export OPENAI_API_KEY=" + sec[5],
			"literal_in_text": "x-access-token:" + Literal + "@github.com",
			"DB_PASSWORD":     98765432123,
			"SLACK_TOKEN":     []any{"arraysecretvalue31", 7},
			"matrix":          []any{[]any{[]any{"token " + sec[16]}}},
			"flags":           []any{true, nil, 1.5},
		},
	}
	ctx := context.Background()
	_, err := s.Append(ctx, "secrets", 0, event.Draft{RunID: "run-" + sec[0], Type: event.OutputMessage, Actor: "worker " + Literal, Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	escaped := strings.NewReplacer("g", `\u0067`, "p", `\u0070`).Replace(sec[12])
	raw := json.RawMessage(`{"text":"escaped ` + escaped + `","role":"worker"}`)
	_, err = s.Append(ctx, "secrets", 1, event.Draft{RunID: "r", Type: event.OutputMessage, Actor: "worker", Payload: raw, ParentID: "parent-" + sec[15]})
	if err != nil {
		t.Fatal(err)
	}
}

// AssertNoSecrets scans every file under dir (database, WAL, logs) for the
// seeded secrets.
func AssertNoSecrets(t *testing.T, dir string) {
	t.Helper()
	files := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		for _, sec := range Secrets {
			if bytes.Contains(b, []byte(sec)) {
				t.Errorf("%s contains the secret %q", p, sec)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("no files written")
	}
}

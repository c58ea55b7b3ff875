package run

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
)

// TestManagerRecoversFromLogs: the server's and CLI's path. A manager
// over an empty store with Logs finds a paused session in
// <data>/sessions/<id>/events.jsonl, imports it on the first use (Resolve),
// and the resumed run completes; a log whose chain does not verify is
// refused with ErrUnverifiedLog and nothing is imported.
func TestManagerRecoversFromLogs(t *testing.T) {
	worker := []string{`    - tool_calls: [{id: w1, name: write, args: {path: a.txt}}]`, echoCall, finalReport}
	f1 := newFixture(t, script(worker...), nil)
	ctx := context.Background()
	if out, err := f1.mgr.Start(ctx, f1.eng, StartRequest{SessionID: "lost", Prompt: "greet"}); err != nil || out.Status != "paused" {
		t.Fatalf("%+v %v", out, err)
	}
	var log bytes.Buffer
	if _, err := store.Export(ctx, f1.store, "lost", &log); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	path := filepath.Join(data, "sessions", "lost", "events.jsonl")
	must(t, os.MkdirAll(filepath.Dir(path), 0o755))

	// An edited log is refused.
	edited := bytes.Replace(log.Bytes(), []byte(`"prompt":"greet"`), []byte(`"prompt":"greet everyone"`), 1)
	must(t, os.WriteFile(path, edited, 0o644))
	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	must(t, err)
	empty := store.NewMemory(sealer)
	trackStore(empty)
	f2 := newFixture(t, script(worker...), empty)
	f2.mgr.Logs = DirLogs(data)
	if err := f2.mgr.Resolve(ctx, "lost", "ap-1", "approve", "octocat", ""); !errors.Is(err, ErrUnverifiedLog) {
		t.Fatalf("edited log: %v, want ErrUnverifiedLog", err)
	}
	if evs, _ := empty.Read(ctx, "lost", 1); len(evs) != 0 {
		t.Fatalf("an unverified log was imported (%d events)", len(evs))
	}

	// The real log is imported and the run completes.
	must(t, os.WriteFile(path, log.Bytes(), 0o644))
	must(t, f2.mgr.Resolve(ctx, "lost", "ap-1", "approve", "octocat", ""))
	out, err := f2.mgr.Resume(ctx, f2.eng, "lost", "", "")
	if err != nil || out.Status != "completed" {
		t.Fatalf("resume after recovery: %+v %v", out, err)
	}
	verify(t, f2.events(t, "lost"))
	// A session with no log anywhere is simply new.
	if _, err := f2.mgr.Cancel(ctx, "never-seen", "octocat", ""); !errors.Is(err, ErrNotPaused) {
		t.Errorf("unknown session: %v", err)
	}
}

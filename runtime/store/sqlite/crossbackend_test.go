package sqlite

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/jsonl"
	"github.com/agentos/agentos/runtime/store/storetest"
)

// TestExportImportAcrossBackends: a session exported from SQLite is the
// JSONL store's events.jsonl byte for byte, and importing that file back
// into a fresh SQLite store exports the same bytes again. Payloads carry
// non-ASCII text, escapes and HTML characters, which a non-canonical
// re-encoding would change.
func TestExportImportAcrossBackends(t *testing.T) {
	ctx := context.Background()
	sealer := storetest.NewSealer(t)
	src := mustOpen(t, t.TempDir(), sealer)
	texts := []string{"plain", "caf\u00e9 \u2028 \U0001F600", "quote \" backslash \\ tab \t", "<b>&amp;</b>", "line\nbreak"}
	var seq int64
	var parent string
	for i, text := range texts {
		d := event.Draft{RunID: "run-1", Type: event.OutputMessage, Actor: "worker", Payload: map[string]any{"text": text, "role": "worker"}, ParentID: parent}
		evs, err := src.Append(ctx, "cross", seq, d)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		seq, parent = evs[0].Seq, evs[0].ID
	}
	var exported bytes.Buffer
	if n, err := store.Export(ctx, src, "cross", &exported); err != nil || n != len(texts) {
		t.Fatalf("export: %d %v", n, err)
	}

	// SQLite → JSONL store: the session file equals the export.
	jdir := t.TempDir()
	js, err := jsonl.Open(jdir, sealer)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	if _, _, err := store.Import(ctx, bytes.NewReader(exported.Bytes()), js); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(filepath.Join(jdir, "sessions", "cross", jsonl.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, exported.Bytes()) {
		t.Fatalf("events.jsonl differs from the SQLite export:\n%s\n%s", file, exported.Bytes())
	}
	// The JSONL store keeps going where SQLite stopped.
	if _, err := js.Append(ctx, "cross", seq, event.Draft{RunID: "run-1", Type: event.OutputMessage, Actor: "worker", Payload: map[string]any{"text": "appended in JSONL"}}); err != nil {
		t.Fatal(err)
	}
	var fromJSONL bytes.Buffer
	if _, err := store.Export(ctx, js, "cross", &fromJSONL); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(fromJSONL.Bytes(), exported.Bytes()) {
		t.Fatal("the JSONL store's export does not start with the SQLite export")
	}

	// JSONL → a fresh SQLite store → JSONL again: byte-identical.
	dst := mustOpen(t, t.TempDir(), sealer)
	sid, n, err := store.Import(ctx, bytes.NewReader(fromJSONL.Bytes()), dst)
	if err != nil || sid != "cross" || n != len(texts)+1 {
		t.Fatalf("import: %s %d %v", sid, n, err)
	}
	var again bytes.Buffer
	if _, err := store.Export(ctx, dst, "cross", &again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), fromJSONL.Bytes()) {
		t.Fatalf("SQLite → JSONL → SQLite → JSONL is not byte-identical:\n%s\n%s", fromJSONL.Bytes(), again.Bytes())
	}
	// A torn copy is refused, not half-imported.
	torn := fromJSONL.Bytes()[:fromJSONL.Len()-10]
	other := mustOpen(t, t.TempDir(), sealer)
	if _, _, err := store.Import(ctx, bytes.NewReader(torn), other); err == nil {
		t.Fatal("a torn log was imported")
	}
	if evs, _ := other.Read(ctx, "cross", 1); len(evs) != 0 {
		t.Fatalf("a refused import left %d events behind", len(evs))
	}
}

package jsonl

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/storetest"
)

func open(t *testing.T, sealer *event.Sealer) store.Store {
	s, err := Open(t.TempDir(), sealer)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) { storetest.Run(t, open) }

func TestHelperProcess(t *testing.T) {
	if os.Getenv(storetest.CrashChildEnv) == "" {
		t.Skip("crash child only")
	}
	storetest.CrashChild(func(dir string) (store.Store, error) { return Open(dir, storetest.NewSealer(t)) })
}

func TestCrash(t *testing.T) {
	storetest.Crash(t, 50, func(dir string) (store.Store, error) { return Open(dir, storetest.NewSealer(t)) })
}

func TestTornLineRecovered(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, _ := Open(dir, storetest.NewSealer(t))
	if _, err := s.Append(ctx, "t", 0, event.Draft{Type: event.OutputMessage, Actor: "w", Payload: map[string]any{"text": "kept"}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	f, _ := os.OpenFile(filepath.Join(dir, "sessions", "t", FileName), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"id":"01JD","session_id":"t","run_id":"","seq":2,"ts":"2026-`)
	f.Close()
	s, _ = Open(dir, storetest.NewSealer(t))
	defer s.Close()
	evs, err := s.Read(ctx, "t", 1)
	if err != nil || len(evs) != 1 {
		t.Fatalf("%d %v", len(evs), err)
	}
	if rec := s.Recovered(); len(rec) != 1 || rec[0].SessionID != "t" || rec[0].Bytes == 0 {
		t.Fatalf("recovery not reported: %+v", rec)
	}
	if _, err := s.Append(ctx, "t", 1, event.Draft{Type: event.OutputMessage, Actor: "w", Payload: map[string]any{"text": "after"}}); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptLogRefused(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, _ := Open(dir, storetest.NewSealer(t))
	for i := int64(0); i < 3; i++ {
		s.Append(ctx, "c", i, event.Draft{Type: event.OutputMessage, Actor: "w", Payload: map[string]any{"text": "original"}})
	}
	s.Close()
	p := filepath.Join(dir, "sessions", "c", FileName)
	b, _ := os.ReadFile(p)
	os.WriteFile(p, bytes.Replace(b, []byte("original"), []byte("tampered"), 1), 0o644)
	s, _ = Open(dir, storetest.NewSealer(t))
	defer s.Close()
	_, err := s.Append(ctx, "c", 3, event.Draft{Type: event.OutputMessage, Actor: "w", Payload: map[string]any{"text": "x"}})
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Line != 1 {
		t.Fatalf("append to a tampered log: %v", err)
	}
}

func TestSecretsNeverOnDisk(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir, storetest.NewSealer(t))
	storetest.SeedSecrets(t, s)
	s.Close()
	storetest.AssertNoSecrets(t, dir)
}

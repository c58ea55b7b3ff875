package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentos/agentos/bot/config"
	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store/sqlite"
	"github.com/agentos/agentos/schemas"
)

// defaultDataDir is where the embedded store lives unless --data says
// otherwise: $AGENTOS_DATA, else ./.agentos.
func defaultDataDir() string {
	if d := os.Getenv("AGENTOS_DATA"); d != "" {
		return d
	}
	return ".agentos"
}

// newSealer returns the sealer every store of this process uses, with the
// process's own secrets registered for redaction.
func newSealer(keys []string, literals ...string) (*event.Sealer, error) {
	r := redact.New(keys)
	for _, l := range literals {
		r.AddLiteral(l)
	}
	return event.NewSealer(schemas.MustDefault(), r, nil)
}

// openStore opens the embedded SQLite store in dataDir.
func openStore(dataDir string, sealer *event.Sealer) (*sqlite.Store, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, err
	}
	return sqlite.Open(dataDir, sealer, sqlite.Options{})
}

func readStoreSession(ctx context.Context, dataDir, sessionID string) ([]event.Event, error) {
	if u := os.Getenv(config.EnvDatabaseURL); u != "" {
		return readPostgresSession(ctx, u, sessionID)
	}
	if _, err := os.Stat(filepath.Join(dataDir, sqlite.FileName)); err != nil {
		return nil, usageErrorf("replay: %s is not a file, and there is no store in %s (--data)", sessionID, dataDir)
	}
	sealer, err := newSealer(nil)
	if err != nil {
		return nil, err
	}
	s, err := openStore(dataDir, sealer)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	evs, err := s.Read(ctx, sessionID, 1)
	if err != nil {
		return nil, err
	}
	if len(evs) == 0 {
		return nil, &exitError{code: exitFailure, err: fmt.Errorf("replay: no session %s in %s", sessionID, dataDir)}
	}
	return evs, nil
}

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
// otherwise: dataDirFor the working directory.
func defaultDataDir() string {
	wd, err := os.Getwd()
	if err != nil {
		wd = "."
	}
	return dataDirFor(wd)
}

// dataDirFor is the data directory of the repository that holds dir:
// $AGENTOS_DATA when set; else .agentos at the repository's top when a
// store is already there (made before the default moved); else a
// directory of the user's state directory keyed by the repository
// ($XDG_STATE_HOME/agentos/<name>-<hash of its path>, by default under
// ~/.local/state). Outside the repository, commands never see it and no
// sandbox has to hide it: Landlock cannot hide part of a tree it grants.
func dataDirFor(dir string) string {
	if d := os.Getenv("AGENTOS_DATA"); d != "" {
		return d
	}
	top := repoTop(dir)
	if fi, err := os.Stat(filepath.Join(top, ".agentos")); err == nil && fi.IsDir() {
		return filepath.Join(top, ".agentos")
	}
	state := os.Getenv("XDG_STATE_HOME")
	if state == "" || !filepath.IsAbs(state) {
		home, err := os.UserHomeDir()
		if err != nil {
			return filepath.Join(top, ".agentos")
		}
		state = filepath.Join(home, ".local", "state")
	}
	sum := sha256.Sum256([]byte(top))
	return filepath.Join(state, "agentos", filepath.Base(top)+"-"+hex.EncodeToString(sum[:6]))
}

// repoTop is the top of the git repository holding dir (the nearest
// directory with a .git), or dir itself, as an absolute clean path.
func repoTop(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return filepath.Clean(dir)
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return abs
		}
	}
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

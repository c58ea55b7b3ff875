package run

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
)

// ErrUnverifiedLog is returned when a session log offered for recovery
// does not verify (an edited, truncated or foreign log): it is refused and
// nothing is imported.
var ErrUnverifiedLog = errors.New("the session log does not verify")

// ErrNoLog is what a LogSource returns when it holds no log of the session.
var ErrNoLog = errors.New("no log of the session")

// LogSource finds a session's JSONL log (the local-first guarantee:
// the log alone is enough to continue a session). It returns ErrNoLog
// (wrapped or not) when it has none.
type LogSource func(ctx context.Context, sessionID string) ([]byte, error)

// DirLogs is the LogSource of a data directory: sessions/<id>/events.jsonl,
// where the CLI and the server export every session.
func DirLogs(dataDir string) LogSource {
	return func(ctx context.Context, sessionID string) ([]byte, error) {
		if !event.ValidSessionID(sessionID) {
			return nil, fmt.Errorf("%q: %w", sessionID, event.ErrInvalidSession)
		}
		b, err := os.ReadFile(filepath.Join(dataDir, "sessions", sessionID, "events.jsonl"))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", sessionID, ErrNoLog)
		}
		return b, err
	}
}

// ImportLog imports a session's JSONL log into st, which holds no copy of
// the session. The log must verify (hash chain, sequence, schemas, one
// terminal report per run; audit completeness is not asked of a log being
// recovered, as that is advice for logs written before the rule) and be
// the session asked for; otherwise it is ErrUnverifiedLog and st is not
// touched. It returns the number of events imported.
func ImportLog(ctx context.Context, st store.Store, sessionID string, raw []byte) (int, error) {
	rep, err := replay.VerifyReaderOptions(schemas.MustDefault(), bytes.NewReader(raw), replay.Options{Lenient: true})
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrUnverifiedLog, err)
	}
	if !rep.Valid {
		return 0, fmt.Errorf("%w: %s", ErrUnverifiedLog, rep.Problem.Error())
	}
	if rep.SessionID != sessionID {
		return 0, fmt.Errorf("%w: the log is session %q, not %q", ErrUnverifiedLog, rep.SessionID, sessionID)
	}
	if len(raw) > 0 && raw[len(raw)-1] != '\n' {
		// Verified complete (no torn line), only the final newline is
		// missing: Import reads newline-terminated lines.
		raw = append(raw[:len(raw):len(raw)], '\n')
	}
	_, n, err := store.Import(ctx, bytes.NewReader(raw), st)
	if err != nil {
		return 0, fmt.Errorf("import session %s: %w", sessionID, err)
	}
	return n, nil
}

// recover imports the session's log from m.Logs when the store has no
// copy of the session. The caller holds the session's lock.
func (m *Manager) recover(ctx context.Context, sessionID string) error {
	if m.Logs == nil {
		return nil
	}
	evs, err := m.Store.Read(ctx, sessionID, 1)
	if err != nil || len(evs) > 0 {
		return err
	}
	raw, err := m.Logs(ctx, sessionID)
	if errors.Is(err, ErrNoLog) {
		return nil // a new session
	}
	if err != nil {
		return fmt.Errorf("recover session %s: %w", sessionID, err)
	}
	_, err = ImportLog(ctx, m.Store, sessionID, raw)
	return err
}

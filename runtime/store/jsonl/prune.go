package jsonl

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentos/agentos/runtime/store"
)

// DeleteSession implements store.Pruner: the session's directory is
// removed (under the session's lock) if its last event is still lastSeq.
// An append that was waiting for the lock finds the session gone and
// starts it afresh, as for an unknown session.
func (s *Store) DeleteSession(ctx context.Context, sessionID string, lastSeq int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	ss, err := s.session(sessionID, false)
	if err != nil || ss == nil {
		return 0, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.gone {
		return 0, nil
	}
	if ss.tip.Seq != lastSeq {
		return 0, &store.ConflictError{SessionID: sessionID, Expected: lastSeq, Actual: ss.tip.Seq}
	}
	s.mu.Lock()
	if s.sessions[sessionID] == ss {
		delete(s.sessions, sessionID)
	}
	s.mu.Unlock()
	ss.gone = true
	n := ss.tip.Seq
	ss.f.Close()
	s.list.mu.Lock()
	if s.list.idx != nil {
		s.list.idx.Delete(sessionID)
	}
	s.list.mu.Unlock()
	if err := os.RemoveAll(filepath.Dir(ss.path)); err != nil {
		return 0, fmt.Errorf("jsonl: delete session %s: %w", sessionID, err)
	}
	if !s.noSync {
		if d, err := os.Open(filepath.Join(s.dir, "sessions")); err == nil {
			_ = d.Sync()
			d.Close()
		}
	}
	return n, nil
}

package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentos/agentos/runtime/store"
	"github.com/jackc/pgx/v5"
)

// DeleteSession implements store.Pruner: in one transaction that holds
// the session's head row (the lock appends take), its events and head are
// deleted if its last event is still lastSeq.
func (s *Store) DeleteSession(ctx context.Context, sessionID string, lastSeq int64) (int64, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("postgres: delete session %s: %w", sessionID, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // after Commit: a no-op
	var cur int64
	err = tx.QueryRow(ctx, `SELECT last_seq FROM agentos_sessions WHERE session_id = $1 FOR UPDATE`, sessionID).Scan(&cur)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: delete session %s: %w", sessionID, err)
	}
	if cur != lastSeq {
		return 0, &store.ConflictError{SessionID: sessionID, Expected: lastSeq, Actual: cur}
	}
	ct, err := tx.Exec(ctx, `DELETE FROM agentos_events WHERE session_id = $1`, sessionID)
	if err != nil {
		return 0, fmt.Errorf("postgres: delete session %s: %w", sessionID, err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM agentos_sessions WHERE session_id = $1`, sessionID); err != nil {
		return 0, fmt.Errorf("postgres: delete session %s: %w", sessionID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("postgres: delete session %s: %w", sessionID, err)
	}
	s.hintsMu.Lock()
	delete(s.hints, sessionID)
	s.hintsMu.Unlock()
	return ct.RowsAffected(), nil
}

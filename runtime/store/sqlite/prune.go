package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentos/agentos/runtime/store"
)

// Deleting a session (store.Pruner). A batch row holds the events of many
// sessions at consecutive positions, and other sessions' chains point at
// positions, so a deleted event keeps its position: its index record
// stays, with an empty session (no session id is empty; readers skip such
// records), its seq, no previous position and a zero-length line, and its
// line is cut out of the row's lines. The session's heads row is deleted.
// The deletion runs in the commit loop like an append, in the same
// transaction and fsync as the appends it is batched with, so the loop's
// cached tip of the session is dropped at once and an append after it
// starts a new session.

// DeleteSession implements store.Pruner.
func (s *Store) DeleteSession(ctx context.Context, sessionID string, lastSeq int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	r := newReq()
	defer reqPool.Put(r)
	r.sessionID, r.expected, r.del = sessionID, lastSeq, true
	if err := s.submit(ctx, r); err != nil {
		return 0, err
	}
	if r.err != nil {
		return 0, r.err
	}
	return r.deleted, nil
}

// deleteSession runs a deletion request in the commit loop's transaction;
// t is the session's tip as this transaction has it (moved, so that an
// append after it in the batch finds the session new). A conflict fails
// the request alone; an error fails the transaction.
func (w *writer) deleteSession(ctx context.Context, r *appendReq, t *tipRow) error {
	if t.pos == 0 {
		return nil // unknown (or deleted already): nothing to delete
	}
	if t.tip.Seq != r.expected {
		r.err = &store.ConflictError{SessionID: r.sessionID, Expected: r.expected, Actual: t.tip.Seq}
		return nil
	}
	n, err := w.erase(ctx, r.sessionID, t.pos)
	if err != nil {
		return fmt.Errorf("delete session %s: %w", r.sessionID, err)
	}
	st, err := w.stmt(ctx, `DELETE FROM heads WHERE session_id = ?`)
	if err != nil {
		return err
	}
	if _, err := st.ExecContext(ctx, r.sessionID); err != nil {
		return err
	}
	*t = tipRow{}
	r.deleted = n
	return nil
}

// erase blanks every event of session sid, walking its chain back from
// position last a batch row at a time, and returns how many it blanked.
func (w *writer) erase(ctx context.Context, sid string, last int64) (int64, error) {
	get, err := w.stmt(ctx, `SELECT pos, idx, lines FROM batches WHERE pos <= ? ORDER BY pos DESC LIMIT 1`)
	if err != nil {
		return 0, err
	}
	put, err := w.stmt(ctx, `UPDATE batches SET idx = ?, lines = ? WHERE pos = ?`)
	if err != nil {
		return 0, err
	}
	var total int64
	for p := last; p > 0; {
		var pos int64
		var idx, lines []byte
		if err := get.QueryRowContext(ctx, p).Scan(&pos, &idx, &lines); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				err = errCorrupt
			}
			return total, fmt.Errorf("position %d: %w", p, err)
		}
		nidx, nlines := []byte{}, []byte{} // not NULL: the columns are NOT NULL
		next, n := int64(0), 0
		found := false
		err := eachIndex(pos, idx, func(i int, s []byte, seq, prev int64, off, ln int) bool {
			if string(s) != sid {
				nidx = appendIndex(nidx, string(s), seq, prev, ln)
				nlines = append(nlines, lines[off:off+ln]...)
				return true
			}
			if pos+int64(i) == p {
				found = true
			}
			if n == 0 {
				next = prev // the session's first event in this row: where its chain enters
			}
			n++
			nidx = appendIndex(nidx, "", seq, 0, 0)
			return true
		})
		if err != nil {
			return total, errors.Join(err, errCorrupt)
		}
		if !found || next >= pos {
			return total, fmt.Errorf("position %d: not an event of session %s: %w", p, sid, errCorrupt)
		}
		if _, err := put.ExecContext(ctx, nidx, nlines, pos); err != nil {
			return total, err
		}
		total += int64(n)
		p = next
	}
	return total, nil
}

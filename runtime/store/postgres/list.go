package postgres

import (
	"context"
	"fmt"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/jackc/pgx/v5"
)

// List implements store.Store: a range scan of the activity index
// (migration 2) from the cursor. Times and ids compare as bytes (COLLATE
// "C"), as the other backends compare them.
func (s *Store) List(ctx context.Context, o store.ListOptions) ([]store.SessionInfo, error) {
	o, err := o.Check()
	if err != nil {
		return nil, err
	}
	if err := s.open(); err != nil {
		return nil, err
	}
	const cols = `SELECT session_id, last_seq, first_ts, last_ts, last_type FROM agentos_sessions WHERE last_seq > 0`
	const order = ` ORDER BY last_ts COLLATE "C" DESC, session_id COLLATE "C" DESC LIMIT `
	var rows pgx.Rows
	if o.After.IsZero() {
		rows, err = s.pool.Query(ctx, cols+order+`$1`, o.Limit)
	} else {
		rows, err = s.pool.Query(ctx, cols+` AND (last_ts COLLATE "C", session_id COLLATE "C") < ($1::text COLLATE "C", $2::text COLLATE "C")`+order+`$3`,
			o.After.LastTS, o.After.SessionID, o.Limit)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: list: %w", err)
	}
	defer rows.Close()
	out := make([]store.SessionInfo, 0, o.Limit)
	for rows.Next() {
		var si store.SessionInfo
		if err := rows.Scan(&si.SessionID, &si.LastSeq, &si.FirstTS, &si.LastTS, &si.LastType); err != nil {
			return nil, fmt.Errorf("postgres: list: %w", err)
		}
		out = append(out, si)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list: %w", err)
	}
	return out, nil
}

// scanPage is how many events Scan reads per query; fn runs between
// queries, holding no connection.
const scanPage = 512

// readPageRetried is readPage retried over a blip (retry.go), then
// failing with *store.UnavailableError.
func (s *Store) readPageRetried(ctx context.Context, sessionID string, fromSeq int64, limit int) ([]event.Event, error) {
	bo := s.newBackoff()
	for {
		evs, err := s.readPage(ctx, sessionID, fromSeq, limit)
		if !transient(err) {
			return evs, err
		}
		if !bo.wait(ctx) {
			return nil, bo.unavailable("read", sessionID, false, err)
		}
	}
}

// Scan implements store.Store, a page of events per query (keyset: the
// next page starts after the last seq read), so a session of any length
// is read in memory bounded by a page. A page read rides out a blip as
// Read does.
func (s *Store) Scan(ctx context.Context, sessionID string, fromSeq int64, fn func(*event.Event) error) error {
	if err := s.open(); err != nil {
		return err
	}
	next := max(fromSeq, 1)
	for {
		evs, err := s.readPageRetried(ctx, sessionID, next, scanPage)
		if err != nil {
			return err
		}
		for i := range evs {
			if err := fn(&evs[i]); err != nil {
				return err
			}
		}
		if len(evs) < scanPage {
			return nil
		}
		next = evs[len(evs)-1].Seq + 1
	}
}

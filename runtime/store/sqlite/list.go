package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
)

// Listing (layout 4). The heads table also holds each session's last
// time, and the index heads_by_activity orders it by (last_ts,
// session_id), so a page of List is an index range scan from the cursor.
// Heads are folded lazily (ADR 7 in docs/decisions.md): a session moved
// by the commits since the last fold (the tail, at most foldEvery commits)
// has a stale heads row, so List takes those sessions from the tail,
// skips their rows, and merges the two. A page costs O(page + tail), not
// O(sessions stored).

// migrateActivity brings a layout-3 heads table to layout 4: the last_ts
// column, filled from each head's last event, and its index.
func migrateActivity(tx *sql.Tx) error {
	ctx := context.Background()
	var n int
	if err := tx.QueryRow(`SELECT count(*) FROM pragma_table_info('heads') WHERE name = 'last_ts'`).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		if _, err := tx.Exec(`ALTER TABLE heads ADD COLUMN last_ts TEXT NOT NULL DEFAULT ''`); err != nil {
			return err
		}
	}
	rows, err := tx.Query(`SELECT session_id, last_pos FROM heads WHERE last_ts = ''`)
	if err != nil {
		return err
	}
	type fill struct {
		sid string
		pos int64
	}
	var todo []fill
	for rows.Next() {
		var f fill
		if err := rows.Scan(&f.sid, &f.pos); err != nil {
			rows.Close()
			return err
		}
		todo = append(todo, f)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if len(todo) > 0 {
		var stmts []*sql.Stmt
		defer func() {
			for _, st := range stmts {
				st.Close()
			}
		}()
		cache := map[string]*sql.Stmt{}
		q := &querier{prepare: func(ctx context.Context, query string) (*sql.Stmt, error) {
			if st, ok := cache[query]; ok {
				return st, nil
			}
			st, err := tx.PrepareContext(ctx, query)
			if err == nil {
				cache[query] = st
				stmts = append(stmts, st)
			}
			return st, err
		}}
		r := &batchReader{q: q}
		for _, f := range todo {
			_, line, err := r.event(ctx, f.pos)
			if err != nil {
				return fmt.Errorf("session %s: %w", f.sid, err)
			}
			e, err := event.ParseLineFast(line)
			if err != nil {
				return fmt.Errorf("session %s: last event: %w", f.sid, err)
			}
			if _, err := tx.Exec(`UPDATE heads SET last_ts = ? WHERE session_id = ?`, e.TS, f.sid); err != nil {
				return err
			}
		}
	}
	_, err = tx.Exec(`CREATE INDEX IF NOT EXISTS heads_by_activity ON heads (last_ts, session_id)`)
	return err
}

// info is a session's listing entry from its head: its last visible
// event (false if none is durable yet) and first time.
func info(ctx context.Context, r *batchReader, sid string, h head, lo, hi int64) (store.SessionInfo, bool, error) {
	pos, _, line, err := visible(ctx, r, sid, h.last, lo, hi)
	if err != nil || pos == 0 {
		return store.SessionInfo{}, false, err
	}
	last, err := event.ParseLineFast(line)
	if err != nil {
		return store.SessionInfo{}, false, fmt.Errorf("session %s: last event: %w", sid, err)
	}
	in := store.SessionInfo{SessionID: sid, FirstTS: h.firstTS, LastSeq: last.Seq, LastTS: last.TS, LastType: last.Type}
	if in.FirstTS == "" {
		if in.FirstTS, err = r.firstTS(ctx, h.first); err != nil {
			return store.SessionInfo{}, false, fmt.Errorf("session %s: %w", sid, err)
		}
	}
	return in, true, nil
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, o store.ListOptions) ([]store.SessionInfo, error) {
	o, err := o.Check()
	if err != nil {
		return nil, err
	}
	q, err := s.readTx(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list: %w", err)
	}
	defer q.close()
	out, err := s.list(ctx, q, o)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list: %w", err)
	}
	return out, nil
}

func (s *Store) list(ctx context.Context, q *querier, o store.ListOptions) ([]store.SessionInfo, error) {
	folded, err := q.folded(ctx)
	if err != nil {
		return nil, err
	}
	tail, err := q.tail(ctx, folded)
	if err != nil {
		return nil, err
	}
	lo, hi := s.hidden()
	r := &batchReader{q: q}
	var cands []store.SessionInfo
	add := func(sid string, h head) error {
		in, ok, err := info(ctx, r, sid, h, lo, hi)
		if err == nil && ok && o.After.Precedes(store.CursorOf(in)) {
			cands = append(cands, in)
		}
		return err
	}
	for sid, h := range tail {
		row, err := q.headRow(ctx, sid)
		if err != nil {
			return nil, err
		}
		h.firstTS = row.firstTS // "" if it has no row yet
		if err := add(sid, *h); err != nil {
			return nil, err
		}
	}
	// Enough rows that skipping the tail's stale ones leaves a page.
	n := o.Limit + len(tail)
	var rows *sql.Rows
	if o.After.IsZero() {
		st, err := q.prepare(ctx, `SELECT session_id, last_pos, first_ts FROM heads ORDER BY last_ts DESC, session_id DESC LIMIT ?`)
		if err != nil {
			return nil, err
		}
		rows, err = st.QueryContext(ctx, n)
		if err != nil {
			return nil, err
		}
	} else {
		st, err := q.prepare(ctx, `SELECT session_id, last_pos, first_ts FROM heads WHERE (last_ts, session_id) < (?, ?) ORDER BY last_ts DESC, session_id DESC LIMIT ?`)
		if err != nil {
			return nil, err
		}
		rows, err = st.QueryContext(ctx, o.After.LastTS, o.After.SessionID, n)
		if err != nil {
			return nil, err
		}
	}
	type row struct {
		sid string
		h   head
	}
	var page []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.sid, &r.h.last, &r.h.firstTS); err != nil {
			rows.Close()
			return nil, err
		}
		if _, stale := tail[r.sid]; !stale {
			page = append(page, r)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	for _, p := range page {
		if err := add(p.sid, p.h); err != nil {
			return nil, err
		}
	}
	store.SortForList(cands)
	if len(cands) > o.Limit {
		cands = cands[:o.Limit]
	}
	return cands, nil
}

// scanChunk is how many events Scan reads per read transaction; it bounds
// the events held at once, and fn runs between transactions, holding no
// connection.
const scanChunk = 256

// Scan implements store.Store. A session's chain links each event to the
// one before, so Scan first walks it back from the head collecting
// positions (8 bytes per event, not the events), then reads the events
// forward a chunk at a time. Positions never change once durable.
func (s *Store) Scan(ctx context.Context, sessionID string, fromSeq int64, fn func(*event.Event) error) error {
	if fromSeq < 1 {
		fromSeq = 1
	}
	positions, err := s.positions(ctx, sessionID, fromSeq)
	if err != nil {
		return fmt.Errorf("sqlite: scan %s: %w", sessionID, err)
	}
	for len(positions) > 0 {
		n := min(len(positions), scanChunk)
		evs, err := s.readAt(ctx, sessionID, fromSeq, positions[:n])
		if err != nil {
			return fmt.Errorf("sqlite: scan %s: %w", sessionID, err)
		}
		for i := range evs {
			if err := fn(&evs[i]); err != nil {
				return err
			}
		}
		positions, fromSeq = positions[n:], fromSeq+int64(n)
	}
	return nil
}

// positions returns the positions of the session's visible events with
// seq >= fromSeq, in seq order.
func (s *Store) positions(ctx context.Context, sid string, fromSeq int64) ([]int64, error) {
	q, err := s.readTx(ctx)
	if err != nil {
		return nil, err
	}
	defer q.close()
	h, err := q.head(ctx, sid)
	if err != nil {
		return nil, err
	}
	lo, hi := s.hidden()
	r := &batchReader{q: q}
	pos, e, _, err := visible(ctx, r, sid, h.last, lo, hi)
	if err != nil || pos == 0 || fromSeq > e.seq {
		return nil, err
	}
	out := make([]int64, e.seq-fromSeq+1)
	for i := len(out) - 1; ; i-- {
		if e.sid != sid || e.seq != fromSeq+int64(i) {
			return nil, fmt.Errorf("chain has %s seq %d where seq %d belongs: %w", e.sid, e.seq, fromSeq+int64(i), errCorrupt)
		}
		out[i] = pos
		if i == 0 {
			return out, nil
		}
		pos = e.prev
		if e, err = r.entry(ctx, pos); err != nil {
			return nil, err
		}
	}
}

// readAt reads the events at positions, which hold seq fromSeq on.
func (s *Store) readAt(ctx context.Context, sid string, fromSeq int64, positions []int64) ([]event.Event, error) {
	q, err := s.readTx(ctx)
	if err != nil {
		return nil, err
	}
	defer q.close()
	r := &batchReader{q: q}
	out := make([]event.Event, len(positions))
	for i, p := range positions {
		e, line, err := r.event(ctx, p)
		if err != nil {
			return nil, err
		}
		if want := fromSeq + int64(i); e.sid != sid || e.seq != want {
			return nil, fmt.Errorf("position %d holds %s seq %d, not seq %d: %w", p, e.sid, e.seq, want, errCorrupt)
		}
		if out[i], err = event.ParseLineFast(line); err != nil {
			return nil, fmt.Errorf("seq %d: %w", e.seq, err)
		}
	}
	return out, nil
}

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
)

// errCorrupt marks a database whose rows contradict each other (a chain
// pointing at a missing position, a head naming another session's event).
var errCorrupt = errors.New("sqlite: database is inconsistent")

// querier runs the layout's read queries, on the writer's connection or in
// a reader's transaction (readTx), with statements prepared once per
// querier.
type querier struct {
	prepare func(ctx context.Context, query string) (*sql.Stmt, error)
	close   func() // readTx's: ends the transaction
}

// readTx takes a reader connection and begins a read transaction on it
// (one consistent snapshot from its first read); the querier runs the
// connection's statements, and close ends the transaction and gives the
// connection back. Everything runs on that one connection (see pool.go).
func (s *Store) readTx(ctx context.Context) (*querier, error) {
	rc, err := s.readers.acquire(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := rc.conn.ExecContext(ctx, "BEGIN"); err != nil {
		s.readers.release(rc, false)
		return nil, err
	}
	return &querier{
		prepare: rc.stmt,
		close: func() {
			// A ROLLBACK that fails leaves the connection's state
			// unknown: it is closed rather than reused.
			_, err := rc.conn.ExecContext(context.Background(), "ROLLBACK")
			s.readers.release(rc, err == nil)
		},
	}, nil
}

// head is where a session's chain ends (last) and, when the heads table
// has no row for it, where it starts (first); firstTS comes from the row.
type head struct {
	last, first int64
	firstTS     string
}

// lastPos is the position of the last event stored (0 if none).
func (q *querier) lastPos(ctx context.Context) (int64, error) {
	st, err := q.prepare(ctx, `SELECT pos, idx FROM batches ORDER BY pos DESC LIMIT 1`)
	if err != nil {
		return 0, err
	}
	var pos int64
	var idx []byte
	switch err := st.QueryRowContext(ctx).Scan(&pos, &idx); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, err
	}
	n, err := countIndex(pos, idx)
	if err != nil {
		return 0, errors.Join(err, errCorrupt)
	}
	return pos + int64(n) - 1, nil
}

// folded is the position the heads table is exact at.
func (q *querier) folded(ctx context.Context) (int64, error) {
	st, err := q.prepare(ctx, `SELECT pos FROM folded`)
	if err != nil {
		return 0, err
	}
	var pos int64
	return pos, st.QueryRowContext(ctx).Scan(&pos)
}

// headRow reads a session's heads row; zero if it has none.
func (q *querier) headRow(ctx context.Context, sid string) (head, error) {
	st, err := q.prepare(ctx, `SELECT last_pos, first_ts FROM heads WHERE session_id = ?`)
	if err != nil {
		return head{}, err
	}
	var h head
	if err := st.QueryRowContext(ctx, sid).Scan(&h.last, &h.firstTS); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return head{}, err
	}
	return h, nil
}

// scanTail calls fn for each event after position from (the tail), in
// ascending order; fn gets the session as bytes valid only during the
// call. Only the index column is read.
func (q *querier) scanTail(ctx context.Context, from int64, fn func(pos int64, sid []byte)) error {
	st, err := q.prepare(ctx, `SELECT pos, idx FROM batches WHERE pos > ? ORDER BY pos`)
	if err != nil {
		return err
	}
	rows, err := st.QueryContext(ctx, from)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var pos int64
		var idx sql.RawBytes
		if err := rows.Scan(&pos, &idx); err != nil {
			return err
		}
		err := eachIndex(pos, idx, func(i int, sid []byte, _, _ int64, _, _ int) bool {
			if len(sid) > 0 { // an empty session is a deleted event (prune.go)
				fn(pos+int64(i), sid)
			}
			return true
		})
		if err != nil {
			return errors.Join(err, errCorrupt)
		}
	}
	return rows.Err()
}

// tail returns where the chain of every session with events after
// position folded starts and ends in the tail; firstTS is left to the
// caller (it is in the session's heads row, if it has one).
func (q *querier) tail(ctx context.Context, folded int64) (map[string]*head, error) {
	heads := map[string]*head{}
	err := q.scanTail(ctx, folded, func(pos int64, sid []byte) {
		if h, ok := heads[string(sid)]; ok {
			h.last = pos
		} else {
			heads[string(sid)] = &head{first: pos, last: pos}
		}
	})
	return heads, err
}

// head returns a session's head: its newest event in the tail, else its
// heads row (zero for an unknown session).
func (q *querier) head(ctx context.Context, sid string) (head, error) {
	folded, err := q.folded(ctx)
	if err != nil {
		return head{}, err
	}
	var last, first int64
	err = q.scanTail(ctx, folded, func(pos int64, s []byte) {
		if string(s) == sid {
			if first == 0 {
				first = pos
			}
			last = pos
		}
	})
	if err != nil {
		return head{}, err
	}
	h, err := q.headRow(ctx, sid)
	if err != nil || last == 0 {
		return h, err
	}
	h.last = last
	if h.firstTS == "" {
		h.first = first // no row yet: the session starts in the tail
	}
	return h, nil
}

// batchReader reads events by position. It keeps the index of the last
// batch it read, since consecutive events of one session are often in one
// batch, and fetches only the line it needs.
type batchReader struct {
	q      *querier
	curPos int64
	curIdx []byte
}

// event returns the index entry and line at position p.
func (r *batchReader) event(ctx context.Context, p int64) (entry, []byte, error) {
	e, err := r.entry(ctx, p)
	if err != nil {
		return entry{}, nil, err
	}
	st, err := r.q.prepare(ctx, `SELECT substr(lines, ?, ?) FROM batches WHERE pos = ?`)
	if err != nil {
		return entry{}, nil, err
	}
	var line []byte
	if err := st.QueryRowContext(ctx, e.off+1, e.n, r.curPos).Scan(&line); err != nil {
		return entry{}, nil, fmt.Errorf("position %d: %w", p, err)
	}
	if len(line) != e.n {
		return entry{}, nil, fmt.Errorf("position %d: line is %d bytes, index says %d: %w", p, len(line), e.n, errCorrupt)
	}
	return e, line, nil
}

// entry returns the index entry at position p, leaving its batch current.
func (r *batchReader) entry(ctx context.Context, p int64) (entry, error) {
	e, ok, err := indexAt(r.curPos, r.curIdx, p)
	if !ok || err != nil {
		st, err := r.q.prepare(ctx, `SELECT pos, idx FROM batches WHERE pos <= ? ORDER BY pos DESC LIMIT 1`)
		if err != nil {
			return entry{}, err
		}
		if err := st.QueryRowContext(ctx, p).Scan(&r.curPos, &r.curIdx); err != nil {
			r.curIdx = nil
			if errors.Is(err, sql.ErrNoRows) {
				err = errCorrupt
			}
			return entry{}, fmt.Errorf("position %d: %w", p, err)
		}
		if e, ok, err = indexAt(r.curPos, r.curIdx, p); err != nil || !ok {
			r.curIdx = nil
			return entry{}, fmt.Errorf("position %d: not in any batch: %w", p, errors.Join(err, errCorrupt))
		}
	}
	return e, nil
}

// firstTS returns the time of the event at position p.
func (r *batchReader) firstTS(ctx context.Context, p int64) (string, error) {
	_, line, err := r.event(ctx, p)
	if err != nil {
		return "", err
	}
	e, err := event.ParseLineFast(line)
	if err != nil {
		return "", fmt.Errorf("first event at pos %d: %w", p, err)
	}
	return e.TS, nil
}

// hidden is the range of positions (lo, hi] that this store committed but
// has not yet fsynced; readers in this process do not see them. It must be
// taken after the read transaction's snapshot is established: the commit
// loop raises hi before it commits, so a snapshot that holds a row of ours
// was taken after hi covered it.
func (s *Store) hidden() (lo, hi int64) {
	return s.durable.Load(), s.ours.Load()
}

// visible walks back from pos past positions in (lo, hi] and returns the
// first visible event's position, index entry and line (pos 0 if none is
// left).
func visible(ctx context.Context, r *batchReader, sid string, pos, lo, hi int64) (int64, entry, []byte, error) {
	for pos != 0 {
		e, line, err := r.event(ctx, pos)
		if err != nil {
			return 0, entry{}, nil, err
		}
		if e.sid != sid {
			return 0, entry{}, nil, fmt.Errorf("session %s: position %d holds session %s: %w", sid, pos, e.sid, errCorrupt)
		}
		if pos <= lo || pos > hi {
			return pos, e, line, nil
		}
		pos = e.prev
	}
	return 0, entry{}, nil, nil
}

// Read implements store.Store. It walks the session's chain backwards from
// its head inside one read transaction, so it sees a consistent snapshot.
func (s *Store) Read(ctx context.Context, sessionID string, fromSeq int64) ([]event.Event, error) {
	q, err := s.readTx(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read: %w", err)
	}
	defer q.close()
	h, err := q.head(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read %s: %w", sessionID, err)
	}
	lo, hi := s.hidden()
	r := &batchReader{q: q}
	pos, e, line, err := visible(ctx, r, sessionID, h.last, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read %s: %w", sessionID, err)
	}
	if fromSeq < 1 {
		fromSeq = 1
	}
	if pos == 0 || fromSeq > e.seq {
		return nil, nil
	}
	out := make([]event.Event, e.seq-fromSeq+1)
	for i := len(out) - 1; i >= 0; i-- {
		if i < len(out)-1 { // the last one visible already read
			if e, line, err = r.event(ctx, pos); err != nil {
				return nil, fmt.Errorf("sqlite: read %s: %w", sessionID, err)
			}
		}
		if want := fromSeq + int64(i); e.sid != sessionID || e.seq != want {
			return nil, fmt.Errorf("sqlite: session %s: chain has %s seq %d where seq %d belongs: %w", sessionID, e.sid, e.seq, want, errCorrupt)
		}
		ev, err := event.ParseLineFast(line)
		if err != nil {
			return nil, fmt.Errorf("sqlite: session %s seq %d: %w", sessionID, e.seq, err)
		}
		out[i] = ev
		pos = e.prev
	}
	return out, nil
}

// Sessions implements store.Store.
func (s *Store) Sessions(ctx context.Context) ([]store.SessionInfo, error) {
	q, err := s.readTx(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlite: sessions: %w", err)
	}
	defer q.close()
	heads, err := q.allHeads(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlite: sessions: %w", err)
	}
	folded, err := q.folded(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlite: sessions: %w", err)
	}
	tail, err := q.tail(ctx, folded)
	if err != nil {
		return nil, fmt.Errorf("sqlite: sessions: %w", err)
	}
	for sid, h := range tail {
		h.firstTS = heads[sid].firstTS // "" if it has no row yet
		heads[sid] = *h
	}
	sids := make([]string, 0, len(heads))
	for sid := range heads {
		sids = append(sids, sid)
	}
	sort.Strings(sids)
	lo, hi := s.hidden()
	r := &batchReader{q: q}
	out := make([]store.SessionInfo, 0, len(sids))
	for _, sid := range sids {
		h := heads[sid]
		pos, _, line, err := visible(ctx, r, sid, h.last, lo, hi)
		if err != nil {
			return nil, fmt.Errorf("sqlite: sessions: %w", err)
		}
		if pos == 0 {
			continue // none of its events is durable yet
		}
		last, err := event.ParseLineFast(line)
		if err != nil {
			return nil, fmt.Errorf("sqlite: session %s: last event: %w", sid, err)
		}
		info := store.SessionInfo{SessionID: sid, FirstTS: h.firstTS, LastSeq: last.Seq, LastTS: last.TS, LastType: last.Type}
		if info.FirstTS == "" {
			if info.FirstTS, err = r.firstTS(ctx, h.first); err != nil {
				return nil, fmt.Errorf("sqlite: session %s: %w", sid, err)
			}
		}
		out = append(out, info)
	}
	return out, nil
}

// allHeads reads the heads table.
func (q *querier) allHeads(ctx context.Context) (map[string]head, error) {
	st, err := q.prepare(ctx, `SELECT session_id, last_pos, first_ts FROM heads`)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	heads := map[string]head{}
	for rows.Next() {
		var sid string
		var h head
		if err := rows.Scan(&sid, &h.last, &h.firstTS); err != nil {
			return nil, err
		}
		heads[sid] = h
	}
	return heads, rows.Err()
}

package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/jackc/pgx/v5"
)

// Group commit. Each commit of PostgreSQL waits for its WAL flush; with
// one transaction per append, 64 sessions appending at once cost 64
// flushes' worth of waiting unless the server happens to group them
// (commit_delay is off by default). The group commit (runtime/groupcommit,
// Options.Committers batches in flight) instead takes every append that
// is waiting, up to MaxBatch, and writes them in one transaction, one
// flush:
//
//  1. (one round trip) BEGIN; create missing head rows (last_seq 0);
//     lock the batch's head rows FOR UPDATE in session order (so that two
//     committers, or two replicas, never deadlock) and read them;
//  2. in Go: check each append's expected seq against its head (a
//     mismatch is its ConflictError alone) and seal the accepted ones on
//     their heads, several appends to one session in order;
//  3. (one round trip) insert every event, move every head, NOTIFY each
//     session, COMMIT.
//
// The (session_id, seq) primary key stays the last guard: if it ever
// fires, the batch fails as a whole and each append is retried alone.

// groupReq is one append or import waiting for the group commit.
type groupReq struct {
	sid      string
	expected int64
	prepared []event.Prepared
	perr     error         // schema violation: append at the tip whatever expected says
	imported []event.Event // ImportSealed
	out      []event.Event
	err      error
	done     chan struct{}
	// doubt holds the versions of this append sent in a transaction
	// whose outcome is unknown (retry.go).
	doubt [][]event.Event
	bo    *backoff
}

// commitGroup commits a batch the group commit took (up to MaxBatch
// appends waiting when one of its Committers slots was free) and
// acknowledges each append.
func (s *Store) commitGroup(batch []*groupReq) {
	s.commitBatch(batch)
	for _, r := range batch {
		close(r.done)
	}
}

func (s *Store) commitBatch(batch []*groupReq) {
	ctx := context.Background()
	for _, r := range batch {
		if r.bo == nil {
			r.bo = s.newBackoff()
		}
	}
	for {
		err := s.commitOnce(ctx, batch)
		if err == nil {
			s.settleConflicts(ctx, batch)
			return
		}
		if isUniqueViolation(err) && len(batch) > 1 {
			// Cannot happen while every writer locks heads (except after a
			// blip, a late commit of our own); retry alone so that one bad
			// append does not fail the others.
			for _, r := range batch {
				r.out, r.err = nil, nil
				s.commitBatch([]*groupReq{r})
			}
			return
		}
		if !transient(err) && !(isUniqueViolation(err) && len(batch[0].doubt) > 0) {
			for _, r := range batch {
				if r.err == nil {
					r.out = nil
					r.err = fmt.Errorf("postgres: append to %s: %w", r.sid, err)
				}
			}
			return
		}
		// The database could not be reached, or a late commit of ours
		// won the seq: every append sealed in this transaction is in
		// doubt until the database says whether it is stored.
		for _, r := range batch {
			if r.out != nil {
				r.doubt = append(r.doubt, r.out)
			}
			r.out, r.err = nil, nil
		}
		if batch = s.settle(ctx, batch, err); len(batch) == 0 {
			return
		}
	}
}

// settle waits out the blip for a failed batch: it backs off, then asks
// which appends in doubt are stored (they succeeded) until the database
// answers or an append's bound passes (it fails, unavailable). It returns
// the appends to try again.
func (s *Store) settle(ctx context.Context, batch []*groupReq, cause error) []*groupReq {
	for {
		var again []*groupReq
		for _, r := range batch {
			if !r.bo.wait(ctx) {
				r.out, r.err = nil, r.bo.unavailable(r.op(), r.sid, len(r.doubt) > 0, cause)
				continue
			}
			again = append(again, r)
		}
		batch = again
		if len(batch) == 0 {
			return nil
		}
		var next []*groupReq
		down := false
		for _, r := range batch {
			if len(r.doubt) == 0 || down {
				next = append(next, r)
				continue
			}
			i, err := s.committed(ctx, r.sid, r.doubt)
			switch {
			case transient(err):
				cause, down = err, true
				next = append(next, r)
			case err != nil:
				r.out, r.err = nil, fmt.Errorf("postgres: append to %s: %w", r.sid, err)
			case i >= 0:
				r.out, r.err = r.doubt[i], nil
				last := r.out[len(r.out)-1]
				s.setHint(r.sid, event.Tip{Seq: last.Seq, Hash: last.Hash})
			default:
				next = append(next, r)
			}
		}
		if !down {
			return next
		}
		batch = next
	}
}

// settleConflicts turns the conflict of an append in doubt into its
// success when the version in doubt is the one stored: its first try
// committed after all, late.
func (s *Store) settleConflicts(ctx context.Context, batch []*groupReq) {
	for _, r := range batch {
		var ce *store.ConflictError
		if len(r.doubt) == 0 || !errors.As(r.err, &ce) && !errors.Is(r.err, store.ErrChain) {
			continue
		}
		if i, err := s.committed(ctx, r.sid, r.doubt); err == nil && i >= 0 {
			r.out, r.err = r.doubt[i], nil
		}
	}
}

func (r *groupReq) op() string {
	if r.imported != nil {
		return "import"
	}
	return "append"
}

type headRow struct {
	tip     event.Tip
	firstTS string
	moved   bool
	lastTS  string
	lastTyp string
}

func (s *Store) commitOnce(ctx context.Context, batch []*groupReq) error {
	sids := make([]string, 0, len(batch))
	for _, r := range batch {
		sids = append(sids, r.sid)
	}
	slices.Sort(sids)
	sids = slices.Compact(sids)

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // after Commit: a no-op
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO agentos_sessions (session_id, last_seq, last_hash, first_ts, last_ts, last_type)
		SELECT x, 0, '', '', '', '' FROM unnest($1::text[]) AS x ORDER BY x COLLATE "C"
		ON CONFLICT (session_id) DO NOTHING`, sids)
	b.Queue(`SELECT session_id, last_seq, last_hash, first_ts FROM agentos_sessions
		WHERE session_id = ANY($1) ORDER BY session_id COLLATE "C" FOR UPDATE`, sids)
	br := tx.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return err
	}
	heads := make(map[string]*headRow, len(sids))
	for rows.Next() {
		var sid string
		h := &headRow{}
		if err := rows.Scan(&sid, &h.tip.Seq, &h.tip.Hash, &h.firstTS); err != nil {
			rows.Close()
			br.Close()
			return err
		}
		heads[sid] = h
	}
	rows.Close()
	if err := errors.Join(rows.Err(), br.Close()); err != nil {
		return err
	}

	var (
		evSID   []string
		evSeq   []int64
		evHash  []string
		evLine  [][]byte
		anyRows bool
	)
	for _, r := range batch {
		h := heads[r.sid]
		if h == nil {
			r.err = fmt.Errorf("postgres: append to %s: head row missing after insert", r.sid)
			continue
		}
		var evs []event.Event
		if r.imported != nil {
			if err := store.CheckContinues(h.tip, r.sid, r.imported); err != nil {
				r.err = err
				continue
			}
			evs = r.imported
		} else {
			if h.tip.Seq != r.expected && r.perr == nil {
				r.err = &store.ConflictError{SessionID: r.sid, Expected: r.expected, Actual: h.tip.Seq}
				continue
			}
			if n := len(r.doubt); n > 0 && r.doubt[n-1][0].Seq == h.tip.Seq+1 && r.doubt[n-1][0].PrevHash == h.tip.Hash {
				evs = r.doubt[n-1] // the same events again (retry.go)
			} else {
				evs = s.sealer.Chain(h.tip, r.prepared)
			}
		}
		for i := range evs {
			evSID = append(evSID, r.sid)
			evSeq = append(evSeq, evs[i].Seq)
			evHash = append(evHash, evs[i].Hash)
			evLine = append(evLine, evs[i].Line())
		}
		last := evs[len(evs)-1]
		if h.firstTS == "" {
			h.firstTS = evs[0].TS
		}
		h.tip = event.Tip{Seq: last.Seq, Hash: last.Hash}
		h.lastTS, h.lastTyp, h.moved = last.TS, last.Type, true
		r.out = evs
		anyRows = true
	}
	if !anyRows {
		return tx.Commit(ctx) // only conflicts; the placeholders may stay
	}
	var hSID, hHash, hFirst, hLast, hType, notes []string
	var hSeq []int64
	for _, sid := range sids {
		h := heads[sid]
		if h == nil || !h.moved {
			continue
		}
		hSID, hSeq, hHash = append(hSID, sid), append(hSeq, h.tip.Seq), append(hHash, h.tip.Hash)
		hFirst, hLast, hType = append(hFirst, h.firstTS), append(hLast, h.lastTS), append(hType, h.lastTyp)
		notes = append(notes, fmt.Sprintf("%s %d", sid, h.tip.Seq))
	}
	b = &pgx.Batch{}
	b.Queue(`INSERT INTO agentos_events (session_id, seq, hash, line)
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bytea[])`, evSID, evSeq, evHash, evLine)
	b.Queue(`UPDATE agentos_sessions AS h SET last_seq = u.seq, last_hash = u.hash, first_ts = u.first_ts, last_ts = u.last_ts, last_type = u.typ
		FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[]) AS u(sid, seq, hash, first_ts, last_ts, typ)
		WHERE h.session_id = u.sid`, hSID, hSeq, hHash, hFirst, hLast, hType)
	b.Queue(`SELECT count(pg_notify('`+EventsChannel+`', x)) FROM unnest($1::text[]) AS x`, notes)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	for _, sid := range hSID {
		h := heads[sid]
		s.setHint(sid, h.tip)
	}
	return nil
}

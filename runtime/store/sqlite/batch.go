package sqlite

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A batch is the row one commit writes: the events of every append in the
// commit, at consecutive positions from pos. Its idx column lists, per
// event, the session, seq, previous position of the same session and line
// length; its lines column holds the lines back to back. One row per
// commit instead of one per event took the SQL work of a 26-event commit
// from about 75 µs to 20 µs (see docs/decisions.md, ADR 7). Readers decode
// the index without allocating and fetch only the line they need.
//
// Index encoding, per event: uvarint len(session) | session | uvarint seq |
// uvarint prev_pos | uvarint len(line).

// entry is one event's index record: where its line lies in the batch's
// lines (off, n), its session, seq and the previous position of its
// session.
type entry struct {
	sid       string
	seq, prev int64
	off, n    int
}

// appendIndex adds one event's index record.
func appendIndex(idx []byte, sid string, seq, prev int64, lineLen int) []byte {
	idx = binary.AppendUvarint(idx, uint64(len(sid)))
	idx = append(idx, sid...)
	idx = binary.AppendUvarint(idx, uint64(seq))
	idx = binary.AppendUvarint(idx, uint64(prev))
	return binary.AppendUvarint(idx, uint64(lineLen))
}

var errIndex = errors.New("malformed batch index")

// eachIndex calls fn for the index records of the batch at pos in order,
// with the session as bytes valid only during the call, until fn returns
// false. A record whose previous position is not before its own, or a
// malformed index, is an error.
func eachIndex(pos int64, idx []byte, fn func(i int, sid []byte, seq, prev int64, off, n int) bool) error {
	bad := func() error { return fmt.Errorf("batch at pos %d: %w", pos, errIndex) }
	off := 0
	for i := 0; len(idx) > 0; i++ {
		var ok bool
		var l, seq, prev, n uint64
		if l, idx, ok = uvarint(idx); !ok || l > uint64(len(idx)) {
			return bad()
		}
		sid := idx[:l]
		idx = idx[l:]
		if seq, idx, ok = uvarint(idx); !ok || seq == 0 || seq > 1<<62 {
			return bad()
		}
		if prev, idx, ok = uvarint(idx); !ok || prev >= uint64(pos)+uint64(i) {
			return bad()
		}
		if n, idx, ok = uvarint(idx); !ok || n > 1<<31 {
			return bad()
		}
		if !fn(i, sid, int64(seq), int64(prev), off, int(n)) {
			return nil
		}
		off += int(n)
	}
	return nil
}

// countIndex returns how many events the index lists.
func countIndex(pos int64, idx []byte) (int, error) {
	n := 0
	err := eachIndex(pos, idx, func(int, []byte, int64, int64, int, int) bool { n++; return true })
	if err == nil && n == 0 {
		return 0, fmt.Errorf("batch at pos %d: empty: %w", pos, errIndex)
	}
	return n, err
}

// indexAt returns the record of the event at position p of the batch at
// pos, and false if the batch does not hold p.
func indexAt(pos int64, idx []byte, p int64) (entry, bool, error) {
	var e entry
	found := false
	err := eachIndex(pos, idx, func(i int, sid []byte, seq, prev int64, off, n int) bool {
		if pos+int64(i) != p {
			return true
		}
		e, found = entry{sid: string(sid), seq: seq, prev: prev, off: off, n: n}, true
		return false
	})
	return e, found, err
}

func uvarint(b []byte) (uint64, []byte, bool) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, b, false
	}
	return v, b[n:], true
}

package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/agentos/agentos/runtime/event"
)

// Importer is a Store that can take already-sealed events unchanged (ids,
// timestamps and hashes kept), e.g. a session log read from a file.
type Importer interface {
	ImportSealed(ctx context.Context, sessionID string, evs []event.Event) error
}

// ErrChain is returned when imported events do not continue a session.
var ErrChain = errors.New("events do not continue the session's chain")

// CheckContinues checks that evs are the session's next events after tip,
// each hashed correctly and linked to the one before.
func CheckContinues(tip event.Tip, sessionID string, evs []event.Event) error {
	for i := range evs {
		e := &evs[i]
		if e.SessionID != sessionID {
			return fmt.Errorf("import: event seq %d belongs to session %q: %w", e.Seq, e.SessionID, ErrChain)
		}
		if e.Seq != tip.Seq+1 || e.PrevHash != tip.Hash {
			return fmt.Errorf("import: seq %d after seq %d: %w", e.Seq, tip.Seq, ErrChain)
		}
		if h := e.ComputeHash(); h != e.Hash {
			return fmt.Errorf("import: seq %d: hash mismatch: %w", e.Seq, ErrChain)
		}
		tip = event.Tip{Seq: e.Seq, Hash: e.Hash}
	}
	return nil
}

// Export writes a session as JSONL: each event's canonical line and "\n".
func Export(ctx context.Context, s Store, sessionID string, w io.Writer) (int, error) {
	evs, err := s.Read(ctx, sessionID, 1)
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriter(w)
	var line []byte
	for i := range evs {
		line = evs[i].AppendLine(line[:0])
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return i, err
		}
	}
	return len(evs), bw.Flush()
}

// Import reads a JSONL session log and imports its events unchanged into
// s, which must implement Importer. It returns the session id.
func Import(ctx context.Context, r io.Reader, s Store) (string, int, error) {
	imp, ok := s.(Importer)
	if !ok {
		return "", 0, errors.New("import: the store cannot import sealed events")
	}
	var evs []event.Event
	br := bufio.NewReaderSize(r, 256<<10)
	for n := 1; ; n++ {
		l, err := br.ReadBytes('\n')
		if len(l) > 0 {
			if l[len(l)-1] != '\n' {
				return "", 0, fmt.Errorf("import: line %d: %w", n, event.ErrTornLine)
			}
			if _, herr := event.CheckLineHash(l[:len(l)-1]); herr != nil {
				return "", 0, fmt.Errorf("import: line %d: %w", n, herr)
			}
			e, perr := event.ParseLine(l[:len(l)-1])
			if perr != nil {
				return "", 0, fmt.Errorf("import: line %d: %w", n, perr)
			}
			evs = append(evs, e)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", 0, err
		}
	}
	if len(evs) == 0 {
		return "", 0, errors.New("import: no events")
	}
	sid := evs[0].SessionID
	return sid, len(evs), imp.ImportSealed(ctx, sid, evs)
}

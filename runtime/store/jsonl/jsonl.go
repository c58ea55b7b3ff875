// Package jsonl is the file Store: one events.jsonl per session under
// <dir>/sessions/<session-id>/, one canonical event line each. It is the
// session artifact format (committed to the artifact branch, the durable
// state of Action mode) and a Store in its own right. Every acknowledged
// append has been written and fsynced.
package jsonl

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
)

// FileName is the name of a session's log inside its directory.
const FileName = "events.jsonl"

// Recovery reports a torn final line that a crash left behind and that
// opening the session removed.
type Recovery struct {
	SessionID string
	Path      string
	Bytes     int // bytes truncated
}

// CorruptError is returned for a session whose log is damaged beyond a torn
// final line: the store refuses to append to it (fail closed).
type CorruptError struct {
	Path string
	Line int
	Err  error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%s: line %d: %v (run agentos verify)", e.Path, e.Line, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// Store is a directory of session logs.
type Store struct {
	store.Watchers
	dir    string
	sealer *event.Sealer
	// NoSync skips fsync, for tests of code above the store only.
	noSync bool

	mu        sync.Mutex
	sessions  map[string]*session
	recovered []Recovery
	closed    bool

	list listing
}

type session struct {
	mu   sync.Mutex
	path string
	f    *os.File
	tip  event.Tip
	ts   [2]string // first and last ts
	typ  string
	gone bool // deleted (DeleteSession): the store holds a new session under its id
}

// Open returns the store rooted at dir, creating it if needed.
func Open(dir string, sealer *event.Sealer) (*Store, error) {
	if err := os.MkdirAll(filepath.Join(dir, "sessions"), 0o755); err != nil {
		return nil, fmt.Errorf("jsonl: %w", err)
	}
	return &Store{dir: dir, sealer: sealer, sessions: map[string]*session{}}, nil
}

// Recovered lists torn final lines removed since Open.
func (s *Store) Recovered() []Recovery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Recovery(nil), s.recovered...)
}

// Path returns the events.jsonl path of a session.
func (s *Store) Path(sessionID string) string {
	return filepath.Join(s.dir, "sessions", sessionID, FileName)
}

// session returns the open session, loading its tip (and repairing a torn
// tail) on first use. create says whether to create the file.
func (s *Store) session(sessionID string, create bool) (*session, error) {
	if !event.ValidSessionID(sessionID) {
		return nil, fmt.Errorf("jsonl: %q: %w", sessionID, event.ErrInvalidSession)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	if ss, ok := s.sessions[sessionID]; ok {
		return ss, nil
	}
	path := s.Path(sessionID)
	if !create {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("jsonl: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("jsonl: %w", err)
	}
	ss := &session{path: path, f: f}
	torn, err := ss.load()
	if err != nil {
		f.Close()
		return nil, err
	}
	if torn > 0 {
		s.recovered = append(s.recovered, Recovery{SessionID: sessionID, Path: path, Bytes: torn})
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, err
	}
	s.sessions[sessionID] = ss
	return ss, nil
}

// load reads the file, checks the chain, truncates a torn final line and
// sets the tip. It returns the number of bytes truncated.
func (ss *session) load() (int, error) {
	b, err := io.ReadAll(ss.f)
	if err != nil {
		return 0, err
	}
	good := bytes.LastIndexByte(b, '\n') + 1
	torn := len(b) - good
	if torn > 0 {
		if err := ss.f.Truncate(int64(good)); err != nil {
			return 0, fmt.Errorf("jsonl: truncate torn line: %w", err)
		}
		if err := ss.f.Sync(); err != nil {
			return 0, err
		}
	}
	line := 0
	for rest := b[:good]; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		l := rest[:i]
		rest = rest[i+1:]
		line++
		h, err := event.CheckLineHash(l)
		if err != nil {
			return 0, &CorruptError{Path: ss.path, Line: line, Err: err}
		}
		e, err := event.ParseLineFast(l)
		if err != nil {
			return 0, &CorruptError{Path: ss.path, Line: line, Err: err}
		}
		if e.Seq != ss.tip.Seq+1 || e.PrevHash != ss.tip.Hash {
			return 0, &CorruptError{Path: ss.path, Line: line, Err: fmt.Errorf("chain broken at seq %d", e.Seq)}
		}
		ss.tip = event.Tip{Seq: e.Seq, Hash: h}
		if ss.ts[0] == "" {
			ss.ts[0] = e.TS
		}
		ss.ts[1], ss.typ = e.TS, e.Type
	}
	return torn, nil
}

// Append implements store.Store.
func (s *Store) Append(ctx context.Context, sessionID string, expectedSeq int64, drafts ...event.Draft) ([]event.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ps, perr := s.sealer.PrepareAll(sessionID, drafts)
	if ps == nil {
		return nil, perr
	}
	ss, err := s.session(sessionID, true)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	if ss.gone {
		// Deleted while this append waited: the id names a new session.
		ss.mu.Unlock()
		return s.Append(ctx, sessionID, expectedSeq, drafts...)
	}
	if ss.tip.Seq != expectedSeq && perr == nil {
		ss.mu.Unlock()
		return nil, &store.ConflictError{SessionID: sessionID, Expected: expectedSeq, Actual: ss.tip.Seq}
	}
	out := s.sealer.Chain(ss.tip, ps)
	var buf []byte
	for i := range out {
		buf = out[i].AppendLine(buf)
		buf = append(buf, '\n')
	}
	if err := ss.write(buf, !s.noSync); err != nil {
		ss.mu.Unlock()
		return nil, err
	}
	last := out[len(out)-1]
	ss.tip = event.Tip{Seq: last.Seq, Hash: last.Hash}
	if ss.ts[0] == "" {
		ss.ts[0] = out[0].TS
	}
	ss.ts[1], ss.typ = last.TS, last.Type
	s.list.note(ss.info(sessionID))
	ss.mu.Unlock()
	s.Notify(sessionID)
	return store.Finish(out, perr)
}

// write appends buf whole and syncs; on failure it truncates back so a
// failed append leaves no partial line behind.
func (ss *session) write(buf []byte, sync bool) error {
	off, err := ss.f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if _, err := ss.f.Write(buf); err != nil {
		_ = ss.f.Truncate(off)
		return fmt.Errorf("jsonl: write %s: %w", ss.path, err)
	}
	if sync {
		if err := ss.f.Sync(); err != nil {
			_ = ss.f.Truncate(off)
			return fmt.Errorf("jsonl: sync %s: %w", ss.path, err)
		}
	}
	return nil
}

// Read implements store.Store.
func (s *Store) Read(ctx context.Context, sessionID string, fromSeq int64) ([]event.Event, error) {
	ss, err := s.session(sessionID, false)
	if err != nil || ss == nil {
		return nil, err
	}
	ss.mu.Lock()
	n := ss.tip.Seq
	ss.mu.Unlock()
	f, err := os.Open(ss.path)
	if errors.Is(err, os.ErrNotExist) && n > 0 {
		return nil, nil // deleted meanwhile (DeleteSession)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []event.Event
	br := bufio.NewReaderSize(f, 256<<10)
	for seq := int64(1); seq <= n; seq++ {
		l, err := br.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("jsonl: read %s: %w", ss.path, err)
		}
		if seq < fromSeq {
			continue
		}
		e, err := event.ParseLineFast(l[:len(l)-1])
		if err != nil {
			return nil, &CorruptError{Path: ss.path, Line: int(seq), Err: err}
		}
		out = append(out, e)
	}
	return out, nil
}

// Scan implements store.Store: the log is read a line at a time.
func (s *Store) Scan(ctx context.Context, sessionID string, fromSeq int64, fn func(*event.Event) error) error {
	ss, err := s.session(sessionID, false)
	if err != nil || ss == nil {
		return err
	}
	ss.mu.Lock()
	n := ss.tip.Seq
	ss.mu.Unlock()
	f, err := os.Open(ss.path)
	if errors.Is(err, os.ErrNotExist) && n > 0 {
		return nil // deleted meanwhile (DeleteSession)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 256<<10)
	var long []byte
	for seq := int64(1); seq <= n; seq++ {
		l, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than the buffer: collect it whole.
			long = append(long[:0], l...)
			for err == bufio.ErrBufferFull {
				l, err = br.ReadSlice('\n')
				long = append(long, l...)
			}
			l = long
		}
		if err != nil {
			return fmt.Errorf("jsonl: read %s: %w", ss.path, err)
		}
		if seq < fromSeq {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// A copy: the event's payload refers to the line, and fn may keep it.
		e, err := event.ParseLineFast(append([]byte(nil), l[:len(l)-1]...))
		if err != nil {
			return &CorruptError{Path: ss.path, Line: int(seq), Err: err}
		}
		if err := fn(&e); err != nil {
			return err
		}
	}
	return nil
}

// Sessions implements store.Store.
func (s *Store) Sessions(ctx context.Context) ([]store.SessionInfo, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "sessions"))
	if err != nil {
		return nil, err
	}
	var out []store.SessionInfo
	for _, e := range ents {
		if !e.IsDir() || !event.ValidSessionID(e.Name()) {
			continue
		}
		ss, err := s.session(e.Name(), false)
		if err != nil {
			return nil, err
		}
		if ss == nil {
			continue
		}
		ss.mu.Lock()
		if ss.tip.Seq > 0 {
			out = append(out, store.SessionInfo{SessionID: e.Name(), LastSeq: ss.tip.Seq, FirstTS: ss.ts[0], LastTS: ss.ts[1], LastType: ss.typ})
		}
		ss.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SessionID < out[j].SessionID })
	return out, nil
}

// ImportSealed implements store.Importer: it appends already-sealed events
// unchanged after checking they continue the session's chain.
func (s *Store) ImportSealed(ctx context.Context, sessionID string, evs []event.Event) error {
	if len(evs) == 0 {
		return nil
	}
	ss, err := s.session(sessionID, true)
	if err != nil {
		return err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.gone {
		return s.ImportSealed(ctx, sessionID, evs)
	}
	if err := store.CheckContinues(ss.tip, sessionID, evs); err != nil {
		return err
	}
	var buf []byte
	for i := range evs {
		buf = evs[i].AppendLine(buf)
		buf = append(buf, '\n')
	}
	if err := ss.write(buf, !s.noSync); err != nil {
		return err
	}
	last := evs[len(evs)-1]
	ss.tip = event.Tip{Seq: last.Seq, Hash: last.Hash}
	if ss.ts[0] == "" {
		ss.ts[0] = evs[0].TS
	}
	ss.ts[1], ss.typ = last.TS, last.Type
	s.list.note(ss.info(sessionID))
	return nil
}

// info is the session's listing entry; the caller holds ss.mu.
func (ss *session) info(sessionID string) store.SessionInfo {
	return store.SessionInfo{SessionID: sessionID, LastSeq: ss.tip.Seq, FirstTS: ss.ts[0], LastTS: ss.ts[1], LastType: ss.typ}
}

// Close implements store.Store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, ss := range s.sessions {
		ss.mu.Lock()
		errs = append(errs, ss.f.Close())
		ss.mu.Unlock()
	}
	return errors.Join(errs...)
}

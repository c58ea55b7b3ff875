package jsonl

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
)

// listing is the store's session index in listing order. It is built on
// the first List from each log's first and last line (not the whole log),
// kept current by this store's appends, and topped up with the sessions
// another process created whenever the sessions directory changes. Like
// the rest of this store it assumes one writer per session log: an
// append by another process to a session already indexed shows in the
// listing after this store is reopened.
type listing struct {
	mu     sync.Mutex
	idx    *store.Index
	dirMod time.Time
}

// note records a session's new head (the caller holds the session's lock).
func (l *listing) note(info store.SessionInfo) {
	l.mu.Lock()
	if l.idx != nil {
		l.idx.Put(info)
	}
	l.mu.Unlock()
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, o store.ListOptions) ([]store.SessionInfo, error) {
	o, err := o.Check()
	if err != nil {
		return nil, err
	}
	l := &s.list
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := s.refreshLocked(ctx); err != nil {
		return nil, err
	}
	return l.idx.Page(o.After, o.Limit), nil
}

// refreshLocked builds the index, or adds the sessions created since the
// directory last changed. Entries are only added here, never replaced: a
// session this store appended to is already current (note).
func (s *Store) refreshLocked(ctx context.Context) error {
	l := &s.list
	dir := filepath.Join(s.dir, "sessions")
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	// A directory changed within the last second may change again with
	// the same modification time (its clock ticks coarsely): look again.
	if l.idx != nil && st.ModTime().Equal(l.dirMod) && time.Since(l.dirMod) > time.Second {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if l.idx == nil {
		l.idx = store.NewIndex()
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		sid := e.Name()
		if !e.IsDir() || !event.ValidSessionID(sid) {
			continue
		}
		if _, ok := l.idx.Get(sid); ok {
			continue
		}
		info, ok, err := headOf(s.Path(sid), sid)
		if err != nil {
			return err
		}
		if ok {
			l.idx.Put(info)
		}
	}
	l.dirMod = st.ModTime()
	return nil
}

// headOf reads a log's listing entry from its first and last complete
// lines. The chain is not checked here: appending to or reading the
// session does that.
func headOf(path, sid string) (store.SessionInfo, bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return store.SessionInfo{}, false, nil
	}
	if err != nil {
		return store.SessionInfo{}, false, err
	}
	defer f.Close()
	first, err := bufio.NewReaderSize(f, 64<<10).ReadBytes('\n')
	if errors.Is(err, io.EOF) {
		return store.SessionInfo{}, false, nil // empty, or only a torn line
	}
	if err != nil {
		return store.SessionInfo{}, false, err
	}
	fe, err := event.ParseLineFast(first[:len(first)-1])
	if err != nil {
		return store.SessionInfo{}, false, &CorruptError{Path: path, Line: 1, Err: err}
	}
	last, err := lastLine(f)
	if err != nil {
		return store.SessionInfo{}, false, err
	}
	le, err := event.ParseLineFast(last)
	if err != nil {
		return store.SessionInfo{}, false, &CorruptError{Path: path, Line: int(fe.Seq), Err: err}
	}
	return store.SessionInfo{SessionID: sid, LastSeq: le.Seq, FirstTS: fe.TS, LastTS: le.TS, LastType: le.Type}, true, nil
}

// lastLine returns the last newline-terminated line of f (without its
// newline), reading backwards from the end; a torn tail is ignored.
func lastLine(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	end := st.Size()
	var tail []byte
	const chunk = 64 << 10
	for off := end; off > 0; {
		n := int64(chunk)
		if off < n {
			n = off
		}
		off -= n
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, off); err != nil {
			return nil, err
		}
		tail = append(buf, tail...)
		nl := bytes.LastIndexByte(tail, '\n')
		if nl < 0 {
			continue // a torn tail longer than a chunk
		}
		if prev := bytes.LastIndexByte(tail[:nl], '\n'); prev >= 0 {
			return tail[prev+1 : nl], nil
		}
		if off == 0 {
			return tail[:nl], nil
		}
	}
	return nil, io.ErrUnexpectedEOF
}

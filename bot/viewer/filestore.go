package viewer

import (
	"context"
	"errors"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
)

// ErrReadOnly is returned by FileStore's Append.
var ErrReadOnly = errors.New("viewer: a replayed log is read-only")

// FileStore is a read-only store.Store over one session's events (read
// from an events.jsonl): what `agentos view` serves.
type FileStore struct {
	id  string
	evs []event.Event
}

// NewFileStore returns a store holding the session evs.
func NewFileStore(evs []event.Event) (*FileStore, error) {
	if len(evs) == 0 {
		return nil, errors.New("viewer: the log has no events")
	}
	return &FileStore{id: evs[0].SessionID, evs: evs}, nil
}

// SessionID is the session the store holds.
func (f *FileStore) SessionID() string { return f.id }

// Append implements store.Store: always ErrReadOnly.
func (f *FileStore) Append(context.Context, string, int64, ...event.Draft) ([]event.Event, error) {
	return nil, ErrReadOnly
}

// Read implements store.Store.
func (f *FileStore) Read(_ context.Context, sid string, from int64) ([]event.Event, error) {
	if sid != f.id {
		return nil, nil
	}
	from = max(from, 1)
	if from > int64(len(f.evs)) {
		return nil, nil
	}
	return f.evs[from-1:], nil
}

// Sessions implements store.Store.
func (f *FileStore) Sessions(context.Context) ([]store.SessionInfo, error) {
	last := f.evs[len(f.evs)-1]
	return []store.SessionInfo{{SessionID: f.id, LastSeq: last.Seq, FirstTS: f.evs[0].TS, LastTS: last.TS, LastType: last.Type}}, nil
}

// Watch implements store.Store: nothing is ever appended.
func (f *FileStore) Watch(string) (<-chan struct{}, func()) { return make(chan struct{}), func() {} }

// Close implements store.Store.
func (f *FileStore) Close() error { return nil }

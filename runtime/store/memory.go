package store

import (
	"context"
	"sort"
	"sync"

	"github.com/agentos/agentos/runtime/event"
)

// Memory is an in-process Store with no durability, for tests and
// benchmarks of code above the store.
type Memory struct {
	Watchers
	sealer *event.Sealer

	mu       sync.RWMutex
	sessions map[string][]event.Event
	index    *Index
	closed   bool
}

// NewMemory returns an empty in-memory store.
func NewMemory(s *event.Sealer) *Memory {
	return &Memory{sealer: s, sessions: map[string][]event.Event{}, index: NewIndex()}
}

// Append implements Store.
func (m *Memory) Append(ctx context.Context, sessionID string, expectedSeq int64, drafts ...event.Draft) ([]event.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ps, perr := m.sealer.PrepareAll(sessionID, drafts)
	if ps == nil {
		return nil, perr
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	evs := m.sessions[sessionID]
	tip := event.Tip{}
	if n := len(evs); n > 0 {
		tip = event.Tip{Seq: evs[n-1].Seq, Hash: evs[n-1].Hash}
	}
	if tip.Seq != expectedSeq && perr == nil {
		m.mu.Unlock()
		return nil, &ConflictError{SessionID: sessionID, Expected: expectedSeq, Actual: tip.Seq}
	}
	out := m.sealer.Chain(tip, ps)
	m.sessions[sessionID] = append(evs, out...)
	m.indexLocked(sessionID)
	m.mu.Unlock()
	m.Notify(sessionID)
	return finish(out, perr)
}

// finish attaches the appended schema.violation to a violation error.
func finish(out []event.Event, perr error) ([]event.Event, error) {
	if perr == nil {
		return out, nil
	}
	if sv, ok := perr.(*event.SchemaViolationError); ok && len(out) == 1 {
		sv.Violation = &out[0]
	}
	return out, perr
}

// Finish is exported for backends: it attaches the appended schema.violation
// event to the error returned by Sealer.PrepareAll.
func Finish(out []event.Event, perr error) ([]event.Event, error) { return finish(out, perr) }

// Read implements Store.
func (m *Memory) Read(ctx context.Context, sessionID string, fromSeq int64) ([]event.Event, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	evs := m.sessions[sessionID]
	if fromSeq < 1 {
		fromSeq = 1
	}
	if fromSeq > int64(len(evs)) {
		return nil, nil
	}
	return append([]event.Event(nil), evs[fromSeq-1:]...), nil
}

// Sessions implements Store.
func (m *Memory) Sessions(ctx context.Context) ([]SessionInfo, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]SessionInfo, 0, len(m.sessions))
	for id, evs := range m.sessions {
		last := evs[len(evs)-1]
		out = append(out, SessionInfo{SessionID: id, LastSeq: last.Seq, FirstTS: evs[0].TS, LastTS: last.TS, LastType: last.Type})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SessionID < out[j].SessionID })
	return out, nil
}

// Close implements Store.
func (m *Memory) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}

// ImportSealed implements Importer.
func (m *Memory) ImportSealed(ctx context.Context, sessionID string, evs []event.Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.sessions[sessionID]
	tip := event.Tip{}
	if n := len(cur); n > 0 {
		tip = event.Tip{Seq: cur[n-1].Seq, Hash: cur[n-1].Hash}
	}
	if err := CheckContinues(tip, sessionID, evs); err != nil {
		return err
	}
	m.sessions[sessionID] = append(cur, evs...)
	m.indexLocked(sessionID)
	return nil
}

// indexLocked moves the session's entry in the listing index.
func (m *Memory) indexLocked(sessionID string) {
	evs := m.sessions[sessionID]
	last := evs[len(evs)-1]
	m.index.Put(SessionInfo{SessionID: sessionID, LastSeq: last.Seq, FirstTS: evs[0].TS, LastTS: last.TS, LastType: last.Type})
}

// List implements Store.
func (m *Memory) List(ctx context.Context, o ListOptions) ([]SessionInfo, error) {
	o, err := o.Check()
	if err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.index.Page(o.After, o.Limit), nil
}

// Scan implements Store. Events are never changed once appended, so the
// session's slice is iterated without holding the lock.
func (m *Memory) Scan(ctx context.Context, sessionID string, fromSeq int64, fn func(*event.Event) error) error {
	m.mu.RLock()
	evs := m.sessions[sessionID]
	m.mu.RUnlock()
	if fromSeq < 1 {
		fromSeq = 1
	}
	for i := fromSeq - 1; i < int64(len(evs)); i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		e := evs[i]
		if err := fn(&e); err != nil {
			return err
		}
	}
	return nil
}

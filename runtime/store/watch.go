package store

import "sync"

// Watchers fans append notifications out to Watch callers. Backends embed
// it and call Notify after each committed append.
type Watchers struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

// Watch implements Store.Watch.
func (w *Watchers) Watch(sessionID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if w.subs == nil {
		w.subs = map[string]map[chan struct{}]struct{}{}
	}
	if w.subs[sessionID] == nil {
		w.subs[sessionID] = map[chan struct{}]struct{}{}
	}
	w.subs[sessionID][ch] = struct{}{}
	w.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			w.mu.Lock()
			delete(w.subs[sessionID], ch)
			if len(w.subs[sessionID]) == 0 {
				delete(w.subs, sessionID)
			}
			w.mu.Unlock()
		})
	}
}

// Notify wakes every watcher of the session without blocking.
func (w *Watchers) Notify(sessionID string) {
	w.mu.Lock()
	for ch := range w.subs[sessionID] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	w.mu.Unlock()
}

// NotifyAll wakes every watcher of every session without blocking: a
// backend that may have missed notifications (a lost connection, a poll
// tick) calls it so that followers read again.
func (w *Watchers) NotifyAll() {
	w.mu.Lock()
	for _, subs := range w.subs {
		for ch := range subs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	w.mu.Unlock()
}

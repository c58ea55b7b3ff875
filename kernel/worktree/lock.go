package worktree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// lockMirror takes the mirror's in-process mutex, then its file lock, and
// returns the function releasing both, which first maintains the mirror
// (see maintain.go). It gives up when ctx is done while
// waiting for the in-process mutex.
func (m *Manager) lockMirror(ctx context.Context, dir string) (func(), error) {
	m.mu.Lock()
	mu := m.locks[dir]
	if mu == nil {
		mu = &sync.Mutex{}
		m.locks[dir] = mu
	}
	m.mu.Unlock()

	for !mu.TryLock() {
		// Waiting on a sync.Mutex cannot observe ctx; poll instead. Mirror
		// operations last milliseconds to seconds, so the poll is cheap.
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("worktree: waiting for mirror lock: %w", ctx.Err())
		case <-pollTick():
		}
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		mu.Unlock()
		return nil, fmt.Errorf("worktree: mirror lock: %w", err)
	}
	unlockFile, err := lockFile(ctx, dir+".lock")
	if err != nil {
		mu.Unlock()
		return nil, err
	}
	return func() {
		m.maintain(dir)
		unlockFile()
		mu.Unlock()
	}, nil
}

//go:build unix

package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

func pollTick() <-chan time.Time { return time.After(5 * time.Millisecond) }

// lockFile takes an exclusive flock(2) on path, polling so that ctx can
// cancel the wait. The lock is released when the process dies, so a crashed
// holder never wedges the mirror.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("worktree: mirror lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("worktree: mirror lock: %w", err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("worktree: waiting for mirror lock: %w", ctx.Err())
		case <-pollTick():
		}
	}
}

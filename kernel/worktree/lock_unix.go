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
	return flock(ctx, path, syscall.LOCK_EX, "mirror lock")
}

// shareFile takes a shared flock(2) on path, waiting (cancellably) while
// someone holds it exclusively.
func shareFile(ctx context.Context, path string) (func(), error) {
	return flock(ctx, path, syscall.LOCK_SH, "mirror users lock")
}

// tryExclusive takes an exclusive flock(2) on path only if nobody holds it
// in any mode; ok is false if somebody does.
func tryExclusive(path string) (unlock func(), ok bool, err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("worktree: mirror users lock: %w", err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("worktree: mirror users lock: %w", err)
	}
	return unlockFunc(f), true, nil
}

func flock(ctx context.Context, path string, how int, what string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("worktree: %s: %w", what, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return unlockFunc(f), nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("worktree: %s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("worktree: waiting for %s: %w", what, ctx.Err())
		case <-pollTick():
		}
	}
}

func unlockFunc(f *os.File) func() {
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}

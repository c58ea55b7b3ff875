//go:build unix

package worktree

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestFileLockExcludes takes the file lock the way a second process would
// (a separate open file description) and checks that it waits.
func TestFileLockExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.git.lock")
	unlock, err := lockFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := lockFile(ctx, path); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second lock while held: error = %v, want DeadlineExceeded", err)
	}
	unlock()
	unlock2, err := lockFile(context.Background(), path)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	unlock2()
}

func TestMirrorLockHonoursContext(t *testing.T) {
	m, err := New(Config{CacheDir: t.TempDir(), Backend: BackendGoGit})
	if err != nil {
		t.Fatal(err)
	}
	dir := m.mirrorDir(testRepo)
	unlock, err := m.lockMirror(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.lockMirror(ctx, dir); !errors.Is(err, context.Canceled) {
		t.Errorf("lock while held with a cancelled context: error = %v, want Canceled", err)
	}
	unlock()
	unlock2, err := m.lockMirror(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	unlock2()
}

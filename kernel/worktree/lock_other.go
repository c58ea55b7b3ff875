//go:build !unix

package worktree

import (
	"context"
	"time"
)

func pollTick() <-chan time.Time { return time.After(5 * time.Millisecond) }

// lockFile is a no-op where flock(2) is missing: there the mirror lock is
// in-process only, and a cache directory must not be shared by processes.
func lockFile(context.Context, string) (func(), error) { return func() {}, nil }

// shareFile is a no-op where flock(2) is missing.
func shareFile(context.Context, string) (func(), error) { return func() {}, nil }

// tryExclusive never succeeds where flock(2) is missing: without it nobody
// can tell whether a session is reading the mirror, so maintenance, which
// deletes packs, never runs there.
func tryExclusive(string) (func(), bool, error) { return nil, false, nil }

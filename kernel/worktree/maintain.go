package worktree

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Mirror maintenance.
//
// go-git keeps each fetch that brings objects as a pack of its own, so a
// mirror fetched at every session's start gathers packs without end, and
// every object lookup (by go-git or the git CLI) has to consult more of
// them. When the mirror lock is released and the mirror holds packLimit
// packs or more, they are rolled up with `git repack -d --geometric=2`.
// That combines the small packs and leaves big ones alone, so its cost
// follows what was fetched since the last roll-up, not the repository's
// size. It keeps every object of the packs it combines, reachable or not:
// a session's base commit can become unreachable when its branch is
// force-pushed or deleted, and its worktree, which borrows the mirror's
// objects, must still read it.
//
// Deleting the old packs is safe only while no reader has the mirror's pack
// list cached. The Manager's own operations run under the mirror lock, and
// maintenance runs while it is still held. An open Session holds a shared
// lock on <mirror>.git.users from Prepare to Close, in whatever process it
// is. Maintenance takes that lock exclusively without waiting, and skips
// this round if any session has the mirror open. A later release of the
// mirror lock tries again. Maintenance needs the git CLI (with any
// backend); without it, or where flock(2) is missing, mirrors are left as
// they are.

// packLimit is the number of packs from which releasing the mirror lock
// rolls them up; git's own gc.autoPackLimit is 50.
const packLimit = 32

// maintainTimeout bounds one roll-up, which runs under the mirror lock.
const maintainTimeout = 10 * time.Minute

// usersLock is the path of the lock every open session shares.
func usersLock(mirrorDir string) string { return mirrorDir + ".users" }

// maintain rolls up the packs of the mirror at dir when there are enough
// of them and no session has it open. The caller holds the mirror lock.
// It never fails the operation that held the lock; a failure is logged.
func (m *Manager) maintain(dir string) {
	if m.repackGit == "" {
		return
	}
	entries, err := os.ReadDir(filepath.Join(dir, "objects", "pack"))
	if err != nil {
		return // no mirror yet, or no packs
	}
	packs := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".pack") {
			packs++
		}
	}
	if packs < m.packLimit {
		return
	}
	unlock, ok, err := tryExclusive(usersLock(dir))
	if err != nil {
		m.cfg.Log.Warn("mirror maintenance: cannot check for open sessions", "mirror", dir, "err", err)
		return
	}
	if !ok {
		return // a session has the mirror open; try again later
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), maintainTimeout)
	defer cancel()
	start := time.Now()
	if err := execGit(ctx, m.repackGit, dir, nil, nil, nil, "-c", "gc.auto=0", "repack", "-d", "-q", "--geometric=2"); err != nil {
		m.cfg.Log.Warn("mirror maintenance failed; the mirror stays usable with its packs", "mirror", dir, "packs", packs, "err", err)
		return
	}
	m.cfg.Log.Info("mirror packs rolled up", "mirror", dir, "packs", packs, "took", time.Since(start))
}

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// errSessionBusy: another agentos process holds the session's lock.
var errSessionBusy = errors.New("another agentos process is working this session")

// lockSession takes the session's lock in the data directory, so that two
// processes never run the same session (agentos run, resume, approve and
// deny take it): a second one fails at once instead of appending to the
// log between the first one's events. The lock is an flock on
// DATA/locks/<hash of the session id>.lock; the kernel drops it when its
// process exits, killed or not, so a process that takes it knows the run
// it finds "running" in the log has no process left (agentos resume takes
// it over). The file holds the holder's pid, for the error message only.
func lockSession(dataDir, sessionID string) (release func(), err error) {
	dir := filepath.Join(dataDir, "locks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("session lock: %w", err)
	}
	sum := sha256.Sum256([]byte(sessionID))
	path := filepath.Join(dir, hex.EncodeToString(sum[:16])+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("session lock: %w", err)
	}
	if err := tryLock(f); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = fmt.Sprintf(" (pid %d)", pid)
			}
		}
		f.Close()
		if errors.Is(err, errLocked) {
			return nil, &exitError{code: exitFailure, err: fmt.Errorf("session %s: %w%s; wait for it to end or stop it", sessionID, errSessionBusy, holder)}
		}
		return nil, fmt.Errorf("session lock: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil // closing the file drops the lock
}

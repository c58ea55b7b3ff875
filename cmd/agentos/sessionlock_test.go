package main

import (
	"errors"
	"testing"
)

// TestSessionLock: two holders of one session's lock never coexist (the
// second is refused at once, saying a process works the session, with its
// pid); another session is not affected; the lock is free once released
// (as when its process exits, killed or not: the kernel drops an flock
// with the process's files).
func TestSessionLock(t *testing.T) {
	data := t.TempDir()
	release, err := lockSession(data, "s1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockSession(data, "s1")
	var ee *exitError
	if !errors.Is(err, errSessionBusy) || !errors.As(err, &ee) || ee.code != exitFailure {
		t.Fatalf("second lock of s1: %v, want errSessionBusy (exit %d)", err, exitFailure)
	}
	other, err := lockSession(data, "s2")
	if err != nil {
		t.Fatalf("lock of another session: %v", err)
	}
	other()
	release()
	again, err := lockSession(data, "s1")
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again()
}

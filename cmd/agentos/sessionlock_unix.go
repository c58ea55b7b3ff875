//go:build unix

package main

import (
	"errors"
	"os"
	"syscall"
)

// errLocked: the file is locked by another process.
var errLocked = errors.New("locked")

// tryLock takes an exclusive flock on f without waiting.
func tryLock(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}

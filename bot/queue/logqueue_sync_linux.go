//go:build linux

package queue

import (
	"os"
	"syscall"
)

// fdatasync makes f's written data (and its size) durable without flushing
// unrelated metadata such as the modification time.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

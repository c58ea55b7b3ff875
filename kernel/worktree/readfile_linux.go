package worktree

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// readRegular reads the file at the slash path rel under dir for a
// commit: each directory is opened with openat(O_NOFOLLOW|O_DIRECTORY)
// from the previous one, so no symlink is followed anywhere on the way,
// the file itself with O_NOFOLLOW|O_NONBLOCK (a FIFO put there does not
// block), and only a regular file of at most limit bytes is read.
func readRegular(dir, rel string, limit int64) ([]byte, error) {
	parts := strings.Split(rel, "/")
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the worktree: %w", err)
	}
	for _, p := range parts[:len(parts)-1] {
		next, err := openat(fd, p, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC)
		syscall.Close(fd)
		if err != nil {
			return nil, fmt.Errorf("directory %s: %w", p, noFollow(err))
		}
		fd = next
	}
	f, err := openat(fd, parts[len(parts)-1], syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC)
	syscall.Close(fd)
	if err != nil {
		return nil, noFollow(err)
	}
	file := os.NewFile(uintptr(f), rel)
	defer file.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(f, &st); err != nil {
		return nil, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, errors.New("not a regular file")
	}
	if st.Size > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	b, err := io.ReadAll(io.LimitReader(file, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}

func openat(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := syscall.Openat(dirfd, name, flags, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// noFollow names the errors O_NOFOLLOW gives for a symlink.
func noFollow(err error) error {
	if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("a symlink or not a directory (%w)", err)
	}
	if errors.Is(err, syscall.ENOENT) {
		return errors.New("no such file")
	}
	return err
}

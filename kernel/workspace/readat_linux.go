package workspace

import (
	"os"
	"syscall"
)

// openAt opens name relative to the open directory dir for reading, with
// raw syscalls: openat without following a symlink (a file swapped for a
// link is not read through it) and without blocking (a FIFO opens at
// once instead of waiting for a writer), then fstat, which refuses
// anything that is not a regular file before a byte is read. rel is the
// workspace-relative path, for errors. os.Root.OpenFile would follow an
// in-root symlink in the last component and adds os.File bookkeeping
// that doubled the cost of repo.search.
func openAt(dir *os.File, name, rel string) (*FileReader, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Openat(int(dir.Fd()), name, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err == syscall.ELOOP {
		return nil, notRegular(rel, "a symbolic link")
	}
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: rel, Err: err}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: rel, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return nil, notRegular(rel, fileType(uint32(st.Mode)))
	}
	return &FileReader{fd: fd, rel: rel, size: st.Size}, nil
}

// fileType names a stat mode's file type for errors.
func fileType(mode uint32) string {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return "a directory"
	case syscall.S_IFIFO:
		return "a named pipe (FIFO)"
	case syscall.S_IFSOCK:
		return "a socket"
	case syscall.S_IFCHR:
		return "a character device"
	case syscall.S_IFBLK:
		return "a block device"
	case syscall.S_IFLNK:
		return "a symbolic link"
	}
	return "not a regular file"
}

// FileReader is an open regular file of the workspace (see Root.Open).
type FileReader struct {
	fd   int
	rel  string
	size int64
}

// Read reads from the file.
func (f *FileReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, err := syscall.Read(f.fd, p)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, &os.PathError{Op: "read", Path: f.rel, Err: err}
		}
		if n == 0 {
			return 0, eof
		}
		return n, nil
	}
}

// Close closes the file.
func (f *FileReader) Close() error { return syscall.Close(f.fd) }

const oDirectory = syscall.O_DIRECTORY | syscall.O_NONBLOCK

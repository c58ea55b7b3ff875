package workspace

import (
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
)

// FS returns a read-only fs.FS jailed to the root, for the runtime's
// configuration reads (settings, skills, workflows, roles, memory): the
// files of os.Root.FS, except that a file is opened without blocking and
// must be a regular file or a directory (a FIFO left by a command is
// refused, not waited on), and ReadFile reads at most MaxFileSize bytes.
func (w *Root) FS() fs.FS { return configFS{root: w.root, inner: w.root.FS()} }

type configFS struct {
	root  *os.Root
	inner fs.FS
}

func (c configFS) open(op, name string) (*os.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	f, err := c.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() {
		f.Close()
		return nil, notRegular(name, modeType(fi.Mode()))
	}
	return f, nil
}

func (c configFS) Open(name string) (fs.File, error) {
	f, err := c.open("open", name)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (c configFS) ReadFile(name string) ([]byte, error) {
	f, err := c.open("readfile", name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileSize {
		return nil, tooLarge(name, int64(len(b)), MaxFileSize)
	}
	return b, nil
}

func (c configFS) ReadDir(name string) ([]fs.DirEntry, error) {
	f, err := c.open("readdir", name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ds, err := f.ReadDir(-1)
	slices.SortFunc(ds, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ds, err
}

func (c configFS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(c.inner, name) }

func (c configFS) Lstat(name string) (fs.FileInfo, error) { return fs.Lstat(c.inner, name) }

func (c configFS) ReadLink(name string) (string, error) { return fs.ReadLink(c.inner, name) }

// modeType names a file mode's type for errors.
func modeType(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}

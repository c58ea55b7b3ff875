//go:build !linux

package workspace

import (
	"os"
	"path"
	"syscall"
)

// openAt opens name relative to the open directory dir for reading. Off
// Linux it goes through an os.Root of the directory: Lstat refuses a
// symlink, the open does not block on a FIFO, and Stat of the open file
// refuses anything that is not a regular file.
func openAt(dir *os.File, name, rel string) (*FileReader, error) {
	r, err := os.OpenRoot(dir.Name())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if fi, err := r.Lstat(name); err == nil && !fi.Mode().IsRegular() {
		return nil, notRegular(rel, modeType(fi.Mode()))
	}
	f, err := r.OpenFile(path.Clean(name), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, notRegular(rel, modeType(fi.Mode()))
	}
	return &FileReader{f: f, rel: rel, size: fi.Size()}, nil
}

// FileReader is an open regular file of the workspace (see Root.Open).
type FileReader struct {
	f    *os.File
	rel  string
	size int64
}

// Read reads from the file.
func (f *FileReader) Read(p []byte) (int, error) { return f.f.Read(p) }

// Close closes the file.
func (f *FileReader) Close() error { return f.f.Close() }

const oDirectory = 0

package workspace

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"

	"github.com/agentos/agentos/kernel"
)

// Every read of a workspace file by the file tools (repo.read,
// repo.search, the reads of repo.patch and repo.write, the revision
// digest) goes through Open: a file a sandboxed command left in the
// worktree may be a FIFO (reading it would block forever), a device, or
// a gigabyte of newlines, and none of them may hang the server or
// exhaust its memory.
const (
	// MaxFileSize is the most the workspace reads of one file whole
	// (ReadFile, File.Read): a larger file is refused (ErrTooLarge), so
	// repo.patch and repo.write cannot be made to load it. repo.read and
	// repo.search scan at most this much of a file and stream it.
	MaxFileSize = 16 << 20
	// DefaultMaxOutput is the output limit (bytes) when policy.yaml sets
	// no limits.maxStdout; exec tools and file tools share it.
	DefaultMaxOutput = 20000
)

var (
	// ErrNotRegular is wrapped by the structured error for a path that
	// is not a regular file (a FIFO, a device, a socket, a directory, or
	// a symlink swapped in after the path was resolved).
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge is wrapped by the structured error for a file over
	// the size a caller reads whole.
	ErrTooLarge = errors.New("file too large")
)

var eof = io.EOF

func notRegular(rel, what string) error {
	return &kernel.Error{Kind: "runtime", Code: kernel.CodeToolRuntimeError,
		Message: fmt.Sprintf("%s is %s, not a regular file: the file tools read only regular files", rel, what),
		Details: map[string]string{"path": rel, "file_type": what}, Err: ErrNotRegular}
}

func tooLarge(rel string, size, max int64) error {
	return &kernel.Error{Kind: "runtime", Code: kernel.CodeOutputLimit,
		Message: fmt.Sprintf("%s is %d bytes, more than the %d bytes the workspace reads of a file whole", rel, size, max),
		Details: map[string]any{"path": rel, "size": size, "limit": max}, Err: ErrTooLarge}
}

// Size is the file's size when it was opened.
func (f *FileReader) Size() int64 { return f.size }

// ReadAll reads the whole file, or refuses it (ErrTooLarge) if it holds
// more than max bytes; never more than max+1 bytes are read.
func (f *FileReader) ReadAll(max int64) ([]byte, error) {
	if f.size > max {
		return nil, tooLarge(f.rel, f.size, max)
	}
	b, full, err := f.ReadPrefix(max)
	if err != nil {
		return nil, err
	}
	if !full {
		return nil, tooLarge(f.rel, max+1, max) // it grew since fstat
	}
	return b, nil
}

// ReadPrefix reads at most max bytes from the file; full reports whether
// that was all of it.
func (f *FileReader) ReadPrefix(max int64) ([]byte, bool, error) {
	b := make([]byte, 0, min(f.size, max)+1)
	for {
		if int64(len(b)) > max {
			return b[:max], false, nil
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := f.Read(b[len(b):min(cap(b), int(max)+1)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, true, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
}

// Open opens a regular file of the workspace for reading: the path is
// resolved through the jail (Resolve), its directory opened inside the
// root, and the file itself opened without following a symlink and
// without blocking; anything but a regular file is refused with a
// structured error (ErrNotRegular). The caller closes the reader.
func (w *Root) Open(p string) (*FileReader, error) {
	r, err := w.Resolve(p)
	if err != nil {
		return nil, err
	}
	if r == "." {
		return nil, notRegular(p, "a directory")
	}
	dir, err := w.root.OpenFile(path.Dir(r), os.O_RDONLY|oDirectory, 0)
	if err != nil {
		return nil, jailOr(p, err)
	}
	defer dir.Close()
	f, err := openAt(dir, path.Base(r), p)
	if err != nil {
		return nil, jailOr(p, err)
	}
	return f, nil
}

// ReadFile reads a whole file inside the jail: a regular file of at most
// MaxFileSize bytes (see Open).
func (w *Root) ReadFile(p string) ([]byte, error) {
	f, err := w.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadAll(MaxFileSize)
}

// Open opens a walked file for reading (see Root.Open) relative to its
// directory's handle, without resolving its path again.
func (f *File) Open() (*FileReader, error) {
	if f.dir.dir == nil {
		return nil, notRegular(f.Rel, "not open")
	}
	r, err := openAt(f.dir.dir, f.name, f.Rel)
	if err != nil {
		return nil, jailOr(f.Rel, err)
	}
	return r, nil
}

// Read returns a walked file's content, at most MaxFileSize bytes
// (ErrTooLarge otherwise). The file is opened relative to its directory
// without following a symlink, so a file swapped for a link after the
// walk listed it is not read through the link.
func (f *File) Read() ([]byte, error) {
	r, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.ReadAll(MaxFileSize)
}

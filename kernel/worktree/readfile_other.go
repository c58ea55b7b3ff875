//go:build !linux

package worktree

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// readRegular reads the file at the slash path rel under dir for a
// commit, refusing a symlink anywhere on the way and anything but a
// regular file of at most limit bytes (readfile_linux.go does the same
// with openat(2) and O_NOFOLLOW).
func readRegular(dir, rel string, limit int64) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	parts := strings.Split(rel, "/")
	for i := range parts {
		fi, err := root.Lstat(path.Join(parts[:i+1]...))
		if err != nil {
			return nil, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, errors.New("a symlink")
		}
		if i < len(parts)-1 && !fi.IsDir() {
			return nil, errors.New("not a directory")
		}
		if i == len(parts)-1 && !fi.Mode().IsRegular() {
			return nil, errors.New("not a regular file")
		}
	}
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}

package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// checkoutWriters is how many goroutines create files; file creation is
// syscall-bound, so a few more than the cores helps.
const checkoutWriters = 4

// checkoutFile is one file to create.
type checkoutFile struct {
	name string // slash-separated path in the tree
	mode filemode.FileMode
	hash plumbing.Hash
	data []byte
}

// checkoutFresh writes commit's tree into the empty worktree dir and its
// index, without go-git's generic diff-and-reset machinery: one reader
// decodes the blobs from st (go-git's storage is not safe for concurrent
// use) and a few writers create the files; the index goes to idx. Paths that git itself refuses to check
// out (.., .git, absolute) are an error.
func checkoutFresh(ctx context.Context, st storer.EncodedObjectStorer, idx storer.IndexStorer, dir string, commit plumbing.Hash) error {
	c, err := object.GetCommit(st, commit)
	if err != nil {
		return fmt.Errorf("read commit %s: %w", commit, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return fmt.Errorf("read tree of %s: %w", commit, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	jobs := make(chan checkoutFile, 64)
	results := make([][]*index.Entry, checkoutWriters)
	errs := make([]error, checkoutWriters)
	var wg sync.WaitGroup
	for w := 0; w < checkoutWriters; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for f := range jobs {
				if errs[w] != nil {
					continue // drain
				}
				e, err := writeCheckoutFile(dir, f)
				if err != nil {
					errs[w] = err
					cancel()
					continue
				}
				results[w] = append(results[w], e)
			}
		}(w)
	}

	readErr := func() error {
		defer close(jobs)
		madeDirs := map[string]bool{}
		walker := object.NewTreeWalker(tree, true, nil)
		defer walker.Close()
		for {
			name, entry, err := walker.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("walk tree: %w", err)
			}
			if !safeTreePath(name) {
				return fmt.Errorf("%w: refusing to check out path %q", ErrInvalid, name)
			}
			if entry.Mode == filemode.Dir {
				continue
			}
			parent := filepath.Dir(filepath.Join(dir, filepath.FromSlash(name)))
			if !madeDirs[parent] {
				if err := os.MkdirAll(parent, 0o755); err != nil {
					return err
				}
				madeDirs[parent] = true
			}
			f := checkoutFile{name: name, mode: entry.Mode, hash: entry.Hash}
			if entry.Mode != filemode.Submodule {
				if f.data, err = readBlob(st, entry.Hash); err != nil {
					return fmt.Errorf("read %s: %w", name, err)
				}
			}
			select {
			case jobs <- f:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	if readErr != nil {
		return readErr
	}
	ix := &index.Index{Version: 2}
	for _, r := range results {
		ix.Entries = append(ix.Entries, r...)
	}
	sort.Slice(ix.Entries, func(i, j int) bool { return ix.Entries[i].Name < ix.Entries[j].Name })
	return idx.SetIndex(ix)
}

func readBlob(st storer.EncodedObjectStorer, h plumbing.Hash) ([]byte, error) {
	obj, err := st.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return nil, err
	}
	r, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var b bytes.Buffer
	b.Grow(int(obj.Size()))
	if _, err := b.ReadFrom(r); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeCheckoutFile creates one file (never through an existing path:
// O_EXCL) and returns its index entry.
func writeCheckoutFile(dir string, f checkoutFile) (*index.Entry, error) {
	p := filepath.Join(dir, filepath.FromSlash(f.name))
	switch f.mode {
	case filemode.Submodule:
		// git checks out a gitlink as an empty directory.
		if err := os.Mkdir(p, 0o755); err != nil {
			return nil, err
		}
		return &index.Entry{Name: f.name, Hash: f.hash, Mode: f.mode}, nil
	case filemode.Symlink:
		if err := os.Symlink(string(f.data), p); err != nil {
			return nil, err
		}
	case filemode.Regular, filemode.Deprecated, filemode.Executable:
		perm := os.FileMode(0o644)
		mode := filemode.Regular
		if f.mode == filemode.Executable {
			perm, mode = 0o755, filemode.Executable
		}
		f.mode = mode
		file, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err != nil {
			return nil, err
		}
		if _, err := file.Write(f.data); err != nil {
			file.Close()
			return nil, err
		}
		if err := file.Close(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w: %s has unsupported mode %v", ErrInvalid, f.name, f.mode)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	e := &index.Entry{Name: f.name, Hash: f.hash, Mode: f.mode, ModifiedAt: fi.ModTime(), Size: uint32(fi.Size())}
	fillStat(e, fi)
	return e, nil
}

// safeTreePath reports whether git would check out name: relative, no
// empty, "." or ".." component, and no .git component in any case.
func safeTreePath(name string) bool {
	if name == "" || strings.ContainsAny(name, "\\\x00") {
		return false
	}
	for _, c := range strings.Split(name, "/") {
		if c == "" || c == "." || c == ".." || strings.EqualFold(c, ".git") {
			return false
		}
	}
	return true
}

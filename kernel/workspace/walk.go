package workspace

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// File is a regular file found by WalkFiles. Open and Read (read.go) read
// it through an open handle on its directory (one openat, where a path from the root would
// resolve every component again); Release gives the handle back. Read and
// Release may be called from another goroutine than the walk's, and each
// File must be released exactly once.
type File struct {
	Rel   string      // workspace-relative path, '/'-separated
	Entry fs.DirEntry // as read from the directory
	dir   *dirHandle
	name  string
}

// Release returns the file's share of its directory handle.
func (f *File) Release() { f.dir.release() }

// dirHandle is an open directory shared by the walk and the files it
// handed out; the last release closes it. The workspace root itself is
// never closed here.
type dirHandle struct {
	root *os.Root
	dir  *os.File // the directory itself, for reading files relative to it
	own  bool
	refs atomic.Int64
}

func (d *dirHandle) release() {
	if d.refs.Add(-1) == 0 {
		if d.dir != nil {
			d.dir.Close()
		}
		if d.own {
			d.root.Close()
		}
	}
}

// WalkFiles calls fn for every regular file not ignored by .gitignore
// (and not in .git or a deny pattern), in lexical order. Patterns are read
// as the walk descends, the way git applies them: a directory's .gitignore
// governs its subtree, deeper patterns win, and an ignored directory is
// neither read nor searched for more patterns. Unreadable directories are
// skipped. fn may return fs.SkipDir to skip the rest of a directory or
// fs.SkipAll to stop.
func (w *Root) WalkFiles(ctx context.Context, fn func(f *File) error) error {
	return w.WalkFilesSkipped(ctx, fn, nil)
}

// WalkFilesSkipped is WalkFiles that also reports, to skipped (when not
// nil, on the walk's goroutine), every entry it passes over because it is
// neither a regular file nor a directory (a symlink, a FIFO, a socket, a
// device) and is not ignored or denied.
func (w *Root) WalkFilesSkipped(ctx context.Context, fn func(f *File) error, skipped func(rel string, typ fs.FileMode)) error {
	base := w.readIgnore(".git/info/exclude", nil)
	top := &dirHandle{root: w.root}
	top.refs.Add(1)
	err := w.walkDir(ctx, top, "", nil, base, fn, skipped)
	top.release()
	if errors.Is(err, fs.SkipAll) {
		return nil
	}
	return err
}

func (w *Root) walkDir(ctx context.Context, dir *dirHandle, rel string, parts []string, ps []gitignore.Pattern, fn func(f *File) error, skipped func(string, fs.FileMode)) error {
	df, err := dir.root.Open(".")
	if err != nil {
		return nil // unreadable entries are skipped, not fatal
	}
	dir.dir = df
	ents, err := df.ReadDir(-1)
	if err != nil {
		return nil
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	for _, e := range ents {
		if e.Name() == ".gitignore" && e.Type().IsRegular() {
			ps = append(ps[:len(ps):len(ps)], parseIgnore(df, ".gitignore", path.Join(rel, ".gitignore"), parts)...)
			break
		}
	}
	matcher := gitignore.NewMatcher(ps)
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := path.Join(rel, e.Name())
		sub := append(parts[:len(parts):len(parts)], e.Name())
		if e.IsDir() {
			if strings.EqualFold(e.Name(), ".git") || w.deny(p, p) != nil || matcher.Match(sub, true) {
				continue
			}
			child, err := dir.root.OpenRoot(e.Name())
			if err != nil {
				continue
			}
			h := &dirHandle{root: child, own: true}
			h.refs.Add(1)
			err = w.walkDir(ctx, h, p, sub, ps, fn, skipped)
			h.release()
			if err != nil {
				return err
			}
			continue
		}
		if w.deny(p, p) != nil || matcher.Match(sub, false) {
			continue
		}
		if !e.Type().IsRegular() {
			if skipped != nil {
				skipped(p, e.Type())
			}
			continue
		}
		dir.refs.Add(1)
		if err := fn(&File{Rel: p, Entry: e, dir: dir, name: e.Name()}); err != nil {
			if errors.Is(err, fs.SkipDir) {
				return nil
			}
			return err
		}
	}
	return nil
}

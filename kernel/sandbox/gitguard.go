package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// gitGuard protects a worktree's git control files where the sandbox
// cannot make .git read-only (Landlock grants whole trees): what git
// would execute or trust outside the sandbox — config (hooks path,
// fsmonitor, filters, ssh command), hooks, info, the object alternates,
// HEAD, commondir, and a .git file's gitdir line — is recorded before a
// command and restored after it, and a change is an error.
type gitGuard struct {
	work  string
	files map[string]gitFile // relative to work
}

type gitFile struct {
	data []byte
	mode fs.FileMode
	dir  bool
}

// guarded are the control paths under .git (files, or directories taken
// whole).
var guarded = []string{"config", "HEAD", "commondir", "gitdir", "objects/info/alternates", "objects/info/http-alternates", "hooks", "info", "modules"}

// maxGuard bounds what is read (hooks of a normal repository are ~25 kB).
const maxGuard = 8 << 20

func snapshotGit(work string) (*gitGuard, error) {
	g := &gitGuard{work: work}
	files, err := g.read()
	if err != nil {
		return nil, fmt.Errorf("sandbox: record .git: %w", err)
	}
	g.files = files
	return g, nil
}

// read records the guarded paths as they are now.
func (g *gitGuard) read() (map[string]gitFile, error) {
	out := map[string]gitFile{}
	total := 0
	add := func(rel string) error {
		p := filepath.Join(g.work, rel)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		f := gitFile{mode: fi.Mode()}
		switch {
		case fi.IsDir():
			f.dir = true
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			f.data = []byte(t)
		case fi.Mode().IsRegular():
			if total += int(fi.Size()); total > maxGuard {
				return fmt.Errorf(".git control files exceed %d bytes", maxGuard)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			f.data = b
		}
		out[rel] = f
		return nil
	}
	if err := add(".git"); err != nil {
		return nil, err
	}
	top, ok := out[".git"]
	if !ok || !top.dir {
		return out, nil
	}
	for _, name := range guarded {
		root := filepath.Join(".git", name)
		err := filepath.WalkDir(filepath.Join(g.work, root), func(p string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(g.work, p)
			if err != nil {
				return err
			}
			return add(rel)
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// verify compares the guarded paths with the record, restores what
// changed and reports it.
func (g *gitGuard) verify() error {
	now, err := g.read()
	if err != nil {
		return fmt.Errorf("sandbox: check .git after the command: %w", err)
	}
	var changed []string
	// Remove what the command added, deepest first.
	var added []string
	for rel := range now {
		if _, ok := g.files[rel]; !ok {
			added = append(added, rel)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(added)))
	for _, rel := range added {
		changed = append(changed, rel)
		if err := os.RemoveAll(filepath.Join(g.work, rel)); err != nil {
			return fmt.Errorf("sandbox: restore %s: %w", rel, err)
		}
	}
	// Put back what it changed or removed, parents first.
	var old []string
	for rel := range g.files {
		old = append(old, rel)
	}
	sort.Strings(old)
	for _, rel := range old {
		want := g.files[rel]
		have, ok := now[rel]
		if ok && have.dir == want.dir && have.mode == want.mode && bytes.Equal(have.data, want.data) {
			continue
		}
		changed = append(changed, rel)
		p := filepath.Join(g.work, rel)
		if ok && (have.dir != want.dir || have.mode.Type() != want.mode.Type()) {
			if err := os.RemoveAll(p); err != nil {
				return fmt.Errorf("sandbox: restore %s: %w", rel, err)
			}
		}
		var err error
		switch {
		case want.dir:
			err = os.MkdirAll(p, want.mode.Perm())
			if err == nil {
				err = os.Chmod(p, want.mode.Perm())
			}
		case want.mode&fs.ModeSymlink != 0:
			_ = os.Remove(p)
			err = os.Symlink(string(want.data), p)
		default:
			err = os.WriteFile(p, want.data, want.mode.Perm())
			if err == nil {
				err = os.Chmod(p, want.mode.Perm())
			}
		}
		if err != nil {
			return fmt.Errorf("sandbox: restore %s: %w", rel, err)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	sort.Strings(changed)
	return &GitTamperError{Paths: changed}
}

// GitTamperError reports that a command changed the worktree's git control
// files; they were restored.
type GitTamperError struct {
	Paths []string
	// Nested: the paths are repositories planted at submodule paths
	// (see gitlinks.go), which were removed.
	Nested bool
}

func (e *GitTamperError) Error() string {
	if e.Nested {
		return "the command planted git repositories at submodule paths (" + strings.Join(e.Paths, ", ") + "); they were removed: a command may not make a submodule path a repository, whose configuration host git would run"
	}
	return "the command changed git control files (" + strings.Join(e.Paths, ", ") + "); they were restored: commands may not change .git"
}

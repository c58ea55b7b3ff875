package worktree

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// sessionStorage is a session worktree's storage for go-git: the
// worktree's own .git (refs, index, config, the session's new objects),
// then the mirror's object store, read with its pack list cached and its
// pack files kept open.
//
// The worktree's objects/info/alternates file is what the git CLI follows;
// go-git is kept from following it, because go-git re-reads the file and
// re-parses the mirror's pack index for every object it does not find
// locally, which made reading a 5,000-file tree take seconds. While a
// session is open, packs are only added to the mirror (maintenance, which
// deletes packs, waits until no session has the mirror open; see
// maintain.go), so a cached pack list stays valid for the objects that
// existed when it was read, which are the ones a session reads.
type sessionStorage struct {
	*filesystem.Storage
	mirror *filesystem.Storage
}

// openStorage opens the storage of the session worktree dir of repo r.
// The caller closes it.
func (m *Manager) openStorage(r Repo, dir string) *sessionStorage {
	return &sessionStorage{
		Storage: filesystem.NewStorageWithOptions(osfs.New(filepath.Join(dir, ".git")), cache.NewObjectLRUDefault(),
			filesystem.Options{AlternatesFS: memfs.New()}),
		mirror: filesystem.NewStorageWithOptions(osfs.New(m.mirrorDir(r)), cache.NewObjectLRUDefault(),
			filesystem.Options{ExclusiveAccess: true, KeepDescriptors: true}),
	}
}

// openRepo opens the session worktree dir as a go-git repository.
func (m *Manager) openRepo(r Repo, dir string) (*git.Repository, *sessionStorage, error) {
	st := m.openStorage(r, dir)
	repo, err := git.Open(st, osfs.New(dir))
	if err != nil {
		st.Close()
		return nil, nil, fmt.Errorf("open %s: %w", dir, err)
	}
	return repo, st, nil
}

// Close releases the mirror's pack files.
func (s *sessionStorage) Close() error {
	return errors.Join(s.mirror.Close(), s.Storage.Close())
}

// EncodedObject looks in the worktree, then in the mirror. An object from
// the worktree's own .git is checked against its name: the commands the
// agent runs can write there (go-git reads a loose object or a pack entry
// without hashing it), and a planted object under the name of a commit or
// tree the session builds on would otherwise become part of what is
// pushed. The mirror is agentos's own and outside any sandbox.
func (s *sessionStorage) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	o, err := s.Storage.EncodedObject(t, h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return s.mirror.EncodedObject(t, h)
	}
	if err != nil {
		return nil, err
	}
	return verified(o, h)
}

// verified returns a copy of o, read once, after checking that its
// content hashes to h.
func verified(o plumbing.EncodedObject, h plumbing.Hash) (plumbing.EncodedObject, error) {
	r, err := o.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	m := &plumbing.MemoryObject{}
	m.SetType(o.Type())
	m.SetSize(o.Size())
	if _, err := io.Copy(m, r); err != nil {
		return nil, err
	}
	if m.Hash() != h {
		return nil, fmt.Errorf("%w: the object stored as %s in the worktree's .git holds other content (%s)", ErrInvalid, h, m.Hash())
	}
	return m, nil
}

// DeltaObject returns whole objects: a delta stored in the mirror's pack
// names a base the pack encoder would look for in the wrong place.
func (s *sessionStorage) DeltaObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	return s.EncodedObject(t, h)
}

// HasEncodedObject looks in the worktree, then in the mirror.
func (s *sessionStorage) HasEncodedObject(h plumbing.Hash) error {
	err := s.Storage.HasEncodedObject(h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return s.mirror.HasEncodedObject(h)
	}
	return err
}

// EncodedObjectSize looks in the worktree, then in the mirror.
func (s *sessionStorage) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	n, err := s.Storage.EncodedObjectSize(h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return s.mirror.EncodedObjectSize(h)
	}
	return n, err
}

// writeIndexTree writes the trees of idx that the storage lacks and
// returns the root tree's hash.
func writeIndexTree(st storer.EncodedObjectStorer, idx *index.Index) (plumbing.Hash, error) {
	type dir struct {
		files []object.TreeEntry
		dirs  map[string]*dir
	}
	root := &dir{dirs: map[string]*dir{}}
	for _, e := range idx.Entries {
		if e.Stage != 0 { // go-git leaves resolved entries at stage 0
			return plumbing.ZeroHash, fmt.Errorf("%w: %s is unmerged", ErrInvalid, e.Name)
		}
		parts := strings.Split(e.Name, "/")
		d := root
		for _, p := range parts[:len(parts)-1] {
			next := d.dirs[p]
			if next == nil {
				next = &dir{dirs: map[string]*dir{}}
				d.dirs[p] = next
			}
			d = next
		}
		d.files = append(d.files, object.TreeEntry{Name: parts[len(parts)-1], Mode: e.Mode, Hash: e.Hash})
	}
	var write func(d *dir) (plumbing.Hash, error)
	write = func(d *dir) (plumbing.Hash, error) {
		entries := d.files
		for name, sub := range d.dirs {
			h, err := write(sub)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
		}
		sortTreeEntries(entries)
		obj := &plumbing.MemoryObject{}
		if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
			return plumbing.ZeroHash, err
		}
		h := obj.Hash()
		if st.HasEncodedObject(h) == nil {
			return h, nil
		}
		return st.SetEncodedObject(obj)
	}
	return write(root)
}

// sortTreeEntries orders entries as git does: by name, a directory
// compared as name + "/".
func sortTreeEntries(entries []object.TreeEntry) {
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(entries, func(i, j int) bool { return key(entries[i]) < key(entries[j]) })
}

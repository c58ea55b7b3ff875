package worktree

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// What a session commit holds.
//
// A session commit holds exactly the changes the kernel's file tools
// (repo.write, repo.patch) made, never "whatever is in the worktree": the
// commands the agent runs (tests, linters, process.run) write into the
// same directory, and a hostile repository's test could write a workflow,
// edit a CI script or plant a nested git directory, which `git add -A`
// would commit and push before anyone approved it. The caller names the
// change set (the session's log records every file tool result, with the
// SHA-256 of the content written); the commit is built with go-git from
// the parent's tree plus those paths, each read from the worktree with a
// bounded open that follows no symlink and accepts only a regular file,
// and checked against the hash the tool recorded. Nothing else of the
// worktree is read, and no git program runs.

// maxCommitFile bounds one file read into a commit (GitHub refuses files
// over 100 MiB).
const maxCommitFile = 100 << 20

// Change is one path a kernel file tool changed.
type Change struct {
	// Path is the slash-separated path in the repository.
	Path string
	// SHA256 is the hex SHA-256 of the content the tool wrote; "" means
	// the tool deleted the path.
	SHA256 string
}

// ChangedError says that a file of the change set is not, in the
// worktree, what the kernel's file tool wrote: a command changed,
// replaced or removed it afterwards. The commit is refused.
type ChangedError struct {
	Path string
	// Want is the SHA-256 the tool recorded; Found what the worktree holds
	// ("" when there is no regular file to read, see Reason).
	Want, Found string
	Reason      string
}

func (e *ChangedError) Error() string {
	what := "its sha256 is " + e.Found
	if e.Reason != "" {
		what = e.Reason
	}
	return fmt.Sprintf("worktree: %s is not what the kernel wrote (sha256 %s): %s; a command changed it after the write, and only content written through the file tools is committed: write it again with repo.write or repo.patch", e.Path, e.Want, what)
}

// cleanChangePath checks a change's path and returns its clean form: a
// relative slash path with no "..", and no component that is .git in any
// case or that a Windows checkout would take for .git (".git." or
// ".git " with trailing dots and spaces, the short name "git~1").
func cleanChangePath(p string) (string, error) {
	if p == "" || strings.ContainsAny(p, "\\\x00") || strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("%w: change path %q", ErrInvalid, p)
	}
	c := path.Clean(p)
	if !safeTreePath(c) {
		return "", fmt.Errorf("%w: change path %q", ErrInvalid, p)
	}
	for _, part := range strings.Split(c, "/") {
		if t := strings.TrimRight(part, ". "); strings.EqualFold(t, ".git") || strings.EqualFold(part, "git~1") {
			return "", fmt.Errorf("%w: change path %q", ErrInvalid, p)
		}
	}
	return c, nil
}

// treeFile is a non-directory entry of a flattened tree.
type treeFile struct {
	mode filemode.FileMode
	hash plumbing.Hash
}

// flattenTree lists every non-directory entry of tree by path.
func flattenTree(tree *object.Tree) (map[string]treeFile, error) {
	out := map[string]treeFile{}
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	for {
		name, e, err := w.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if e.Mode != filemode.Dir {
			out[name] = treeFile{mode: e.Mode, hash: e.Hash}
		}
	}
}

// blobSHA256 is the SHA-256 of a blob's content.
func (s *Session) blobSHA256(st *sessionStorage, h plumbing.Hash) (string, error) {
	b, err := readBlob(st, h)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// commitChanges makes the session commit of changes on the branch tip
// (see the top of this file); s.mu is held.
func (s *Session) commitChanges(msg string, when time.Time, changes []Change, allowEmpty bool, author Identity) (string, error) {
	st := s.m.openStorage(s.repo, s.Dir)
	defer st.Close()
	head, err := s.branchTip(st)
	if err != nil {
		return "", fmt.Errorf("worktree: commit: %w", err)
	}
	parent, err := object.GetCommit(st, head)
	if err != nil {
		return "", fmt.Errorf("worktree: commit: %w", err)
	}
	ptree, err := parent.Tree()
	if err != nil {
		return "", fmt.Errorf("worktree: commit: %w", err)
	}
	files, err := flattenTree(ptree)
	if err != nil {
		return "", fmt.Errorf("worktree: commit: read tree: %w", err)
	}
	// The last change of a path wins.
	last := map[string]string{}
	var order []string
	for _, c := range changes {
		p, err := cleanChangePath(c.Path)
		if err != nil {
			return "", err
		}
		if c.SHA256 != "" {
			if b, err := hex.DecodeString(c.SHA256); err != nil || len(b) != sha256.Size || strings.ToLower(c.SHA256) != c.SHA256 {
				return "", fmt.Errorf("%w: change of %s: sha256 %q", ErrInvalid, p, c.SHA256)
			}
		}
		if _, ok := last[p]; !ok {
			order = append(order, p)
		}
		last[p] = c.SHA256
	}
	sort.Strings(order)
	// indexed are the paths whose index entry follows the commit: files
	// read from the worktree and deletions.
	indexed := map[string]bool{}
	for _, p := range order {
		want := last[p]
		if want == "" {
			delete(files, p)
			indexed[p] = true
			continue
		}
		old, had := files[p]
		data, rerr := readRegular(s.Dir, p, maxCommitFile)
		got := ""
		if rerr == nil {
			sum := sha256.Sum256(data)
			got = hex.EncodeToString(sum[:])
		}
		if got != want {
			// The parent may hold the written content already (an earlier
			// commit of the session): then nothing changes for this path,
			// whatever a command did to the file since.
			if had && (old.mode == filemode.Regular || old.mode == filemode.Executable || old.mode == filemode.Deprecated) {
				if sum, err := s.blobSHA256(st, old.hash); err == nil && sum == want {
					continue
				}
			}
			e := &ChangedError{Path: p, Want: want, Found: got}
			if rerr != nil {
				e.Reason = rerr.Error()
			}
			return "", e
		}
		mode := filemode.Regular
		if had && old.mode == filemode.Executable {
			mode = filemode.Executable
		}
		obj := st.NewEncodedObject()
		obj.SetType(plumbing.BlobObject)
		obj.SetSize(int64(len(data)))
		w, err := obj.Writer()
		if err != nil {
			return "", fmt.Errorf("worktree: commit: %w", err)
		}
		if _, err := w.Write(data); err != nil {
			w.Close()
			return "", fmt.Errorf("worktree: commit: %w", err)
		}
		if err := w.Close(); err != nil {
			return "", fmt.Errorf("worktree: commit: %w", err)
		}
		h := obj.Hash()
		if st.HasEncodedObject(h) != nil {
			if h, err = st.SetEncodedObject(obj); err != nil {
				return "", fmt.Errorf("worktree: commit: %w", err)
			}
		}
		files[p] = treeFile{mode: mode, hash: h}
		indexed[p] = true
	}
	// A file and a directory cannot share a path (a command removed a
	// file and the tool then wrote below its name, or a write under a
	// gitlink or a symlink of the tree).
	for p := range files {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, ok := files[d]; ok {
				return "", fmt.Errorf("%w: %s cannot be committed: %s is a file, a symlink or a submodule in the commit", ErrInvalid, p, d)
			}
		}
	}
	ix := &index.Index{Version: 2, Entries: make([]*index.Entry, 0, len(files))}
	for p, f := range files {
		ix.Entries = append(ix.Entries, &index.Entry{Name: p, Mode: f.mode, Hash: f.hash})
	}
	tree, err := writeIndexTree(st, ix)
	if err != nil {
		return "", fmt.Errorf("worktree: commit: %w", err)
	}
	if tree == parent.TreeHash && !allowEmpty {
		return "", ErrNoChanges
	}
	sig := object.Signature{Name: author.Name, Email: author.Email, When: when}
	commit := &object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: tree, ParentHashes: []plumbing.Hash{parent.Hash}}
	obj := st.NewEncodedObject()
	if err := commit.Encode(obj); err != nil {
		return "", fmt.Errorf("worktree: commit: %w", err)
	}
	h, err := st.SetEncodedObject(obj)
	if err != nil {
		return "", fmt.Errorf("worktree: commit: %w", err)
	}
	if err := s.setTip(st, h); err != nil {
		return "", fmt.Errorf("worktree: commit: %w", err)
	}
	s.updateIndex(st, files, indexed)
	return h.String(), nil
}

// updateIndex makes the worktree's index agree with the commit for the
// paths it read from the worktree or deleted, so that git sees them
// clean. Other entries are left as they are. It is best effort: the
// commit is made, and no operation of the session depends on the index's
// stat data.
func (s *Session) updateIndex(st *sessionStorage, files map[string]treeFile, paths map[string]bool) {
	idx, err := st.Index()
	if err != nil {
		return
	}
	kept := idx.Entries[:0]
	for _, e := range idx.Entries {
		if !paths[e.Name] {
			kept = append(kept, e)
		}
	}
	idx.Entries = kept
	for p := range paths {
		f, ok := files[p]
		if !ok {
			continue
		}
		e := &index.Entry{Name: p, Mode: f.mode, Hash: f.hash}
		if fi, err := os.Lstat(filepath.Join(s.Dir, filepath.FromSlash(p))); err == nil && fi.Mode().IsRegular() {
			e.ModifiedAt, e.Size = fi.ModTime(), uint32(fi.Size())
			fillStat(e, fi)
		}
		idx.Entries = append(idx.Entries, e)
	}
	sort.Slice(idx.Entries, func(i, j int) bool { return idx.Entries[i].Name < idx.Entries[j].Name })
	idx.Cache = nil // the cached trees no longer match
	_ = st.SetIndex(idx)
}

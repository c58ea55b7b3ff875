// Package workspace is the jail every capability tool works through: paths
// resolve inside the workspace root with os.Root, symlinks are followed only
// while they stay inside, .git internals and policy deny patterns are out
// of bounds, and processes run in the OS sandbox (kernel/sandbox) with a
// scrubbed environment, a cwd inside the root, a timeout that kills the
// whole process tree, and capped output.
package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/bmatcuk/doublestar/v4"
	"github.com/go-git/go-git/v5"
)

// Options configure a workspace.
type Options struct {
	// UntrustedCode: the worktree holds code from outside the repository
	// (a fork's pull request). Its dependency caches are its own
	// (RepoIdentity), never the repository's, which its setup commands
	// could otherwise poison for every later run.
	UntrustedCode bool
	// DenyPatterns are doublestar globs (policy.yaml workspace.denyPatterns)
	// matched against workspace-relative paths; a match is a jail violation.
	DenyPatterns []string
	// EnvAllow names extra environment variables passed to processes.
	EnvAllow []string
	// SecretName reports env names that are secrets (never passed unless
	// listed in EnvAllow explicitly).
	SecretName func(string) bool
	// Exclude are files or directories that lie inside the workspace but
	// are not part of it, such as agentos's own data directory (its event
	// logs and store): absolute, or relative to the workspace root. Like
	// .git, an excluded path and everything under it is a jail violation
	// for every path the tools resolve (read, write, patch) and is skipped
	// by walks (search, the revision digest). Paths outside the workspace
	// are ignored; excluding the workspace root itself is an error.
	Exclude []string
	// Sandbox confines every process Run starts. Nil refuses them: the
	// jail fails closed. sandbox.Disabled() runs them unconfined (the
	// operator's explicit `sandbox: none`).
	Sandbox *sandbox.Sandbox
	// Network is the processes' network allow-list (policy.yaml
	// network.allow); empty: no network.
	Network []string
	// Limits bound each process (zero fields: the sandbox's defaults).
	Limits sandbox.Limits
}

// Root is an opened workspace.
type Root struct {
	dir  string
	root *os.Root
	opts Options
	// excluded are opts.Exclude inside the root: clean, '/'-separated,
	// relative to it, with symlinks resolved.
	excluded []string
	// deps are the repository's dependency caches commands see read-only
	// once the setup phase is over (UseDepCaches); nil: the host's.
	deps atomic.Pointer[sandbox.DepCaches]
}

// Open opens dir as a workspace.
func Open(dir string, opts Options) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	abs, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	for _, p := range opts.DenyPatterns {
		if !doublestar.ValidatePattern(p) {
			r.Close()
			return nil, fmt.Errorf("workspace: invalid deny pattern %q", p)
		}
	}
	w := &Root{dir: abs, root: r, opts: opts}
	for _, p := range opts.Exclude {
		rel, inside, err := w.relative(p)
		if err != nil {
			r.Close()
			return nil, err
		}
		if inside {
			w.excluded = append(w.excluded, rel)
		}
	}
	return w, nil
}

// relative turns an Exclude entry into a clean root-relative path, and
// reports whether it lies inside the root at all.
func (w *Root) relative(p string) (string, bool, error) {
	if p == "" {
		return "", false, nil
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(w.dir, p)
	}
	real, err := realPath(filepath.Clean(p))
	if err != nil {
		return "", false, fmt.Errorf("workspace: exclude %s: %w", p, err)
	}
	rel, err := filepath.Rel(w.dir, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false, nil
	}
	if rel == "." {
		return "", false, fmt.Errorf("workspace: %s cannot be excluded: it is the workspace itself (put the agentos data directory outside the repository, or in a subdirectory)", p)
	}
	return filepath.ToSlash(rel), true, nil
}

// realPath resolves the symlinks of p's longest existing prefix, so that a
// path that does not exist yet (a data directory created later) is
// compared with the root as it will be.
func realPath(p string) (string, error) {
	real, err := filepath.EvalSymlinks(p)
	if err == nil {
		return real, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	parent := filepath.Dir(p)
	if parent == p {
		return p, nil
	}
	rp, err := realPath(parent)
	if err != nil {
		return "", err
	}
	return filepath.Join(rp, filepath.Base(p)), nil
}

// Excluded returns the absolute paths of the excluded files and
// directories that lie inside the workspace (see Options.Exclude), for a
// process sandbox that should hide them too.
func (w *Root) Excluded() []string {
	out := make([]string, 0, len(w.excluded))
	for _, rel := range w.excluded {
		out = append(out, filepath.Join(w.dir, filepath.FromSlash(rel)))
	}
	return out
}

// Close releases the root.
func (w *Root) Close() error { return w.root.Close() }

// Root implements kernel.Workspace.
func (w *Root) Root() string { return w.dir }

func violation(p, why string) error {
	return &kernel.Error{Kind: "jail", Code: kernel.CodeJailViolation, Message: fmt.Sprintf("%q: %s", p, why)}
}

// maxLinks bounds symlink hops (loops end here).
const maxLinks = 40

// Resolve checks a workspace-relative path and returns its cleaned form with
// every symlink resolved, or a JAIL_VIOLATION. The final component may not
// exist yet.
func (w *Root) Resolve(p string) (string, error) {
	if p == "" {
		return "", violation(p, "empty path")
	}
	if strings.ContainsRune(p, 0) {
		return "", violation(p, "NUL byte in path")
	}
	if filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) || (len(p) > 1 && p[1] == ':') {
		return "", violation(p, "absolute paths are outside the workspace")
	}
	if strings.ContainsRune(p, '\\') {
		return "", violation(p, "backslashes are not path separators here")
	}
	clean := path.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", violation(p, "escapes the workspace")
	}
	if err := w.deny(clean, p); err != nil {
		return "", err
	}
	// Walk the components, following symlinks inside the root.
	parts := strings.Split(clean, "/")
	resolved := ""
	hops := 0
	for i := 0; i < len(parts); i++ {
		if parts[i] == "." || parts[i] == "" {
			continue
		}
		next := path.Join(resolved, parts[i])
		fi, err := w.root.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			resolved = path.Join(next, path.Join(parts[i+1:]...))
			break
		}
		if err != nil {
			return "", violation(p, err.Error())
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			resolved = next
			continue
		}
		if hops++; hops > maxLinks {
			return "", violation(p, "too many symlinks (a loop?)")
		}
		target, err := w.root.Readlink(next)
		if err != nil {
			return "", violation(p, err.Error())
		}
		if filepath.IsAbs(target) {
			return "", violation(p, fmt.Sprintf("symlink %s points outside the workspace (%s)", next, target))
		}
		joined := path.Clean(path.Join(path.Dir(next), target))
		if joined == ".." || strings.HasPrefix(joined, "../") {
			return "", violation(p, fmt.Sprintf("symlink %s points outside the workspace", next))
		}
		// Continue from the link target with the remaining components.
		parts = append(strings.Split(joined, "/"), parts[i+1:]...)
		resolved, i = "", -1
	}
	if resolved == "" {
		resolved = "."
	}
	if err := w.deny(resolved, p); err != nil {
		return "", err
	}
	return resolved, nil
}

// deny applies the built-in and policy deny rules to a clean path.
func (w *Root) deny(clean, orig string) error {
	for _, seg := range strings.Split(clean, "/") {
		// Case-insensitively: on a case-insensitive file system (macOS,
		// Windows) .GIT/config is .git/config.
		if strings.EqualFold(seg, ".git") {
			return violation(orig, ".git internals are not part of the workspace")
		}
	}
	for _, ex := range w.excluded {
		if clean == ex || strings.HasPrefix(clean, ex+"/") {
			return violation(orig, ex+" is excluded from the workspace (agentos's own data, not the repository's)")
		}
	}
	if pat := w.denyPattern(clean); pat != "" {
		return violation(orig, "matches deny pattern "+pat)
	}
	return nil
}

// Stat stats a path inside the jail (following in-root symlinks).
func (w *Root) Stat(p string) (fs.FileInfo, error) {
	r, err := w.Resolve(p)
	if err != nil {
		return nil, err
	}
	fi, err := w.root.Stat(r)
	if err != nil {
		return nil, jailOr(p, err)
	}
	return fi, nil
}

// WriteFile writes a file inside the jail atomically (temp file + rename),
// creating parent directories.
func (w *Root) WriteFile(p string, data []byte, perm fs.FileMode) error {
	r, err := w.Resolve(p)
	if err != nil {
		return err
	}
	if r == "." {
		return violation(p, "not a file")
	}
	if dir := path.Dir(r); dir != "." {
		if err := w.root.MkdirAll(dir, 0o755); err != nil {
			return jailOr(p, err)
		}
	}
	if fi, err := w.root.Stat(r); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("%s is a directory", p)
		}
		perm = fi.Mode().Perm()
	}
	tmp := path.Join(path.Dir(r), fmt.Sprintf(".agentos-tmp-%s", randHex()))
	f, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return jailOr(p, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		w.root.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		w.root.Remove(tmp)
		return err
	}
	if err := w.root.Rename(tmp, r); err != nil {
		w.root.Remove(tmp)
		return jailOr(p, err)
	}
	return nil
}

// Remove deletes a file inside the jail.
func (w *Root) Remove(p string) error {
	r, err := w.Resolve(p)
	if err != nil {
		return err
	}
	if err := w.root.Remove(r); err != nil {
		return jailOr(p, err)
	}
	return nil
}

// jailOr maps os.Root's escape errors to JAIL_VIOLATION and keeps others.
func jailOr(p string, err error) error {
	if err != nil && strings.Contains(err.Error(), "path escapes from parent") {
		return violation(p, "escapes the workspace")
	}
	return err
}

func randHex() string {
	var b [6]byte
	if _, err := readRandom(b[:]); err != nil {
		return "x"
	}
	return hex.EncodeToString(b[:])
}

// Walk calls fn for every regular file not ignored by .gitignore (and not
// in .git or a deny pattern), in lexical order, with its relative path.
func (w *Root) Walk(ctx context.Context, fn func(rel string, d fs.DirEntry) error) error {
	return w.WalkFiles(ctx, func(f *File) error {
		defer f.Release()
		return fn(f.Rel, f.Entry)
	})
}

// Revision implements kernel.Workspace: the HEAD commit (if the root is a
// git repository) and a SHA-256 digest over every non-ignored file's path,
// mode and content. The digest is not git's tree hash — computing that
// needs the index — but it changes whenever a file an approval could depend
// on changes, which is what staleness needs.
func (w *Root) Revision(ctx context.Context) (kernel.Revision, error) {
	var rev kernel.Revision
	if repo, err := git.PlainOpen(w.dir); err == nil {
		if head, err := repo.Head(); err == nil {
			rev.Commit = head.Hash().String()
		}
	}
	type entry struct{ p, line string }
	var entries []entry
	err := w.WalkFiles(ctx, func(f *File) error {
		defer f.Release()
		rel, d := f.Rel, f.Entry
		// Streamed: a large file costs time, not memory.
		r, err := f.Open()
		if err != nil {
			return nil
		}
		fh := sha256.New()
		_, err = io.Copy(fh, r)
		r.Close()
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		entries = append(entries, entry{rel, fmt.Sprintf("%s\x00%o\x00%x\n", rel, fi.Mode().Perm(), fh.Sum(nil))})
		return nil
	})
	if err != nil {
		return rev, err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].p < entries[j].p })
	h := sha256.New()
	for _, e := range entries {
		h.Write([]byte(e.line))
	}
	rev.Tree = hex.EncodeToString(h.Sum(nil))
	return rev, nil
}

// ReadWalked reads a file that Walk just reported. Walk yields only regular
// files inside the root (it does not follow symlinks) that passed the deny
// rules, so the component-by-component resolution of ReadFile is skipped;
// os.Root still refuses anything that would leave the root, and the file
// is read like every other (Open): regular files only, at most
// MaxFileSize bytes.
func (w *Root) ReadWalked(rel string) ([]byte, error) {
	dir, err := w.root.OpenFile(path.Dir(rel), os.O_RDONLY|oDirectory, 0)
	if err != nil {
		return nil, jailOr(rel, err)
	}
	defer dir.Close()
	f, err := openAt(dir, path.Base(rel), rel)
	if err != nil {
		return nil, jailOr(rel, err)
	}
	defer f.Close()
	return f.ReadAll(MaxFileSize)
}

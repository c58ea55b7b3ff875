//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Landlock grants whole trees: it cannot take a file out of the worktree
// it grants. A masked file (a .env beside the code, which the policy's
// deny patterns keep from the tools) is therefore moved out of the
// worktree while a command runs — into a directory beside the worktree,
// on the same file system, that the command is not granted — and moved
// back when the command ends. A file the command created at the same path
// meanwhile is replaced by the original. A process that dies in between
// leaves the files in that directory, and the next command in the same
// worktree (or agentos doctor's probe of it) puts them back first.
//
// agentos's own data directory is never moved (its database is open):
// the caller refuses the command instead (Request.Data).

// asideDir is where work's masked files wait while a command runs.
func asideDir(work string) string {
	return filepath.Join(filepath.Dir(work), ".agentos-hidden-"+workKey(work))
}

// manifest lines are "<name in asideDir>\t<path relative to work>".
const asideManifest = "MANIFEST"

// moveAside moves the masked files and directories out of work and
// returns the function that brings them back. One that cannot be moved
// on the same file system is an error (nothing stays moved).
func moveAside(work string, masks []string) (restore func() error, err error) {
	if err := restoreAside(work); err != nil {
		return nil, err
	}
	var files []string
	for _, m := range masks {
		_, err := os.Lstat(m)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		files = append(files, m)
	}
	if len(files) == 0 {
		return func() error { return nil }, nil
	}
	dir := asideDir(work)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: a place to hide %s from the command: %w", files[0], err)
	}
	var manifest strings.Builder
	moved := 0
	undo := func() error { return restoreAside(work) }
	for i, f := range files {
		rel, err := filepath.Rel(work, f)
		if err != nil || strings.ContainsAny(rel, "\t\n") {
			_ = undo()
			return nil, fmt.Errorf("sandbox: cannot hide %q", f)
		}
		name := fmt.Sprintf("%d", i)
		fmt.Fprintf(&manifest, "%s\t%s\n", name, filepath.ToSlash(rel))
		// The manifest is written before each move, so that a crash
		// between the two leaves nothing unaccounted for.
		if err := os.WriteFile(filepath.Join(dir, asideManifest), []byte(manifest.String()), 0o600); err != nil {
			_ = undo()
			return nil, fmt.Errorf("sandbox: hide %s: %w", f, err)
		}
		if err := os.Rename(f, filepath.Join(dir, name)); err != nil {
			_ = undo()
			return nil, fmt.Errorf("sandbox: %s must be hidden from commands and Landlock cannot hide a file of a tree it grants; moving it out of the worktree failed (%v): move it out yourself, or use bwrap", f, err)
		}
		moved++
	}
	return undo, nil
}

// restoreAside puts back what an earlier moveAside of work left in its
// directory, then removes the directory. A file a command wrote at the
// same path is replaced.
func restoreAside(work string) error {
	dir := asideDir(work)
	b, err := os.ReadFile(filepath.Join(dir, asideManifest))
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sandbox: %s is left from an earlier command; look inside, then remove it: %w", dir, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("sandbox: restore hidden files: %w", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		name, rel, ok := strings.Cut(line, "\t")
		if !ok || strings.Contains(name, "/") || filepath.IsAbs(rel) || strings.HasPrefix(filepath.Clean(rel), "..") {
			return fmt.Errorf("sandbox: restore hidden files: bad manifest line %q in %s", line, dir)
		}
		src := filepath.Join(dir, name)
		if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
			continue // recorded, but the move never happened (or was undone)
		}
		dst := filepath.Join(work, filepath.FromSlash(rel))
		// Never through a symlink a command made of a parent directory:
		// that could carry the file out to where later commands read.
		for d := filepath.Dir(dst); d != work && within(d, work); d = filepath.Dir(d) {
			if fi, err := os.Lstat(d); err == nil && !fi.IsDir() {
				return fmt.Errorf("sandbox: restore %s: a command replaced its directory %s; the file is kept in %s", rel, d, dir)
			}
		}
		if fi, err := os.Lstat(dst); err == nil {
			// The command made something where the hidden one was: a file
			// replaces a file or link; otherwise both are kept.
			if sfi, serr := os.Lstat(src); serr == nil && (fi.IsDir() || sfi.IsDir()) {
				dst += ".agentos-restored"
			}
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("sandbox: restore %s: %w", rel, err)
		}
		if err := os.Rename(src, dst); err != nil {
			return fmt.Errorf("sandbox: restore %s from %s: %w", rel, dir, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("sandbox: restore hidden files: %w", err)
	}
	return nil
}

package workspace

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// Masked returns what a process the workspace starts must not see: the
// excluded paths (agentos's own data) and every file or directory that
// policy.yaml's workspace.denyPatterns keep from the repository tools
// (by default .env and .env.local: credentials kept beside the code). A
// deny pattern that only stopped repo.read would leave `cat .env` to any
// test or command; the sandbox covers each of these with an empty file or
// directory.
//
// Left alone: .git (the sandbox makes it read-only; git needs it);
// symbolic links (a link's target is either outside the worktree, which
// the sandbox does not show, or a path inside it that the patterns allow
// under its own name); and a denied file whose content is exactly what
// the git index holds for it — a committed .env of public defaults, which
// `git show :.env` prints anyway and which a project's tests may need.
// A committed file filled in locally is masked.
//
// The list is taken when the command starts, by walking the worktree
// (skipping .git and the excluded paths); a denied file a command creates
// is its own.
func (w *Root) Masked() []string {
	out := w.Excluded()
	if len(w.opts.DenyPatterns) == 0 {
		return out
	}
	skip := make(map[string]bool, len(w.excluded))
	for _, ex := range w.excluded {
		skip[ex] = true
	}
	type match struct {
		abs, rel string
		dir      bool
	}
	var found []match
	_ = filepath.WalkDir(w.dir, func(abs string, d fs.DirEntry, err error) error {
		if err != nil || abs == w.dir {
			return nil // an unreadable directory: the command cannot read it either
		}
		rel := filepath.ToSlash(abs[len(w.dir)+1:])
		if d.IsDir() && (d.Name() == ".git" || skip[rel]) {
			return fs.SkipDir
		}
		if d.Type()&fs.ModeSymlink != 0 || w.denyPattern(rel) == "" {
			return nil
		}
		found = append(found, match{abs, rel, d.IsDir()})
		if d.IsDir() {
			return fs.SkipDir
		}
		return nil
	})
	if len(found) == 0 {
		return out
	}
	index := w.indexBlobs()
	committed := func(abs, rel string) bool {
		h, ok := index[rel]
		if !ok {
			return false
		}
		b, err := os.ReadFile(abs)
		return err == nil && plumbing.ComputeHash(plumbing.BlobObject, b) == h
	}
	for _, m := range found {
		if !m.dir {
			if !committed(m.abs, m.rel) {
				out = append(out, m.abs)
			}
			continue
		}
		tracked := false
		for p := range index {
			if strings.HasPrefix(p, m.rel+"/") {
				tracked = true
				break
			}
		}
		if !tracked {
			out = append(out, m.abs) // the whole directory, names and all
			continue
		}
		_ = filepath.WalkDir(m.abs, func(abs string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Type()&fs.ModeSymlink != 0 {
				return nil
			}
			if rel := filepath.ToSlash(abs[len(w.dir)+1:]); !committed(abs, rel) {
				out = append(out, abs)
			}
			return nil
		})
	}
	return out
}

// indexBlobs maps the paths the worktree's git index tracks to their blob
// hashes; nil when the worktree is not a git repository or its index
// cannot be read (every denied file is then masked).
func (w *Root) indexBlobs() map[string]plumbing.Hash {
	repo, err := git.PlainOpenWithOptions(w.dir, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
	if err != nil {
		return nil
	}
	idx, err := repo.Storer.Index()
	if err != nil {
		return nil
	}
	out := make(map[string]plumbing.Hash, len(idx.Entries))
	for _, e := range idx.Entries {
		out[e.Name] = e.Hash
	}
	return out
}

// denyPattern returns the deny pattern that matches rel, or "". A pattern
// ending in /** also covers the directory itself ("secrets/**" denies
// "secrets").
func (w *Root) denyPattern(rel string) string {
	for _, pat := range w.opts.DenyPatterns {
		if ok, _ := doublestar.Match(pat, rel); ok {
			return pat
		}
		if strings.HasSuffix(pat, "/**") {
			if ok, _ := doublestar.Match(pat, rel+"/x"); ok {
				return pat
			}
		}
	}
	return ""
}

package workspace

import (
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// Masked returns what a process the workspace starts must not see: the
// excluded paths (agentos's own data) and every file or directory that
// policy.yaml's workspace.denyPatterns keep from the repository tools
// (by default .env and .env.local: credentials kept beside the code). A
// deny pattern that only stopped repo.read would leave `cat .env` to any
// test or command; the sandbox covers each of these with an empty file or
// directory. .git is left alone (the sandbox makes it read-only; git needs
// it), and so are symbolic links: a link's target is either outside the
// worktree, which the sandbox does not show, or a path inside it that the
// patterns allow under its own name.
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
	_ = filepath.WalkDir(w.dir, func(abs string, d fs.DirEntry, err error) error {
		if err != nil || abs == w.dir {
			return nil // an unreadable directory: the command cannot read it either
		}
		p := filepath.ToSlash(abs[len(w.dir)+1:])
		if d.IsDir() && (d.Name() == ".git" || skip[p]) {
			return fs.SkipDir
		}
		if d.Type()&fs.ModeSymlink != 0 || w.denyPattern(p) == "" {
			return nil
		}
		out = append(out, abs)
		if d.IsDir() {
			return fs.SkipDir
		}
		return nil
	})
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

package workspace

import (
	"crypto/rand"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

func readRandom(b []byte) (int, error) { return rand.Read(b) }

// ignorePatterns reads the workspace's .gitignore files (and
// .git/info/exclude) through a filesystem bound to the root.
func (w *Root) ignorePatterns() []gitignore.Pattern {
	ps, _ := gitignore.ReadPatterns(osfs.New(w.dir, osfs.WithBoundOS()), nil)
	return ps
}

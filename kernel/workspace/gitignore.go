package workspace

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"os"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

func readRandom(b []byte) (int, error) { return rand.Read(b) }

// readIgnore parses one ignore file of the workspace (e.g.
// .git/info/exclude) read through the jail.
func (w *Root) readIgnore(rel string, domain []string) []gitignore.Pattern {
	dir, err := w.root.OpenFile(path.Dir(rel), os.O_RDONLY|oDirectory, 0)
	if err != nil {
		return nil
	}
	defer dir.Close()
	return parseIgnore(dir, path.Base(rel), rel, domain)
}

// parseIgnore parses the ignore file name inside the open directory dir
// (rel is its workspace-relative path); domain is the directory it
// governs. A missing or unreadable file, or one that is not a regular
// file or is over MaxFileSize, has no patterns. Comment and blank lines
// are skipped as git does.
func parseIgnore(dir *os.File, name, rel string, domain []string) []gitignore.Pattern {
	f, err := openAt(dir, name, rel)
	if err != nil {
		return nil
	}
	b, err := f.ReadAll(MaxFileSize)
	f.Close()
	if err != nil {
		return nil
	}
	var ps []gitignore.Pattern
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		s := sc.Text()
		if !strings.HasPrefix(s, "#") && strings.TrimSpace(s) != "" {
			ps = append(ps, gitignore.ParsePattern(s, domain))
		}
	}
	return ps
}

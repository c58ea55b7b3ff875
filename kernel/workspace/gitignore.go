package workspace

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"os"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

func readRandom(b []byte) (int, error) { return rand.Read(b) }

// readIgnore parses one ignore file of the workspace (e.g.
// .git/info/exclude) read through the jail.
func (w *Root) readIgnore(rel string, domain []string) []gitignore.Pattern {
	return parseIgnore(w.root, rel, domain)
}

// parseIgnore parses the ignore file name inside dir; domain is the
// directory it governs. A missing or unreadable file has no patterns.
// Comment and blank lines are skipped as git does.
func parseIgnore(dir *os.Root, name string, domain []string) []gitignore.Pattern {
	b, err := dir.ReadFile(name)
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

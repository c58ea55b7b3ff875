package github

import (
	"fmt"
	"strconv"
	"strings"
)

// DiffMap says which lines of a pull request can carry a review comment:
// GitHub accepts a line comment only on a line its diff shows — RIGHT for
// an added or context line of the new file, LEFT for a removed or context
// line of the old one — and a multi-line comment only within one hunk.
type DiffMap struct {
	files map[string]*diffFile
}

type diffFile struct {
	status string
	hunks  []diffHunk
}

// diffHunk is one "@@ -a,b +c,d @@" section: the old-file (left) and
// new-file (right) lines it shows.
type diffHunk struct {
	left, right map[int]bool
}

// NewDiffMap builds the map from a pull request's files (ListPRFiles). A
// file without a patch (binary, or too large for GitHub to show) has no
// commentable lines. A malformed patch is an error: a map that guessed
// would send comments GitHub refuses, and a refused review posts nothing.
func NewDiffMap(files []PRFile) (DiffMap, error) {
	m := DiffMap{files: map[string]*diffFile{}}
	for _, f := range files {
		hs, err := parseHunks(f.Patch)
		if err != nil {
			return DiffMap{}, fmt.Errorf("github: diff of %s: %w", f.Path, err)
		}
		m.files[f.Path] = &diffFile{status: f.Status, hunks: hs}
	}
	return m, nil
}

func parseHunks(patch string) ([]diffHunk, error) {
	var out []diffHunk
	if patch == "" {
		return nil, nil
	}
	var l, r int
	for i, line := range strings.Split(strings.TrimSuffix(patch, "\n"), "\n") {
		if strings.HasPrefix(line, "@@ ") {
			a, c, err := hunkHeader(line)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			out = append(out, diffHunk{left: map[int]bool{}, right: map[int]bool{}})
			l, r = a, c
			continue
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("line %d: text before the first hunk", i+1)
		}
		h := &out[len(out)-1]
		switch {
		case strings.HasPrefix(line, "+"):
			h.right[r] = true
			r++
		case strings.HasPrefix(line, "-"):
			h.left[l] = true
			l++
		case strings.HasPrefix(line, `\`):
		default:
			h.left[l], h.right[r] = true, true
			l++
			r++
		}
	}
	return out, nil
}

// hunkHeader reads the starts of "@@ -a[,b] +c[,d] @@ ...".
func hunkHeader(line string) (int, int, error) {
	f := strings.Fields(line)
	if len(f) < 4 || f[0] != "@@" || f[3] != "@@" || !strings.HasPrefix(f[1], "-") || !strings.HasPrefix(f[2], "+") {
		return 0, 0, fmt.Errorf("bad hunk header %q", line)
	}
	start := func(s string) (int, error) {
		s, _, _ = strings.Cut(s[1:], ",")
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bad hunk header %q", line)
		}
		return n, nil
	}
	a, err := start(f[1])
	if err != nil {
		return 0, 0, err
	}
	c, err := start(f[2])
	return a, c, err
}

// Has reports whether path is part of the pull request.
func (m DiffMap) Has(path string) bool { _, ok := m.files[path]; return ok }

// Place puts a finding on lines line..end (end 0 or equal: one line) of
// path onto the diff: the side is RIGHT (the new file), or LEFT for a
// removed file, whose lines exist only there. The range is kept when one
// hunk shows all of it; otherwise the comment goes on the part of it that
// the first hunk touching it shows (GitHub refuses a range across hunks).
// ok is false when no line of the range is in the diff: that finding
// belongs in the review body.
func (m DiffMap) Place(path string, line, end int) (c LineComment, ok bool) {
	f, found := m.files[path]
	if !found || line <= 0 {
		return LineComment{}, false
	}
	if end < line {
		end = line
	}
	side := "RIGHT"
	if f.status == "removed" {
		side = "LEFT"
	}
	for _, h := range f.hunks {
		shown := h.right
		if side == "LEFT" {
			shown = h.left
		}
		first, last := 0, 0
		for n := line; n <= end; n++ {
			if shown[n] {
				if first == 0 {
					first = n
				}
				last = n
			} else if first != 0 {
				break // the hunk's run of lines ended inside the range
			}
		}
		if first == 0 {
			continue
		}
		c = LineComment{Path: path, Line: last, Side: side}
		if first != last {
			c.StartLine, c.StartSide = first, side
		}
		return c, true
	}
	return LineComment{}, false
}

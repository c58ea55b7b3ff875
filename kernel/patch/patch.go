// Package patch parses git-style unified diffs (several files, new,
// deleted and renamed files, "\ No newline at end of file", CRLF files)
// and applies them like `git apply`: a hunk may apply at a shifted position
// when its context matches exactly there, and a hunk whose context matches
// nowhere is an error naming the file and the hunk. Applying is pure; the
// caller writes the results all or nothing.
package patch

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Op is what a file patch does.
type Op string

// Ops.
const (
	Modify Op = "modify"
	Create Op = "create"
	Delete Op = "delete"
	Rename Op = "rename"
)

// File is the patch of one file.
type File struct {
	OldPath string // "" for a new file
	NewPath string // "" for a deleted file
	Op      Op
	Hunks   []Hunk
}

// Path is the path the patch leaves behind (or removes, for a delete).
func (f *File) Path() string {
	if f.NewPath != "" {
		return f.NewPath
	}
	return f.OldPath
}

// Hunk is one @@ section.
type Hunk struct {
	OldStart, OldLines int
	NewStart, NewLines int
	Lines              []Line
	Header             string
}

// Line is one hunk line: Kind is ' ', '-' or '+'.
type Line struct {
	Kind      byte
	Text      string // without the line ending
	NoNewline bool   // followed by "\ No newline at end of file"
}

// Stats counts a patch's changes.
func (f *File) Stats() (added, removed int) {
	for _, h := range f.Hunks {
		for _, l := range h.Lines {
			switch l.Kind {
			case '+':
				added++
			case '-':
				removed++
			}
		}
	}
	return
}

// ParseError points at the diff line that could not be parsed.
type ParseError struct {
	Line int
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("diff line %d: %s", e.Line, e.Msg) }

// Parse reads a unified diff.
func Parse(diff string) ([]File, error) {
	lines := strings.Split(strings.ReplaceAll(diff, "\r\n", "\n"), "\n")
	// A trailing "\n" leaves an empty last element.
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	var files []File
	var cur *File
	flush := func() {
		if cur != nil {
			files = append(files, *cur)
			cur = nil
		}
	}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "diff --git "):
			flush()
			cur = &File{Op: Modify}
			a, b, ok := splitGitHeader(strings.TrimPrefix(l, "diff --git "))
			if ok {
				cur.OldPath, cur.NewPath = a, b
			}
		case strings.HasPrefix(l, "new file mode"):
			if cur != nil {
				cur.Op, cur.OldPath = Create, ""
			}
		case strings.HasPrefix(l, "deleted file mode"):
			if cur != nil {
				cur.Op, cur.NewPath = Delete, ""
			}
		case strings.HasPrefix(l, "rename from "):
			if cur != nil {
				cur.Op, cur.OldPath = Rename, strings.TrimPrefix(l, "rename from ")
			}
		case strings.HasPrefix(l, "rename to "):
			if cur != nil {
				cur.Op, cur.NewPath = Rename, strings.TrimPrefix(l, "rename to ")
			}
		case strings.HasPrefix(l, "--- ") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "+++ "):
			if cur == nil || len(cur.Hunks) > 0 {
				flush()
				cur = &File{Op: Modify}
			}
			oldP := diffPath(strings.TrimPrefix(l, "--- "), "a/")
			newP := diffPath(strings.TrimPrefix(lines[i+1], "+++ "), "b/")
			i++
			switch {
			case oldP == "" && newP == "":
				return nil, &ParseError{Line: i, Msg: "both sides are /dev/null"}
			case oldP == "":
				cur.Op, cur.OldPath, cur.NewPath = Create, "", newP
			case newP == "":
				cur.Op, cur.OldPath, cur.NewPath = Delete, oldP, ""
			default:
				if cur.Op != Rename {
					cur.OldPath, cur.NewPath = oldP, newP
					if oldP != newP {
						cur.Op = Rename
					}
				}
			}
		case strings.HasPrefix(l, "@@"):
			if cur == nil {
				return nil, &ParseError{Line: i + 1, Msg: "hunk before any file header"}
			}
			h, err := parseHunkHeader(l)
			if err != nil {
				return nil, &ParseError{Line: i + 1, Msg: err.Error()}
			}
			oldN, newN := 0, 0
			for i+1 < len(lines) && (oldN < h.OldLines || newN < h.NewLines) {
				i++
				hl := lines[i]
				if hl == "" {
					hl = " " // some tools strip the space of empty context lines
				}
				switch hl[0] {
				case ' ':
					oldN++
					newN++
				case '-':
					oldN++
				case '+':
					newN++
				case '\\':
					if err := markNoNewline(&h, i+1); err != nil {
						return nil, err
					}
					continue
				default:
					return nil, &ParseError{Line: i + 1, Msg: fmt.Sprintf("unexpected line in hunk %s: %q", h.Header, clip(hl))}
				}
				h.Lines = append(h.Lines, Line{Kind: hl[0], Text: strings.TrimSuffix(hl[1:], "\r")})
			}
			if oldN != h.OldLines || newN != h.NewLines {
				return nil, &ParseError{Line: i + 1, Msg: fmt.Sprintf("hunk %s is short: %d old and %d new lines, header says %d and %d", h.Header, oldN, newN, h.OldLines, h.NewLines)}
			}
			if i+1 < len(lines) && strings.HasPrefix(lines[i+1], `\`) {
				i++
				if err := markNoNewline(&h, i+1); err != nil {
					return nil, err
				}
			}
			cur.Hunks = append(cur.Hunks, h)
		case strings.HasPrefix(l, "index "), strings.HasPrefix(l, "similarity index"), strings.HasPrefix(l, "dissimilarity index"),
			strings.HasPrefix(l, "old mode"), strings.HasPrefix(l, "new mode"), strings.HasPrefix(l, "Binary files"):
			if strings.HasPrefix(l, "Binary files") {
				return nil, &ParseError{Line: i + 1, Msg: "binary patches are not supported"}
			}
		default:
			// Free text between files (commit messages, "```" fences) is
			// ignored, as git apply does.
		}
	}
	flush()
	if len(files) == 0 {
		return nil, &ParseError{Line: 1, Msg: "no file headers (--- a/path, +++ b/path) found"}
	}
	for i, f := range files {
		if f.Path() == "" {
			return nil, &ParseError{Line: 1, Msg: fmt.Sprintf("file %d has no path", i+1)}
		}
		if f.Op != Delete && f.Op != Rename && len(f.Hunks) == 0 {
			return nil, &ParseError{Line: 1, Msg: fmt.Sprintf("%s: no hunks", f.Path())}
		}
	}
	return files, nil
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

func splitGitHeader(s string) (string, string, bool) {
	// "a/x b/x"; paths with spaces are ambiguous, the ---/+++ lines win.
	if i := strings.Index(s, " b/"); i > 0 && strings.HasPrefix(s, "a/") {
		return s[2:i], s[i+3:], true
	}
	return "", "", false
}

func diffPath(s, prefix string) string {
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	if s == "/dev/null" {
		return ""
	}
	return strings.TrimPrefix(s, prefix)
}

func parseHunkHeader(l string) (Hunk, error) {
	h := Hunk{Header: l}
	end := strings.Index(l[2:], "@@")
	if !strings.HasPrefix(l, "@@ ") || end < 0 {
		return h, fmt.Errorf("bad hunk header %q", l)
	}
	f := strings.Fields(l[2 : end+2])
	if len(f) != 2 || f[0][0] != '-' || f[1][0] != '+' {
		return h, fmt.Errorf("bad hunk header %q", l)
	}
	var err error
	if h.OldStart, h.OldLines, err = rangeOf(f[0][1:]); err != nil {
		return h, err
	}
	h.NewStart, h.NewLines, err = rangeOf(f[1][1:])
	return h, err
}

func rangeOf(s string) (int, int, error) {
	start, count := s, "1"
	if i := strings.IndexByte(s, ','); i >= 0 {
		start, count = s[:i], s[i+1:]
	}
	a, err1 := strconv.Atoi(start)
	b, err2 := strconv.Atoi(count)
	if err1 != nil || err2 != nil || a < 0 || b < 0 {
		return 0, 0, fmt.Errorf("bad hunk range %q", s)
	}
	return a, b, nil
}

// ErrContextMismatch matches every *ApplyError about context.
var ErrContextMismatch = errors.New("context does not match")

// ApplyError names the file and hunk that did not apply.
type ApplyError struct {
	Path string
	Hunk int // 1-based
	Msg  string
	Err  error
}

func (e *ApplyError) Error() string {
	if e.Hunk > 0 {
		return fmt.Sprintf("%s: hunk %d: %s", e.Path, e.Hunk, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

func (e *ApplyError) Unwrap() error { return e.Err }

type srcLine struct {
	text string // without ending
	eol  string // "\n", "\r\n" or "" (last line without newline)
}

func splitLines(b []byte) []srcLine {
	var out []srcLine
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, srcLine{text: string(b)})
			break
		}
		l := srcLine{text: string(b[:i]), eol: "\n"}
		if strings.HasSuffix(l.text, "\r") {
			l.text, l.eol = strings.TrimSuffix(l.text, "\r"), "\r\n"
		}
		out = append(out, l)
		b = b[i+1:]
	}
	return out
}

// Apply applies f's hunks to old (nil for a new file) and returns the new
// content. Lines are compared without their line ending, so an LF diff
// applies to a CRLF file; added lines take the file's line ending. (git
// apply would reject the CRLF mismatch; models rarely reproduce \r.)
func (f *File) Apply(old []byte) ([]byte, error) {
	src := splitLines(old)
	eol := "\n"
	for _, l := range src {
		if l.eol != "" {
			eol = l.eol
			break
		}
	}
	var out []srcLine
	pos, offset := 0, 0
	for hi, h := range f.Hunks {
		var want []string
		for _, l := range h.Lines {
			if l.Kind != '+' {
				want = append(want, l.Text)
			}
		}
		expected := h.OldStart - 1 + offset
		if h.OldLines == 0 {
			expected = h.OldStart + offset // insertion after line OldStart
		}
		// Like git apply: a hunk that starts at line 1 must match at the
		// beginning, and one with no trailing context must match at the end.
		trailing := 0
		for i := len(h.Lines) - 1; i >= 0 && h.Lines[i].Kind == ' '; i-- {
			trailing++
		}
		at := find(src, want, expected, pos)
		if at >= 0 && ((h.OldStart <= 1 && at != 0) || (trailing == 0 && h.OldLines > 0 && at+len(want) != len(src))) {
			at = -1
		}
		if at < 0 {
			return nil, &ApplyError{Path: f.Path(), Hunk: hi + 1, Msg: fmt.Sprintf("context does not match at line %d or anywhere after the previous hunk (%s)", h.OldStart, h.Header), Err: ErrContextMismatch}
		}
		out = append(out, src[pos:at]...)
		k := at
		for _, l := range h.Lines {
			switch l.Kind {
			case ' ':
				out = append(out, src[k])
				k++
			case '-':
				k++
			case '+':
				nl := srcLine{text: l.Text, eol: eol}
				if l.NoNewline {
					nl.eol = ""
				}
				out = append(out, nl)
			}
		}
		// A context line marked "no newline" keeps the source's ending.
		offset = at - (h.OldStart - 1)
		if h.OldLines == 0 {
			offset = at - h.OldStart
		}
		pos = k
	}
	out = append(out, src[pos:]...)
	// Only the last line may lack a newline.
	for i := 0; i < len(out)-1; i++ {
		if out[i].eol == "" {
			out[i].eol = eol
		}
	}
	var b bytes.Buffer
	for _, l := range out {
		b.WriteString(l.text)
		b.WriteString(l.eol)
	}
	return b.Bytes(), nil
}

// find returns where want matches src exactly, nearest to expected and not
// before min, or -1.
func find(src []srcLine, want []string, expected, min int) int {
	match := func(at int) bool {
		if at < min || at+len(want) > len(src) {
			return false
		}
		for i, w := range want {
			if src[at+i].text != w {
				return false
			}
		}
		return true
	}
	if expected < min {
		expected = min
	}
	for d := 0; d <= len(src); d++ {
		if match(expected + d) {
			return expected + d
		}
		if d > 0 && match(expected-d) {
			return expected - d
		}
		if expected+d > len(src) && expected-d < min {
			break
		}
	}
	return -1
}

// markNoNewline applies a "\ No newline at end of file" marker to the hunk's
// last line. A file cannot end in an empty line that lacks its newline (an
// empty unterminated last line is no line at all), so git never writes the
// marker after an empty line; such a diff is refused rather than applied
// with the line silently vanishing.
func markNoNewline(h *Hunk, lineNo int) error {
	n := len(h.Lines)
	if n == 0 {
		return nil
	}
	if h.Lines[n-1].Text == "" {
		return &ParseError{Line: lineNo, Msg: fmt.Sprintf("hunk %s: \\ No newline at end of file follows an empty line", h.Header)}
	}
	h.Lines[n-1].NoNewline = true
	return nil
}

// WholeFile renders a whole-file replacement of path (old → new, "" for
// a file that does not exist yet) as a unified diff with one hunk, and
// counts its added and removed lines: repo.write's preview, and the run
// viewer's account of a write.
func WholeFile(path, old, new string) (diff string, added, removed int) {
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	}
	ol, nl := split(old), split(new)
	var b strings.Builder
	from := "a/" + path
	if old == "" {
		from = "/dev/null"
	}
	fmt.Fprintf(&b, "--- %s\n+++ b/%s\n@@ -%d,%d +%d,%d @@\n", from, path, min(1, len(ol)), len(ol), min(1, len(nl)), len(nl))
	for _, l := range ol {
		b.WriteString("-" + l + "\n")
	}
	for _, l := range nl {
		b.WriteString("+" + l + "\n")
	}
	return b.String(), len(nl), len(ol)
}

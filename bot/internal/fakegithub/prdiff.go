package fakegithub

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// PRFile is one file of a pull request's diff, as GitHub's "List pull
// request files" reports it: the path, the status and the unified-diff
// patch of the file (hunks only, starting at the first "@@" line). A pull
// request seeded with Files has a diff: review comments are checked against
// its hunks, GET .../pulls/{n}/files lists them, and GET .../pulls/{n} with
// the diff media type answers the whole diff.
type PRFile struct {
	Path string
	// Status is added, removed, modified or renamed ("modified" if empty).
	Status string
	// PreviousPath is the old path of a renamed file.
	PreviousPath string
	Patch        string
}

// hunk is one "@@ -a,b +c,d @@" section of a patch: the lines of the old
// file (LEFT) and of the new file (RIGHT) it shows.
type hunk struct {
	left, right map[int]bool
}

// parsePatch splits a file's patch into hunks. It fails on a malformed
// header, so a test that seeds a broken patch learns it at once.
func parsePatch(patch string) ([]hunk, error) {
	var out []hunk
	var cur *hunk
	var l, r int
	for i, line := range strings.Split(strings.TrimSuffix(patch, "\n"), "\n") {
		if strings.HasPrefix(line, "@@") {
			var a, c int
			rest := strings.TrimPrefix(line, "@@ ")
			old, rest, ok1 := strings.Cut(rest, " ")
			nw, _, ok2 := strings.Cut(rest, " @@")
			if !ok1 || !ok2 || !strings.HasPrefix(old, "-") || !strings.HasPrefix(nw, "+") {
				return nil, fmt.Errorf("patch line %d: bad hunk header %q", i+1, line)
			}
			var err error
			if a, err = hunkStart(old[1:]); err != nil {
				return nil, fmt.Errorf("patch line %d: %w", i+1, err)
			}
			if c, err = hunkStart(nw[1:]); err != nil {
				return nil, fmt.Errorf("patch line %d: %w", i+1, err)
			}
			out = append(out, hunk{left: map[int]bool{}, right: map[int]bool{}})
			cur = &out[len(out)-1]
			l, r = a, c
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("patch line %d: text before the first hunk header", i+1)
		}
		switch {
		case strings.HasPrefix(line, "+"):
			cur.right[r] = true
			r++
		case strings.HasPrefix(line, "-"):
			cur.left[l] = true
			l++
		case strings.HasPrefix(line, `\`): // "\ No newline at end of file"
		default: // context (" ", or an empty line some tools emit for it)
			cur.left[l], cur.right[r] = true, true
			l++
			r++
		}
	}
	return out, nil
}

func hunkStart(s string) (int, error) {
	start, _, _ := strings.Cut(s, ",")
	n, err := strconv.Atoi(start)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad hunk range %q", s)
	}
	return n, nil
}

// hunkOf returns the index of the hunk of file that shows line on side,
// or -1.
func hunkOf(hs []hunk, side string, line int) int {
	for i, h := range hs {
		if (side == "LEFT" && h.left[line]) || (side != "LEFT" && h.right[line]) {
			return i
		}
	}
	return -1
}

// GitHub's messages for a review comment it cannot place, as its API
// answers them (422, in a create-review's "errors" list).
const (
	msgLineNotInDiff   = "Pull request review thread line must be part of the diff"
	msgStartOtherHunk  = "Pull request review thread start line must be part of the same hunk as the line."
	msgPathNotResolved = "Path could not be resolved"
	msgLineNotResolved = "Line could not be resolved"
	msgStartAfterLine  = "Pull request review thread start line must precede the end line."
	msgBadSide         = "Pull request review thread side must be LEFT or RIGHT"
)

// placeComment checks a line comment against p's diff the way GitHub does
// and returns the message of the first problem ("" when it can be placed).
// side and startSide default to RIGHT and side. Without seeded Files the
// older DiffLines check (RIGHT lines only) applies; with neither, any line
// is accepted.
func placeComment(p *PullRequest, path string, line int, side string, startLine int, startSide string) string {
	if side == "" {
		side = "RIGHT"
	}
	if startSide == "" {
		startSide = side
	}
	if (side != "LEFT" && side != "RIGHT") || (startSide != "LEFT" && startSide != "RIGHT") {
		return msgBadSide
	}
	if line <= 0 {
		return msgLineNotResolved
	}
	if p.Files == nil {
		if !inDiff(p, path, line) {
			return msgLineNotInDiff
		}
		return ""
	}
	var file *PRFile
	for i := range p.Files {
		if p.Files[i].Path == path {
			file = &p.Files[i]
		}
	}
	if file == nil {
		return msgPathNotResolved
	}
	hs, err := parsePatch(file.Patch)
	if err != nil {
		return msgLineNotResolved
	}
	end := hunkOf(hs, side, line)
	if end < 0 {
		return msgLineNotInDiff
	}
	if startLine != 0 {
		if startSide == side && startLine >= line {
			return msgStartAfterLine
		}
		if hunkOf(hs, startSide, startLine) != end {
			return msgStartOtherHunk
		}
	}
	return ""
}

// unifiedDiff renders p's files as `git diff` does, which is what GitHub
// answers for the diff media type.
func unifiedDiff(p *PullRequest) string {
	var b strings.Builder
	for _, f := range p.Files {
		old := f.Path
		if f.PreviousPath != "" {
			old = f.PreviousPath
		}
		fmt.Fprintf(&b, "diff --git a/%s b/%s\n", old, f.Path)
		from, to := "a/"+old, "b/"+f.Path
		switch f.Status {
		case "added":
			b.WriteString("new file mode 100644\n")
			from = "/dev/null"
		case "removed":
			b.WriteString("deleted file mode 100644\n")
			to = "/dev/null"
		case "renamed":
			fmt.Fprintf(&b, "rename from %s\nrename to %s\n", old, f.Path)
		}
		if f.Patch == "" {
			continue
		}
		fmt.Fprintf(&b, "--- %s\n+++ %s\n", from, to)
		b.WriteString(f.Patch)
		if !strings.HasSuffix(f.Patch, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

func countChanges(patch string) (adds, dels int) {
	for _, l := range strings.Split(patch, "\n") {
		switch {
		case strings.HasPrefix(l, "+"):
			adds++
		case strings.HasPrefix(l, "-"):
			dels++
		}
	}
	return adds, dels
}

// wantsDiff reports whether the request asks for the diff media type
// (application/vnd.github.diff, or the v3 spelling).
func wantsDiff(r *http.Request) bool {
	for _, a := range strings.Split(r.Header.Get("Accept"), ",") {
		a = strings.TrimSpace(a)
		if a == "application/vnd.github.diff" || a == "application/vnd.github.v3.diff" {
			return true
		}
	}
	return false
}

// listPRFiles is GET /repos/{owner}/{repo}/pulls/{pull_number}/files:
// one entry per file with its patch, paginated like GitHub's (at most
// 3000 files in all).
func listPRFiles(c *call) {
	rs, p := c.repoPR()
	if p == nil {
		return
	}
	v := c.f.prView(rs, p)
	full := rs.Owner + "/" + rs.Name
	out := []any{}
	for i, f := range p.Files {
		if i == 3000 {
			break
		}
		adds, dels := countChanges(f.Patch)
		status := f.Status
		if status == "" {
			status = "modified"
		}
		m := map[string]any{
			"sha": sha("blob-" + v.HeadSHA + f.Path), "filename": f.Path, "status": status,
			"additions": adds, "deletions": dels, "changes": adds + dels,
			"blob_url":     fmt.Sprintf("%s/%s/blob/%s/%s", c.f.webURL(), full, v.HeadSHA, f.Path),
			"raw_url":      fmt.Sprintf("%s/%s/raw/%s/%s", c.f.webURL(), full, v.HeadSHA, f.Path),
			"contents_url": fmt.Sprintf("%s/repos/%s/contents/%s?ref=%s", c.f.apiURL(), full, f.Path, v.HeadSHA),
		}
		if f.Patch != "" {
			m["patch"] = f.Patch
		}
		if f.PreviousPath != "" {
			m["previous_filename"] = f.PreviousPath
		}
		out = append(out, m)
	}
	c.page(out)
}

// SetPRFiles replaces pull request n's diff (as a push to its head
// would).
func (f *Fake) SetPRFiles(repo string, n int, files []PRFile) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rs, ok := f.repos[strings.ToLower(repo)]; ok && rs.prs[n] != nil {
		rs.prs[n].Files = append([]PRFile(nil), files...)
	}
}

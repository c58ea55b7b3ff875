package tracking

import (
	"fmt"
	"sort"
	"strings"

	"github.com/agentos/agentos/runtime/markdown"
)

// ReviewMarker starts the approval review body, so the bot can tell its
// approval reviews from other reviews.
func ReviewMarker(sessionID string) string {
	return "<!-- agentos:approvals session=" + safeID(sessionID) + " -->"
}

// RenderApprovalReview returns the body of the pull request review (event
// COMMENT; the bot cannot approve its own pull request) that asks for the
// pending approvals of v: each action with its preview (a diff block for
// repo.patch and other file changes, the command and working directory for
// process.run), its id and digest, and how to answer. Diffs are shortened,
// never cut open, to keep the body under MaxChars.
func RenderApprovalReview(v View) string {
	var head strings.Builder
	head.WriteString(ReviewMarker(v.SessionID) + "\n")
	n := len(v.Approvals)
	fmt.Fprintf(&head, "### agentos needs approval for %d action%s\n\n", n, plural(n))
	if v.HeadSHA != "" {
		fmt.Fprintf(&head, "Computed against %s; if the branch moves, these approvals go stale and are asked again.\n", code(shortSHA(v.HeadSHA)))
	}
	how := howToAnswer(v)

	// Each approval without its diff, and its diff separately, so the
	// diffs can share what room is left.
	type part struct {
		text  string
		diff  string // fenced content, "" if none
		full  int    // lines in the diff
		chars int    // characters in the diff
	}
	parts := make([]part, 0, n)
	for i, a := range v.Approvals {
		var b strings.Builder
		fmt.Fprintf(&b, "\n#### %d. %s — approval %s\n\n", i+1, code(a.Tool), code(a.ID))
		if a.Command != "" {
			fmt.Fprintf(&b, "Command: %s", code(oneLine(a.Command, 2000)))
			if a.Cwd != "" {
				fmt.Fprintf(&b, " in %s", code(oneLine(a.Cwd, 300)))
			}
			b.WriteString("\n\n")
		}
		if len(a.Files) > 0 {
			var fs []string
			for j, f := range a.Files {
				if j == 20 {
					fs = append(fs, fmt.Sprintf("…and %d more", len(a.Files)-20))
					break
				}
				name := code(oneLine(f.Path, 200))
				if f.OldPath != "" {
					name = code(oneLine(f.OldPath, 200)) + " → " + name
				}
				fs = append(fs, fmt.Sprintf("%s (%s, +%d −%d)", name, inline(f.Op, 20), f.Added, f.Removed))
			}
			fmt.Fprintf(&b, "Files: %s\n\n", strings.Join(fs, ", "))
		}
		fmt.Fprintf(&b, "Digest: %s", code(a.Digest))
		if a.Commit != "" {
			fmt.Fprintf(&b, " · computed at %s", code(shortSHA(a.Commit)))
		}
		b.WriteString("\n")
		p := part{text: b.String(), diff: strings.TrimRight(a.Diff, "\n")}
		if p.diff != "" {
			p.full = strings.Count(p.diff, "\n") + 1
			p.chars = charsUpTo(p.diff, MaxChars+1) // no diff gets more than a whole body
		}
		parts = append(parts, p)
	}

	fixed := chars(head.String()) + chars(how)
	left := budget - fixed
	// Approvals that do not fit even without a diff are summarised.
	shown := 0
	for _, p := range parts {
		need := chars(p.text) + 300
		if need > left {
			break
		}
		left -= need
		shown++
	}
	// Share the rest among the diffs: small ones whole, the big ones
	// equally (water-filling), each cut at a line boundary.
	alloc := make([]int, shown)
	var idx []int
	for i := 0; i < shown; i++ {
		if parts[i].diff != "" {
			idx = append(idx, i)
		}
	}
	sort.Slice(idx, func(a, b int) bool { return parts[idx[a]].chars < parts[idx[b]].chars })
	for k, i := range idx {
		share := left / (len(idx) - k)
		if share < 0 {
			share = 0
		}
		need := parts[i].chars
		if need > share {
			need = share
		}
		alloc[i] = need
		left -= need
	}

	var body strings.Builder
	for i := 0; i < shown; i++ {
		p, a := parts[i], v.Approvals[i]
		body.WriteString(p.text)
		if p.diff == "" {
			continue
		}
		d, cut := cutLines(p.diff, p.full, alloc[i])
		if d != "" {
			f := markdown.Fence(d)
			fmt.Fprintf(&body, "\n%sdiff\n%s\n%s\n", f, d, f)
		}
		if cut > 0 || a.DiffTruncated {
			note := fmt.Sprintf("\n_The diff is shortened here (%d of %d lines shown); the full change is in %s._\n", p.full-cut, p.full, eventsRef(v))
			if a.DiffTruncated && cut == 0 {
				note = fmt.Sprintf("\n_The kernel shortened this diff; the full change is in %s._\n", eventsRef(v))
			}
			body.WriteString(note)
		}
	}
	if rest := n - shown; rest > 0 {
		var ids []string
		for _, a := range v.Approvals[shown:] {
			ids = append(ids, code(a.ID))
		}
		fmt.Fprintf(&body, "\n_…and %d more action%s not shown (the review is limited to %d characters): %s. See %s._\n", rest, plural(rest), MaxChars, cutRunes(strings.Join(ids, ", "), 200), eventsRef(v))
	}
	out := head.String() + body.String() + how
	if chars(out) > MaxChars {
		// Unreachable with bounded parts; kept so that no input can make
		// GitHub reject the review.
		out = head.String() + fmt.Sprintf("\n_The previews are too long for a review: see %s._\n", eventsRef(v)) + how
	}
	return out
}

func howToAnswer(v View) string {
	t := v.trigger()
	return fmt.Sprintf("\n---\n**How to answer** (people with write access only):\n"+
		"- `%[1]s approve <id>` approves one action; `%[1]s approve all` approves all of them.\n"+
		"- `%[1]s deny <id> <reason>` denies one action and tells the agent why.\n"+
		"- Or submit a review on this pull request: **Approve** approves every pending action; **Request changes** denies them, with your review text as the reason.\n", t)
}

// cutLines keeps the whole lines of s (which has total lines) that fit in
// max characters and reports how many lines were dropped. It reads only
// as far as it keeps.
func cutLines(s string, total, max int) (string, int) {
	n, keep, end := 0, 0, 0
	for rest := s; rest != ""; keep++ {
		line, tail, found := strings.Cut(rest, "\n")
		c := chars(line)
		if found {
			c++
		}
		if n+c > max {
			break
		}
		n += c
		end += len(line)
		if found {
			end++
		}
		rest = tail
	}
	return strings.TrimSuffix(s[:end], "\n"), total - keep
}

// charsUpTo counts the characters of s, stopping at limit.
func charsUpTo(s string, limit int) int {
	if len(s) <= limit {
		return chars(s)
	}
	n := 0
	for range s {
		n++
		if n == limit {
			break
		}
	}
	return n
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

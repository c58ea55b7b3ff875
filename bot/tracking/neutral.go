package tracking

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/runtime/untrusted"
)

// Text the bot posts quotes people who may not be maintainers and a model
// that may have read their instructions: the prompt, plan steps, the
// reviewer's feedback, the worker's report, a failure's reason, review
// findings, a triage summary. Neutralize keeps such text from acting on
// GitHub, or on the maintainer reading it, when it is rendered: outside
// code it is shown as written, as text, with none of the Markdown or HTML
// that would link, load, hide or pose as the bot's own structure.
//
//   - an @mention (user or team) would notify someone the run did not come
//     from, and an e-mail address becomes a mailto: link: every "@" before
//     a letter or digit is followed by a zero-width space, so it reads the
//     same and neither notifies nor links;
//   - a character reference (&#64;, &lt;, &commat; …) would let text spell
//     any of this indirectly: its "&" is escaped, so it shows as typed;
//   - raw HTML (an <a href>, an <img>, <details> that folds text away, a
//     comment that hides it, an autolink such as <https://…>): every "<"
//     is escaped, so tags show as text;
//   - a link, an image, a reference link or its definition, a footnote:
//     every "[" is escaped, so none of them forms;
//   - a bare URL (scheme://…, www.…), which GitHub links on its own: a
//     zero-width space goes after the "://" and before the "." of "www.";
//   - a heading (an ATX "#" at the start of a line, also inside a quote or
//     a list item, or a setext "===" or "---" line) would pose as a
//     section of the bot's own: its "#" or first "=" or "-" is escaped;
//   - "#123" would link (and cross-reference) an issue: a zero-width space
//     goes after the "#";
//   - a line starting with the bot's command would read as a command to
//     anyone copying it, and to bots that do not skip the author: the
//     command word is broken with a zero-width space;
//   - zero-width, bidi and other invisible characters would hide or reorder
//     text: each is shown as <U+XXXX>, in code too;
//   - a credential-shaped string (a GitHub or API token, a private key,
//     NAME_TOKEN=value) is masked, in code too.
//
// Text of several lines may still hold blocks (a list, a code block left
// open) that run into what the bot writes after it: Quote keeps them in a
// block quote.
//
// Code spans and fences are left as they are otherwise (GitHub renders
// none of this inside them), as far as they are certainly code: a fence
// only when its opening line starts at the left margin and no indented
// line before it opened a fence (an indented one may belong to a list
// item that ends before the text does, and a fence line at the margin
// may close it), a code span only when its backtick is not escaped and
// no backtick run earlier in the same run of non-blank lines was left
// without its closing run on its line (with every "<" escaped, no HTML
// block is left where Markdown would not be parsed). Such a run may close on a later line (a code span can span
// lines within a paragraph: "`\n`@alice`" is a code span holding a
// newline, then a live @alice), or the paragraph may end first; where the
// pairing depends on block structure, the rest of the lines up to the
// next blank line are neutralized whole, code spans included.
func Neutralize(s, trigger string) string { return neutralize(s, trigger, true) }

// neutralize is Neutralize; without blocks, for text the bot puts in the
// middle of its own line: no line opens a fence, and backticks that open
// no code span in the text are escaped.
func neutralize(s, trigger string, blocks bool) string {
	if s == "" {
		return s
	}
	if trigger == "" {
		trigger = "/agent"
	}
	s = untrusted.Visible(shapes.String(s), false)
	// A lone carriage return ends a line for GitHub and for bot/command.
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
	lines := strings.SplitAfter(s, "\n")
	fence := "" // the open fence's marker
	// doubt: an indented line opened a fence, or may have (in a list item,
	// or at the top level with up to three spaces). Where it ends depends
	// on block structure (a list item may end before its fence closes),
	// so a fence line at the left margin after it may be the closing one,
	// with prose after it: from there on, no line is taken for code.
	doubt := !blocks
	unpaired := false // a backtick run above, in these non-blank lines, has no closing run on its line
	for i, l := range lines {
		t := strings.TrimRight(l, " \t\r\n")
		if fence != "" {
			if closesFence(t, fence) {
				fence = ""
			}
			continue
		}
		if strings.TrimSpace(t) == "" {
			unpaired = false
			continue
		}
		if m := opensFence(t); m != "" && !doubt {
			fence, unpaired = m, false
			continue
		}
		doubt = doubt || opensFence(strings.TrimLeft(t, " \t>*+-.)0123456789")) != ""
		var open bool
		lines[i], open = neutralLine(l, trigger, unpaired, !blocks)
		lines[i] = breakSetext(lines[i])
		unpaired = unpaired || open
	}
	return strings.Join(lines, "")
}

// Quote renders text of any length as a block quote of neutralized text
// (Neutralize): whatever blocks it holds (lists, code blocks, quotes) stay
// inside the quote, which ends at the next line that does not start with
// ">" after a blank line, so the text cannot run into what the bot writes
// after it. Put a blank line after it.
func Quote(s, trigger string) string {
	s = strings.Trim(Neutralize(s, trigger), "\n")
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l == "" {
			lines[i] = ">"
		} else {
			lines[i] = "> " + l
		}
	}
	return strings.Join(lines, "\n")
}

// setextRe is a line that would underline the paragraph above it as a
// heading ("===" or "---", up to three spaces in, trailing spaces), after
// the markers of the quotes and list items it is in.
var setextRe = regexp.MustCompile(`^((?:[ \t]*(?:>|[-+*][ \t]|[0-9]{1,9}[.)][ \t]))*[ \t]*)(=+|-+)[ \t]*\r?\n?$`)

// breakSetext escapes the first "=" or "-" of a setext underline, which
// then reads as text.
func breakSetext(l string) string {
	m := setextRe.FindStringSubmatchIndex(l)
	if m == nil {
		return l
	}
	k := m[4] // start of the run
	ent := "&#61;"
	if l[k] == '-' {
		ent = "&#45;"
	}
	return l[:k] + ent + l[k+1:]
}

// shapes masks credential shapes and NAME_TOKEN=value pairs; literal
// secrets are the sealer's (events are redacted before they are rendered).
var shapes = redact.New(nil)

// opensFence returns the fence marker (``` or ~~~ and longer) when line t
// opens a fenced code block at the left margin, else "".
func opensFence(t string) string {
	if !strings.HasPrefix(t, "```") && !strings.HasPrefix(t, "~~~") {
		return ""
	}
	n := 3
	for n < len(t) && t[n] == t[0] {
		n++
	}
	if t[0] == '`' && strings.Contains(t[n:], "`") {
		return "" // an info string with a backtick: not a fence
	}
	return t[:n]
}

// closesFence reports whether t closes the fence opened by marker: at
// most three spaces, at least as many of the same character, nothing else.
func closesFence(t, marker string) bool {
	u := strings.TrimLeft(t, " ")
	if len(t)-len(u) > 3 || !strings.HasPrefix(u, marker) {
		return false
	}
	return strings.Trim(u, marker[:1]) == ""
}

var htmlBlockRe = regexp.MustCompile(`^ {0,3}<[A-Za-z/!?]`)

// startsHTMLBlock reports whether a line starts an HTML block: Markdown
// (code spans included) is not parsed in it up to the next blank line.
// Neutralize escapes every "<" of prose, so its output starts none; the
// fuzz tests' scanner of prose (fuzz_test.go) still checks.
func startsHTMLBlock(t string) bool { return htmlBlockRe.MatchString(t) }

// zwsp is a zero-width space as an HTML entity (GitHub renders it; it
// breaks the mention and command syntax).
const zwsp = "&#8203;"

var (
	// A character reference (CommonMark: named, decimal or hexadecimal).
	entityRe = regexp.MustCompile(`&(#[0-9]{1,7};|#[xX][0-9A-Fa-f]{1,6};|[A-Za-z][A-Za-z0-9]{0,31};)`)
	// An "@" that may begin a mention or end an e-mail address's local
	// part.
	atRe = regexp.MustCompile(`@([A-Za-z0-9])`)
	// A URL's "://" and a "www." GitHub links without a scheme, also
	// spelt with backslash escapes (":/\/" reads "://").
	schemeRe = regexp.MustCompile(`:(\\?/\\?/)`)
	wwwRe    = regexp.MustCompile(`(?i)(w\\?w\\?w)(\\?\.)`)
	// An issue reference: "#" and a digit. The text's own character
	// references are escaped first, and the bot's entities come after.
	issueRe = regexp.MustCompile(`#([0-9])`)
	// An ATX heading's "#", after the markers of the quotes and list items
	// the line is in (more than a heading matches: a "#" after "1." or "-"
	// without a space; escaping it changes nothing but the source).
	atxRe = regexp.MustCompile(`^[ \t>*+\-0-9.)]*#`)
)

// neutralLine neutralizes one line outside fences, leaving its code spans
// unless whole is set (a line in an HTML block, or after an unpaired
// backtick run). unpaired reports what makes the next lines' code spans
// doubtful too: a backtick run on the line without its closing run there,
// or a link destination or HTML tag left open at its end.
//
// A backtick after an open link destination ("[a](" with no closing ")"
// yet) or an open HTML tag or autolink ("<" with no ">" yet) may belong to
// it, not to a code span: in "[](`)@0`" the link's destination is "`"
// and "@0" is prose (found by FuzzNeutralize's goldmark oracle). From
// such a backtick on, the line is neutralized whole.
func neutralLine(l, trigger string, whole, inline bool) (out string, unpaired bool) {
	// Inline, the backticks that open no code span here are escaped: after
	// the text, the bot's line goes on, and its code spans would pair
	// with them.
	lit := func(s string) string { return s }
	if inline {
		lit = escapeTicks
	}
	if whole {
		return lit(neutralText(l, trigger, true)), false
	}
	full, pos := l, 0
	var b strings.Builder
	first := true
	for len(l) > 0 {
		i := strings.IndexByte(l, '`')
		for i > 0 && escapedAt(l, i) { // \` is a literal backtick
			j := strings.IndexByte(l[i+1:], '`')
			if j < 0 {
				i = -1
				break
			}
			i += 1 + j
		}
		if i < 0 {
			b.WriteString(neutralText(l, trigger, first))
			break
		}
		if openConstruct(full[:pos+i]) {
			b.WriteString(lit(neutralText(l, trigger, first)))
			return b.String(), true
		}
		b.WriteString(neutralText(l[:i], trigger, first))
		first = false
		// A code span runs to the next backtick run of the same length.
		n := 1
		for i+n < len(l) && l[i+n] == '`' {
			n++
		}
		ticks := l[i : i+n]
		rest := l[i+n:]
		j := closingTicks(rest, n)
		if j < 0 { // not a code span on this line: literal backticks here
			b.WriteString(lit(ticks))
			l, pos = rest, pos+i+n
			unpaired = true
			continue
		}
		b.WriteString(ticks + rest[:j+n])
		l, pos = rest[j+n:], pos+i+n+j+n
	}
	return b.String(), unpaired || openConstruct(full)
}

// openConstruct reports whether s (a line up to a backtick) leaves a link
// destination or an HTML tag or autolink open, so that what follows may
// belong to it: a "](" after which the parentheses never close (a
// backslash-escaped one does not count), or a "<" with no ">" after it or
// with a quote after it (an attribute value may hold a ">").
func openConstruct(s string) bool {
	for k := strings.Index(s, "]("); k >= 0; {
		depth, closed := 1, false
		for i := k + 2; i < len(s) && !closed; i++ {
			switch {
			case s[i] == '\\':
				i++
			case s[i] == '(':
				depth++
			case s[i] == ')':
				depth--
				closed = depth == 0
			}
		}
		if !closed {
			return true
		}
		next := strings.Index(s[k+2:], "](")
		if next < 0 {
			break
		}
		k += 2 + next
	}
	for k := strings.IndexByte(s, '<'); k >= 0; {
		rest := s[k+1:]
		gt := strings.IndexByte(rest, '>')
		if gt < 0 || strings.ContainsAny(rest, `"'`) {
			return true
		}
		next := strings.IndexByte(rest, '<')
		if next < 0 {
			break
		}
		k += 1 + next
	}
	return false
}

// escapeTicks escapes every backtick of s that is not escaped already.
func escapeTicks(s string) string {
	if !strings.Contains(s, "`") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '`' && !escapedAt(s, i) {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// escapedAt reports whether s[i] follows an odd number of backslashes.
func escapedAt(s string, i int) bool {
	k := 0
	for i-1-k >= 0 && s[i-1-k] == '\\' {
		k++
	}
	return k%2 == 1
}

// closingTicks is the index in s of a run of exactly n backticks, or -1.
func closingTicks(s string, n int) int {
	for i := 0; i < len(s); {
		if s[i] != '`' {
			i++
			continue
		}
		k := i
		for k < len(s) && s[k] == '`' {
			k++
		}
		if k-i == n {
			return i
		}
		i = k
	}
	return -1
}

func neutralText(s, trigger string, lineStart bool) string {
	// The text's own character references first: every entity written
	// below is the bot's.
	s = escapeBackslashes(s)
	s = entityRe.ReplaceAllString(s, "&amp;$1")
	s = issueRe.ReplaceAllString(s, "#"+zwsp+"${1}")
	if lineStart {
		if m := atxRe.FindStringIndex(s); m != nil {
			s = s[:m[1]-1] + "&#35;" + s[m[1]:]
		}
	}
	s = atRe.ReplaceAllString(s, "@"+zwsp+"${1}")
	s = schemeRe.ReplaceAllString(s, ":"+zwsp+"${1}")
	s = wwwRe.ReplaceAllString(s, "${1}"+zwsp+"${2}")
	s = strings.ReplaceAll(s, "<", "&lt;")
	s = strings.ReplaceAll(s, "[", "&#91;")
	if lineStart {
		// As bot/command reads a line: any Unicode space (a vertical tab
		// too) before the command word, compared case-insensitively.
		t := strings.TrimLeftFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == '>' })
		if len(t) >= len(trigger) && strings.EqualFold(t[:len(trigger)], trigger) || strings.HasPrefix(strings.ToLower(t), strings.ToLower(trigger)) {
			_, n := utf8.DecodeRuneInString(t)
			k := len(s) - len(t) + n
			s = s[:k] + zwsp + s[k:]
		}
	}
	return s
}

// escapeBackslashes escapes the backslash before each "&", "<" and "["
// (an odd run of them ends in an escape): the bot writes these characters
// as character references, whose "&" the backslash would escape, showing
// the reference as typed ("\\&#91;" reads "&#91;", and "#91" is an issue
// reference).
func escapeBackslashes(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	run := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if run%2 == 1 && (c == '&' || c == '<' || c == '[') {
			b.WriteByte('\\')
		}
		if c == '\\' {
			run++
		} else {
			run = 0
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Plain is text for a Markdown line: one line, cut to max characters,
// neutralized (Neutralize: it escapes "<", so an HTML comment too). The
// bot puts it after text of its own, so it opens no code fence.
func Plain(s string, max int, trigger string) string {
	return neutralize(cutRunes(flat(s), max), trigger, false)
}

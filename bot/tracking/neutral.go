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
// reviewer's feedback, the worker's report, a failure's reason. Neutralize
// keeps such text from acting on GitHub when it is rendered:
//
//   - an @mention (user or team, also spelt with an entity such as
//     &#64;) would notify someone the run did not come from: "@" is
//     followed by a zero-width space, so it reads the same and notifies no
//     one;
//   - an image (Markdown or HTML) would be fetched by every reader's browser
//     from wherever it points, carrying whatever the URL encodes: images
//     become plain text;
//   - a line starting with the bot's command would read as a command to
//     anyone copying it, and to bots that do not skip the author: the
//     command word is broken the same way;
//   - an HTML comment would hide text from the reader: its opening is
//     escaped, so it shows;
//   - zero-width, bidi and other invisible characters would hide or reorder
//     text: each is shown as <U+XXXX>, in code too;
//   - a credential-shaped string (a GitHub or API token, a private key,
//     NAME_TOKEN=value) is masked, in code too.
//
// Code spans and fences are left as they are otherwise (GitHub renders
// neither mentions nor images inside them), as far as they are certainly
// code: a fence only when its opening line starts at the left margin (an
// indented one may belong to a list item that ends before the text does),
// a code span only when its backtick is not escaped, it is not inside
// an HTML block, where Markdown is not parsed, and no backtick run earlier
// in the same run of non-blank lines was left without its closing run on
// its line. Such a run may close on a later line (a code span can span
// lines within a paragraph: "`\n`@alice`" is a code span holding a
// newline, then a live @alice), or the paragraph may end first; where the
// pairing depends on block structure, the rest of the lines up to the
// next blank line are neutralized whole, code spans included.
func Neutralize(s, trigger string) string {
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
	html := false
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
			html, unpaired = false, false
			continue
		}
		if !html {
			if m := opensFence(t); m != "" {
				fence, unpaired = m, false
				continue
			}
			html = startsHTMLBlock(t)
		}
		var open bool
		lines[i], open = neutralLine(l, trigger, html || unpaired)
		unpaired = unpaired || open
	}
	return strings.Join(lines, "")
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
func startsHTMLBlock(t string) bool { return htmlBlockRe.MatchString(t) }

// zwsp is a zero-width space as an HTML entity (GitHub renders it; it
// breaks the mention and command syntax).
const zwsp = "&#8203;"

var (
	// An "@" (or an entity GitHub renders as one) after a character that
	// does not make it part of a word, an e-mail address or a path. An
	// underscore does not count: it may be emphasis ("_@alice_" is a
	// mention in italics; found by FuzzNeutralize's goldmark oracle).
	mentionRe = regexp.MustCompile(`(^|[^A-Za-z0-9/])(@|&#0*64;|&#[xX]0*40;|&commat;)([A-Za-z0-9][A-Za-z0-9-]*)`)
	// An "@" after an e-mail address: GitHub links "a@b.c" and the "@d"
	// after it starts a text node of its own, where it is a mention
	// (found by FuzzNeutralize's goldmark oracle: "0@0.0@0").
	afterAddrRe = regexp.MustCompile(`(@[A-Za-z0-9._+-]*)(@|&#0*64;|&#[xX]0*40;|&commat;)([A-Za-z0-9])`)
	htmlImgRe   = regexp.MustCompile(`(?i)<\s*(img|picture|source|video|image|svg|audio|iframe|object|embed|input)\b`)
	htmlOpenRe  = regexp.MustCompile(`<!--`)
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
func neutralLine(l, trigger string, whole bool) (out string, unpaired bool) {
	if whole {
		return neutralText(l, trigger, true), false
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
			b.WriteString(neutralText(l, trigger, first))
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
			b.WriteString(ticks)
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
	// Replacing consumes the character before each "@", so "@a-@b" needs
	// a second pass for "@b"; a neutralized mention never matches again.
	for t := ""; t != s; {
		t = s
		s = mentionRe.ReplaceAllString(s, "${1}${2}"+zwsp+"${3}")
		s = afterAddrRe.ReplaceAllString(s, "${1}${2}"+zwsp+"${3}")
	}
	s = strings.ReplaceAll(s, "![", "!"+zwsp+"[")
	s = htmlImgRe.ReplaceAllStringFunc(s, func(m string) string { return "&lt;" + m[1:] })
	s = htmlOpenRe.ReplaceAllString(s, "&lt;!--")
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

// Plain is text for a Markdown line: one line, cut to max characters,
// neutralized.
func Plain(s string, max int, trigger string) string { return Neutralize(oneLine(s, max), trigger) }

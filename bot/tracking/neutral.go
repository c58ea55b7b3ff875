package tracking

import (
	"regexp"
	"strings"
)

// Text the bot posts quotes people who may not be maintainers and a model
// that may have read their instructions: the prompt, plan steps, the
// reviewer's feedback, the worker's report, a failure's reason. Neutralize
// keeps such text from acting on GitHub when it is rendered:
//
//   - an @mention (user or team) would notify someone the run did not come
//     from: "@" is followed by a zero-width space, so it reads the same and
//     notifies no one;
//   - an image (Markdown or HTML) would be fetched by every reader's browser
//     from wherever it points, carrying whatever the URL encodes: images
//     become plain text;
//   - a line starting with the bot's command would read as a command to
//     anyone copying it, and to bots that do not skip the author: the
//     command word is broken the same way.
//
// Code spans and fences are left as they are: GitHub renders neither
// mentions nor images inside them.
func Neutralize(s, trigger string) string {
	if s == "" {
		return s
	}
	if trigger == "" {
		trigger = "/agent"
	}
	lines := strings.SplitAfter(s, "\n")
	fenceMark := ""
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if fenceMark != "" {
			if strings.HasPrefix(t, fenceMark) {
				fenceMark = ""
			}
			continue
		}
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fenceMark = t[:3]
			for j := 3; j < len(t) && t[j] == t[0]; j++ {
				fenceMark += t[:1]
			}
			continue
		}
		lines[i] = neutralLine(l, trigger)
	}
	return strings.Join(lines, "")
}

// zwsp is a zero-width space as an HTML entity (GitHub renders it; it
// breaks the mention and command syntax).
const zwsp = "&#8203;"

var (
	mentionRe = regexp.MustCompile(`(^|[^A-Za-z0-9_/` + "`" + `])@([A-Za-z0-9][A-Za-z0-9-]*)`)
	htmlImgRe = regexp.MustCompile(`(?i)<\s*(img|picture|source|video|image|svg)\b`)
)

// neutralLine neutralizes one line outside fences, leaving code spans.
func neutralLine(l, trigger string) string {
	var b strings.Builder
	first := true
	for len(l) > 0 {
		i := strings.IndexByte(l, '`')
		if i < 0 {
			b.WriteString(neutralText(l, trigger, first))
			break
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
		j := strings.Index(rest, ticks)
		if j < 0 { // not a code span: literal backticks
			b.WriteString(ticks)
			l = rest
			continue
		}
		b.WriteString(ticks + rest[:j+n])
		l = rest[j+n:]
	}
	return b.String()
}

func neutralText(s, trigger string, lineStart bool) string {
	s = mentionRe.ReplaceAllString(s, "${1}@"+zwsp+"${2}")
	s = strings.ReplaceAll(s, "![", "!"+zwsp+"[")
	s = htmlImgRe.ReplaceAllStringFunc(s, func(m string) string { return "&lt;" + m[1:] })
	if lineStart {
		t := strings.TrimLeft(s, " \t>")
		if strings.HasPrefix(strings.ToLower(t), strings.ToLower(trigger)) {
			k := len(s) - len(t) + 1
			s = s[:k] + zwsp + s[k:]
		}
	}
	return s
}

// Plain is text for a Markdown line: one line, cut to max characters,
// neutralized.
func Plain(s string, max int, trigger string) string { return Neutralize(oneLine(s, max), trigger) }

// Package gfmcheck is the test oracle for what the bot posts on GitHub:
// it parses Markdown as GitHub Flavored Markdown with goldmark, a
// CommonMark parser no code here wrote, and lists everything in it that is
// more than text — a link of any kind, an image, raw HTML, a heading — and
// what GitHub would act on in its rendered text: a mention or e-mail
// address, an issue reference, a bare URL. bot/tracking's Neutralize and
// Quote must leave none of these in what a model or a non-maintainer
// wrote; the tests of the renderers compare a rendering of hostile text
// with one of plain text (Extra).
//
// It is imported by tests only.
package gfmcheck

import (
	"fmt"
	"html"
	"regexp"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"
)

// gfm's autolinks follow the GFM spec's extended autolinks (cmark-gfm,
// what GitHub runs): after http://, https:// or www. and a domain, the
// link runs to the next space or "<", so "http://a.b@c" is one link.
// goldmark's own URL pattern ends the link at the domain and would read
// "@c" as text.
var gfm = goldmark.New(goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.TaskList,
	extension.NewLinkify(
		extension.WithLinkifyURLRegexp(regexp.MustCompile(`^(?:https?|ftp)://[-a-zA-Z0-9_]+(?:\.[-a-zA-Z0-9_]+)+[^\s<]*`)),
		extension.WithLinkifyWWWRegexp(regexp.MustCompile(`^www\.[-a-zA-Z0-9_]+(?:\.[-a-zA-Z0-9_]+)+[^\s<]*`)),
	)))

// textRef is a backslash escape of ASCII punctuation or a character
// reference (CommonMark), as they appear in a text node's source.
var textRef = regexp.MustCompile("\\\\[!-/:-@[-`{-~]|&(?:#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|[A-Za-z][A-Za-z0-9]{0,31});")

// renderedText is a text node's source as the rendered text node has it:
// escapes resolved ("\\@" is "@"), character references decoded ("&#64;"
// is "@"), left to right, so "\\&#64;" stays "&#64;".
func renderedText(src string) string {
	return textRef.ReplaceAllStringFunc(src, func(m string) string {
		if m[0] == '\\' {
			return m[1:]
		}
		return html.UnescapeString(m)
	})
}

// What GitHub finds in rendered text on its own: a mention or an e-mail
// address ("@" before a letter or digit), an issue reference ("#" before a
// digit), a URL it links without brackets.
var (
	LiveAt     = regexp.MustCompile(`@[A-Za-z0-9]`)
	liveIssue  = regexp.MustCompile(`#[0-9]`)
	liveURL    = regexp.MustCompile(`(?i)://|www\.`)
	liveInText = []*regexp.Regexp{LiveAt, liveIssue, liveURL}
)

// Live lists, in document order, what GitHub would act on, or show as
// something other than text, in the Markdown s: each link of any kind
// (inline, reference, autolink, bare URL, e-mail address) with its
// destination, image, piece of raw HTML (inline or a block: a tag, a
// comment, <details>), heading with its level, and in rendered text (code
// aside) each mention, issue reference or URL.
func Live(s string) []string {
	src := []byte(s)
	doc := gfm.Parser().Parse(text.NewReader(src))
	var found []string
	var run strings.Builder // the current text node's text
	flush := func() {
		t := run.String()
		for _, re := range liveInText {
			for _, m := range re.FindAllString(t, -1) {
				found = append(found, fmt.Sprintf("%q in text", m))
			}
		}
		run.Reset()
	}
	raw := func(lines *text.Segments) string {
		var b strings.Builder
		for i := 0; i < lines.Len(); i++ {
			seg := lines.At(i)
			b.Write(seg.Value(src))
		}
		return b.String()
	}
	// GitHub finds mentions in each rendered text node: text runs between
	// elements, so every element's start and end ends a run (the "0" of
	// "@*0*" is in an <em>: no mention). Consecutive Text nodes are one
	// text node in the HTML and one run here.
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		switch n := n.(type) {
		case *ast.Text:
			if entering {
				run.WriteString(renderedText(string(n.Segment.Value(src))))
				if n.SoftLineBreak() || n.HardLineBreak() {
					run.WriteByte('\n')
				}
			}
			return ast.WalkContinue, nil
		case *ast.String:
			if entering {
				run.Write(n.Value)
			}
			return ast.WalkContinue, nil
		}
		flush()
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.CodeSpan, *ast.FencedCodeBlock, *ast.CodeBlock:
			return ast.WalkSkipChildren, nil
		case *ast.AutoLink:
			found = append(found, "autolink "+string(n.URL(src)))
		case *ast.Link:
			found = append(found, "link "+string(n.Destination))
		case *ast.Image:
			found = append(found, "image "+string(n.Destination))
		case *ast.Heading:
			// Its level only: the bot's own headings quote model text in
			// code spans, which Extra must not count as a difference.
			found = append(found, fmt.Sprintf("heading (level %d)", n.Level))
		case *ast.RawHTML:
			found = append(found, "inline HTML "+raw(n.Segments))
		case *ast.HTMLBlock:
			b := raw(n.Lines())
			if n.HasClosure() {
				b += string(n.ClosureLine.Value(src))
			}
			found = append(found, "HTML block "+b)
		}
		return ast.WalkContinue, nil
	})
	flush()
	return found
}

// First is the first of Live(s), "" when there is none.
func First(s string) string {
	if l := Live(s); len(l) > 0 {
		return l[0]
	}
	return ""
}

// Extra lists what Live finds in got beyond what it finds in base, each
// as often as it occurs more: rendering hostile text where base rendered
// plain text must add nothing.
func Extra(got, base string) []string {
	have := map[string]int{}
	for _, l := range Live(base) {
		have[l]++
	}
	var extra []string
	for _, l := range Live(got) {
		if have[l] > 0 {
			have[l]--
			continue
		}
		extra = append(extra, l)
	}
	return extra
}

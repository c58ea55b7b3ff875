package tracking

import (
	"regexp"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"
)

// gfm parses Markdown as GitHub Flavored Markdown with goldmark, a
// CommonMark parser no code here wrote: the independent oracle for
// Neutralize, whose own fence, code-span and HTML-block scanner prose
// (fuzz_test.go) shares.
//
// Its autolinks follow the GFM spec's extended autolinks (cmark-gfm, what
// GitHub runs): after http://, https:// or www. and a domain, the link
// runs to the next space or "<", so "http://a.b@c" is one link. goldmark's
// own URL pattern ends the link at the domain and would read "@c" as text.
var gfm = goldmark.New(goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.TaskList,
	extension.NewLinkify(
		extension.WithLinkifyURLRegexp(regexp.MustCompile(`^(?:https?|ftp)://[-a-zA-Z0-9_]+(?:\.[-a-zA-Z0-9_]+)+[^\s<]*`)),
		extension.WithLinkifyWWWRegexp(regexp.MustCompile(`^www\.[-a-zA-Z0-9_]+(?:\.[-a-zA-Z0-9_]+)+[^\s<]*`)),
	)))

// escapedPunct is a backslash escape of ASCII punctuation (CommonMark).
var escapedPunct = regexp.MustCompile("\\\\([!-/:-@[-`{-~])")

// liveInGFM returns what GitHub would act on in s as goldmark reads it: a
// mention in rendered text (outside code), an image, or raw HTML that
// loads something or hides text; "" when there is none.
func liveInGFM(s string) string {
	src := []byte(s)
	doc := gfm.Parser().Parse(text.NewReader(src))
	var found string
	var run strings.Builder // the current text node's text
	flush := func() {
		if found == "" {
			if m := liveMention.FindString(run.String()); m != "" {
				found = "mention " + m + " in " + run.String()
			}
		}
		run.Reset()
	}
	// GitHub finds mentions in each rendered text node: text runs between
	// elements, so every element's start and end ends a run (the "0" of
	// "@*0*" is in an <em>: no mention). Consecutive Text nodes are one
	// text node in the HTML and one run here.
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if found != "" {
			return ast.WalkStop, nil
		}
		switch n := n.(type) {
		case *ast.Text:
			if entering {
				// The raw text with CommonMark's backslash escapes resolved,
				// as the rendered text node has it ("\\@" is "@").
				run.WriteString(escapedPunct.ReplaceAllString(string(n.Segment.Value(src)), "$1"))
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
		switch n := n.(type) {
		case *ast.CodeSpan, *ast.FencedCodeBlock, *ast.CodeBlock, *ast.AutoLink:
			return ast.WalkSkipChildren, nil
		case *ast.Image:
			if entering {
				found = "image " + string(n.Destination)
			}
		case *ast.RawHTML:
			if entering {
				var b strings.Builder
				for i := 0; i < n.Segments.Len(); i++ {
					seg := n.Segments.At(i)
					b.Write(seg.Value(src))
				}
				if m := liveImage.FindString(b.String()); m != "" {
					found = "inline HTML " + b.String()
				}
			}
		case *ast.HTMLBlock:
			if entering {
				var b strings.Builder
				for i := 0; i < n.Lines().Len(); i++ {
					seg := n.Lines().At(i)
					b.Write(seg.Value(src))
				}
				if n.HasClosure() {
					b.Write(n.ClosureLine.Value(src))
				}
				if m := liveImage.FindString(b.String()); m != "" {
					found = "HTML block " + b.String()
				} else if m := liveMention.FindString(b.String()); m != "" {
					found = "mention " + m + " in the HTML block " + b.String()
				}
			}
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	flush()
	return found
}

func TestLiveInGFM(t *testing.T) {
	for in, live := range map[string]bool{
		"ask @alice":                         true,
		"mail dev@example.com":               false,
		"`@alice` in code":                   false,
		"```\n@alice\n```":                   false,
		"    @alice (indented code)":         false,
		"see ![x](https://evil.example/p)":   true,
		"<img src=x>":                        true,
		"<div>\n@alice\n</div>":              true,
		"text <!-- hidden --> text":          true,
		"<!--\nhidden\n-->":                  true,
		"| a | b |\n|---|---|\n| @bob | c |": true,
		"&#64;alice":                         true,
		"plain words":                        false,
		"@*0*":                               false, // "0" is in an <em>: the "@" ends its text node
		"*x*@alice":                          true,
		"_@alice_":                           true,
		"dev\\@example.com":                  false,
		"0@0.0@0":                            true,  // an e-mail link, then "@0" in a text node of its own
		"http://0.a@0":                       false, // one link (GFM extended autolink)
		"www.example.com/@alice":             false,
	} {
		if got := liveInGFM(in); (got != "") != live {
			t.Errorf("liveInGFM(%q) = %q, want live=%v", in, got, live)
		}
	}
}

// Package markdown holds the Markdown helpers that bot and runtime share:
// choosing a code fence for text that is shown as code, and reading
// Markdown structure (fenced code blocks, where a cut leaves no block
// open) with goldmark, the way GitHub renders a comment (CommonMark).
// Code that produces Markdown uses Fence and CodeBlock; code that reads
// it uses FencedBlocks and Cut, never a line scanner of its own.
package markdown

import (
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
)

// Fence returns a run of backticks that can fence s: at least three, and
// longer than any run of backticks in s, so that nothing in s closes the
// block early (CommonMark: a closing fence is at least as long as the
// opening one).
func Fence(s string) string {
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

// CodeBlock renders s as a fenced code block with the info string info
// ("" for none): s is shown as it is, whatever Markdown it holds. A
// trailing newline of s is not doubled.
func CodeBlock(info, s string) string {
	f := Fence(s + info)
	return f + info + "\n" + strings.TrimSuffix(s, "\n") + "\n" + f
}

// Block is a fenced code block of a document.
type Block struct {
	// Info is the info string ("json", "go", "" ...), trimmed.
	Info string
	// Content is the block's text, one "\n" after each line.
	Content string
	// from and to bound the source lines the block may occupy: from its
	// opening fence up to where the next block starts.
	from, to int
}

// FencedBlocks returns the fenced code blocks of src in document order,
// nested ones (in lists and quotes) included.
func FencedBlocks(src string) []Block {
	b := []byte(src)
	root := goldmark.DefaultParser().Parse(text.NewReader(b))
	var out []Block
	_ = ast.Walk(root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		fb, ok := n.(*ast.FencedCodeBlock)
		if !entering || !ok {
			return ast.WalkContinue, nil
		}
		var blk Block
		if fb.Info != nil {
			blk.Info = strings.TrimSpace(string(fb.Info.Segment.Value(b)))
		}
		var content strings.Builder
		lines := fb.Lines()
		for i := 0; i < lines.Len(); i++ {
			seg := lines.At(i)
			content.WriteString(strings.Repeat(" ", seg.Padding))
			content.Write(seg.Value(b))
		}
		blk.Content = content.String()
		// The opening fence is the line of the info string, or the line
		// before the first line of content, or (an empty block without
		// info) after the previous block.
		switch {
		case fb.Info != nil:
			blk.from = lineStart(src, fb.Info.Segment.Start)
		case lines.Len() > 0:
			blk.from = lineStart(src, max(lineStart(src, lines.At(0).Start)-1, 0))
		default:
			blk.from = lastOffset(src, before(fb))
		}
		blk.to = len(src)
		if next := after(fb); next != nil {
			if off := firstOffset(next); off >= 0 {
				blk.to = lineStart(src, off)
			}
		}
		out = append(out, blk)
		return ast.WalkSkipChildren, nil
	})
	return out
}

// before and after are the blocks next to n in document order, at n's
// level or an outer one.
func before(n ast.Node) ast.Node {
	for ; n != nil; n = n.Parent() {
		if p := n.PreviousSibling(); p != nil {
			return p
		}
	}
	return nil
}

func after(n ast.Node) ast.Node {
	for ; n != nil; n = n.Parent() {
		if p := n.NextSibling(); p != nil {
			return p
		}
	}
	return nil
}

// firstOffset is where the first line of a block's source starts (-1 if
// it has no lines).
func firstOffset(n ast.Node) int {
	for ; n != nil; n = n.FirstChild() {
		if fb, ok := n.(*ast.FencedCodeBlock); ok && fb.Info != nil {
			return fb.Info.Segment.Start
		}
		if n.Type() == ast.TypeBlock && n.Lines().Len() > 0 {
			return n.Lines().At(0).Start
		}
	}
	return -1
}

// lastOffset is the start of the line after a block's last line (0 for
// none).
func lastOffset(src string, n ast.Node) int {
	for ; n != nil; n = n.LastChild() {
		if n.Type() == ast.TypeBlock && n.Lines().Len() > 0 {
			return min(lineEnd(src, n.Lines().At(n.Lines().Len()-1).Stop)+1, len(src))
		}
	}
	return 0
}

// Cut returns the longest prefix of s made of whole lines, at most max
// characters (runes) long, that does not end inside a fenced code block:
// what a long Markdown text can be shortened to without leaving a fence
// open (which would turn everything after it into code). cut reports
// whether s had to be shortened.
func Cut(s string, max int) (prefix string, cut bool) {
	if utf8.RuneCountInString(s) <= max {
		return s, false
	}
	blocks := FencedBlocks(s)
	end, n := 0, 0
	for off := 0; off < len(s); {
		next := strings.IndexByte(s[off:], '\n')
		if next < 0 {
			next = len(s)
		} else {
			next += off + 1
		}
		n += utf8.RuneCountInString(s[off:next])
		if n > max {
			break
		}
		if !inside(blocks, next) {
			end = next
		}
		off = next
	}
	return s[:end], true
}

// inside reports whether a cut at off, the start of a line, would fall
// inside a block: after its opening fence and before the next block. The
// blank lines between a closed block and the next are lost as cut points,
// which only shortens the prefix a little.
func inside(blocks []Block, off int) bool {
	for _, b := range blocks {
		if off > b.from && off < b.to {
			return true
		}
	}
	return false
}

func lineStart(s string, off int) int {
	return strings.LastIndexByte(s[:off], '\n') + 1
}

func lineEnd(s string, off int) int {
	if i := strings.IndexByte(s[off:], '\n'); i >= 0 {
		return off + i
	}
	return len(s)
}

package patch

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// FuzzParseApply: any diff against any file either parses and applies or
// fails with a typed error; it never panics, and a successful apply keeps
// every added line of every hunk.
func FuzzParseApply(f *testing.F) {
	for _, c := range corpus {
		for _, content := range c.files {
			f.Add(c.diff, content)
			break
		}
		if len(c.files) == 0 {
			f.Add(c.diff, "")
		}
	}
	f.Fuzz(func(t *testing.T, diff, old string) {
		fps, err := Parse(diff)
		if err != nil {
			if !errors.As(err, new(*ParseError)) {
				t.Fatalf("Parse: untyped error %T: %v", err, err)
			}
			return
		}
		for i := range fps {
			fp := &fps[i]
			var src []byte
			if fp.Op != Create {
				src = []byte(old)
			}
			out, err := fp.Apply(src)
			if err != nil {
				if !errors.As(err, new(*ApplyError)) {
					t.Fatalf("Apply: untyped error %T: %v", err, err)
				}
				continue
			}
			if fp.Op == Delete {
				continue
			}
			have := map[string]bool{}
			for _, l := range splitLines(out) {
				have[l.text] = true
			}
			for _, h := range fp.Hunks {
				for _, l := range h.Lines {
					if l.Kind == '+' && !have[l.Text] {
						t.Fatalf("applied %q to %q: added line %q missing from %q", diff, old, l.Text, out)
					}
				}
			}
		}
	})
}

// FuzzApplyRoundTrip builds the unified diff of one edit (delete del lines
// at start, insert ins) with three lines of context, as git writes it, and
// checks that Apply reproduces the edited file exactly.
func FuzzApplyRoundTrip(f *testing.F) {
	f.Add("a\nb\nc\nd\ne\nf\ng\n", uint8(3), uint8(1), "D\nD2")
	f.Add("", uint8(0), uint8(0), "first")
	f.Add("x\n", uint8(0), uint8(1), "")
	f.Add("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", uint8(9), uint8(1), "ten")
	f.Add("same\nsame\nsame\nsame\nsame\nsame\nsame\nsame\n", uint8(5), uint8(0), "same")
	f.Fuzz(func(t *testing.T, old string, start, del uint8, ins string) {
		clean := func(s string) string { return strings.NewReplacer("\r", "", "\x00", "").Replace(s) }
		old, ins = clean(old), clean(ins)
		var oldLines []string
		if old != "" {
			oldLines = strings.Split(strings.TrimSuffix(old, "\n"), "\n")
			old = strings.Join(oldLines, "\n") + "\n"
		}
		var insLines []string
		if ins != "" {
			insLines = strings.Split(ins, "\n")
		}
		n := len(oldLines)
		i := int(start) % (n + 1)
		d := int(del) % (n - i + 1)
		want := append(append(append([]string{}, oldLines[:i]...), insLines...), oldLines[i+d:]...)
		if d == 0 && len(insLines) == 0 {
			return // no change: git writes no hunk
		}
		lo, hi := max(0, i-3), min(n, i+d+3)
		var b strings.Builder
		b.WriteString("--- a/f.txt\n+++ b/f.txt\n")
		oldCount, newCount := hi-lo, hi-lo-d+len(insLines)
		oldStart, newStart := lo+1, lo+1
		if oldCount == 0 {
			oldStart = lo
		}
		if newCount == 0 {
			newStart = lo
		}
		fmt.Fprintf(&b, "@@ -%d,%d +%d,%d @@\n", oldStart, oldCount, newStart, newCount)
		for _, l := range oldLines[lo:i] {
			b.WriteString(" " + l + "\n")
		}
		for _, l := range oldLines[i : i+d] {
			b.WriteString("-" + l + "\n")
		}
		for _, l := range insLines {
			b.WriteString("+" + l + "\n")
		}
		for _, l := range oldLines[i+d : hi] {
			b.WriteString(" " + l + "\n")
		}
		fps, err := Parse(b.String())
		if err != nil {
			t.Fatalf("Parse of a well-formed diff:\n%s\n%v", b.String(), err)
		}
		if len(fps) != 1 {
			t.Fatalf("%d files, want 1", len(fps))
		}
		got, err := fps[0].Apply([]byte(old))
		if err != nil {
			t.Fatalf("Apply of\n%s\nto %q: %v", b.String(), old, err)
		}
		wantText := ""
		if len(want) > 0 {
			wantText = strings.Join(want, "\n") + "\n"
		}
		if string(got) != wantText {
			t.Fatalf("Apply of\n%s\nto %q = %q, want %q", b.String(), old, got, wantText)
		}
	})
}

package markdown

import (
	"strings"
	"testing"
)

func TestFence(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", "```"},
		{"plain", "```"},
		{"a `span` here", "```"},
		{"has ``` inside", "````"},
		{"````` five and ``` three", "``````"},
		{"ends with ``", "```"},
	} {
		if got := Fence(tt.in); got != tt.want {
			t.Errorf("Fence(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestCodeBlockRoundTrip: whatever the text holds, goldmark reads the
// block back as one code block with the same content.
func TestCodeBlockRoundTrip(t *testing.T) {
	for _, s := range []string{"x := 1\n", "```\nnot the end\n```", "````go\n````", "~~~\n", "a\n\n\nb", "`", "> quote\n- list"} {
		got := FencedBlocks(CodeBlock("text", s) + "\n\nafter")
		if len(got) != 1 || got[0].Info != "text" || got[0].Content != strings.TrimSuffix(s, "\n")+"\n" {
			t.Errorf("CodeBlock(%q) reads back as %+v", s, got)
		}
	}
}

func TestFencedBlocks(t *testing.T) {
	src := "intro ```not a fence```\n\n```json\n{\"a\": 1}\n```\n\n- item\n\n  ~~~\n  nested\n  ~~~\n\n> ```\n> quoted\n\n    ```\n    indented code, not a fence\n"
	got := FencedBlocks(src)
	want := []Block{{Info: "json", Content: "{\"a\": 1}\n"}, {Content: "nested\n"}, {Content: "quoted\n"}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i].Info != want[i].Info || got[i].Content != want[i].Content {
			t.Errorf("block %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestCut(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want string
		cut  bool
	}{
		{"fits", "a\nb\n", 10, "a\nb\n", false},
		{"line boundary", "aaa\nbbb\nccc\n", 9, "aaa\nbbb\n", true},
		{"never inside a fence", "intro\n```\ncode\ncode\n```\nafter\n", 20, "intro\n", true},
		{"whole fence kept", "intro\n```\ncode\n```\nafter line\n", 20, "intro\n```\ncode\n```\n", true},
		{"longer fence not closed by shorter", "intro\n````\n```\ncode\n````\nafter line\n", 20, "intro\n", true},
		{"tilde fence", "intro\n~~~\ncode\ncode\n~~~\nafter\n", 20, "intro\n", true},
		{"unclosed fence", "intro\n```\ncode\ncode\ncode\n", 18, "intro\n", true},
		{"fence in a list", "- a\n\n  ```\n  code\n  code\n  ```\n- b\n", 24, "- a\n\n", true},
		{"runes, not bytes", "ééé\nééé\nééé\n", 8, "ééé\nééé\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := Cut(tt.in, tt.max)
			if got != tt.want || cut != tt.cut {
				t.Errorf("Cut(%q, %d) = %q, %v; want %q, %v", tt.in, tt.max, got, cut, tt.want, tt.cut)
			}
			for _, b := range FencedBlocks(got) {
				if !strings.Contains(tt.in, b.Content) {
					t.Errorf("the cut %q changes a block", got)
				}
			}
		})
	}
}

func FuzzCut(f *testing.F) {
	f.Add("intro\n```\ncode\n```\nafter\n", 10)
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > 1<<16 {
			return
		}
		got, _ := Cut(s, max)
		if !strings.HasPrefix(s, got) {
			t.Fatalf("Cut(%q) = %q is not a prefix", s, got)
		}
	})
}

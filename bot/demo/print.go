package demo

import (
	"fmt"
	"io"
	"strings"
)

// printer lays the walkthrough out for a terminal: numbered steps, and
// Markdown bodies framed so that they read as what GitHub would render.
type printer struct {
	w io.Writer
}

func (p *printer) title(s string) { fmt.Fprintf(p.w, "\n%s\n", s) }

func (p *printer) step(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	fmt.Fprintf(p.w, "\n── %s %s\n\n", s, strings.Repeat("─", max(3, 76-len([]rune(s)))))
}

func (p *printer) line(format string, args ...any) {
	fmt.Fprintf(p.w, "  %s\n", fmt.Sprintf(format, args...))
}

// markdown prints a comment or review body between rulers, each line
// behind a bar, as the Markdown source GitHub renders.
func (p *printer) markdown(label, body string) {
	fmt.Fprintf(p.w, "  ┌─ %s\n", label)
	body = strings.TrimRight(strings.ReplaceAll(body, "\r\n", "\n"), "\n")
	if body == "" {
		body = "(empty)"
	}
	for _, l := range strings.Split(body, "\n") {
		fmt.Fprintf(p.w, "  │ %s\n", l)
	}
	fmt.Fprintln(p.w, "  └─")
}

// block prints command output indented.
func (p *printer) block(s string) {
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		fmt.Fprintf(p.w, "      %s\n", l)
	}
}

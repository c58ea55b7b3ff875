package workflow

import (
	"bytes"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// position maps a JSON pointer into a file's frontmatter to a line of the
// file, so a problem reads FILE:LINE: FIELD: MESSAGE.
type position struct {
	node   *yaml.Node
	offset int // lines of the file before the frontmatter's first line
}

// frontmatterOffset counts the lines up to and including the opening
// "---", so YAML line n is file line offset+n.
func frontmatterOffset(b []byte) int {
	for i, line := range bytes.Split(b, []byte("\n")) {
		if strings.TrimSpace(string(line)) == "---" {
			return i + 1
		}
	}
	return 0
}

// line resolves pointer (RFC 6901) to the line of the value it names, or of
// the deepest part of it that exists; 0 when not even its first part does.
func (p position) line(pointer string) int {
	n := p.node
	if n == nil {
		return 0
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if pointer == "" {
		return 0
	}
	line, found := 0, false
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == tok {
					line = n.Content[i].Line
					next = n.Content[i+1]
					break
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
				line = next.Line
			}
		}
		if next == nil {
			break
		}
		n, found = next, true
	}
	if !found {
		return 0 // not even the top-level field exists: the whole file
	}
	return p.offset + line
}

// Package argv splits a command line into the argv process.run starts. It
// is a leaf: the workspace runs what it returns, and the permission rules
// (kernel/toolrule) check that same argv besides the shell's reading.
package argv

import (
	"errors"
	"fmt"
	"strings"
)

// Split splits a command line into argv with shell-like quoting
// (single quotes, double quotes, backslash escapes) and no expansion: no
// variables, globs, pipes or redirections. Metacharacters stay literal
// arguments. Where a line has none of those, Split reads it as POSIX sh
// does (TestSplitAgreesWithSh checks this against /bin/sh): a
// backslash-newline joins lines, and a backslash that ends the line is a
// literal backslash.
func Split(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case quote == '"':
			switch c {
			case '"':
				quote = 0
			case '\\':
				if i+1 < len(s) && s[i+1] == '\n' {
					i++ // line continuation
				} else if i+1 < len(s) && strings.IndexByte(`"\$`+"`", s[i+1]) >= 0 {
					i++
					cur.WriteByte(s[i])
				} else {
					cur.WriteByte(c)
				}
			default:
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == '\\':
			switch {
			case i+1 == len(s):
				cur.WriteByte(c)
				inWord = true
			case s[i+1] == '\n':
				i++ // line continuation
			default:
				i++
				cur.WriteByte(s[i])
				inWord = true
			}
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if inWord {
		out = append(out, cur.String())
	}
	if len(out) == 0 {
		return nil, errors.New("empty command")
	}
	return out, nil
}

package webhook

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// routeAction checks that body is one JSON object (RFC 8259 syntax, as
// encoding/json.Valid accepts it) and returns its top-level "action" string
// ("" if absent or null). It is a single pass that allocates nothing but
// the action: on the hot path, decoding a 16 KB payload with
// encoding/json cost more CPU than the HMAC and the SQLite write together.
func routeAction(body []byte) (string, error) {
	s := scanner{b: body}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return "", errors.New("not a JSON object")
	}
	if err := s.object(1, true); err != nil {
		return "", err
	}
	s.ws()
	if s.i != len(s.b) {
		return "", s.errf("data after the top-level object")
	}
	if s.action == nil || string(s.action) == "null" {
		return "", nil
	}
	if s.action[0] != '"' {
		return "", errors.New(`"action" is not a string`)
	}
	raw := s.action[1 : len(s.action)-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw), nil
	}
	// Escapes or invalid UTF-8: decode exactly as encoding/json does.
	var a string
	if err := json.Unmarshal(s.action, &a); err != nil {
		return "", err
	}
	return a, nil
}

// maxDepth matches encoding/json's nesting limit.
const maxDepth = 10000

type scanner struct {
	b      []byte
	i      int
	action []byte // raw value of the last top-level "action"
}

func (s *scanner) errf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", s.i, fmt.Sprintf(format, args...))
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) value(depth int) error {
	if s.i >= len(s.b) {
		return s.errf("unexpected end")
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth+1, false)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		return s.str()
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	default:
		return s.errf("invalid character %q", c)
	}
}

func (s *scanner) object(depth int, top bool) error {
	if depth > maxDepth {
		return s.errf("nested too deeply")
	}
	s.i++ // {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.errf("object key expected")
		}
		k := s.i
		if err := s.str(); err != nil {
			return err
		}
		key := s.b[k:s.i]
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.errf("':' expected")
		}
		s.i++
		s.ws()
		v := s.i
		if err := s.value(depth); err != nil {
			return err
		}
		if top && isActionKey(key) {
			s.action = s.b[v:s.i]
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.errf("unexpected end")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			return nil
		default:
			return s.errf("',' or '}' expected")
		}
	}
}

func isActionKey(raw []byte) bool {
	if string(raw) == `"action"` {
		return true
	}
	for _, c := range raw {
		if c == '\\' {
			var k string
			return json.Unmarshal(raw, &k) == nil && k == "action"
		}
	}
	return false
}

func (s *scanner) array(depth int) error {
	if depth > maxDepth {
		return s.errf("nested too deeply")
	}
	s.i++ // [
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		if err := s.value(depth); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.errf("unexpected end")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.ws()
		case ']':
			s.i++
			return nil
		default:
			return s.errf("',' or ']' expected")
		}
	}
}

// plain marks the bytes a string holds without further thought.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// Masks for scanning a string eight bytes at a time.
const (
	lsb   = 0x0101010101010101
	msb   = 0x8080808080808080
	quote = '"' * lsb
	bslsh = '\\' * lsb
	space = ' ' * lsb
)

// special reports whether any of the eight bytes in w is a quote, a
// backslash or a control character (below 0x20). A false positive is
// harmless (the caller looks byte by byte); there are no false negatives.
func special(w uint64) bool {
	q, b := w^quote, w^bslsh // a zero byte where w has a quote, a backslash
	return ((q-lsb)&^q|(b-lsb)&^b|(w-space)&^w)&msb != 0
}

func (s *scanner) str() error {
	s.i++ // opening quote
	b := s.b
	for {
		i := s.i
		for i+8 <= len(b) && !special(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && plain[b[i]] {
			i++
		}
		s.i = i
		if i >= len(b) {
			return s.errf("unterminated string")
		}
		switch b[i] {
		case '"':
			s.i++
			return nil
		case '\\':
			if i+1 >= len(b) {
				return s.errf("unterminated string")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i = i + 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return s.errf("invalid \\u escape")
				}
				s.i = i + 6
			default:
				return s.errf("invalid escape")
			}
		default:
			return s.errf("control character in string")
		}
	}
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func (s *scanner) lit(word string) error {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return s.errf("invalid literal")
	}
	s.i += len(word)
	return nil
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

func (s *scanner) number() error {
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i >= len(s.b) {
		return s.errf("invalid number")
	}
	if s.b[s.i] == '0' {
		s.i++
	} else if s.digits() == 0 {
		return s.errf("invalid number")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return s.errf("invalid number")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return s.errf("invalid number")
		}
	}
	return nil
}

package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// ParseLineFast decodes a canonical line positionally (fields in envelope
// order, payload delimited by bracket matching) and falls back to
// encoding/json for anything else, so its result always equals ParseLine's
// for valid input. Replay uses it: most of a line is never looked at.
func ParseLineFast(line []byte) (Event, error) {
	if e, ok := parseCanonical(line); ok {
		return e, nil
	}
	return ParseLine(line)
}

type cursor struct {
	b   []byte
	i   int
	bad bool
}

func (c *cursor) lit(s string) {
	if c.bad || !bytes.HasPrefix(c.b[c.i:], []byte(s)) {
		c.bad = true
		return
	}
	c.i += len(s)
}

// str reads a JSON string without escapes; escaped strings fall back to
// encoding/json for exactness.
func (c *cursor) str() string {
	if c.bad || c.i >= len(c.b) || c.b[c.i] != '"' {
		c.bad = true
		return ""
	}
	start := c.i + 1
	for j := start; j < len(c.b); j++ {
		switch ch := c.b[j]; {
		case ch == '"':
			c.i = j + 1
			return string(c.b[start:j])
		case ch == '\\' || ch >= 0x80:
			// Escapes and non-ASCII (which encoding/json checks for valid
			// UTF-8) take the exact path.
			end := skipString(c.b, c.i)
			if end < 0 {
				c.bad = true
				return ""
			}
			var s string
			if err := json.Unmarshal(c.b[c.i:end], &s); err != nil {
				c.bad = true
				return ""
			}
			c.i = end
			return s
		case ch < 0x20:
			c.bad = true
			return ""
		}
	}
	c.bad = true
	return ""
}

func (c *cursor) int() int64 {
	if c.bad {
		return 0
	}
	j := c.i
	for j < len(c.b) && (c.b[j] >= '0' && c.b[j] <= '9' || c.b[j] == '-') {
		j++
	}
	n, err := strconv.ParseInt(string(c.b[c.i:j]), 10, 64)
	if err != nil {
		c.bad = true
		return 0
	}
	c.i = j
	return n
}

// skipString returns the index just past the JSON string starting at i.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the index just past the JSON object or array at i.
func skipValue(b []byte, i int) int {
	if i >= len(b) || (b[i] != '{' && b[i] != '[') {
		return -1
	}
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			end := skipString(b, j)
			if end < 0 {
				return -1
			}
			j = end - 1
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1
			}
		}
	}
	return -1
}

func parseCanonical(b []byte) (Event, bool) {
	var e Event
	c := &cursor{b: b}
	c.lit(`{"id":`)
	e.ID = c.str()
	c.lit(`,"session_id":`)
	e.SessionID = c.str()
	c.lit(`,"run_id":`)
	e.RunID = c.str()
	c.lit(`,"seq":`)
	e.Seq = c.int()
	c.lit(`,"ts":`)
	e.TS = c.str()
	c.lit(`,"type":`)
	e.Type = c.str()
	c.lit(`,"actor":`)
	e.Actor = c.str()
	c.lit(`,"payload":`)
	if c.bad {
		return e, false
	}
	end := validValue(b, c.i, 0)
	if end < 0 || b[c.i] != '{' {
		return e, false
	}
	e.Payload = json.RawMessage(b[c.i:end:end])
	c.i = end
	c.lit(`,"schema_version":`)
	e.SchemaVersion = c.str()
	c.lit(`,"parent_id":`)
	if !c.bad && bytes.HasPrefix(b[c.i:], []byte("null")) {
		c.i += 4
	} else {
		p := c.str()
		e.ParentID = &p
	}
	c.lit(`,"prev_hash":`)
	e.PrevHash = c.str()
	c.lit(`,"hash":`)
	e.Hash = c.str()
	c.lit(`}`)
	return e, !c.bad && c.i == len(b)
}

// ErrTornLine marks a final line cut short by a crash.
var ErrTornLine = errors.New("torn final line")

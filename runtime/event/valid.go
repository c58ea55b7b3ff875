package event

// validValue returns the index just past the JSON value that starts at
// b[i], or -1. It accepts only compact JSON (no white space between
// tokens), as canonical lines are, and declines nesting deeper than
// maxValidDepth; whatever it accepts, encoding/json.Valid accepts too
// (FuzzValidValue). Replay calls it once per payload instead of finding the
// payload's end and then running json.Valid over it, a second pass that
// took over a third of parsing a line.
func validValue(b []byte, i, depth int) int {
	if i >= len(b) || depth > maxValidDepth {
		return -1
	}
	switch c := b[i]; {
	case c == '{':
		i++
		if i < len(b) && b[i] == '}' {
			return i + 1
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return -1
			}
			if i = validString(b, i); i < 0 || i >= len(b) || b[i] != ':' {
				return -1
			}
			if i = validValue(b, i+1, depth+1); i < 0 || i >= len(b) {
				return -1
			}
			switch b[i] {
			case ',':
				i++
			case '}':
				return i + 1
			default:
				return -1
			}
		}
	case c == '[':
		i++
		if i < len(b) && b[i] == ']' {
			return i + 1
		}
		for {
			if i = validValue(b, i, depth+1); i < 0 || i >= len(b) {
				return -1
			}
			switch b[i] {
			case ',':
				i++
			case ']':
				return i + 1
			default:
				return -1
			}
		}
	case c == '"':
		return validString(b, i)
	case c == '-' || '0' <= c && c <= '9':
		return jsonNumberEnd(b, i)
	case c == 't':
		return validLiteral(b, i, "true")
	case c == 'f':
		return validLiteral(b, i, "false")
	case c == 'n':
		return validLiteral(b, i, "null")
	}
	return -1
}

// maxValidDepth bounds validValue's recursion; deeper values take the slow
// path (encoding/json allows 10,000 levels).
const maxValidDepth = 500

// validString returns the index just past the JSON string at b[i] ('"').
// Like encoding/json it does not check UTF-8: invalid bytes are valid JSON
// that decoding replaces.
func validString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return -1
				}
				for _, h := range b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// jsonNumberEnd returns the index just past the JSON number (RFC 8259)
// that starts at b[i], or -1 if none does; i < len(b).
func jsonNumberEnd[T string | []byte](b T, i int) int {
	digits := func(i int) int {
		start := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == start {
			return -1
		}
		return i
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		if i = digits(i + 1); i < 0 {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i = digits(i); i < 0 {
			return -1
		}
	}
	return i
}

func validLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

package event

import (
	"encoding/json"
	"strconv"
)

// Field returns the raw JSON value of the top-level member key of the JSON
// object obj, or nil if obj is not an object or has no such member. It is a
// scanner, not a parser: replay uses it to read a few fields of hot event
// payloads without reflection. Values are not validated beyond bracket and
// string matching.
func Field(obj []byte, key string) []byte {
	i := skipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil
	}
	i++
	for {
		i = skipWS(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return nil
		}
		kEnd := skipString(obj, i)
		if kEnd < 0 {
			return nil
		}
		k := obj[i+1 : kEnd-1]
		i = skipWS(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return nil
		}
		i = skipWS(obj, i+1)
		vEnd := skipAny(obj, i)
		if vEnd < 0 {
			return nil
		}
		if string(k) == key {
			return obj[i:vEnd]
		}
		i = skipWS(obj, vEnd)
		if i >= len(obj) || obj[i] != ',' {
			return nil
		}
		i++
	}
}

// FieldString returns a top-level string member ("" if absent or not a
// string).
func FieldString(obj []byte, key string) string {
	v := Field(obj, key)
	if len(v) < 2 || v[0] != '"' {
		return ""
	}
	for _, c := range v[1 : len(v)-1] {
		if c == '\\' || c >= 0x80 {
			var s string
			_ = json.Unmarshal(v, &s)
			return s
		}
	}
	return string(v[1 : len(v)-1])
}

// FieldInt returns a top-level integer member (0 if absent or not one).
func FieldInt(obj []byte, key string) int64 {
	n, _ := strconv.ParseInt(string(Field(obj, key)), 10, 64)
	return n
}

// FieldFloat returns a top-level number member (0 if absent or not one).
func FieldFloat(obj []byte, key string) float64 {
	f, _ := strconv.ParseFloat(string(Field(obj, key)), 64)
	return f
}

// FieldBool returns a top-level boolean member (false if absent).
func FieldBool(obj []byte, key string) bool { return string(Field(obj, key)) == "true" }

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// skipAny returns the index just past the JSON value starting at i.
func skipAny(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		return skipValue(b, i)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\t' && b[j] != '\r' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

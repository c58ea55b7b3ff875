package run

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/markdown"
	"github.com/agentos/agentos/schemas"
)

// Local repair steps of a role's reply (role.output_repaired's step).
const (
	stepStripFence    = "strip_fence"
	stepExtractObject = "extract_object"
)

// maxCandidates bounds how many "{" positions extraction tries.
const maxCandidates = 16

// parseReply turns a role's reply into its schema's document (canonical
// JSON): as sent; else from inside a Markdown code fence; else the first
// balanced JSON object in the prose around it. step names the local repair
// that was needed ("" for none) and problem why the reply as sent was not
// valid. A JSON object that breaks the schema is not searched further: no
// local step can fix it, so err is its validation error, which a repair
// turn quotes.
func parseReply(text, schemaID string, reg *schemas.Registry) (doc json.RawMessage, step, problem string, err error) {
	t := strings.TrimSpace(text)
	if t == "" {
		return nil, "", "", errors.New("the reply is empty")
	}
	doc, isObject, asSent := candidate(t, schemaID, reg)
	if asSent == nil {
		return doc, "", "", nil
	}
	if isObject {
		return nil, "", "", asSent
	}
	if inner, ok := fenced(t); ok {
		doc, fobj, ferr := candidate(inner, schemaID, reg)
		if ferr == nil {
			return doc, stepStripFence, "the JSON was inside a Markdown code fence: " + asSent.Error(), nil
		}
		if fobj {
			return nil, "", "", ferr
		}
	}
	for _, c := range objects(t, maxCandidates) {
		doc, obj, oerr := candidate(c, schemaID, reg)
		if oerr == nil {
			return doc, stepExtractObject, "the JSON object had text around it: " + asSent.Error(), nil
		}
		if obj {
			return nil, "", "", oerr
		}
	}
	return nil, "", "", errors.New("the reply contains no JSON object")
}

// candidate canonicalises and validates one piece of text. isObject says
// the text is a JSON object (so a failure is the schema's verdict).
func candidate(text, schemaID string, reg *schemas.Registry) (json.RawMessage, bool, error) {
	raw, err := event.Canonical([]byte(text))
	if err != nil {
		return nil, false, fmt.Errorf("the reply is not a JSON object (%v)", err)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false, errors.New("the reply is JSON but not an object")
	}
	if err := reg.ValidateJSON(schemaID, raw); err != nil {
		return nil, true, err
	}
	return raw, true, nil
}

// fenced returns the content of the first fenced code block (``` or
// ```json, as GitHub's Markdown reads it) that holds a "{".
func fenced(text string) (string, bool) {
	for _, b := range markdown.FencedBlocks(text) {
		if strings.ContainsAny(b.Info, "{}") {
			continue
		}
		if inner := strings.TrimSpace(b.Content); strings.Contains(inner, "{") {
			return inner, true
		}
	}
	return "", false
}

// objects returns the balanced {...} spans that start at the first max
// opening braces of text, in order; braces inside JSON strings do not
// count. The bound keeps a huge reply full of braces from costing
// quadratic time.
func objects(text string, max int) []string {
	var out []string
	tried := 0
	for start := strings.IndexByte(text, '{'); start >= 0 && tried < max; tried++ {
		if end := balanced(text, start); end > 0 {
			out = append(out, text[start:end])
		}
		next := strings.IndexByte(text[start+1:], '{')
		if next < 0 {
			break
		}
		start += 1 + next
	}
	return out
}

// balanced returns the index after the "}" that closes the "{" at start,
// or -1.
func balanced(text string, start int) int {
	depth, inString, escaped := 0, false, false
	for i := start; i < len(text); i++ {
		c := text[i]
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

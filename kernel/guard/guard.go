// Package guard blocks malformed tool calls before anything executes and
// classifies them the way BFCL's checker does (the tool-guard
// benchmark): wrong_func_name, missing_required, unexpected_param,
// type_error, value_error, path_outside_workspace, unparsable_arguments.
// The diagnostics are structured so the agent loop can send them back to
// the model for one repair round.
package guard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Error classes.
const (
	WrongFuncName        = "wrong_func_name"
	MissingRequired      = "missing_required"
	UnexpectedParam      = "unexpected_param"
	TypeError            = "type_error"
	ValueError           = "value_error"
	PathOutsideWorkspace = "path_outside_workspace"
	UnparsableArguments  = "unparsable_arguments"
)

// Diagnostic is one finding.
type Diagnostic struct {
	Class      string `json:"class"`
	Param      string `json:"param,omitempty"` // JSON pointer into the arguments
	Message    string `json:"message"`
	Suggestion string `json:"suggestion,omitempty"`
}

// SuggestName returns the registered name nearest to name, if it is close
// enough to be a likely typo (or a case/separator variant).
func SuggestName(name string, registered []string) string {
	best, bestD := "", 1<<30
	norm := func(s string) string {
		return strings.NewReplacer("_", ".", "-", ".", "/", ".").Replace(strings.ToLower(s))
	}
	for _, r := range registered {
		d := levenshtein(norm(name), norm(r))
		if d < bestD || (d == bestD && r < best) {
			best, bestD = r, d
		}
	}
	if best == "" || bestD > max(2, len(best)/3) {
		return ""
	}
	return best
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

var (
	fenceRe      = regexp.MustCompile("(?s)^\\s*```[a-zA-Z]*\\s*(.*?)\\s*```\\s*$")
	trailCommaRe = regexp.MustCompile(`,\s*([}\]])`)
)

// Parse decodes raw arguments to a JSON object, repairing trivially broken
// JSON (a Markdown code fence, trailing commas, single-quoted strings). It
// returns the canonical arguments and the repairs made; an empty raw means
// {}. Anything else is unparsable_arguments.
//
// Arguments that were not a JSON object when the model sent them travel
// through the provider layer and the log as {"_raw": "<the model's text>"}
// (see provider.NormalizeArgs); Parse judges that text, not the wrapper.
func Parse(raw []byte) (json.RawMessage, []string, *Diagnostic) {
	s := strings.TrimSpace(string(raw))
	if text, ok := rawWrapped(s); ok {
		s = strings.TrimSpace(text)
	}
	if s == "" {
		return json.RawMessage(`{}`), nil, nil
	}
	if obj, ok := asObject(s); ok {
		return obj, nil, nil
	}
	var repairs []string
	if m := fenceRe.FindStringSubmatch(s); m != nil {
		s = m[1]
		repairs = append(repairs, "removed a Markdown code fence")
	}
	if obj, ok := asObject(s); ok {
		return obj, repairs, nil
	}
	if t := trailCommaRe.ReplaceAllString(s, "$1"); t != s {
		s = t
		repairs = append(repairs, "removed trailing commas")
		if obj, ok := asObject(s); ok {
			return obj, repairs, nil
		}
	}
	if t, ok := singleToDouble(s); ok && t != s {
		s = t
		repairs = append(repairs, "converted single-quoted strings to JSON strings")
		if obj, ok := asObject(s); ok {
			return obj, repairs, nil
		}
	}
	var v any
	err := json.Unmarshal([]byte(s), &v)
	msg := "arguments are not a JSON object"
	if err != nil {
		msg = "arguments are not valid JSON: " + err.Error()
	}
	return nil, nil, &Diagnostic{Class: UnparsableArguments, Message: msg}
}

// rawWrapped recognises {"_raw": "<text>"}, the wrapper for arguments that
// were not a JSON object.
func rawWrapped(s string) (string, bool) {
	if !strings.HasPrefix(s, "{") || !strings.Contains(s, `"_raw"`) {
		return "", false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(s), &m) != nil || len(m) != 1 {
		return "", false
	}
	var text string
	if json.Unmarshal(m["_raw"], &text) != nil {
		return "", false
	}
	return text, true
}

func asObject(s string) (json.RawMessage, bool) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil || dec.More() {
		return nil, false
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, false
	}
	return json.RawMessage(bytes.TrimSpace(buf.Bytes())), true
}

// singleToDouble rewrites 'strings' as "strings" outside double-quoted
// strings, escaping embedded double quotes.
func singleToDouble(s string) (string, bool) {
	var b strings.Builder
	inDouble, inSingle := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inDouble:
			b.WriteByte(c)
			if c == '\\' && i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			} else if c == '"' {
				inDouble = false
			}
		case inSingle:
			switch c {
			case '\\':
				if i+1 < len(s) {
					i++
					if s[i] == '\'' {
						b.WriteByte('\'')
					} else {
						b.WriteByte('\\')
						b.WriteByte(s[i])
					}
				}
			case '\'':
				b.WriteByte('"')
				inSingle = false
			case '"':
				b.WriteString(`\"`)
			default:
				b.WriteByte(c)
			}
		case c == '"':
			inDouble = true
			b.WriteByte(c)
		case c == '\'':
			inSingle = true
			b.WriteByte('"')
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), !inDouble && !inSingle
}

var printer = message.NewPrinter(language.English)

// Validate checks arguments against a compiled input schema and returns
// every finding, classified.
func Validate(schema *jsonschema.Schema, args json.RawMessage) []Diagnostic {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return []Diagnostic{{Class: UnparsableArguments, Message: err.Error()}}
	}
	err = schema.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []Diagnostic{{Class: ValueError, Message: err.Error()}}
	}
	var out []Diagnostic
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		out = append(out, classify(e))
	}
	walk(ve)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Param < out[j].Param })
	return out
}

func classify(e *jsonschema.ValidationError) Diagnostic {
	ptr := pointer(e.InstanceLocation)
	msg := e.ErrorKind.LocalizedString(printer)
	kw := e.ErrorKind.KeywordPath()
	last := ""
	if len(kw) > 0 {
		last = kw[len(kw)-1]
	}
	d := Diagnostic{Param: ptr, Message: msg}
	switch last {
	case "required":
		d.Class = MissingRequired
		if m := quoted.FindStringSubmatch(msg); m != nil {
			d.Param = ptr + "/" + m[1]
		}
	case "additionalProperties", "unevaluatedProperties":
		d.Class = UnexpectedParam
		if m := quoted.FindStringSubmatch(msg); m != nil {
			d.Param = ptr + "/" + m[1]
		}
	case "type":
		d.Class = TypeError
	default:
		d.Class = ValueError
	}
	return d
}

var quoted = regexp.MustCompile(`'([^']+)'`)

func pointer(loc []string) string {
	var b strings.Builder
	for _, t := range loc {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// PathArgs are the argument names that hold workspace paths.
var PathArgs = []string{"path", "cwd"}

// Paths checks path-like arguments lexically: absolute paths and paths that
// climb out of the workspace are path_outside_workspace. (The workspace
// jail also resolves symlinks when the call runs.)
func Paths(args json.RawMessage) []Diagnostic {
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return nil
	}
	var out []Diagnostic
	check := func(param, p string) {
		if bad := outside(p); bad != "" {
			out = append(out, Diagnostic{Class: PathOutsideWorkspace, Param: "/" + param, Message: fmt.Sprintf("%q %s; use a path relative to the repository root", p, bad)})
		}
	}
	for _, name := range PathArgs {
		if s, ok := m[name].(string); ok {
			check(name, s)
		}
	}
	if gs, ok := m["globs"].([]any); ok {
		for i, g := range gs {
			if s, ok := g.(string); ok {
				check(fmt.Sprintf("globs/%d", i), strings.TrimPrefix(s, "!"))
			}
		}
	}
	return out
}

func outside(p string) string {
	switch {
	case strings.ContainsRune(p, 0):
		return "contains a NUL byte"
	case strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) || (len(p) > 1 && p[1] == ':'):
		return "is absolute"
	case strings.HasPrefix(p, "~"):
		return "refers to a home directory"
	}
	c := path.Clean(strings.ReplaceAll(p, `\`, "/"))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "escapes the workspace"
	}
	return ""
}

// Package redact removes secrets from text and JSON before anything is
// written: event payloads, tool output, provider requests and responses.
//
// It knows the shapes of common credentials (GitHub tokens, bearer tokens,
// sk-style API keys, AWS access keys, PEM private keys), the values of
// environment-style names that contain a configured key (policy.yaml
// redaction.keys, e.g. TOKEN → GITHUB_TOKEN=...), and literal secrets
// registered at start-up such as the bot's own tokens.
package redact

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Mask replaces every redacted value.
const Mask = "[REDACTED]"

// DefaultKeys are the env-name fragments redacted when policy names none
// (policy.yaml redaction.keys).
var DefaultKeys = []string{"SECRET", "TOKEN", "API_KEY", "PASSWORD", "PRIVATE_KEY"}

// shapes match credentials by their form alone.
var shapes = []*regexp.Regexp{
	regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|$)`),
	regexp.MustCompile(`\b(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{20,255}\b`),
	regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{20,255}\b`),
	regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{8,}=*`),
	regexp.MustCompile(`\bsk-(?:[A-Za-z0-9_\-]{16,})`),
	regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b`),
}

// Redactor is safe for concurrent use.
type Redactor struct {
	keys  []string
	keyRe *regexp.Regexp // NAME=value / NAME: value with NAME containing a key
	mu    sync.Mutex     // serialises AddLiteral
	// literals, longest first so that a secret containing another is
	// masked whole; replaced (never modified) by AddLiteral, so String
	// reads it without a lock.
	literals atomic.Pointer[[]string]
}

// New returns a Redactor for env-name fragments keys (case-insensitive match
// against upper-case env-style names). nil keys means DefaultKeys.
func New(keys []string) *Redactor {
	if keys == nil {
		keys = DefaultKeys
	}
	r := &Redactor{}
	var alts []string
	for _, k := range keys {
		k = strings.ToUpper(strings.TrimSpace(k))
		if k == "" {
			continue
		}
		r.keys = append(r.keys, k)
		alts = append(alts, regexp.QuoteMeta(k))
	}
	if len(alts) > 0 {
		r.keyRe = regexp.MustCompile(`\b([A-Z0-9_]*(?:` + strings.Join(alts, "|") + `)[A-Z0-9_]*)(\s*[=:]\s*)("[^"\n]*"|'[^'\n]*'|[^\s"',;&]+)`)
	}
	return r
}

// AddLiteral registers an exact secret value (an installation token, the
// webhook secret) that must never be written. Values shorter than 6
// characters are refused silently to avoid masking ordinary words; they are
// not secrets anyone should rely on.
func (r *Redactor) AddLiteral(secret string) {
	if len(secret) < 6 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var lits []string
	if p := r.literals.Load(); p != nil {
		lits = *p
	}
	if slices.Contains(lits, secret) {
		return
	}
	lits = append(slices.Clone(lits), secret)
	sort.SliceStable(lits, func(i, j int) bool { return len(lits[i]) > len(lits[j]) })
	r.literals.Store(&lits)
}

// HasLiteral reports whether s contains one of the exact secret values
// registered with AddLiteral (not merely something shaped like a key).
func (r *Redactor) HasLiteral(s string) bool {
	if p := r.literals.Load(); p != nil {
		for _, l := range *p {
			if strings.Contains(s, l) {
				return true
			}
		}
	}
	return false
}

// IsSecretName reports whether an env-style name (upper-case letters, digits,
// underscores) contains one of the configured keys. Lower-case field names
// such as "input_tokens" are not env names and never match.
func (r *Redactor) IsSecretName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	for _, k := range r.keys {
		if strings.Contains(name, k) {
			return true
		}
	}
	return false
}

// String returns s with every secret masked.
func (r *Redactor) String(s string) string {
	if p := r.literals.Load(); p != nil {
		for _, l := range *p {
			if strings.Contains(s, l) {
				s = strings.ReplaceAll(s, l, Mask)
			}
		}
	}
	shape, kv := scan(s)
	if shape {
		for _, re := range shapes {
			s = re.ReplaceAllString(s, Mask)
		}
	}
	// (A shape's mask holds no '=' or ':', and keyRe cannot match
	// without one, so kv of the text before masking shapes will do.)
	if r.keyRe != nil && kv {
		s = r.keyRe.ReplaceAllStringFunc(s, func(m string) string {
			sub := r.keyRe.FindStringSubmatch(m)
			if sub[3] == Mask || sub[3] == `"`+Mask+`"` {
				return m
			}
			return sub[1] + sub[2] + Mask
		})
	}
	return s
}

// scan reports in one pass over s whether it may hold a credential shape
// (it contains a substring every shape needs: "PRIVATE KEY", "gh",
// "github_pat_", "earer", "EARER", "sk-" or an AWS key prefix) and
// whether it may hold a NAME=value pair ('=' or ':'). Most strings need
// neither regexp.
func scan(s string) (shape, kv bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '=', ':':
			kv = true
		case 'P':
			shape = shape || strings.HasPrefix(s[i:], "PRIVATE KEY")
		case 'g':
			shape = shape || strings.HasPrefix(s[i:], "gh") || strings.HasPrefix(s[i:], "github_pat_")
		case 'e':
			shape = shape || strings.HasPrefix(s[i:], "earer")
		case 'E':
			shape = shape || strings.HasPrefix(s[i:], "EARER")
		case 's':
			shape = shape || strings.HasPrefix(s[i:], "sk-")
		case 'A':
			if !shape && i+4 <= len(s) {
				switch s[i : i+4] {
				case "AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA":
					shape = true
				}
			}
		}
		if shape && kv {
			return
		}
	}
	return
}

// Value redacts a decoded JSON value in place and returns it: every string
// (object keys included) is passed through String, and the value of any
// object member whose name is a secret env-style name is replaced by Mask.
func (r *Redactor) Value(v any) any {
	switch x := v.(type) {
	case string:
		return r.String(x)
	case []any:
		for i := range x {
			x[i] = r.Value(x[i])
		}
		return x
	case map[string]any:
		for k, val := range x {
			nk := r.String(k)
			if nk != k {
				delete(x, k)
			}
			if r.IsSecretName(k) {
				if _, isObj := val.(map[string]any); !isObj {
					x[nk] = Mask
					continue
				}
			}
			x[nk] = r.Value(val)
		}
		return x
	default:
		return v
	}
}

// JSON redacts a JSON document and returns it re-encoded (keys sorted, no
// HTML escaping, numbers preserved). Invalid JSON is returned as an error.
func (r *Redactor) JSON(doc []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	v = r.Value(v)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Package args converts tool-call arguments between the runtime's raw JSON
// form (provider.ToolCall.Args) and the providers' wire forms, without
// repairing anything: repair and classification are the kernel guard's job.
package args

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentos/agentos/runtime/provider"
)

// Object returns arguments as a JSON object for providers whose wire
// format requires one (Anthropic tool_use input, Gemini functionCall args).
// Arguments that are not an object (a model's broken output, kept verbatim
// in the history) are wrapped as {"_raw": "<text>"}, the convention of the
// scripted recorder, so the model still sees what it sent.
func Object(raw json.RawMessage) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err == nil && m != nil {
		return m
	}
	if strings.TrimSpace(string(raw)) == "" {
		return map[string]any{}
	}
	return map[string]any{"_raw": string(raw)}
}

// Raw returns a provider's argument text as normalised raw arguments:
// empty text means no arguments ({}); anything else is kept byte for byte,
// a JSON object or not, for the kernel's argument guard to parse, repair
// or classify.
func Raw(s string) json.RawMessage {
	if strings.TrimSpace(s) == "" {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(s)
}

// Schema returns a tool's input schema as a map; an empty schema is an
// object schema without properties (what every provider accepts for a tool
// that takes no arguments).
func Schema(raw json.RawMessage) (map[string]any, error) {
	if strings.TrimSpace(string(raw)) == "" {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, errors.New("input_schema is not a JSON object")
	}
	return m, nil
}

// CallID synthesises a tool-call id for providers that may omit one
// (Gemini, some OpenAI-compatible servers): prefix followed by 16 hex
// digits. It is stable: the same request (salt, see Salt) and answer give
// the same id on every replay, while the same call in another turn or
// another session gets another id.
func CallID(prefix, salt string, index int, name string, raw []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%s\x00", salt, index, name)
	h.Write(raw)
	return prefix + hex.EncodeToString(h.Sum(nil))[:16]
}

// Salt digests a conversation for CallID.
func Salt(msgs []provider.Message) string {
	h := sha256.New()
	for _, m := range msgs {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00", m.Role, m.Content, m.ToolCallID, m.Name)
		for _, c := range m.ToolCalls {
			fmt.Fprintf(h, "%s\x00%s\x00", c.ID, c.Name)
			h.Write(c.Args)
			h.Write([]byte{0})
		}
		h.Write([]byte{1})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Names maps tool names to wire names that match ^[a-zA-Z0-9_-]{1,64}$,
// the pattern OpenAI and Anthropic require (the kernel's names, such as
// repo.read, contain dots), and maps the model's answers back. One Names
// serves one request: built from the tools it offers, applied to the
// history it sends and to the calls in the answer.
type Names struct {
	wire map[string]string // original → wire
	orig map[string]string // wire → original
}

// NewNames assigns wire names to the offered tools, in order; a collision
// after sanitising gets a numeric suffix.
func NewNames(tools []string) *Names {
	n := &Names{wire: map[string]string{}, orig: map[string]string{}}
	for _, t := range tools {
		if _, ok := n.wire[t]; ok {
			continue
		}
		w := sanitize(t)
		for i := 2; ; i++ {
			if _, taken := n.orig[w]; !taken {
				break
			}
			suffix := fmt.Sprintf("_%d", i)
			w = sanitize(t)
			if len(w)+len(suffix) > 64 {
				w = w[:64-len(suffix)]
			}
			w += suffix
		}
		n.wire[t], n.orig[w] = w, t
	}
	return n
}

// Wire returns the name to send for a tool (offered or not).
func (n *Names) Wire(name string) string {
	if w, ok := n.wire[name]; ok {
		return w
	}
	return sanitize(name)
}

// Original returns the tool name a wire name stands for; a name that
// matches no offered tool is returned unchanged, for the kernel to reject
// or suggest a correction.
func (n *Names) Original(wire string) string {
	if o, ok := n.orig[wire]; ok {
		return o
	}
	return wire
}

func sanitize(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

package event

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// Prompt blocks stored once per session (docs/decisions.md, "Prompts
// stored once per session").
//
// An llm.request records the request sent to the model. Most of it is
// the same from one call to the next: the role's system prompt, the tool
// specs, and every earlier message of the conversation. So each message
// and each tool spec of the recorded request is a block, named by its
// reference: "sha256:" and the hex SHA-256 of the block's canonical JSON
// (Canonical). A list of references is a block too (a list block, a JSON
// array), read by expanding each reference in place: a request's
// conversation is a list block holding the list block of an earlier
// request's conversation (its prefix) and the references of the messages
// added since, and its tool specs a list block that every request with
// the same tools shares. The request lists references where it listed
// messages and tool specs, and the llm.request that first uses a block
// in the session defines it in its "prompts" member (reference → block).
// Later requests reference it without repeating it. A log written before
// this format holds whole requests, which read as they always did.
//
// The Sealer computes the references it writes over the redacted blocks
// (sealPrompts), so the stored text is always the redacted text and its
// reference the digest of what is stored. replay's verify checks every
// definition against its reference and that every reference was defined
// at or before the request that uses it, in the same session's log.

// PromptsMember is the llm.request payload member that defines blocks.
const PromptsMember = "prompts"

// PromptRefPrefix starts every block reference.
const PromptRefPrefix = "sha256:"

// PromptRef returns the reference of a block given as canonical JSON.
func PromptRef(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return PromptRefPrefix + hex.EncodeToString(sum[:])
}

// IsPromptRef reports whether s is a well-formed block reference:
// "sha256:" and 64 lower-case hex digits.
func IsPromptRef(s string) bool {
	if len(s) != len(PromptRefPrefix)+64 || s[:len(PromptRefPrefix)] != PromptRefPrefix {
		return false
	}
	for i := len(PromptRefPrefix); i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// BlockRef returns the reference of a block given as any JSON encoding
// of it: the digest of its canonical form.
func BlockRef(block []byte) (string, error) {
	c, err := Canonical(block)
	if err != nil {
		return "", err
	}
	return PromptRef(c), nil
}

// promptLists are the members of a recorded request whose items are
// blocks.
var promptLists = [...]string{"messages", "tools"}

// maxListDepth bounds how deep list blocks nest when read: one level per
// request of a conversation.
const maxListDepth = 1 << 16

// isList reports whether a block is a list block.
func isList(block []byte) bool { return len(block) > 0 && block[0] == '[' }

// PromptWriter makes the recorded form of a session's requests. It must
// Learn every llm.request of the session's log it is to reuse blocks of,
// as stored, and only those: a block it does not know is defined again,
// so that every reference it writes is defined at or before its use.
type PromptWriter struct {
	known map[string]bool     // references the log defines
	flat  map[string][]string // list block → the references it expands to
}

// NewPromptWriter returns a writer that knows no block.
func NewPromptWriter() *PromptWriter {
	return &PromptWriter{known: map[string]bool{}, flat: map[string][]string{}}
}

// Learn records the blocks a stored llm.request defines (other events
// and definitions that do not hash to their reference are ignored).
func (w *PromptWriter) Learn(e *Event) {
	if e.Type != LLMRequest {
		return
	}
	defs, err := CheckPromptDefs(e.Payload)
	if err != nil {
		return
	}
	for ref := range defs {
		w.known[ref] = true
	}
	for ref, b := range defs {
		if isList(b) {
			w.flatten(ref, defs, 0)
		}
	}
}

func (w *PromptWriter) flatten(ref string, defs map[string]json.RawMessage, depth int) []string {
	if f, ok := w.flat[ref]; ok {
		return f
	}
	var items []string
	_ = json.Unmarshal(defs[ref], &items)
	var out []string
	for _, it := range items {
		if f, ok := w.flat[it]; ok {
			out = append(out, f...)
		} else if d, ok := defs[it]; ok && isList(d) && depth < maxListDepth {
			out = append(out, w.flatten(it, defs, depth+1)...)
		} else {
			out = append(out, it)
		}
	}
	w.flat[ref] = out
	return out
}

// Compact turns a request (a completion_request_v1 document) into its
// recorded form: its messages and its tool specs each one reference (a
// list block; a single block or none stays a list of its references).
// defs holds the blocks the writer does not know, keyed by reference.
// The request's other members are kept as they are.
func (w *PromptWriter) Compact(req []byte) (compact map[string]json.RawMessage, defs map[string]json.RawMessage, err error) {
	if err := json.Unmarshal(req, &compact); err != nil {
		return nil, nil, fmt.Errorf("event: compact request: %w", err)
	}
	if compact == nil {
		return nil, nil, errors.New("event: compact request: not a JSON object")
	}
	defs = map[string]json.RawMessage{}
	for _, list := range promptLists {
		raw, ok := compact[list]
		if !ok || bytes.Equal(raw, []byte("null")) {
			continue
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, nil, fmt.Errorf("event: compact request: %s: %w", list, err)
		}
		refs := make([]string, len(items))
		for i, it := range items {
			c, err := Canonical(it)
			if err != nil {
				return nil, nil, fmt.Errorf("event: compact request: %s[%d]: %w", list, i, err)
			}
			if len(c) == 0 || c[0] != '{' {
				return nil, nil, fmt.Errorf("event: compact request: %s[%d] is not an object", list, i)
			}
			refs[i] = PromptRef(c)
			if !w.known[refs[i]] {
				defs[refs[i]] = c
			}
		}
		if len(refs) >= 2 {
			ref, block := w.listFor(refs)
			if block != nil {
				defs[ref] = block
			}
			refs = []string{ref}
		}
		if compact[list], err = json.Marshal(refs); err != nil {
			return nil, nil, err
		}
	}
	return compact, defs, nil
}

// listFor returns the list block that expands to refs: the longest known
// one that expands to a prefix of refs, followed by the rest. block is
// nil when the writer knows the list block already.
func (w *PromptWriter) listFor(refs []string) (ref string, block json.RawMessage) {
	best, bestLen := "", 0
	for r, flat := range w.flat {
		if len(flat) < bestLen || len(flat) > len(refs) || len(flat) == bestLen && r > best {
			continue
		}
		prefix := true
		for i := range flat {
			if flat[i] != refs[i] {
				prefix = false
				break
			}
		}
		if prefix {
			best, bestLen = r, len(flat)
		}
	}
	if bestLen > 0 && bestLen == len(refs) {
		return best, nil
	}
	items := refs
	if bestLen > 0 {
		items = append([]string{best}, refs[bestLen:]...)
	}
	b, _ := json.Marshal(items) // references need no escaping: canonical as is
	ref = PromptRef(b)
	if w.known[ref] {
		return ref, nil
	}
	return ref, b
}

// PromptDefs returns the blocks an llm.request payload defines, keyed by
// reference, as stored (nil when it defines none).
func PromptDefs(payload []byte) (map[string]json.RawMessage, error) {
	raw := Field(payload, PromptsMember)
	if raw == nil {
		return nil, nil
	}
	var defs map[string]json.RawMessage
	if err := json.Unmarshal(raw, &defs); err != nil {
		return nil, fmt.Errorf("%s: %w", PromptsMember, err)
	}
	return defs, nil
}

// PromptRefs returns the block references an llm.request payload's
// request uses, in order (messages, then tools). Inline blocks (the
// format before references) are not listed.
func PromptRefs(payload []byte) ([]string, error) {
	req := Field(payload, "request")
	if req == nil {
		return nil, nil
	}
	var refs []string
	for _, list := range promptLists {
		raw := Field(req, list)
		if raw == nil || bytes.Equal(raw, []byte("null")) {
			continue
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, fmt.Errorf("request.%s: %w", list, err)
		}
		for _, it := range items {
			if len(it) > 0 && it[0] == '"' {
				var s string
				if err := json.Unmarshal(it, &s); err != nil {
					return nil, fmt.Errorf("request.%s: %w", list, err)
				}
				refs = append(refs, s)
			}
		}
	}
	return refs, nil
}

// CheckPromptDefs checks that each block an llm.request payload defines
// hashes to its reference, and returns the definitions.
func CheckPromptDefs(payload []byte) (map[string]json.RawMessage, error) {
	defs, err := PromptDefs(payload)
	if err != nil {
		return nil, err
	}
	for ref, block := range defs {
		if !IsPromptRef(ref) {
			return nil, fmt.Errorf("prompt block name %q is not a reference (sha256:<64 hex>)", ref)
		}
		got, err := BlockRef(block)
		if err != nil {
			return nil, fmt.Errorf("prompt block %s: %w", ref, err)
		}
		if got != ref {
			return nil, fmt.Errorf("prompt block %s hashes to %s: its text was changed after it was written", ref, got)
		}
		if isList(block) {
			items, err := ListItems(block)
			if err != nil {
				return nil, fmt.Errorf("prompt block %s: %w", ref, err)
			}
			for _, it := range items {
				if !IsPromptRef(it) {
					return nil, fmt.Errorf("prompt block %s lists %q, which is not a reference", ref, it)
				}
			}
		} else if len(block) == 0 || block[0] != '{' {
			return nil, fmt.Errorf("prompt block %s is neither an object nor a list of references", ref)
		}
	}
	return defs, nil
}

// ListItems returns the references a list block lists (nil for a block
// that is not a list).
func ListItems(block []byte) ([]string, error) {
	if !isList(block) {
		return nil, nil
	}
	var items []string
	if err := json.Unmarshal(block, &items); err != nil {
		return nil, errors.New("a list block holds only references")
	}
	return items, nil
}

// Prompts is the table of the prompt blocks a session's llm.request
// events define, for reading recorded requests back whole.
type Prompts struct {
	blocks map[string]json.RawMessage
}

// NewPrompts returns the table of the blocks defined by the llm.request
// events among evs. A definition that does not hash to its reference is
// left out (replay's verify reports it), so a request that uses it does not
// read back.
func NewPrompts(evs []Event) *Prompts {
	p := &Prompts{blocks: map[string]json.RawMessage{}}
	for i := range evs {
		_ = p.Add(&evs[i])
	}
	return p
}

// Add records the blocks e defines, if e is an llm.request. It reports a
// definition that does not hash to its reference and records none of e's.
func (p *Prompts) Add(e *Event) error {
	if e.Type != LLMRequest {
		return nil
	}
	defs, err := CheckPromptDefs(e.Payload)
	if err != nil {
		return fmt.Errorf("llm.request seq %d: %w", e.Seq, err)
	}
	if p.blocks == nil {
		p.blocks = map[string]json.RawMessage{}
	}
	for ref, b := range defs {
		p.blocks[ref] = b
	}
	return nil
}

// Has reports whether the table holds ref.
func (p *Prompts) Has(ref string) bool {
	_, ok := p.blocks[ref]
	return ok
}

// Request returns the request an llm.request event records, whole: every
// reference replaced by its block, in canonical form. A request recorded
// whole (the earlier format) is returned as it is.
func (p *Prompts) Request(e *Event) (json.RawMessage, error) {
	req := Field(e.Payload, "request")
	if req == nil {
		return nil, fmt.Errorf("llm.request seq %d has no request", e.Seq)
	}
	refs, err := PromptRefs(e.Payload)
	if err != nil {
		return nil, fmt.Errorf("llm.request seq %d: %w", e.Seq, err)
	}
	if len(refs) == 0 {
		return req, nil
	}
	var own map[string]json.RawMessage // the event's own definitions
	ownRead := false
	var m map[string]json.RawMessage
	if err := json.Unmarshal(req, &m); err != nil {
		return nil, fmt.Errorf("llm.request seq %d: request: %w", e.Seq, err)
	}
	for _, list := range promptLists {
		raw, ok := m[list]
		if !ok || bytes.Equal(raw, []byte("null")) {
			continue
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, fmt.Errorf("llm.request seq %d: request.%s: %w", e.Seq, list, err)
		}
		out := make([]json.RawMessage, 0, len(items))
		for i, it := range items {
			if len(it) == 0 || it[0] != '"' {
				out = append(out, it)
				continue
			}
			var ref string
			if err := json.Unmarshal(it, &ref); err != nil {
				return nil, fmt.Errorf("llm.request seq %d: request.%s[%d]: %w", e.Seq, list, i, err)
			}
			if !ownRead {
				if own, err = CheckPromptDefs(e.Payload); err != nil {
					return nil, fmt.Errorf("llm.request seq %d: %w", e.Seq, err)
				}
				ownRead = true
			}
			if out, err = p.expand(ref, own, out, 0); err != nil {
				return nil, fmt.Errorf("llm.request seq %d: request.%s[%d]: %w", e.Seq, list, i, err)
			}
		}
		if m[list], err = marshalCanonical(out); err != nil {
			return nil, err
		}
	}
	return marshalCanonical(m)
}

// expand appends the blocks ref stands for to out: the block, or what
// each reference of a list block stands for.
func (p *Prompts) expand(ref string, own map[string]json.RawMessage, out []json.RawMessage, depth int) ([]json.RawMessage, error) {
	b, ok := p.blocks[ref]
	if !ok {
		if b, ok = own[ref]; !ok {
			return nil, fmt.Errorf("prompt block %s is not defined by an llm.request before it", ref)
		}
	}
	if !isList(b) {
		return append(out, b), nil
	}
	if depth >= maxListDepth {
		return nil, fmt.Errorf("prompt block %s: list blocks nest more than %d deep", ref, maxListDepth)
	}
	items, err := ListItems(b)
	if err != nil {
		return nil, fmt.Errorf("prompt block %s: %w", ref, err)
	}
	for _, it := range items {
		if out, err = p.expand(it, own, out, depth+1); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Payload returns an llm.request event's payload as the earlier format
// wrote it: the request whole and no prompts member.
func (p *Prompts) Payload(e *Event) (json.RawMessage, error) {
	if Field(e.Payload, PromptsMember) == nil {
		if refs, err := PromptRefs(e.Payload); err == nil && len(refs) == 0 {
			return e.Payload, nil
		}
	}
	req, err := p.Request(e)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(e.Payload, &m); err != nil {
		return nil, err
	}
	delete(m, PromptsMember)
	m["request"] = req
	return marshalCanonical(m)
}

// sealPrompts makes the block references of an llm.request payload, as
// redacted (red, and val when the caller has the decoded form), the
// digests of the blocks as they will be stored: a block the redactor
// changed gets the reference of its redacted text, in its definition, in
// the list blocks that list it (which are named anew in turn) and
// wherever the request uses it. So no reference is ever the digest of
// text that was not written, and the writer's references need not
// anticipate the redactor. It returns the payload to write and its
// decoded form (nil when it re-encoded from the bytes alone).
func sealPrompts(red []byte, val any) ([]byte, any, error) {
	if Field(red, PromptsMember) == nil {
		return red, val, nil
	}
	v := val
	if v == nil {
		dec := json.NewDecoder(bytes.NewReader(red))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return red, val, nil
	}
	defs, ok := m[PromptsMember].(map[string]any)
	if !ok {
		return red, val, nil // not an object: the payload schema rejects it
	}
	digest := func(b any) (string, error) {
		c, ok := appendCanonical(nil, b)
		if !ok {
			var err error
			if c, err = marshalCanonical(b); err != nil {
				return "", err
			}
		}
		return PromptRef(c), nil
	}
	// cur: each definition's name → the digest of its block as it now
	// stands. Lists are rebuilt from their items as written, so that a
	// list of a list follows its item's new name however late it moved.
	cur := make(map[string]string, len(defs))
	written := map[string][]any{}
	same := true
	for k, b := range defs {
		ref, err := digest(b)
		if err != nil {
			return nil, nil, fmt.Errorf("prompt block %s: %w", k, err)
		}
		cur[k] = ref
		same = same && ref == k
		if l, ok := b.([]any); ok {
			written[k] = append([]any(nil), l...)
		}
	}
	if same {
		return red, val, nil
	}
	rename := func(it any) any {
		if s, ok := it.(string); ok {
			if r, ok := cur[s]; ok {
				return r
			}
		}
		return it
	}
	for round := 0; ; round++ {
		if round > len(defs) {
			return nil, nil, errors.New("prompt blocks list each other in a cycle")
		}
		changed := false
		for k, items := range written {
			l := make([]any, len(items))
			for i, it := range items {
				l[i] = rename(it)
			}
			defs[k] = l
			ref, err := digest(l)
			if err != nil {
				return nil, nil, err
			}
			if ref != cur[k] {
				cur[k], changed = ref, true
			}
		}
		if !changed {
			break
		}
	}
	nd := make(map[string]any, len(defs))
	for k, b := range defs {
		nd[cur[k]] = b
	}
	m[PromptsMember] = nd
	if req, ok := m["request"].(map[string]any); ok {
		for _, list := range promptLists {
			items, _ := req[list].([]any)
			for i, it := range items {
				items[i] = rename(it)
			}
		}
	}
	out, ok := appendCanonical(nil, m)
	if !ok {
		var err error
		if out, err = marshalCanonical(m); err != nil {
			return nil, nil, err
		}
	}
	if val == nil {
		return out, nil, nil
	}
	return out, m, nil
}

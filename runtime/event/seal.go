package event

import (
	"bytes"
	"crypto/rand"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/schemas"
	"github.com/oklog/ulid/v2"
)

// Draft is an event before the store gives it an id, sequence number,
// timestamp and hash.
type Draft struct {
	RunID    string
	Type     string
	Actor    string
	Payload  any // a struct, map, json.RawMessage or []byte holding JSON
	ParentID string
}

// Prepared is a draft whose payload has been redacted, canonicalised and
// validated. Preparing is the expensive part of an append and needs no lock.
type Prepared struct {
	SessionID string
	RunID     string
	Type      string
	Actor     string
	Payload   json.RawMessage
	ParentID  *string
}

// Tip is the last event of a session as the chain needs it.
type Tip struct {
	Seq  int64
	Hash string
}

// SchemaViolationError is returned when a draft's payload fails its event
// type's schema. The store appends a schema.violation event in its place
// (Violation) and appends nothing else from the batch.
type SchemaViolationError struct {
	EventType string
	SchemaID  string
	Pointer   string
	Message   string
	Violation *Event // the schema.violation event appended instead, if any
}

func (e *SchemaViolationError) Error() string {
	ptr := e.Pointer
	if ptr == "" {
		ptr = "/"
	}
	return fmt.Sprintf("event %s: payload violates %s at %s: %s", e.EventType, e.SchemaID, ptr, e.Message)
}

// ErrInvalidSession is returned for a session id that is not safe to use as
// a file name component.
var ErrInvalidSession = errors.New("invalid session id")

// ValidSessionID reports whether id can name a session: 1–128 characters of
// letters, digits, '.', '_' and '-', not starting with a dot or dash and
// without "..".
// It runs on every append, so it is a loop rather than a regular
// expression (TestValidSessionIDMatchesPattern keeps the two equal).
func ValidSessionID(id string) bool {
	if len(id) == 0 || len(id) > 128 || id[0] == '.' || id[0] == '_' || id[0] == '-' {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return !containsDotDot(id)
}

func containsDotDot(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '.' && s[i+1] == '.' {
			return true
		}
	}
	return false
}

// Sealer turns drafts into chained events: redact, canonicalise, validate,
// then (under the store's per-session lock) number and hash.
type Sealer struct {
	schemas  *schemas.Registry
	redactor *redact.Redactor
	now      func() time.Time
	known    map[string]string // event type → payload schema id

	mu      sync.Mutex
	entropy *ulid.MonotonicEntropy
}

// NewSealer returns a Sealer. A nil redactor uses redact.New(nil); a nil
// clock uses time.Now.
func NewSealer(reg *schemas.Registry, r *redact.Redactor, now func() time.Time) (*Sealer, error) {
	if r == nil {
		r = redact.New(nil)
	}
	if now == nil {
		now = time.Now
	}
	s := &Sealer{schemas: reg, redactor: r, now: now, known: map[string]string{}, entropy: ulid.Monotonic(rand.Reader, 0)}
	for _, t := range Types {
		id := schemas.PayloadSchemaID(t)
		if !reg.Has(id) {
			return nil, fmt.Errorf("event: no payload schema %s for %s: %w", id, t, schemas.ErrUnknownSchema)
		}
		s.known[t] = id
	}
	return s, nil
}

// Redactor returns the redactor applied to every payload.
func (s *Sealer) Redactor() *redact.Redactor { return s.redactor }

// Prepare redacts, canonicalises and validates one draft.
func (s *Sealer) Prepare(sessionID string, d Draft) (Prepared, error) {
	if !ValidSessionID(sessionID) {
		return Prepared{}, fmt.Errorf("event: %q: %w", sessionID, ErrInvalidSession)
	}
	schemaID, ok := s.known[d.Type]
	if !ok {
		return Prepared{}, &SchemaViolationError{EventType: d.Type, SchemaID: "event_v1", Pointer: "/type", Message: fmt.Sprintf("unknown event type %q", d.Type)}
	}
	if d.Actor == "" {
		return Prepared{}, &SchemaViolationError{EventType: d.Type, SchemaID: "event_v1", Pointer: "/actor", Message: "actor is required"}
	}
	red, val, err := s.redactPayload(d.Payload)
	if err != nil {
		return Prepared{}, &SchemaViolationError{EventType: d.Type, SchemaID: schemaID, Message: "payload is not JSON: " + err.Error()}
	}
	if d.Type == LLMRequest {
		// References name the blocks as redacted (prompts.go).
		if red, val, err = sealPrompts(red, val); err != nil {
			return Prepared{}, &SchemaViolationError{EventType: d.Type, SchemaID: schemaID, Pointer: "/" + PromptsMember, Message: err.Error()}
		}
	}
	if val != nil {
		err = s.schemas.ValidateDecoded(schemaID, val)
	} else {
		err = s.schemas.ValidateJSON(schemaID, red)
	}
	if err != nil {
		var ve *schemas.ValidationError
		if errors.As(err, &ve) {
			releaseDecoded(val) // ve holds strings only
			return Prepared{}, &SchemaViolationError{EventType: d.Type, SchemaID: schemaID, Pointer: ve.Pointer, Message: ve.Message}
		}
		return Prepared{}, err
	}
	// The decoded copy served validation and the encoding; nothing keeps it.
	releaseDecoded(val)
	p := Prepared{SessionID: sessionID, RunID: s.redactor.String(d.RunID), Type: d.Type, Actor: s.redactor.String(d.Actor), Payload: red}
	if d.ParentID != "" {
		// Parent ids are event ids; masking one that somehow carries a
		// secret keeps every written field behind the redactor.
		pid := s.redactor.String(d.ParentID)
		p.ParentID = &pid
	}
	return p, nil
}

// PrepareAll prepares a batch. On a schema violation it returns the error
// and a one-event batch holding the schema.violation to append instead.
func (s *Sealer) PrepareAll(sessionID string, drafts []Draft) ([]Prepared, error) {
	out := make([]Prepared, 0, len(drafts))
	for _, d := range drafts {
		p, err := s.Prepare(sessionID, d)
		if err != nil {
			var sv *SchemaViolationError
			if !errors.As(err, &sv) {
				return nil, err
			}
			vp, verr := s.Prepare(sessionID, Draft{RunID: d.RunID, Type: SchemaViolation, Actor: "runtime", Payload: map[string]any{
				"schema_id": sv.SchemaID, "event_type": sv.EventType, "pointer": sv.Pointer, "message": sv.Message, "boundary": "event.append",
			}})
			if verr != nil {
				return nil, errors.Join(err, verr)
			}
			return []Prepared{vp}, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Chain numbers and hashes prepared events after tip. The caller must hold
// the session's append lock so that tip is current.
func (s *Sealer) Chain(tip Tip, ps []Prepared) []Event {
	out, _ := s.chain(tip, ps, false)
	return out
}

// ChainLines is Chain that also returns each event's line, encoding each
// event once for both its hash and its line. A caller that is done with
// the lines may hand them back with ReleaseLines.
func (s *Sealer) ChainLines(tip Tip, ps []Prepared) ([]Event, [][]byte) {
	return s.chain(tip, ps, true)
}

// bufPool recycles byte buffers that die young: the line each caller of
// ChainLines renders (the SQLite store copies it into its batch row, and
// the line is garbage right after) and the scratch buffer a payload is
// canonically encoded into. At ~100k events/s they were a fifth of what
// an append allocated.
var bufPool sync.Pool // *[]byte

// maxPooledBuffer bounds the buffers kept for reuse, so that one huge
// event does not pin its buffer.
const maxPooledBuffer = 16 << 10

// buffer returns an empty buffer of capacity at least n.
func buffer(n int) []byte {
	if p, ok := bufPool.Get().(*[]byte); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]byte, 0, max(n, 512))
}

// ReleaseLines hands lines from ChainLines back for reuse. Neither the
// lines nor anything sliced from them may be used afterwards; the events
// ChainLines returned do not share their memory.
func ReleaseLines(lines [][]byte) {
	for i, b := range lines {
		releaseBuffer(b)
		lines[i] = nil
	}
}

func releaseBuffer(b []byte) {
	if b != nil && cap(b) <= maxPooledBuffer {
		b = b[:0]
		bufPool.Put(&b)
	}
}

func (s *Sealer) chain(tip Tip, ps []Prepared, withLines bool) ([]Event, [][]byte) {
	now := s.now().UTC()
	ts := formatTS(now)
	out := make([]Event, len(ps))
	var lines [][]byte
	if withLines {
		lines = make([][]byte, len(ps))
	}
	s.mu.Lock()
	for i := range ps {
		out[i].ID = ulid.MustNew(ulid.Timestamp(now), s.entropy).String()
	}
	s.mu.Unlock()
	prev := tip
	for i, p := range ps {
		e := &out[i]
		e.SessionID, e.RunID, e.Type, e.Actor, e.Payload, e.ParentID = p.SessionID, p.RunID, p.Type, p.Actor, p.Payload, p.ParentID
		e.Seq = prev.Seq + 1
		e.TS = ts
		e.SchemaVersion = SchemaVersion
		e.PrevHash = prev.Hash
		if withLines {
			lines[i] = e.seal(buffer(e.lineSize()))
		} else {
			e.Hash = e.ComputeHash()
		}
		prev = Tip{Seq: e.Seq, Hash: e.Hash}
	}
	return out, lines
}

// redactPayload returns the payload redacted and canonically encoded, and
// when it has it, the redacted value in decoded-JSON form (so validation
// need not decode the bytes again). Payloads that are plain JSON-shaped Go
// values (maps with string keys, slices, strings, integers, booleans, and
// pointers or interfaces holding them) are converted to the decoded form
// the redactor works on directly and encoded by appendCanonical;
// everything else takes the long way through json.Marshal and a decode.
// Both ways give the same bytes: the short one skips two encodes and two
// decodes, about half of the CPU of an append.
func (s *Sealer) redactPayload(p any) ([]byte, any, error) {
	switch p.(type) {
	case nil, json.RawMessage, []byte:
	default:
		if v, ok := decodedValue(s.redactor, p, 0); ok && v != nil {
			// Encoded into a recycled buffer, then copied to one of its
			// exact size: the payload lives as long as its event.
			buf, ok := appendCanonical(buffer(256), v)
			var b []byte
			if ok {
				b = bytes.Clone(buf)
			}
			releaseBuffer(buf)
			if ok {
				return b, v, nil
			}
			b, err := marshalCanonical(v)
			return b, v, err
		}
	}
	raw, err := payloadJSON(p)
	if err != nil {
		return nil, nil, err
	}
	b, err := s.redactor.JSON(raw)
	return b, nil, err
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
	jsonNumber    = reflect.TypeFor[json.Number]()
)

// decodedValue copies p into decoded-JSON form: jsonValue with the common
// payload types handled without reflection. With a redactor it is
// r.Value of that copy in one pass (strings, keys and secret-named members
// are redacted as the copy is built).
func decodedValue(r *redact.Redactor, p any, depth int) (any, bool) {
	if depth > 100 {
		return nil, false
	}
	switch x := p.(type) {
	case nil:
		return nil, true
	case string:
		if !utf8.ValidString(x) {
			return nil, false
		}
		if r != nil {
			if rs := r.String(x); rs != x {
				return rs, true
			}
		}
		return p, true // p already holds x: no new interface value
	case bool:
		return x, true
	case int:
		return intNumber(int64(x)), true
	case int64:
		return intNumber(x), true
	case map[string]any:
		if x == nil {
			return nil, true
		}
		m := newMap(len(x))
		for k, e := range x {
			if !utf8.ValidString(k) {
				return nil, false
			}
			v, ok := decodedValue(r, e, depth+1)
			if !ok {
				return nil, false
			}
			if r != nil {
				if r.IsSecretName(k) {
					if _, isObj := v.(map[string]any); !isObj {
						v = redact.Mask
					}
				}
				k = r.String(k)
			}
			m[k] = v
		}
		return m, true
	case []any:
		return decodedSlice(x, func(e any) (any, bool) { return decodedValue(r, e, depth+1) })
	case []string:
		// Common in payloads (file lists, argv); what jsonValue and
		// r.Value make of it, without reflection.
		return decodedSlice(x, func(e string) (any, bool) {
			if !utf8.ValidString(e) {
				return nil, false
			}
			if r != nil {
				e = r.String(e)
			}
			return e, true
		})
	case []int:
		return decodedSlice(x, func(e int) (any, bool) { return intNumber(int64(e)), true })
	default:
		v, ok := jsonValue(reflect.ValueOf(p), depth)
		if ok && r != nil {
			v = r.Value(v)
		}
		return v, ok
	}
}

// mapPool recycles the maps of decoded payload copies. A copy lives only
// while Prepare validates and encodes it, and its maps were most of what
// an append allocated. Only the copy's own maps go back (decodedValue and
// jsonValue make new maps all the way down, never the caller's).
var mapPool = sync.Pool{New: func() any { return map[string]any{} }}

// maxPooledMap bounds the maps handed out and kept for reuse: up to 8
// entries a map is one group, and a cleared map keeps its size, so a
// bigger one would make every later small copy slower to iterate.
const maxPooledMap = 8

func newMap(n int) map[string]any {
	if n > maxPooledMap {
		return make(map[string]any, n)
	}
	return mapPool.Get().(map[string]any)
}

// releaseDecoded hands the maps of a decoded copy back for reuse. The copy
// must not be used afterwards.
func releaseDecoded(v any) {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			releaseDecoded(e)
		}
		if len(x) <= maxPooledMap {
			clear(x)
			mapPool.Put(x)
		}
	case []any:
		for _, e := range x {
			releaseDecoded(e)
		}
	}
}

// smallNumbers holds 0..255 as decoded JSON numbers in interface values,
// so that the small integers payloads are full of (line ranges, counts,
// exit codes) cost no allocation.
var smallNumbers = func() (a [256]any) {
	for i := range a {
		a[i] = json.Number(strconv.Itoa(i))
	}
	return a
}()

// intNumber is n as a decoded JSON number.
func intNumber(n int64) any {
	if n >= 0 && n < int64(len(smallNumbers)) {
		return smallNumbers[n]
	}
	return json.Number(strconv.FormatInt(n, 10))
}

// decodedSlice converts each element of x with conv into a []any; a nil
// slice is JSON null.
func decodedSlice[E any](x []E, conv func(E) (any, bool)) (any, bool) {
	if x == nil {
		return nil, true
	}
	a := make([]any, len(x))
	for i, e := range x {
		v, ok := conv(e)
		if !ok {
			return nil, false
		}
		a[i] = v
	}
	return a, true
}

// jsonValue converts v to what decoding json.Marshal(v) with UseNumber
// yields: map[string]any, []any, string, json.Number, bool or nil. It
// reports false for anything whose encoding it does not reproduce exactly
// (structs, arrays, byte slices, floats, custom marshalers, invalid UTF-8,
// json.Number, very deep values), which the caller then marshals.
func jsonValue(v reflect.Value, depth int) (any, bool) {
	if !v.IsValid() {
		return nil, true
	}
	if depth > 100 {
		return nil, false
	}
	t := v.Type()
	if t == jsonNumber || reflect.PointerTo(t).Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
		return nil, false
	}
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			return nil, true
		}
		return decodedValue(nil, v.Elem().Interface(), depth+1)
	case reflect.Pointer:
		if v.IsNil() {
			return nil, true
		}
		return jsonValue(v.Elem(), depth+1)
	case reflect.String:
		str := v.String()
		return str, utf8.ValidString(str)
	case reflect.Bool:
		return v.Bool(), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return intNumber(v.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return json.Number(strconv.FormatUint(v.Uint(), 10)), true
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, false
		}
		if v.IsNil() {
			return nil, true
		}
		m := newMap(v.Len())
		for it := v.MapRange(); it.Next(); {
			k := it.Key().String()
			if !utf8.ValidString(k) {
				return nil, false
			}
			e, ok := jsonValue(it.Value(), depth+1)
			if !ok {
				return nil, false
			}
			m[k] = e
		}
		return m, true
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil, false // base64, or a custom element encoding
		}
		if v.IsNil() {
			return nil, true
		}
		a := make([]any, v.Len())
		for i := range a {
			e, ok := jsonValue(v.Index(i), depth+1)
			if !ok {
				return nil, false
			}
			a[i] = e
		}
		return a, true
	default:
		return nil, false
	}
}

func payloadJSON(p any) ([]byte, error) {
	switch v := p.(type) {
	case nil:
		return []byte(`{}`), nil
	case json.RawMessage:
		return v, nil
	case []byte:
		return v, nil
	default:
		return json.Marshal(v)
	}
}

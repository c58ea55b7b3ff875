package schemas

import (
	"encoding/json"
	"math/big"
	"regexp"
	"strconv"
	"unicode/utf8"
)

// The fast path.
//
// Every appended event is validated against its payload schema, and the
// library validator costs microseconds and a dozen allocations even for a
// tiny valid payload: it builds scopes, evaluation trackers and error values
// on every call. Almost every payload is valid, so the registry also compiles
// each schema that stays inside a small, plain subset of JSON Schema 2020-12
// into a tree of fastNode checks that walk the decoded value without
// allocating in the common case.
//
// A fastNode only ever answers "definitely valid". When it says anything else
// ValidateDecoded runs the library exactly as before, so every error (its
// pointer and message) still comes from the library and a rejection can never
// differ. The node must therefore never accept what the library rejects: each
// keyword below mirrors the library's own code (santhosh-tekuri/jsonschema/v6
// validator.go), and a schema using any keyword outside the subset gets no
// fast node at all. Where a value is unusual enough that matching the library
// would need care (a json.Number that is not JSON number syntax), the node
// declines and the library decides.

// draft2020 is the only dialect the fast path compiles; it is the registry's
// default draft and the one every schema file names.
const draft2020 = "https://json-schema.org/draft/2020-12/schema"

// jsonTypes is a set of JSON Schema type names as a bit mask.
type jsonTypes uint8

const (
	typeNull jsonTypes = 1 << iota
	typeBoolean
	typeNumber
	typeInteger
	typeString
	typeArray
	typeObject
)

var typeNames = map[string]jsonTypes{
	"null": typeNull, "boolean": typeBoolean, "number": typeNumber, "integer": typeInteger,
	"string": typeString, "array": typeArray, "object": typeObject,
}

// fastNode is one compiled (sub)schema. Zero-valued fields mean "keyword
// absent", so the zero fastNode is the empty schema {} that accepts anything.
type fastNode struct {
	reject bool      // the boolean schema false
	types  jsonTypes // 0: no "type"

	hasConst bool
	constVal any
	hasEnum  bool
	enum     []any

	minLength, maxLength int // -1: absent
	pattern              *regexp.Regexp
	minimum, maximum     *bound

	required   []string
	props      []fastProp
	propByName map[string]*fastNode
	additional *fastNode // nil: "additionalProperties" absent
	items      *fastNode // nil: "items" absent
}

type fastProp struct {
	name string
	node *fastNode
}

// bound is a "minimum" or "maximum" value, exact as a rational like the
// library's, with an int64 copy when it is an integer that fits, so the
// common integer instance compares without allocating.
type bound struct {
	rat     *big.Rat
	i       int64
	isInt64 bool
}

// compileFast compiles a schema document (a schema file as
// jsonschema.UnmarshalJSON decodes it) to a fastNode. It only reads doc.
// ok is false when the schema uses anything outside the subset; the
// registry then validates that schema with the library only.
func compileFast(doc any) (n *fastNode, ok bool) {
	m, isMap := doc.(map[string]any)
	if !isMap {
		return nil, false
	}
	if s, has := m["$schema"]; has && s != draft2020 {
		return nil, false
	}
	n, err := compileNode(doc, true)
	return n, err == nil
}

// errUnsupported marks a schema the fast path does not compile. It never
// leaves this file: the caller just keeps the library path.
type errUnsupported string

func (e errUnsupported) Error() string { return "fast path: unsupported " + string(e) }

// compileNode compiles one (sub)schema. $schema and $id are accepted only at
// the root, where they name the dialect and the file; nested ones could start
// a new resource with another dialect.
func compileNode(doc any, root bool) (*fastNode, error) {
	switch d := doc.(type) {
	case bool:
		return &fastNode{reject: !d, minLength: -1, maxLength: -1}, nil
	case map[string]any:
		n := &fastNode{minLength: -1, maxLength: -1}
		for kw, v := range d {
			if err := n.compileKeyword(kw, v, root); err != nil {
				return nil, err
			}
		}
		return n, nil
	default:
		return nil, errUnsupported("schema value")
	}
}

func (n *fastNode) compileKeyword(kw string, v any, root bool) error {
	var err error
	switch kw {
	case "$schema", "$id":
		if !root {
			return errUnsupported("nested " + kw)
		}
	case "title", "description", "examples", "default", "$comment":
		// Annotations: no effect on validity.
	case "type":
		n.types, err = compileTypes(v)
	case "const":
		n.hasConst, n.constVal = true, v
	case "enum":
		arr, ok := v.([]any)
		if !ok {
			return errUnsupported("enum")
		}
		n.hasEnum, n.enum = true, arr
	case "minLength":
		n.minLength, err = compileCount(v)
	case "maxLength":
		n.maxLength, err = compileCount(v)
	case "pattern":
		s, ok := v.(string)
		if !ok {
			return errUnsupported("pattern")
		}
		// The library's default regexp engine is regexp.Compile too.
		n.pattern, err = regexp.Compile(s)
	case "minimum":
		n.minimum, err = compileBound(v)
	case "maximum":
		n.maximum, err = compileBound(v)
	case "required":
		n.required, err = compileRequired(v)
	case "properties":
		err = n.compileProperties(v)
	case "additionalProperties":
		n.additional, err = compileNode(v, false)
	case "items":
		n.items, err = compileNode(v, false)
	default:
		return errUnsupported(kw)
	}
	return err
}

func compileTypes(v any) (jsonTypes, error) {
	names := []any{v}
	if arr, ok := v.([]any); ok {
		names = arr
	}
	var t jsonTypes
	for _, name := range names {
		s, _ := name.(string)
		bit, ok := typeNames[s]
		if !ok {
			return 0, errUnsupported("type")
		}
		t |= bit
	}
	if t == 0 {
		return 0, errUnsupported("empty type")
	}
	return t, nil
}

// compileCount reads minLength or maxLength the way the library does (any
// number that is mathematically a non-negative integer, e.g. 2 or 2.0).
func compileCount(v any) (int, error) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, errUnsupported("length")
	}
	r, ok := new(big.Rat).SetString(num.String())
	if !ok || !r.IsInt() || r.Sign() < 0 || !r.Num().IsInt64() || r.Num().Int64() > 1<<31 {
		return 0, errUnsupported("length")
	}
	return int(r.Num().Int64()), nil
}

func compileBound(v any) (*bound, error) {
	num, ok := v.(json.Number)
	if !ok {
		return nil, errUnsupported("bound")
	}
	r, ok := new(big.Rat).SetString(num.String())
	if !ok {
		return nil, errUnsupported("bound")
	}
	b := &bound{rat: r}
	if r.IsInt() && r.Num().IsInt64() {
		b.i, b.isInt64 = r.Num().Int64(), true
	}
	return b, nil
}

func compileRequired(v any) ([]string, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, errUnsupported("required")
	}
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, errUnsupported("required")
		}
		out = append(out, s)
	}
	return out, nil
}

func (n *fastNode) compileProperties(v any) error {
	m, ok := v.(map[string]any)
	if !ok {
		return errUnsupported("properties")
	}
	n.propByName = make(map[string]*fastNode, len(m))
	for name, sub := range m {
		c, err := compileNode(sub, false)
		if err != nil {
			return err
		}
		n.props = append(n.props, fastProp{name, c})
		n.propByName[name] = c
	}
	return nil
}

// valid reports whether v is definitely valid against the node. false means
// "invalid, or not decided here": the caller must ask the library. v holds
// only decoded JSON types (ValidateDecoded checked that first).
func (n *fastNode) valid(v any) bool {
	if n.reject {
		return false
	}
	if num, ok := v.(json.Number); ok && !jsonNumberSyntax(string(num)) {
		return false
	}
	if n.types != 0 && !n.typeMatches(v) {
		return false
	}
	if n.hasConst && !equalJSON(v, n.constVal) {
		return false
	}
	if n.hasEnum && !n.inEnum(v) {
		return false
	}
	switch x := v.(type) {
	case map[string]any:
		return n.validObject(x)
	case []any:
		return n.validArray(x)
	case string:
		return n.validString(x)
	case json.Number:
		return n.validNumber(x)
	}
	return true
}

// typeMatches mirrors the library: "integer" also accepts a number that is
// mathematically an integer, such as 1.0 or 1e2.
func (n *fastNode) typeMatches(v any) bool {
	var t jsonTypes
	switch v.(type) {
	case nil:
		t = typeNull
	case bool:
		t = typeBoolean
	case json.Number:
		t = typeNumber
	case string:
		t = typeString
	case []any:
		t = typeArray
	case map[string]any:
		t = typeObject
	}
	if n.types&t != 0 {
		return true
	}
	return t == typeNumber && n.types&typeInteger != 0 && isIntegral(v.(json.Number))
}

func (n *fastNode) inEnum(v any) bool {
	for _, e := range n.enum {
		if equalJSON(v, e) {
			return true
		}
	}
	return false
}

func (n *fastNode) validObject(obj map[string]any) bool {
	for _, name := range n.required {
		if _, ok := obj[name]; !ok {
			return false
		}
	}
	if n.additional == nil {
		// Only declared properties are checked: look them up rather
		// than range over the instance.
		for _, p := range n.props {
			if pv, ok := obj[p.name]; ok && !p.node.valid(pv) {
				return false
			}
		}
		return true
	}
	for name, pv := range obj {
		sub, ok := n.propByName[name]
		if !ok {
			sub = n.additional
		}
		if !sub.valid(pv) {
			return false
		}
	}
	return true
}

func (n *fastNode) validArray(arr []any) bool {
	if n.items == nil {
		return true
	}
	for _, e := range arr {
		if !n.items.valid(e) {
			return false
		}
	}
	return true
}

// validString counts code points as the library does (utf8.RuneCount, where
// each invalid byte counts as one).
func (n *fastNode) validString(s string) bool {
	if n.minLength >= 0 || n.maxLength >= 0 {
		c := utf8.RuneCountInString(s)
		if c < n.minLength || (n.maxLength >= 0 && c > n.maxLength) {
			return false
		}
	}
	return n.pattern == nil || n.pattern.MatchString(s)
}

func (n *fastNode) validNumber(num json.Number) bool {
	if n.minimum != nil {
		if c, ok := n.minimum.compare(num); !ok || c < 0 {
			return false
		}
	}
	if n.maximum != nil {
		if c, ok := n.maximum.compare(num); !ok || c > 0 {
			return false
		}
	}
	return true
}

// compare returns the sign of num - b, exactly; num is in JSON number syntax.
// ok is false when big.Rat cannot represent num (an exponent too large for
// it), where the library's own comparison would fail: the library decides.
func (b *bound) compare(num json.Number) (sign int, ok bool) {
	if b.isInt64 && plainInteger(string(num)) {
		if i, err := strconv.ParseInt(string(num), 10, 64); err == nil {
			switch {
			case i < b.i:
				return -1, true
			case i > b.i:
				return 1, true
			}
			return 0, true
		}
	}
	r, ok := new(big.Rat).SetString(string(num))
	if !ok {
		return 0, false
	}
	return r.Cmp(b.rat), true
}

// isIntegral is the library's isInteger: num parses as a rational with
// denominator 1. Plain integer literals skip the big.Rat.
func isIntegral(num json.Number) bool {
	if plainInteger(string(num)) {
		return true
	}
	r, ok := new(big.Rat).SetString(string(num))
	return ok && r.IsInt()
}

// equalJSON is the library's equals for decoded values: deep equality where
// numbers compare as exact rationals, so 1, 1.0 and 1e0 are equal.
func equalJSON(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equalJSON(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		if x == y && jsonNumberSyntax(string(x)) {
			return true
		}
		rx, okx := new(big.Rat).SetString(string(x))
		ry, oky := new(big.Rat).SetString(string(y))
		return okx && oky && rx.Cmp(ry) == 0
	}
	return false
}

// plainInteger reports whether s is a JSON integer literal: -?(0|[1-9][0-9]*).
func plainInteger(s string) bool {
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// jsonNumberSyntax reports whether s is a number as JSON spells it
// (RFC 8259 §6), which is all a decoder with UseNumber produces. The library
// accepts other json.Number strings big.Rat happens to parse ("0x10", "1/2")
// and can panic on ones it cannot; the fast path leaves those to it.
func jsonNumberSyntax(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() int {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - start
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

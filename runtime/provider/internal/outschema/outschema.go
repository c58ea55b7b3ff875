// Package outschema derives the request schemas the providers' structured
// output features take from the runtime's own JSON Schemas (schemas/*.json,
// draft 2020-12), so a role's output contract is written once:
//
//   - OpenAI response_format json_schema: a strict-mode variant when one
//     can be made (every property required, additionalProperties false,
//     only keywords strict mode supports), else the schema as it is, sent
//     non-strict.
//   - Anthropic tool input_schema: the schema without $schema/$id.
//   - Gemini responseSchema: the OpenAPI 3.0 subset Gemini accepts
//     (upper-case types, string enums, nullable, propertyOrdering).
//
// Every derived schema accepts only documents the original accepts, or
// says what it leaves out in a description: the runtime validates every
// answer against the original schema anyway, so a keyword a provider cannot
// enforce only moves a violation from the provider to the local check and
// its repair path. Key order is kept: providers generate members in schema
// order, and the same schema must render the same bytes for prompt caching.
package outschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Object is a JSON object that keeps its members' order.
type Object struct {
	Keys []string
	Vals map[string]any
}

// Get returns a member.
func (o *Object) Get(k string) (any, bool) {
	v, ok := o.Vals[k]
	return v, ok
}

// Set sets a member, appending new keys.
func (o *Object) Set(k string, v any) {
	if _, ok := o.Vals[k]; !ok {
		o.Keys = append(o.Keys, k)
	}
	o.Vals[k] = v
}

// Delete removes a member.
func (o *Object) Delete(k string) {
	if _, ok := o.Vals[k]; !ok {
		return
	}
	delete(o.Vals, k)
	for i, x := range o.Keys {
		if x == k {
			o.Keys = append(o.Keys[:i:i], o.Keys[i+1:]...)
			break
		}
	}
}

// MarshalJSON writes the members in order.
func (o *Object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.Keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		vb, err := json.Marshal(o.Vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func newObject() *Object { return &Object{Vals: map[string]any{}} }

// Parse decodes a JSON document keeping object member order; numbers stay
// json.Number.
func Parse(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("outschema: trailing data after the schema")
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := newObject()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				o.Set(k, v)
			}
			_, err := dec.Token()
			return o, err
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			_, err := dec.Token()
			return arr, err
		}
		return nil, fmt.Errorf("outschema: unexpected %v", t)
	default:
		return t, nil
	}
}

// root parses raw and checks it is an object schema.
func root(raw []byte) (*Object, error) {
	v, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("outschema: %w", err)
	}
	o, ok := v.(*Object)
	if !ok {
		return nil, errors.New("outschema: the schema is not a JSON object")
	}
	if t, _ := o.Get("type"); t != "object" {
		return nil, errors.New(`outschema: a response schema must have "type": "object" at its root`)
	}
	return o, nil
}

// clone deep-copies a parsed value.
func clone(v any) any {
	switch t := v.(type) {
	case *Object:
		o := newObject()
		for _, k := range t.Keys {
			o.Set(k, clone(t.Vals[k]))
		}
		return o
	case []any:
		out := make([]any, len(t))
		for i := range t {
			out[i] = clone(t[i])
		}
		return out
	default:
		return v
	}
}

// jsonType is the JSON Schema type of a literal.
func jsonType(v any) string {
	switch t := v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number:
		if _, err := t.Int64(); err == nil {
			return "integer"
		}
		return "number"
	case nil:
		return "null"
	case []any:
		return "array"
	case *Object:
		return "object"
	}
	return ""
}

// enumType is the one type of an enum's values, "" if they differ.
func enumType(vals []any) string {
	t := ""
	for i, v := range vals {
		vt := jsonType(v)
		if vt == "integer" {
			vt = "number"
		}
		if i > 0 && vt != t {
			return ""
		}
		t = vt
	}
	if t == "number" {
		for _, v := range vals {
			if jsonType(v) != "integer" {
				return "number"
			}
		}
		return "integer"
	}
	return t
}

// describeDropped folds keywords a provider cannot enforce into the
// description, so the model still reads the constraint.
func describeDropped(o *Object, dropped []string) {
	if len(dropped) == 0 {
		return
	}
	sort.Strings(dropped)
	note := "Constraints: " + strings.Join(dropped, "; ") + "."
	if d, ok := o.Get("description"); ok {
		if s, ok := d.(string); ok && s != "" {
			note = s + " " + note
		}
	}
	o.Set("description", note)
}

func constraint(k string, v any) string {
	b, _ := json.Marshal(v)
	switch k {
	case "minLength":
		return fmt.Sprintf("length at least %s", b)
	case "maxLength":
		return fmt.Sprintf("length at most %s", b)
	case "uniqueItems":
		return "items unique"
	}
	return fmt.Sprintf("%s %s", k, b)
}

package outschema

import (
	"encoding/json"
	"fmt"
	"strings"
)

// annotations carry no constraint; they are dropped from request schemas.
var annotations = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "examples": true, "default": true,
	"deprecated": true, "readOnly": true, "writeOnly": true,
}

// OpenAI returns the schema for response_format json_schema and whether it
// may be sent with strict: true. The strict variant requires every
// property (optional ones included: a document with all of them is still
// valid against the original), closes every object
// (additionalProperties: false), writes const as a one-value enum, gives an
// enum its type, and moves the assertions strict mode lacks (minLength,
// maxLength, uniqueItems ...) into the description. A schema that needs
// more than that (oneOf, allOf, not, open objects, patternProperties,
// references) is returned as it is, for a non-strict request.
func OpenAI(raw []byte) (*Object, bool, error) {
	o, err := root(raw)
	if err != nil {
		return nil, false, err
	}
	plain := clone(o).(*Object)
	for k := range annotations {
		plain.Delete(k)
	}
	strict := clone(plain)
	if strictify(strict) {
		return strict.(*Object), true, nil
	}
	return plain, false, nil
}

// strictKeep are the keywords strict mode supports as they are.
var strictKeep = map[string]bool{
	"type": true, "description": true, "title": true, "enum": true, "anyOf": true,
	"properties": true, "required": true, "additionalProperties": true, "items": true,
	"minItems": true, "maxItems": true, "pattern": true, "format": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
}

// strictDescribed are assertions strict mode lacks; they move into the
// description.
var strictDescribed = map[string]bool{
	"minLength": true, "maxLength": true, "uniqueItems": true, "minProperties": true, "maxProperties": true,
	"contentEncoding": true, "contentMediaType": true,
}

func strictify(v any) bool {
	o, ok := v.(*Object)
	if !ok {
		return false
	}
	var dropped []string
	for _, k := range append([]string(nil), o.Keys...) {
		val := o.Vals[k]
		switch {
		case annotations[k]:
			o.Delete(k)
		case k == "const":
			o.Delete(k)
			o.Set("enum", []any{val})
		case strictDescribed[k]:
			o.Delete(k)
			dropped = append(dropped, constraint(k, val))
		case !strictKeep[k]:
			return false // oneOf, allOf, not, if/then/else, patternProperties, $ref ...
		}
	}
	if _, ok := o.Get("type"); !ok {
		e, hasEnum := o.Get("enum")
		_, hasAnyOf := o.Get("anyOf")
		switch {
		case hasEnum:
			vals, _ := e.([]any)
			t := enumType(vals)
			if t == "" {
				return false
			}
			o.Set("type", t)
		case !hasAnyOf:
			return false
		}
	}
	props, hasProps := o.Get("properties")
	if hasProps || hasType(o, "object") {
		if ap, ok := o.Get("additionalProperties"); ok && ap != false {
			return false
		}
		p, ok := props.(*Object)
		if !hasProps {
			p, ok = newObject(), true
			o.Set("properties", p)
		}
		if !ok {
			return false
		}
		names := make([]any, 0, len(p.Keys))
		for _, k := range p.Keys {
			if !strictify(p.Vals[k]) {
				return false
			}
			names = append(names, k)
		}
		o.Set("required", names)
		o.Set("additionalProperties", false)
	}
	if items, ok := o.Get("items"); ok && !strictify(items) {
		return false
	}
	if a, ok := o.Get("anyOf"); ok {
		list, ok := a.([]any)
		if !ok {
			return false
		}
		for _, s := range list {
			if !strictify(s) {
				return false
			}
		}
	}
	describeDropped(o, dropped)
	return true
}

func hasType(o *Object, want string) bool {
	switch t := o.Vals["type"].(type) {
	case string:
		return t == want
	case []any:
		for _, x := range t {
			if x == want {
				return true
			}
		}
	}
	return false
}

// Anthropic returns the input_schema of the forced tool that carries a
// role's output: the schema without its annotations. Anthropic tool input
// schemas take standard JSON Schema.
func Anthropic(raw []byte) (*Object, error) {
	o, err := root(raw)
	if err != nil {
		return nil, err
	}
	out := clone(o).(*Object)
	for k := range annotations {
		out.Delete(k)
	}
	return out, nil
}

// Gemini returns the responseSchema for raw in the OpenAPI 3.0 subset the
// Gemini API accepts: upper-case types, nullable instead of a "null" type,
// enums of strings only, const as a one-value enum, propertyOrdering set to
// the schema's order. Keywords Gemini lacks are dropped, the asserting ones
// noted in the description.
func Gemini(raw []byte) (*Object, error) {
	o, err := root(raw)
	if err != nil {
		return nil, err
	}
	return gemini(o, "")
}

func gemini(v any, at string) (*Object, error) {
	o, ok := v.(*Object)
	if !ok {
		return nil, fmt.Errorf("outschema: at %s: a schema must be an object for Gemini", orRoot(at))
	}
	out := newObject()
	var dropped []string
	switch t := o.Vals["type"].(type) {
	case string:
		if t == "null" {
			return nil, fmt.Errorf("outschema: at %s: Gemini has no null type", orRoot(at))
		}
		out.Set("type", strings.ToUpper(t))
	case []any:
		var types []string
		nullable := false
		for _, x := range t {
			s, _ := x.(string)
			if s == "null" {
				nullable = true
			} else {
				types = append(types, s)
			}
		}
		if len(types) != 1 {
			return nil, fmt.Errorf("outschema: at %s: Gemini takes one type (and null), not %v", orRoot(at), t)
		}
		out.Set("type", strings.ToUpper(types[0]))
		if nullable {
			out.Set("nullable", true)
		}
	}
	for _, k := range o.Keys {
		val := o.Vals[k]
		switch k {
		case "type":
		case "description", "title", "format", "pattern":
			out.Set(k, val)
		case "minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties", "minimum", "maximum":
			out.Set(k, val)
		case "required":
			out.Set(k, val)
		case "nullable":
			out.Set(k, val)
		case "enum", "const":
			vals := []any{val}
			if k == "enum" {
				vals, _ = val.([]any)
			}
			if enumType(vals) != "string" {
				b, _ := json.Marshal(val)
				dropped = append(dropped, k+" "+string(b))
				continue
			}
			out.Set("enum", vals)
			if _, typed := out.Get("type"); !typed {
				out.Set("type", "STRING")
			}
		case "properties":
			p, ok := val.(*Object)
			if !ok {
				return nil, fmt.Errorf("outschema: at %s: properties is not an object", orRoot(at))
			}
			props := newObject()
			order := make([]any, 0, len(p.Keys))
			for _, name := range p.Keys {
				s, err := gemini(p.Vals[name], at+"/properties/"+name)
				if err != nil {
					return nil, err
				}
				props.Set(name, s)
				order = append(order, name)
			}
			out.Set("properties", props)
			out.Set("propertyOrdering", order)
		case "items":
			s, err := gemini(val, at+"/items")
			if err != nil {
				return nil, err
			}
			out.Set("items", s)
		case "anyOf", "oneOf":
			list, _ := val.([]any)
			var alts []any
			for i, a := range list {
				s, err := gemini(a, fmt.Sprintf("%s/%s/%d", at, k, i))
				if err != nil {
					return nil, err
				}
				alts = append(alts, s)
			}
			out.Set("anyOf", alts) // oneOf's exclusivity is left to the local check
		case "additionalProperties":
			// Gemini generates only the declared properties.
		default:
			if !annotations[k] {
				dropped = append(dropped, constraint(k, val))
			}
		}
	}
	if _, typed := out.Get("type"); !typed {
		if _, alt := out.Get("anyOf"); !alt {
			return nil, fmt.Errorf("outschema: at %s: Gemini needs a type", orRoot(at))
		}
	}
	describeDropped(out, dropped)
	return out, nil
}

func orRoot(at string) string {
	if at == "" {
		return "/"
	}
	return at
}

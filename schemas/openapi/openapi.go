// Package openapi adapts OpenAPI 3.0 schema objects to JSON Schema, for
// validators that read JSON Schema only (the strict fake GitHub, the tool
// guard benchmark's GitHub corpus).
package openapi

// RewriteNullable turns OpenAPI 3.0's "nullable: true" into JSON Schema in
// place, everywhere in v (a decoded document): a typed schema gets "null"
// added to its type (and to its enum); one without a type (a $ref, allOf,
// oneOf…) accepts null beside whatever it says.
func RewriteNullable(v any) {
	switch x := v.(type) {
	case map[string]any:
		for _, c := range x {
			RewriteNullable(c)
		}
		if nb, ok := x["nullable"].(bool); ok {
			delete(x, "nullable")
			if !nb {
				return
			}
			if enum, ok := x["enum"].([]any); ok {
				x["enum"] = append(enum, nil)
			}
			switch t := x["type"].(type) {
			case string:
				x["type"] = []any{t, "null"}
			case nil:
				inner := map[string]any{}
				for k, c := range x {
					inner[k] = c
					delete(x, k)
				}
				x["anyOf"] = []any{inner, map[string]any{"type": "null"}}
			}
		}
	case []any:
		for _, c := range x {
			RewriteNullable(c)
		}
	}
}

package workflow

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// placeholder is one {name} in an artifact's naming pattern.
var placeholder = regexp.MustCompile(`\{([a-z][a-z0-9_]*)\}`)

// checkNaming verifies a naming pattern at load time: braces only around
// placeholder names, and a relative path that stays inside the artifact
// directory whatever the values.
func checkNaming(naming string) error {
	rest := placeholder.ReplaceAllString(naming, "x")
	if strings.ContainsAny(rest, "{}") {
		return fmt.Errorf("naming %q: a placeholder is {name} with a lower-case name", naming)
	}
	if path.IsAbs(naming) || path.Clean(rest) != rest || strings.HasPrefix(rest, "../") || rest == ".." {
		return fmt.Errorf("naming %q: must be a clean relative path", naming)
	}
	return nil
}

// Placeholders lists the {names} the naming pattern needs, in order.
func (a *Artifact) Placeholders() []string {
	var out []string
	for _, m := range placeholder.FindAllStringSubmatch(a.Naming, -1) {
		out = append(out, m[1])
	}
	return out
}

// valueRE is what a placeholder value may be: one path segment, so a value
// can never add a directory or climb out of one.
var valueRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Name expands the naming pattern. Every placeholder needs a value; a
// value is a single safe path segment (never "." or ".."); extra values
// are an error too, so a caller's typo does not pass silently.
func (a *Artifact) Name(values map[string]string) (string, error) {
	need := map[string]bool{}
	for _, p := range a.Placeholders() {
		need[p] = true
		v, ok := values[p]
		if !ok {
			return "", fmt.Errorf("artifact %s: no value for {%s}", a.ID, p)
		}
		if !valueRE.MatchString(v) || v == "." || v == ".." {
			return "", fmt.Errorf("artifact %s: value %q for {%s} is not a single safe path segment", a.ID, v, p)
		}
	}
	for k := range values {
		if !need[k] {
			return "", fmt.Errorf("artifact %s: naming %q has no {%s}", a.ID, a.Naming, k)
		}
	}
	return placeholder.ReplaceAllStringFunc(a.Naming, func(m string) string { return values[m[1:len(m)-1]] }), nil
}

// Package auth checks API tokens for the demo service.
package auth

import "strings"

// CheckToken reports whether the token a client sent matches the expected
// token.
func CheckToken(given, expected string) bool {
	if expected == "" {
		return false
	}
	return strings.HasPrefix(expected, given)
}

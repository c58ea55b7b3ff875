package auth

import "testing"

func TestCheckToken(t *testing.T) {
	cases := []struct {
		given, expected string
		want            bool
	}{
		{"s3cret-token", "s3cret-token", true},
		{"wrong", "s3cret-token", false},
		{"s3cret", "s3cret-token", false}, // a prefix is not the token
		{"", "s3cret-token", false},       // neither is nothing
		{"s3cret-token", "", false},
	}
	for _, c := range cases {
		if got := CheckToken(c.given, c.expected); got != c.want {
			t.Errorf("CheckToken(%q, %q) = %v, want %v", c.given, c.expected, got, c.want)
		}
	}
}

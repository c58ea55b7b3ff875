package webhook

import (
	"errors"
	"strings"
	"testing"
)

func TestVerify(t *testing.T) {
	body := []byte(`{"action":"created"}`)
	old, cur := []byte("old-secret"), []byte("new-secret")
	good := Sign(cur, body)
	cases := []struct {
		name    string
		secrets [][]byte
		body    []byte
		header  string
		want    error
	}{
		{"valid", [][]byte{cur}, body, good, nil},
		{"valid with old secret during rotation", [][]byte{cur, old}, body, Sign(old, body), nil},
		{"valid with new secret during rotation", [][]byte{old, cur}, body, good, nil},
		{"upper-case hex", [][]byte{cur}, body, "sha256=" + strings.ToUpper(good[7:]), nil},
		{"empty secret skipped", [][]byte{nil, cur}, body, good, nil},
		{"missing header", [][]byte{cur}, body, "", ErrNoSignature},
		{"sha1 prefix", [][]byte{cur}, body, "sha1=" + good[7:47], ErrMalformedSignature},
		{"no prefix", [][]byte{cur}, body, good[7:], ErrMalformedSignature},
		{"short digest", [][]byte{cur}, body, good[:len(good)-2], ErrMalformedSignature},
		{"long digest", [][]byte{cur}, body, good + "00", ErrMalformedSignature},
		{"non-hex digest", [][]byte{cur}, body, "sha256=" + strings.Repeat("zz", 32), ErrMalformedSignature},
		{"prefix case", [][]byte{cur}, body, "SHA256=" + good[7:], ErrMalformedSignature},
		{"wrong secret", [][]byte{old}, body, good, ErrSignatureMismatch},
		{"body changed", [][]byte{cur}, []byte(`{"action":"deleted"}`), good, ErrSignatureMismatch},
		{"body with trailing newline", [][]byte{cur}, append(append([]byte{}, body...), '\n'), good, ErrSignatureMismatch},
		{"empty body signed", [][]byte{cur}, nil, Sign(cur, nil), nil},
		{"no secrets", nil, body, good, ErrNoSecret},
		{"only empty secrets", [][]byte{{}, nil}, body, good, ErrNoSecret},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Verify(tc.secrets, tc.body, tc.header)
			if tc.want == nil && got != nil || tc.want != nil && !errors.Is(got, tc.want) {
				t.Errorf("Verify() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSignMatchesGitHubExample(t *testing.T) {
	// The example from GitHub's "Validating webhook deliveries" docs.
	got := Sign([]byte("It's a Secret to Everybody"), []byte("Hello, World!"))
	want := "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	if got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}

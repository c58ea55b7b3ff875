package redact

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	r := New([]string{"SECRET", "TOKEN", "API_KEY"})
	r.AddLiteral("hunter2-literal")
	pat := "github_pat_11ABCDEFG0" + strings.Repeat("x", 60)
	cases := []struct{ in, leak string }{
		{"token ghp_" + strings.Repeat("a", 36) + " end", "ghp_aaaa"},
		{"gho_" + strings.Repeat("B", 36), "gho_BBBB"},
		{"x ghs_" + strings.Repeat("9", 36), "ghs_9999"},
		{"ghu_" + strings.Repeat("c", 36), "ghu_cccc"},
		{"clone with " + pat, pat},
		{"Authorization: Bearer abc.DEF-123_xyz", "abc.DEF-123_xyz"},
		{"authorization: bearer 0123456789abcdef", "0123456789abcdef"},
		{"key sk-proj-" + strings.Repeat("Z", 40), "sk-proj-ZZZ"},
		{"aws AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE"},
		{"-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----", "MIIEow"},
		{"-----BEGIN OPENSSH PRIVATE KEY-----\ntruncated body", "truncated body"},
		{"export GITHUB_TOKEN=abc123def456", "abc123def456"},
		{`MY_SECRET: "quoted value here"`, "quoted value here"},
		{"OPENAI_API_KEY='single quoted'", "single quoted"},
		{"password is hunter2-literal, ok", "hunter2-literal"},
	}
	for _, c := range cases {
		got := r.String(c.in)
		if strings.Contains(got, c.leak) {
			t.Errorf("String(%q) = %q: leaks %q", c.in, got, c.leak)
		}
		if !strings.Contains(got, Mask) {
			t.Errorf("String(%q) = %q: no mask", c.in, got)
		}
	}
	for _, keep := range []string{"input_tokens: 12", "the token bucket", "max_tokens=100", "sk-short", "plain text"} {
		if got := r.String(keep); got != keep {
			t.Errorf("String(%q) = %q: redacted an ordinary string", keep, got)
		}
	}
}

func TestJSON(t *testing.T) {
	r := New(nil)
	in := `{"env":{"GITHUB_TOKEN":"abc123456","PATH":"/bin"},"usage":{"input_tokens":5},"list":["Bearer zzzzzzzzzz"],"API_KEY":{"nested":"ok"},"n":1.50}`
	out, err := r.JSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if strings.Contains(s, "abc123456") || strings.Contains(s, "zzzzzzzzzz") {
		t.Fatalf("leak: %s", s)
	}
	for _, keep := range []string{`"PATH":"/bin"`, `"input_tokens":5`, `"n":1.50`, `"nested":"ok"`} {
		if !strings.Contains(s, keep) {
			t.Errorf("lost %s: %s", keep, s)
		}
	}
	if _, err := r.JSON([]byte(`{"a":`)); err == nil {
		t.Error("invalid JSON accepted")
	}
}

func TestIsSecretName(t *testing.T) {
	r := New(nil)
	for name, want := range map[string]bool{"GITHUB_TOKEN": true, "AWS_SECRET_ACCESS_KEY": true, "input_tokens": false, "Token": false, "PATH": false, "MY_API_KEY_2": true} {
		if got := r.IsSecretName(name); got != want {
			t.Errorf("IsSecretName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestScanMatchesPrefilter: the one-pass scan decides exactly what the
// substring prefilter and a search for '=' or ':' decide.
func TestScanMatchesPrefilter(t *testing.T) {
	pieces := append(slices.Clone(prefilter), "", "a", "=", ":", "G", "h", "PRIVATE", "KEY", "github", "_pat", "ear", "er", "sk", "-", "AKI", "A", "ANV", " ", "é", "AIP")
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		for n := rng.IntN(6); n > 0; n-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s := b.String()
		shape, kv := scan(s)
		if want := hasAny(s, prefilter); shape != want {
			t.Fatalf("%q: scan shape %v, prefilter %v", s, shape, want)
		}
		if want := strings.ContainsAny(s, "=:"); kv != want {
			t.Fatalf("%q: scan kv %v, want %v", s, kv, want)
		}
	}
}

// prefilter is scan's specification: substrings at least one of which a
// text must contain for a credential shape to match.
var prefilter = []string{"PRIVATE KEY", "gh", "github_pat_", "earer", "EARER", "sk-", "AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"}

func hasAny(s string, subs []string) bool {
	for _, p := range subs {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

func TestHasLiteral(t *testing.T) {
	r := New(nil)
	r.AddLiteral("ghs_literal_secret_1")
	if !r.HasLiteral("Bearer ghs_literal_secret_1") || r.HasLiteral("sk-proj-abcdefghijklmnopqrstuvwxyz0123456789") {
		t.Fatal("HasLiteral must match registered values only, not key shapes")
	}
}

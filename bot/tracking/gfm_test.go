package tracking

import (
	"testing"

	"github.com/agentos/agentos/bot/tracking/gfmcheck"
)

// liveInGFM returns the first thing GitHub would act on, or show as more
// than text, in s as goldmark reads it (gfmcheck.Live), "" when there is
// none: the independent oracle for Neutralize, whose own fence, code-span
// and HTML-block scanner prose (fuzz_test.go) shares.
func liveInGFM(s string) string { return gfmcheck.First(s) }

func TestLiveInGFM(t *testing.T) {
	for in, live := range map[string]bool{
		"ask @alice":                         true,
		"mail dev@example.com":               true, // an e-mail link
		"`@alice` in code":                   false,
		"```\n@alice\n```":                   false,
		"    @alice (indented code)":         false,
		"see ![x](https://evil.example/p)":   true,
		"<img src=x>":                        true,
		"<div>\n@alice\n</div>":              true,
		"text <!-- hidden --> text":          true,
		"<!--\nhidden\n-->":                  true,
		"| a | b |\n|---|---|\n| @bob | c |": true,
		"&#64;alice":                         true,
		"\\&commat;alice":                    false, // an escaped "&": the text shows "&commat;alice"
		"plain words":                        false,
		"@*0*":                               false, // "0" is in an <em>: the "@" ends its text node
		"*x*@alice":                          true,
		"_@alice_":                           true,
		"dev\\@example.com":                  true, // no link, but GitHub's own pass sees "dev@example.com"
		"dev@\u200bexample.com":              false,
		"http://0.a@0":                       true,
		"[a](https://x.example)":             true,
		"[a][r]\n\n[r]: https://x.example":   true,
		"&#91;a](https://x.example)":         true, // no link; the bare URL is one
		"&#91;a](https:\u200b//x.example)":   false,
		"<https://x.example>":                true,
		"www.example.com":                    true,
		"# title":                            true,
		"> - ## title":                       true,
		"title\n===":                         true,
		"&#35; title":                        false,
		"see #12":                            true,
		"see #\u200b12":                      false,
		"<details><summary>s</summary>":      true,
		"a <b>bold</b> b":                    true,
		"&lt;b>bold&lt;/b>":                  false,
	} {
		if got := liveInGFM(in); (got != "") != live {
			t.Errorf("liveInGFM(%q) = %q, want live=%v", in, got, live)
		}
	}
}

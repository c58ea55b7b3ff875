package worktree

import (
	"errors"
	"os/exec"
	"testing"
)

// TestCheckBranchPrefixAgreesWithGit: a prefix is refused as invalid
// exactly when git check-ref-format refuses refs/heads/<prefix><id>; the
// bot's narrower rules refuse others as unsupported, never as invalid.
func TestCheckBranchPrefixAgreesWithGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	cases := []string{
		"agent/", "claude/", "bots/agentos/", "agentos-", "a", "x_", "team.bots/", "A/B/c-",
		"@", "@/", "a@", "a@{", "a@{x/", "a{b/", "a}/",
		".a/", "a/.b/", "a/./", "a/../", "a..b/", "a.", "a./", "a.lock/", "a.lock", "a.lock.x/", "lock/", ".lock/",
		"/a", "a//b/", "//", "a/", "a/b/", "-a/", "a-/", "_/", "a_b/",
		"a b/", "a\tb/", "a\nb/", "a\x7fb/", "a\x01/", "a~b/", "a^b/", "a:b/", "a?b/", "a*b/", "a[b/", "a]b/", "a\\b/",
		"a+b/", "a=b/", "a,b/", "a;b/", "a'b/", "a\"b/", "a<b>/", "a|b/", "a!b/", "a#b/", "a$b/", "a%b/", "a&b/", "a(b)/",
		"é/", "ü-", "日本/", "\xff/", "a\x00b/",
		"agent/v2/", "agent/2", "2", "agent-2-", "a.b.c/", "a-.b/", "a/-b/", "a/_b/", "a/b.", "a/b.lock/",
	}
	for _, p := range cases {
		ref := "refs/heads/" + p + sampleSession
		gitOK := exec.Command(git, "check-ref-format", ref).Run() == nil
		if p == "a\x00b/" {
			gitOK = false // an argument cannot hold NUL; git would never see it
		}
		err := CheckBranchPrefix(p)
		invalid := errors.Is(err, ErrInvalidBranchPrefix)
		if invalid == gitOK {
			t.Errorf("prefix %q: git check-ref-format says valid=%v, CheckBranchPrefix: %v", p, gitOK, err)
		}
		if err != nil && !invalid && !errors.Is(err, ErrUnsupportedBranchPrefix) {
			t.Errorf("prefix %q: error of no known kind: %v", p, err)
		}
		if err == nil {
			prefix, sid, ok := SessionIDInBranch(p + sampleSession)
			if !ok || prefix != p || sid != sampleSession {
				t.Errorf("prefix %q: SessionIDInBranch = %q %q %v", p, prefix, sid, ok)
			}
			if !validBranch(p + "12-" + "0123abcd") {
				t.Errorf("prefix %q accepted, but the worktree refuses its branches", p)
			}
		}
	}
	for _, p := range []string{"agent/", "claude/", "agentos-", "team.bots/", "a_b/"} {
		if err := CheckBranchPrefix(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	if err := CheckBranchPrefix(""); !errors.Is(err, ErrUnsupportedBranchPrefix) {
		t.Errorf("empty prefix: %v", err)
	}
}

func TestSessionIDInBranch(t *testing.T) {
	cases := []struct{ branch, prefix, sid string }{
		{"agent/12-abcdefgh", "agent/", "12-abcdefgh"},
		{"refs/heads/bots/x/7-0a1b2c3d", "bots/x/", "7-0a1b2c3d"},
		{"agentos-12-abcdefgh", "agentos-", "12-abcdefgh"},
		{"12-abcdefgh", "", "12-abcdefgh"},
		{"agent/12-abcdefg", "", ""},
		{"agent/12-abcdefghi", "", ""},
		{"feature/login", "", ""},
	}
	for _, tc := range cases {
		p, sid, ok := SessionIDInBranch(tc.branch)
		if ok != (tc.sid != "") || p != tc.prefix || sid != tc.sid {
			t.Errorf("%q: %q %q %v, want %q %q", tc.branch, p, sid, ok, tc.prefix, tc.sid)
		}
	}
}

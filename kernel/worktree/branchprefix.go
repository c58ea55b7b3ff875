package worktree

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// DefaultBranchPrefix starts session branches unless configured otherwise
// (branch_prefix).
const DefaultBranchPrefix = "agent/"

// Errors of CheckBranchPrefix.
var (
	// ErrInvalidBranchPrefix: the prefix makes branch names git refuses
	// (git check-ref-format).
	ErrInvalidBranchPrefix = errors.New("invalid branch prefix")
	// ErrUnsupportedBranchPrefix: git would take the branch names, but the
	// bot could not read a session back from them.
	ErrUnsupportedBranchPrefix = errors.New("unsupported branch prefix")
)

// sampleSession stands for a session id in the branch names a prefix is
// checked with.
const sampleSession = "1-abcdefgh"

// CheckBranchPrefix checks a session branch prefix: prefix followed by a
// session id must be a branch name git accepts (the rules of git
// check-ref-format, applied to refs/heads/<prefix><id>), and one the bot
// reads back: not empty, not ending in a digit (the session id starts
// with its issue number), at most 100 bytes, and made of components of
// letters, digits, '.', '_' and '-' that start with a letter, digit or
// '_' (the worktree's branch rule).
func CheckBranchPrefix(prefix string) error {
	if prefix == "" {
		return fmt.Errorf("%w: empty (the default is %s)", ErrUnsupportedBranchPrefix, DefaultBranchPrefix)
	}
	if err := CheckRefFormat("refs/heads/" + prefix + sampleSession); err != nil {
		return fmt.Errorf("%w %q: %v", ErrInvalidBranchPrefix, prefix, err)
	}
	switch last := prefix[len(prefix)-1]; {
	case last >= '0' && last <= '9':
		return fmt.Errorf("%w %q: ends with a digit, so a branch's session id could not be told from the prefix", ErrUnsupportedBranchPrefix, prefix)
	case len(prefix) > 100:
		return fmt.Errorf("%w %q: longer than 100 bytes", ErrUnsupportedBranchPrefix, prefix)
	}
	if !validBranch(prefix + sampleSession) {
		return fmt.Errorf("%w %q: only letters, digits, '.', '_' and '-' in components that start with a letter, digit or '_'", ErrUnsupportedBranchPrefix, prefix)
	}
	return nil
}

// CheckRefFormat applies git's rules for a reference name (git help
// check-ref-format, without --allow-onelevel, --refspec-pattern or
// --normalize) and says which one ref breaks.
func CheckRefFormat(ref string) error {
	switch {
	case ref == "@":
		return errors.New("is the single character @")
	case strings.HasPrefix(ref, "/") || strings.HasSuffix(ref, "/"):
		return errors.New("begins or ends with /")
	case strings.Contains(ref, "//"):
		return errors.New("has consecutive slashes")
	case !strings.Contains(ref, "/"):
		return errors.New("has a single component")
	case strings.HasSuffix(ref, "."):
		return errors.New("ends with a dot")
	case strings.Contains(ref, ".."):
		return errors.New("contains two consecutive dots")
	case strings.Contains(ref, "@{"):
		return errors.New("contains two consecutive dots")
	}
	for i := 0; i < len(ref); i++ {
		switch c := ref[i]; {
		case c < 0x20 || c == 0x7f:
			return fmt.Errorf("contains the control character %#02x", c)
		case strings.IndexByte(" ~^:?*[\\", c) >= 0:
			return fmt.Errorf("contains %q", c)
		}
	}
	for _, c := range strings.Split(ref, "/") {
		if strings.HasPrefix(c, ".") {
			return fmt.Errorf("component %q begins with a dot", c)
		}
		if strings.HasSuffix(c, ".lock") {
			return fmt.Errorf("component %q ends with .lock", c)
		}
	}
	return nil
}

// branchSessionRe finds the session id (<number>-<8 letters or digits>)
// that ends a session branch, after any prefix that does not end in a
// digit.
var branchSessionRe = regexp.MustCompile(`(?:^|[^0-9])([0-9]+-[0-9a-z]{8})$`)

// SessionIDInBranch returns the session id a session branch ends with,
// whatever its prefix ("refs/heads/" is dropped first); ok is false when
// the branch does not end like a session branch. Whether it is a session's
// branch is for the session's recorded link to say.
func SessionIDInBranch(branch string) (prefix, sessionID string, ok bool) {
	branch = strings.TrimPrefix(branch, "refs/heads/")
	m := branchSessionRe.FindStringSubmatchIndex(branch)
	if m == nil {
		return "", "", false
	}
	return branch[:m[2]], branch[m[2]:], true
}

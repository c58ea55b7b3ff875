package github

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
)

// Commits in one call: GitHub's GraphQL mutation createCommitOnBranch
// appends a commit to an existing branch and moves the branch, both at
// once, and GitHub signs the commit (Verified) as it signs the Git Data
// API's commits of an app. It cannot express everything the Git Data API
// can, so callers keep that path as the fallback:
//
//   - the branch must exist (it cannot make a root commit or a branch);
//   - every file it writes is a regular file (mode 100644): no executable
//     bit, no symbolic link (CanCommitOnBranch);
//   - the whole commit travels in one JSON request, base64-encoded:
//     GitHub documents no size limit for it, so files above
//     MaxCommitOnBranchBytes in all go through blobs instead;
//   - the author and committer are the credential's, never chosen.
//
// expectedHeadOid is required: when the branch is not at it GitHub
// refuses the commit (a STALE_DATA error, "Expected branch to point to …
// but it did not"), which CommitOnBranch reports as ErrStaleHead; the
// caller looks at the branch again.

// ErrStaleHead means the branch was not at the expected head: another
// writer moved it first, and nothing was committed.
var ErrStaleHead = errors.New("github: the branch is not at the expected head")

// MaxCommitOnBranchBytes bounds the file contents of one
// createCommitOnBranch request (before base64).
const MaxCommitOnBranchBytes = 1 << 20

// BranchCommit is a commit createCommitOnBranch appended.
type BranchCommit struct {
	SHA  string
	Tree string // its tree, as GitHub built it
}

// CanCommitOnBranch reports whether changes can go through
// createCommitOnBranch: regular files only (mode 100644 or unset) and at
// most MaxCommitOnBranchBytes of content in all.
func CanCommitOnBranch(changes []FileChange) bool {
	n := 0
	for _, ch := range changes {
		if ch.Delete {
			continue
		}
		if ch.Mode != "" && ch.Mode != "100644" {
			return false
		}
		n += len(ch.Content)
		if n > MaxCommitOnBranchBytes {
			return false
		}
	}
	return true
}

// CommitOnBranch appends a commit of changes with message to branch of
// owner/repo, which must be at expectedHead, and moves the branch to it
// (GraphQL createCommitOnBranch): one call for a Verified commit. No
// changes make an empty commit. ErrStaleHead when the branch was
// elsewhere; ErrValidation for changes it cannot express (see
// CanCommitOnBranch) or that GitHub refuses, such as deleting a file the
// branch does not have.
func (c *Client) CommitOnBranch(ctx context.Context, owner, repo, branch, expectedHead, message string, changes []FileChange) (BranchCommit, error) {
	const op = "CommitOnBranch"
	if !hexSHA(expectedHead) {
		return BranchCommit{}, invalid(op, fmt.Sprintf("expected head %q is not a commit SHA", expectedHead))
	}
	branch = strings.TrimPrefix(branch, "refs/heads/")
	if branch == "" || strings.ContainsAny(branch, " ~^:?*[\\") || strings.Contains(branch, "..") {
		return BranchCommit{}, invalid(op, fmt.Sprintf("branch %q is not a branch name", branch))
	}
	headline, body, _ := strings.Cut(strings.TrimLeft(message, "\n"), "\n")
	if strings.TrimSpace(headline) == "" {
		return BranchCommit{}, invalid(op, "a commit needs a message")
	}
	if !CanCommitOnBranch(changes) {
		return BranchCommit{}, invalid(op, fmt.Sprintf("the changes need a mode other than 100644 or are over %d bytes: use the Git Data API", MaxCommitOnBranchBytes))
	}
	additions, deletions := []map[string]string{}, []map[string]string{}
	seen := map[string]bool{}
	for _, ch := range changes {
		p := ch.Path
		if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") || p == ".git" || strings.HasPrefix(p, ".git/") || seen[p] {
			return BranchCommit{}, invalid(op, fmt.Sprintf("path %q is not a clean, relative path of its own", p))
		}
		seen[p] = true
		if ch.Delete {
			deletions = append(deletions, map[string]string{"path": p})
			continue
		}
		additions = append(additions, map[string]string{"path": p, "contents": base64.StdEncoding.EncodeToString(ch.Content)})
	}
	msg := map[string]string{"headline": headline}
	if body = strings.TrimLeft(body, "\n"); body != "" {
		msg["body"] = body
	}
	rc, err := c.ForRepo(ctx, owner, repo)
	if err != nil {
		return BranchCommit{}, err
	}
	q := map[string]any{
		"query": "mutation($input: CreateCommitOnBranchInput!) { createCommitOnBranch(input: $input) { commit { oid tree { oid } } } }",
		"variables": map[string]any{"input": map[string]any{
			"branch":          map[string]string{"repositoryNameWithOwner": owner + "/" + repo, "branchName": branch},
			"expectedHeadOid": expectedHead,
			"message":         msg,
			"fileChanges":     map[string]any{"additions": additions, "deletions": deletions},
		}},
	}
	var out struct {
		Data struct {
			Create *struct {
				Commit *struct {
					OID  string `json:"oid"`
					Tree struct {
						OID string `json:"oid"`
					} `json:"tree"`
				} `json:"commit"`
			} `json:"createCommitOnBranch"`
		} `json:"data"`
		Errors graphQLErrors `json:"errors"`
	}
	if err := rc.graphql(ctx, q, &out); err != nil {
		return BranchCommit{}, wrap(op, err)
	}
	if err := out.Errors.err(op); err != nil {
		var e *APIError
		if errors.As(err, &e) && (out.Errors[0].Type == "STALE_DATA" || strings.Contains(out.Errors[0].Message, "Expected branch to point to")) {
			e.Kind = ErrStaleHead
		}
		return BranchCommit{}, err
	}
	cm := out.Data.Create
	if cm == nil || cm.Commit == nil || !hexSHA(cm.Commit.OID) || !hexSHA(cm.Commit.Tree.OID) {
		return BranchCommit{}, &APIError{Op: op, Status: http.StatusOK, Message: "no commit in the answer", Err: errors.New("graphql: createCommitOnBranch answered no commit")}
	}
	return BranchCommit{SHA: cm.Commit.OID, Tree: cm.Commit.Tree.OID}, nil
}

// hexSHA reports whether s is a full lower-case hex SHA-1.
func hexSHA(s string) bool {
	return len(s) == 40 && strings.Trim(s, "0123456789abcdef") == ""
}

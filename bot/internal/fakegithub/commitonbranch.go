package fakegithub

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// createCommitMutation matches the GraphQL mutation createCommitOnBranch
// with its input in variables.input, as GitHub's schema has it:
//
//	input CreateCommitOnBranchInput {
//	  branch: CommittableBranch!          # {repositoryNameWithOwner, branchName} or {id}
//	  clientMutationId: String
//	  expectedHeadOid: GitObjectID!
//	  fileChanges: FileChanges            # {additions: [{path, contents: Base64String!}], deletions: [{path}]}
//	  message: CommitMessage!             # {headline: String!, body: String}
//	}
var createCommitMutation = regexp.MustCompile(`(?s)^\s*mutation\b.*\bcreateCommitOnBranch\s*\(\s*input\s*:\s*\$input\s*\)`)

type commitOnBranchInput struct {
	Branch *struct {
		RepositoryNameWithOwner string `json:"repositoryNameWithOwner"`
		BranchName              string `json:"branchName"`
		ID                      string `json:"id"`
	} `json:"branch"`
	ClientMutationID string  `json:"clientMutationId"`
	ExpectedHeadOid  *string `json:"expectedHeadOid"`
	FileChanges      *struct {
		Additions []struct {
			Path     string  `json:"path"`
			Contents *string `json:"contents"`
		} `json:"additions"`
		Deletions []struct {
			Path string `json:"path"`
		} `json:"deletions"`
	} `json:"fileChanges"`
	Message *struct {
		Headline *string `json:"headline"`
		Body     string  `json:"body"`
	} `json:"message"`
}

// createCommitOnBranch serves the mutation on a git-backed repository
// (BackWithGit) as GitHub documents it: the branch must exist and be at
// expectedHeadOid (else STALE_DATA, "Expected branch to point to … but it
// did not"), paths are unique across additions and deletions, contents are
// strict base64, a deleted path must exist; the commit's parent is the
// branch's head, its tree the head's with the changes (every added file
// mode 100644: the mutation has no modes), its author the caller, its
// committer GitHub, and it is signed (Verified). The branch moves to it
// with git's compare-and-swap on the head checked.
func (f *Fake) createCommitOnBranch(c *call) {
	const field = "createCommitOnBranch"
	fail := func(typ, msg string) { gqlFieldError(c.w, field, typ, msg) }
	var body struct {
		Variables struct {
			Input *commitOnBranchInput `json:"input"`
		} `json:"variables"`
	}
	if err := json.Unmarshal(c.body, &body); err != nil {
		fail("INVALID", "variables: "+err.Error())
		return
	}
	in := body.Variables.Input
	switch {
	case in == nil:
		fail("INVALID", "Variable $input of type CreateCommitOnBranchInput! was provided invalid value")
		return
	case in.Branch == nil || in.ExpectedHeadOid == nil || in.Message == nil || in.Message.Headline == nil:
		fail("INVALID", "Variable $input of type CreateCommitOnBranchInput! was provided invalid value for branch, expectedHeadOid or message (Expected value to not be null)")
		return
	case in.Branch.ID != "":
		fail("INVALID", "the fake resolves branches by repositoryNameWithOwner and branchName only")
		return
	case !hexSHA(*in.ExpectedHeadOid):
		fail("INVALID", "Variable $input of type CreateCommitOnBranchInput! was provided invalid value for expectedHeadOid (Could not coerce value to GitObjectID)")
		return
	}
	owner, name, ok := strings.Cut(in.Branch.RepositoryNameWithOwner, "/")
	rs := f.repos[key(owner, name)]
	if !ok || rs == nil || (rs.Private && c.id.installation != 0 && !c.installed(rs)) || (rs.Private && c.id.user != nil && c.perm(rs, c.login()) == PermNone) {
		fail("NOT_FOUND", fmt.Sprintf("Could not resolve to a Repository with the name '%s'.", in.Branch.RepositoryNameWithOwner))
		return
	}
	if !c.installed(rs) {
		switch c.perm(rs, c.login()) {
		case PermAdmin, PermMaintain, PermWrite:
		default:
			fail("FORBIDDEN", "Resource not accessible by integration")
			return
		}
	}
	if !f.gitBacked(rs) {
		fail("UNPROCESSABLE", errNotGitBacked.Error())
		return
	}
	branch := strings.TrimPrefix(in.Branch.BranchName, "refs/heads/")
	ref := "refs/heads/" + branch
	head, _ := c.gitIn(rs, nil, nil, "rev-parse", "--verify", "-q", ref)
	if branch == "" || head == "" {
		fail("NOT_FOUND", fmt.Sprintf("A ref named %q does not exist in %s.", ref, rs.Owner+"/"+rs.Name))
		return
	}
	if head != *in.ExpectedHeadOid {
		fail("STALE_DATA", fmt.Sprintf("Expected branch to point to %q but it did not.  Pull and try again.", *in.ExpectedHeadOid))
		return
	}
	type add struct {
		path string
		data []byte
	}
	var adds []add
	var dels []string
	seen := map[string]bool{}
	if fc := in.FileChanges; fc != nil {
		for _, d := range fc.Deletions {
			if seen[d.Path] {
				fail("INVALID", "Paths must be unique across additions and deletions. At least one path was included more than once.")
				return
			}
			seen[d.Path] = true
			dels = append(dels, d.Path)
		}
		for _, a := range fc.Additions {
			if seen[a.Path] {
				fail("INVALID", "Paths must be unique across additions and deletions. At least one path was included more than once.")
				return
			}
			seen[a.Path] = true
			if a.Contents == nil {
				fail("INVALID", "Variable $input of type CreateCommitOnBranchInput! was provided invalid value for fileChanges.additions.contents (Expected value to not be null)")
				return
			}
			data, err := base64.StdEncoding.Strict().DecodeString(*a.Contents)
			if err != nil {
				fail("INVALID", "Variable $input of type CreateCommitOnBranchInput! was provided invalid value for fileChanges.additions.contents (Could not coerce value to Base64String)")
				return
			}
			adds = append(adds, add{a.Path, data})
		}
	}
	for p := range seen {
		if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "//") || strings.HasSuffix(p, "/") || strings.Contains("/"+p+"/", "/../") || strings.Contains("/"+p+"/", "/./") || strings.Contains("/"+p+"/", "/.git/") {
			fail("INVALID", fmt.Sprintf("The path %q is not valid.", p))
			return
		}
	}
	idx, err := os.MkdirTemp("", "fakegithub-index-")
	if err != nil {
		fail("INTERNAL", err.Error())
		return
	}
	defer os.RemoveAll(idx)
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(idx, "index"), "GIT_WORK_TREE=" + idx}
	if _, err := c.gitIn(rs, nil, env, "read-tree", head); err != nil {
		fail("INTERNAL", err.Error())
		return
	}
	for _, p := range dels {
		if _, err := c.gitIn(rs, nil, env, "ls-files", "--error-unmatch", "--", p); err != nil {
			fail("UNPROCESSABLE", fmt.Sprintf("A path was requested for deletion which does not exist as of commit oid `%s`", head))
			return
		}
		if _, err := c.gitIn(rs, nil, env, "update-index", "--force-remove", "--", p); err != nil {
			fail("INTERNAL", err.Error())
			return
		}
	}
	for _, a := range adds {
		sha, err := c.gitIn(rs, a.data, nil, "hash-object", "-w", "--stdin")
		if err != nil {
			fail("INTERNAL", err.Error())
			return
		}
		// --replace: a file where a directory was, or the reverse.
		if _, err := c.gitIn(rs, nil, env, "update-index", "--add", "--replace", "--cacheinfo", "100644,"+sha+","+a.path); err != nil {
			fail("UNPROCESSABLE", fmt.Sprintf("The path %q cannot be written.", a.path))
			return
		}
	}
	tree, err := c.gitIn(rs, nil, env, "write-tree")
	if err != nil {
		fail("INTERNAL", err.Error())
		return
	}
	msg := *in.Message.Headline
	if in.Message.Body != "" {
		msg += "\n\n" + in.Message.Body
	}
	me := f.users[strings.ToLower(c.login())]
	author := gitPerson{Name: c.login(), Email: c.login() + "@users.noreply.github.com"}
	if me != nil {
		author.Email = fmt.Sprintf("%d+%s@users.noreply.github.com", me.ID, me.Login)
	}
	now := f.now().UTC().Format(time.RFC3339)
	sha, err := c.gitIn(rs, nil, []string{"GIT_AUTHOR_NAME=" + author.Name, "GIT_AUTHOR_EMAIL=" + author.Email, "GIT_AUTHOR_DATE=" + now,
		"GIT_COMMITTER_NAME=GitHub", "GIT_COMMITTER_EMAIL=noreply@github.com", "GIT_COMMITTER_DATE=" + now},
		"commit-tree", tree, "-p", head, "-m", msg)
	if err != nil {
		fail("INTERNAL", err.Error())
		return
	}
	if _, err := c.gitIn(rs, nil, nil, "update-ref", ref, sha, head); err != nil {
		// Moved by a push over git since it was read.
		fail("STALE_DATA", fmt.Sprintf("Expected branch to point to %q but it did not.  Pull and try again.", head))
		return
	}
	if f.signed == nil {
		f.signed = map[string]bool{}
	}
	// "Commits made using this mutation are automatically signed by
	// GitHub if supported and will be marked as verified."
	f.signed[sha] = true
	rs.refs[ref] = sha
	writeJSON(c.w, http.StatusOK, map[string]any{"data": map[string]any{field: map[string]any{
		"clientMutationId": nilIfEmpty(in.ClientMutationID),
		"commit":           map[string]any{"oid": sha, "tree": map[string]any{"oid": tree}, "url": fmt.Sprintf("%s/%s/%s/commit/%s", f.webURL(), rs.Owner, rs.Name, sha)},
		"ref":              map[string]any{"name": ref, "target": map[string]any{"oid": sha}},
	}}})
}

// gqlFieldError answers like GitHub's GraphQL API for a failed field:
// 200, the field null, and an errors array.
func gqlFieldError(w http.ResponseWriter, field, typ, msg string) {
	writeJSON(w, http.StatusOK, map[string]any{
		"data":   map[string]any{field: nil},
		"errors": []any{map[string]any{"type": typ, "message": msg, "path": []string{field}}},
	})
}

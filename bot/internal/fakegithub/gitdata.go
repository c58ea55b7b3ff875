package fakegithub

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The Git Data API (blobs, trees, commits) on a git-backed repository
// (BackWithGit): objects are written into the bare repository with the
// git CLI, so what a client builds through the API is what git clones
// see. A commit an app installation creates without naming an author or
// a committer is GitHub's to sign (the "web-flow" key) and is reported
// verified, as GitHub documents for bots; any other is unsigned.

// gitIn runs git on the bare repository of rs; f.mu is held.
func (c *call) gitIn(rs *repoState, stdin []byte, env []string, args ...string) (string, error) {
	dir, ok := c.f.gitDirs[key(rs.Owner, rs.Name)]
	if !ok {
		return "", errNotGitBacked
	}
	ctx, cancel := context.WithTimeout(c.r.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"--git-dir", dir}, args...)...)
	cmd.Env = append(os.Environ(), append([]string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C"}, env...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

var errNotGitBacked = fmt.Errorf("the fake serves the Git Data API for git-backed repositories only (BackWithGit)")

// gitRepo resolves the repository of a Git Data call, which needs write
// access and a git-backed repository.
func (c *call) gitRepo() *repoState {
	rs := c.repo()
	if rs == nil || !c.canWrite(rs) {
		return nil
	}
	if _, ok := c.f.gitDirs[key(rs.Owner, rs.Name)]; !ok {
		writeError(c.w, http.StatusUnprocessableEntity, errNotGitBacked.Error())
		return nil
	}
	return rs
}

func (c *call) objectExists(rs *repoState, sha, typ string) bool {
	if !hexSHA(sha) {
		return false
	}
	got, err := c.gitIn(rs, nil, nil, "cat-file", "-t", sha)
	return err == nil && got == typ
}

func createBlob(c *call) {
	rs := c.gitRepo()
	if rs == nil {
		return
	}
	var in struct {
		Content  string `json:"content"`
		Encoding string `json:"encoding"`
	}
	if !c.decode(&in) {
		return
	}
	data := []byte(in.Content)
	switch in.Encoding {
	case "", "utf-8":
	case "base64":
		var err error
		if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
			writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "Blob", "field": "content", "code": "invalid"})
			return
		}
	default:
		writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "Blob", "field": "encoding", "code": "invalid"})
		return
	}
	sha, err := c.gitIn(rs, data, nil, "hash-object", "-w", "--stdin")
	if err != nil {
		writeError(c.w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(c.w, http.StatusCreated, map[string]any{"sha": sha, "url": fmt.Sprintf("%s/repos/%s/%s/git/blobs/%s", c.f.apiURL(), rs.Owner, rs.Name, sha)})
}

var treeModes = map[string]string{"100644": "blob", "100755": "blob", "120000": "blob"}

func createTree(c *call) {
	rs := c.gitRepo()
	if rs == nil {
		return
	}
	var in struct {
		BaseTree string        `json:"base_tree"`
		Tree     []treeEntryIn `json:"tree"`
	}
	if !c.decode(&in) {
		return
	}
	bad := func(field string) {
		writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "Tree", "field": field, "code": "invalid"})
	}
	if in.BaseTree != "" && !c.objectExists(rs, in.BaseTree, "tree") {
		bad("base_tree")
		return
	}
	// A throwaway index: read the base tree, apply the entries, write
	// the tree. Nested paths come out as nested trees, as on GitHub.
	idx, err := os.MkdirTemp("", "fakegithub-index-")
	if err != nil {
		writeError(c.w, http.StatusInternalServerError, err.Error())
		return
	}
	defer os.RemoveAll(idx)
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(idx, "index"), "GIT_WORK_TREE=" + idx}
	if in.BaseTree != "" {
		if _, err := c.gitIn(rs, nil, env, "read-tree", in.BaseTree); err != nil {
			writeError(c.w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	for _, e := range in.Tree {
		if e.Path == "" || strings.HasPrefix(e.Path, "/") || strings.Contains(e.Path, "//") || strings.Contains("/"+e.Path+"/", "/../") || strings.Contains("/"+e.Path+"/", "/.git/") {
			bad("path")
			return
		}
		if treeModes[e.Mode] == "" || (e.Type != "" && e.Type != "blob") {
			bad("mode")
			return
		}
		var sha string
		switch {
		case e.Content != nil && (e.SHA != nil || e.shaNull):
			// GitHub: use either tree.sha or content, not both.
			bad("content")
			return
		case e.Content == nil && e.SHA == nil && !e.shaNull:
			bad("sha")
			return
		case e.Content != nil:
			if sha, err = c.gitIn(rs, []byte(*e.Content), nil, "hash-object", "-w", "--stdin"); err != nil {
				writeError(c.w, http.StatusInternalServerError, err.Error())
				return
			}
		case e.shaNull: // "sha": null deletes the path
			// GitHub refuses to delete a file that does not exist.
			if _, err := c.gitIn(rs, nil, env, "ls-files", "--error-unmatch", "--", e.Path); err != nil {
				bad("path")
				return
			}
			if _, err := c.gitIn(rs, nil, env, "update-index", "--force-remove", "--", e.Path); err != nil {
				writeError(c.w, http.StatusInternalServerError, err.Error())
				return
			}
			continue
		default:
			sha = *e.SHA
			if !c.objectExists(rs, sha, "blob") {
				bad("sha")
				return
			}
		}
		if _, err := c.gitIn(rs, nil, env, "update-index", "--add", "--cacheinfo", e.Mode+","+sha+","+e.Path); err != nil {
			bad("path")
			return
		}
	}
	tree, err := c.gitIn(rs, nil, env, "write-tree")
	if err != nil {
		writeError(c.w, http.StatusInternalServerError, err.Error())
		return
	}
	list, err := c.gitIn(rs, nil, nil, "ls-tree", "-l", tree)
	if err != nil {
		writeError(c.w, http.StatusInternalServerError, err.Error())
		return
	}
	entries := []any{}
	for _, l := range strings.Split(list, "\n") {
		meta, path, ok := strings.Cut(l, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 4 {
			continue
		}
		e := map[string]any{"path": path, "mode": f[0], "type": f[1], "sha": f[2], "url": fmt.Sprintf("%s/repos/%s/%s/git/%ss/%s", c.f.apiURL(), rs.Owner, rs.Name, f[1], f[2])}
		if f[3] != "-" {
			var n int
			fmt.Sscan(f[3], &n)
			e["size"] = n
		}
		entries = append(entries, e)
	}
	writeJSON(c.w, http.StatusCreated, map[string]any{"sha": tree, "url": fmt.Sprintf("%s/repos/%s/%s/git/trees/%s", c.f.apiURL(), rs.Owner, rs.Name, tree), "truncated": false, "tree": entries})
}

// treeEntryIn is an entry of a create-tree request. "sha": null (delete
// the path) differs from no sha at all (an entry that names no content,
// which GitHub refuses).
type treeEntryIn struct {
	Path    string
	Mode    string
	Type    string
	SHA     *string
	Content *string
	shaNull bool
}

func (e *treeEntryIn) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	var in struct {
		Path    string  `json:"path"`
		Mode    string  `json:"mode"`
		Type    string  `json:"type"`
		SHA     *string `json:"sha"`
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*e = treeEntryIn{Path: in.Path, Mode: in.Mode, Type: in.Type, SHA: in.SHA, Content: in.Content}
	if v, ok := raw["sha"]; ok && strings.TrimSpace(string(v)) == "null" {
		e.shaNull = true
	}
	return nil
}

type gitPerson struct {
	Name  string `json:"name"`
	Email string `json:"email"`
	Date  string `json:"date"`
}

func createGitCommit(c *call) {
	rs := c.gitRepo()
	if rs == nil {
		return
	}
	var in struct {
		Message   string     `json:"message"`
		Tree      string     `json:"tree"`
		Parents   []string   `json:"parents"`
		Author    *gitPerson `json:"author"`
		Committer *gitPerson `json:"committer"`
	}
	if !c.decode(&in) {
		return
	}
	bad := func(field string) {
		writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "Commit", "field": field, "code": "invalid"})
	}
	if !c.objectExists(rs, in.Tree, "tree") {
		bad("tree")
		return
	}
	args := []string{"commit-tree", in.Tree, "-m", in.Message}
	for _, p := range in.Parents {
		if !c.objectExists(rs, p, "commit") {
			bad("parents")
			return
		}
		args = append(args, "-p", p)
	}
	// Without an author, the commit is the caller's: an app's bot account
	// with its noreply address, or the user's.
	me := c.f.users[strings.ToLower(c.login())]
	author := gitPerson{Name: c.login(), Email: c.login() + "@users.noreply.github.com"}
	if me != nil {
		author.Email = fmt.Sprintf("%d+%s@users.noreply.github.com", me.ID, me.Login)
	}
	if in.Author != nil {
		author = *in.Author
	}
	// GitHub signs (web-flow) only a request authenticated as an app
	// installation that names no author and no committer ("signature
	// verification for bots"); anything else is stored unsigned.
	committer := gitPerson{Name: "GitHub", Email: "noreply@github.com"}
	signed := c.id != nil && c.id.installation != 0 && in.Author == nil && in.Committer == nil
	if in.Committer != nil {
		committer = *in.Committer
	}
	now := c.f.now().UTC().Format(time.RFC3339)
	env := []string{"GIT_AUTHOR_NAME=" + author.Name, "GIT_AUTHOR_EMAIL=" + author.Email, "GIT_AUTHOR_DATE=" + now,
		"GIT_COMMITTER_NAME=" + committer.Name, "GIT_COMMITTER_EMAIL=" + committer.Email, "GIT_COMMITTER_DATE=" + now}
	sha, err := c.gitIn(rs, nil, env, args...)
	if err != nil {
		writeError(c.w, http.StatusInternalServerError, err.Error())
		return
	}
	if c.f.signed == nil {
		c.f.signed = map[string]bool{}
	}
	c.f.signed[sha] = signed
	writeJSON(c.w, http.StatusCreated, c.gitCommitJSON(rs, sha))
}

func getGitCommit(c *call) {
	rs := c.repo()
	if rs == nil {
		return
	}
	sha := c.params["commit_sha"]
	if _, ok := c.f.gitDirs[key(rs.Owner, rs.Name)]; !ok || !c.objectExists(rs, sha, "commit") {
		writeError(c.w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(c.w, http.StatusOK, c.gitCommitJSON(rs, sha))
}

// gitCommitJSON is a git-commit as GitHub describes it, read back from the
// repository.
func (c *call) gitCommitJSON(rs *repoState, sha string) map[string]any {
	out, _ := c.gitIn(rs, nil, nil, "show", "-s", "--format=%T%n%P%n%an%n%ae%n%aI%n%cn%n%ce%n%cI%n%B", sha)
	f := strings.SplitN(out, "\n", 9)
	for len(f) < 9 {
		f = append(f, "")
	}
	api := fmt.Sprintf("%s/repos/%s/%s/git/commits/%s", c.f.apiURL(), rs.Owner, rs.Name, sha)
	parents := []any{}
	for _, p := range strings.Fields(f[1]) {
		parents = append(parents, map[string]any{"sha": p, "url": fmt.Sprintf("%s/repos/%s/%s/git/commits/%s", c.f.apiURL(), rs.Owner, rs.Name, p), "html_url": fmt.Sprintf("%s/%s/%s/commit/%s", c.f.webURL(), rs.Owner, rs.Name, p)})
	}
	verification := map[string]any{"verified": false, "reason": "unsigned", "signature": nil, "payload": nil, "verified_at": nil}
	if c.f.signed[sha] {
		verification = map[string]any{"verified": true, "reason": "valid", "signature": "-----BEGIN PGP SIGNATURE-----\n(fake web-flow signature)\n-----END PGP SIGNATURE-----", "payload": "tree " + f[0], "verified_at": f[7]}
	}
	return map[string]any{
		"sha": sha, "node_id": "C_fake" + sha[:12], "url": api, "html_url": fmt.Sprintf("%s/%s/%s/commit/%s", c.f.webURL(), rs.Owner, rs.Name, sha),
		"author":    map[string]any{"name": f[2], "email": f[3], "date": f[4]},
		"committer": map[string]any{"name": f[5], "email": f[6], "date": f[7]},
		"message":   strings.TrimRight(f[8], "\n"),
		"tree":      map[string]any{"sha": f[0], "url": fmt.Sprintf("%s/repos/%s/%s/git/trees/%s", c.f.apiURL(), rs.Owner, rs.Name, f[0])},
		"parents":   parents, "verification": verification,
	}
}

// Verified reports whether GitHub would show commit sha of repo as
// Verified (it was created through the Git Data API and signed by
// GitHub).
func (f *Fake) Verified(sha string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.signed[sha]
}

// gitRef writes a branch ref of a git-backed repository, as a push would:
// the object must be a commit, a create needs the ref absent, and without
// force an update must fast-forward. The ref's value is read from git
// itself, not from the refs the fake synced before the request (another
// request's sync may have put back a value read before this one's
// update), and the write is git's compare-and-swap on the value checked,
// so concurrent writers are refused as GitHub refuses them, never lost. It
// reports whether the repository is git-backed; on a problem it has
// answered.
func (c *call) gitRef(rs *repoState, name, sha string, create, force bool) (backed, ok bool) {
	if !c.f.gitBacked(rs) {
		return false, true
	}
	if !c.objectExists(rs, sha, "commit") {
		writeError(c.w, http.StatusUnprocessableEntity, "Object does not exist")
		return true, false
	}
	cur, _ := c.gitIn(rs, nil, nil, "rev-parse", "--verify", "-q", name)
	switch {
	case create && cur != "":
		writeError(c.w, http.StatusUnprocessableEntity, "Reference already exists")
		return true, false
	case !create && cur == "":
		writeError(c.w, http.StatusUnprocessableEntity, "Reference does not exist")
		return true, false
	}
	if !create && !force {
		if _, err := c.gitIn(rs, nil, nil, "merge-base", "--is-ancestor", cur, sha); err != nil {
			writeError(c.w, http.StatusUnprocessableEntity, "Update is not a fast forward")
			return true, false
		}
	}
	expect := cur
	if create {
		expect = strings.Repeat("0", 40) // the ref must not exist
	}
	if _, err := c.gitIn(rs, nil, nil, "update-ref", name, sha, expect); err != nil {
		// Moved by a push over git since it was read.
		writeError(c.w, http.StatusUnprocessableEntity, "Update is not a fast forward")
		return true, false
	}
	return true, true
}

// gitBacked reports whether a bare repository is the source of truth for
// rs's refs (BackWithGit).
func (f *Fake) gitBacked(rs *repoState) bool {
	_, ok := f.gitDirs[key(rs.Owner, rs.Name)]
	return ok
}

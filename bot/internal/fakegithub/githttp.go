package fakegithub

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Git over HTTP: a repository backed by a bare git directory (BackWithGit)
// is also served the way github.com serves it, at /<owner>/<name>.git
// (smart HTTP through `git http-backend`), behind the same credentials as
// the API: basic auth with a token as the password (user x-access-token
// for an installation token). Fetching needs read access (public
// repositories need no credentials), pushing needs write access; an
// installation token works only on its installation's repositories, and
// an expired one is refused. Git requests are not counted as API calls.

var gitBackend struct {
	once sync.Once
	path string
	err  error
}

// httpBackend finds `git http-backend`.
func httpBackend() (string, error) {
	gitBackend.once.Do(func() {
		git, err := exec.LookPath("git")
		if err != nil {
			gitBackend.err = fmt.Errorf("git is not on PATH: %w", err)
			return
		}
		out, err := exec.Command(git, "--exec-path").Output()
		if err != nil {
			gitBackend.err = fmt.Errorf("git --exec-path: %w", err)
			return
		}
		p := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
		if _, err := os.Stat(p); err != nil {
			gitBackend.err = fmt.Errorf("git http-backend not found: %w", err)
			return
		}
		gitBackend.path = p
	})
	return gitBackend.path, gitBackend.err
}

// gitPath splits /<owner>/<name>.git/<rest> of a git-backed repository.
func (f *Fake) gitPath(path string) (repoKey, dir, rest string, ok bool) {
	owner, after, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if !ok {
		return "", "", "", false
	}
	name, rest, ok := strings.Cut(after, ".git/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", "", false
	}
	repoKey = key(owner, name)
	f.mu.Lock()
	dir, ok = f.gitDirs[repoKey]
	f.mu.Unlock()
	return repoKey, dir, rest, ok
}

// serveGit answers git's smart HTTP requests for git-backed repositories;
// it returns false for every other request.
func (f *Fake) serveGit(w http.ResponseWriter, r *http.Request) bool {
	repoKey, dir, rest, ok := f.gitPath(r.URL.Path)
	if !ok {
		return false
	}
	push := rest == "git-receive-pack" || (rest == "info/refs" && r.URL.Query().Get("service") == "git-receive-pack")
	switch rest {
	case "info/refs", "git-upload-pack", "git-receive-pack":
	default:
		http.Error(w, "Not Found", http.StatusNotFound)
		return true
	}
	login, status, msg := f.gitAccess(r, repoKey, push)
	if status != 0 {
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
		}
		http.Error(w, msg, status)
		return true
	}
	backend, err := httpBackend()
	if err != nil {
		http.Error(w, "fake GitHub cannot serve git: "+err.Error(), http.StatusInternalServerError)
		return true
	}
	var before map[string]string
	if rest == "git-receive-pack" {
		before = headsOf(dir)
	}
	// http-backend serves GIT_PROJECT_ROOT + PATH_INFO: the bare
	// directory's parent and its own name, whatever the URL calls it.
	req := r.Clone(r.Context())
	req.URL.Path = "/" + filepath.Base(dir) + "/" + rest
	env := []string{"GIT_PROJECT_ROOT=" + filepath.Dir(dir), "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + filepath.Dir(dir)}
	if login != "" {
		env = append(env, "REMOTE_USER="+login) // lets http-backend accept pushes
	}
	h := &cgi.Handler{Path: backend, Env: env, InheritEnv: []string{"PATH"}}
	if t, err := exec.LookPath("timeout"); err == nil {
		// A client killed mid-push (the chaos tests SIGKILL the bot) can
		// leave git-http-backend spinning on its closed input for good: a
		// whole core, and a server that never shuts down (net/http/cgi
		// does not stop the child when the request ends). No request of
		// these tests takes a minute.
		h.Path, h.Args = t, []string{"-k", "5", "60", backend}
	}
	h.ServeHTTP(w, req)
	if before != nil {
		f.pushed(repoKey, login, before, headsOf(dir))
	}
	return true
}

// gitAccess checks a git request's credentials: it returns the account
// the request acts as ("" for anonymous) or the status to refuse it with.
func (f *Fake) gitAccess(r *http.Request, repoKey string, push bool) (string, int, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rs := f.repos[repoKey]
	if rs == nil {
		return "", http.StatusNotFound, "Repository not found."
	}
	_, token, hasAuth := r.BasicAuth()
	if !hasAuth {
		if push || rs.Private {
			return "", http.StatusUnauthorized, "Authentication required"
		}
		return "", 0, ""
	}
	id, status, _ := f.identify(token, false)
	if status != 0 {
		return "", http.StatusUnauthorized, "Invalid username or token. Password authentication is not supported for Git operations."
	}
	if id.installation != 0 {
		login := f.installationLogin(id.installation)
		switch {
		case rs.installationID == id.installation:
			return login, 0, ""
		case rs.Private:
			return "", http.StatusNotFound, "Repository not found."
		case push:
			return "", http.StatusForbidden, "Permission to " + rs.Owner + "/" + rs.Name + ".git denied to " + login + "."
		}
		return login, 0, ""
	}
	login := id.user.Login
	level := PermNone
	if strings.EqualFold(login, rs.Owner) {
		level = PermAdmin
	} else if p, ok := rs.perms[strings.ToLower(login)]; ok {
		level = p
	}
	switch {
	case level == PermNone && rs.Private:
		return "", http.StatusNotFound, "Repository not found."
	case push && level != PermAdmin && level != PermMaintain && level != PermWrite:
		return "", http.StatusForbidden, "Permission to " + rs.Owner + "/" + rs.Name + ".git denied to " + login + "."
	}
	return login, 0, ""
}

// headsOf reads a bare repository's branch heads (branch → sha).
func headsOf(dir string) map[string]string {
	out, err := exec.Command("git", "--git-dir", dir, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/").Output()
	if err != nil {
		return map[string]string{}
	}
	heads := map[string]string{}
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		sha, name, ok := strings.Cut(string(line), " ")
		if ok {
			heads[strings.TrimPrefix(name, "refs/heads/")] = sha
		}
	}
	return heads
}

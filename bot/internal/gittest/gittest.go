// Package gittest serves real bare git repositories over HTTP for the bot's
// tests: `git http-backend` behind basic auth that accepts only the
// installation token (user x-access-token), as GitHub does. Tests check the
// results with the git CLI.
package gittest

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Token is the only password the server accepts.
const Token = "ghs_GitTestInstallationToken0123456789ab"

// Server serves bare repositories root/<owner>/<name>.git.
type Server struct {
	Root string
	URL  string

	mu     sync.Mutex
	pushes []string // paths that received a push
}

// Env is a hermetic environment for the git CLI.
func Env(home string) []string {
	return append(os.Environ(),
		"HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C",
		"GIT_AUTHOR_NAME=Mona Maintainer", "GIT_AUTHOR_EMAIL=mona@example.com",
		"GIT_COMMITTER_NAME=Mona Maintainer", "GIT_COMMITTER_EMAIL=mona@example.com",
	)
}

// Git runs git in dir and returns its trimmed stdout; it fails the test on
// error.
func Git(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = Env(dir)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return strings.TrimSpace(out.String())
}

// New starts a server; it is closed when the test ends.
func New(tb testing.TB) *Server {
	tb.Helper()
	s, h := NewHandler(tb)
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// NewHandler returns the git host as a handler, for tests that serve it
// beside other routes (s.URL is theirs to set). Repositories live at
// /<owner>/<name>.git.
func NewHandler(tb testing.TB) (*Server, http.Handler) {
	tb.Helper()
	execPath := Git(tb, ".", "--exec-path")
	backend := filepath.Join(execPath, "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		tb.Fatalf("git http-backend not found: %v", err)
	}
	s := &Server{Root: tb.TempDir()}
	h := &cgi.Handler{
		Path:       backend,
		Env:        []string{"GIT_PROJECT_ROOT=" + s.Root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + s.Root},
		InheritEnv: []string{"PATH"},
	}
	return s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || user != "x-access-token" || pass != Token {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "bad credentials", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
			s.mu.Lock()
			s.pushes = append(s.pushes, strings.TrimSuffix(r.URL.Path, "/git-receive-pack"))
			s.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

// Pushes lists the repository paths (/<owner>/<name>.git) that received a
// push.
func (s *Server) Pushes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.pushes...)
}

// Bare creates the bare repository owner/name.git with files committed on
// branch main by a human, and returns its directory.
func (s *Server) Bare(tb testing.TB, owner, name string, files map[string]string) string {
	tb.Helper()
	dir := filepath.Join(s.Root, owner, name+".git")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	Git(tb, dir, "init", "-q", "--bare", "-b", "main")
	Git(tb, dir, "config", "http.receivepack", "true")
	if files != nil {
		Commit(tb, dir, "main", "initial", files)
	}
	return dir
}

// Commit commits files (path → content) on branch of the bare repository
// as a human would (clone, write, commit, push) and returns the new tip.
func Commit(tb testing.TB, bare, branch, message string, files map[string]string) string {
	tb.Helper()
	work := tb.TempDir()
	Git(tb, work, "init", "-q", "-b", branch)
	if out := gitMaybe(bare, "rev-parse", "--verify", "-q", "refs/heads/"+branch); out != "" {
		Git(tb, work, "fetch", "-q", bare, branch)
		Git(tb, work, "reset", "-q", "--hard", "FETCH_HEAD")
	}
	for p, c := range files {
		full := filepath.Join(work, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	Git(tb, work, "add", "-A")
	Git(tb, work, "commit", "-q", "--allow-empty", "-m", message)
	Git(tb, work, "push", "-q", bare, "HEAD:refs/heads/"+branch)
	return Git(tb, work, "rev-parse", "HEAD")
}

// WriteTree copies a directory's files into a map for Bare or Commit.
func WriteTree(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	files := map[string]string{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

func gitMaybe(dir string, args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = Env(dir)
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// String describes the server.
func (s *Server) String() string { return fmt.Sprintf("git server %s (%s)", s.URL, s.Root) }

// APICommits lists the commits of rev-list revs in the bare repository
// and checks that each one is GitHub's: verified (the fake's Verified)
// and, when author is not empty, authored by author and committed by
// GitHub, as a commit an app makes through the Git Data API is. It fails
// the test when there is none.
func APICommits(tb testing.TB, bare string, verified func(sha string) bool, author string, revs ...string) []string {
	tb.Helper()
	shas := strings.Fields(Git(tb, bare, append([]string{"rev-list"}, revs...)...))
	if len(shas) == 0 {
		tb.Fatalf("no commit in %v", revs)
	}
	for _, sha := range shas {
		if !verified(sha) {
			tb.Errorf("commit %s (%v) is not Verified", sha, revs)
		}
		if author == "" {
			continue
		}
		if who := Git(tb, bare, "log", "-1", "--format=%an|%cn", sha); who != author+"|GitHub" {
			tb.Errorf("commit %s (%v) by %q, want %s, committed by GitHub", sha, revs, who, author)
		}
	}
	return shas
}

package worktree

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentos/agentos/kernel/testenv"
)

// testToken is the installation token the test server accepts.
const testToken = "ghs_TestInstallationToken0123456789abcd"

// gitEnv is a hermetic environment for the git CLI in tests.
func gitEnv(home string) []string {
	return append(os.Environ(),
		"HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C",
		"GIT_AUTHOR_NAME=Test Human", "GIT_AUTHOR_EMAIL=human@example.com",
		"GIT_COMMITTER_NAME=Test Human", "GIT_COMMITTER_EMAIL=human@example.com",
	)
}

// runGit runs the git CLI in dir and returns its trimmed stdout.
func runGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := runGitErr(dir, nil, args...)
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func runGitErr(dir string, stdin []byte, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv(dir)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: %s", err, stderr.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}

// gitServer serves bare repositories under root through git http-backend,
// accepting only basic auth x-access-token:testToken.
type gitServer struct {
	root string
	srv  *httptest.Server

	mu       sync.Mutex
	requests []string // "METHOD path?query"
	// beforeReceive, when set, runs once before the next receive-pack POST
	// reaches git (to make a competing push land first).
	beforeReceive func()
}

func newGitServer(t *testing.T) *gitServer {
	t.Helper()
	s, err := startGitServer(t.TempDir())
	testenv.Require(t, "git http-backend", err)
	t.Cleanup(s.srv.Close)
	return s
}

// startGitServer serves the bare repositories under root; the caller closes
// s.srv.
func startGitServer(root string) (*gitServer, error) {
	backend, err := runGitErr(".", nil, "--exec-path")
	if err != nil {
		return nil, err
	}
	backend = filepath.Join(backend, "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		return nil, err
	}
	s := &gitServer{root: root}
	cgiH := &cgi.Handler{
		Path:       backend,
		Env:        []string{"GIT_PROJECT_ROOT=" + s.root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + s.root},
		InheritEnv: []string{"PATH"},
		// Refused updates in the race tests are expected; keep them quiet.
		Stderr: io.Discard,
	}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Method+" "+r.URL.RequestURI())
		hook := s.beforeReceive
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
			s.beforeReceive = nil
		} else {
			hook = nil
		}
		s.mu.Unlock()
		user, pass, ok := r.BasicAuth()
		if !ok || user != TokenUser || pass != testToken {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "bad credentials", http.StatusUnauthorized)
			return
		}
		if hook != nil {
			hook()
		}
		cgiH.ServeHTTP(w, r)
	}))
	return s, nil
}

// bare creates an empty bare repository owner/name.git that accepts pushes.
func (s *gitServer) bare(t *testing.T, owner, name string) string {
	t.Helper()
	dir := filepath.Join(s.root, owner, name+".git")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	runGit(t, dir, "init", "-q", "--bare", "-b", "main")
	runGit(t, dir, "config", "http.receivepack", "true")
	return dir
}

// seed pushes commits made from files (path → content, one commit per
// map) to branch of the bare repository dir.
func seed(t *testing.T, bare, branch string, commits ...map[string]string) string {
	t.Helper()
	work := t.TempDir()
	runGit(t, work, "init", "-q", "-b", branch)
	if out, err := runGitErr(work, nil, "fetch", "-q", bare, branch); err == nil {
		_ = out
		runGit(t, work, "reset", "-q", "--hard", "FETCH_HEAD")
	}
	for i, files := range commits {
		for p, content := range files {
			full := filepath.Join(work, p)
			if content == "" {
				os.Remove(full)
				continue
			}
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		runGit(t, work, "add", "-A")
		runGit(t, work, "commit", "-q", "-m", fmt.Sprintf("seed %d", i))
	}
	runGit(t, work, "push", "-q", bare, "HEAD:refs/heads/"+branch)
	return runGit(t, work, "rev-parse", "HEAD")
}

func (s *gitServer) url() string { return s.srv.URL }

func (s *gitServer) log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

func staticToken(tok string) TokenFunc {
	return func(context.Context, Repo) (string, error) { return tok, nil }
}

// newManager returns a Manager on a fresh cache directory talking to s.
func newManager(t *testing.T, s *gitServer, backend Backend) *Manager {
	t.Helper()
	m, err := New(Config{
		CacheDir: t.TempDir(),
		BaseURL:  s.url(),
		Token:    staticToken(testToken),
		Author:   Identity{Name: "agentos[bot]", Email: "12345+agentos[bot]@users.noreply.github.com"},
		Backend:  backend,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var backends = []struct {
	name    string
	backend Backend
}{
	{"gogit", BackendGoGit},
	{"cli", BackendCLI},
}

// write writes content to the slash path rel of the worktree dir, as a
// kernel file tool does, and returns the change a commit takes for it.
func write(t testing.TB, dir, rel, content string) Change {
	t.Helper()
	mustWrite(t, filepath.Join(dir, filepath.FromSlash(rel)), content)
	return Change{Path: rel, SHA256: sha256Hex(content)}
}

// remove deletes the slash path rel of the worktree dir, as a kernel file
// tool does, and returns the change a commit takes for it.
func remove(t testing.TB, dir, rel string) Change {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(rel))); err != nil {
		t.Fatal(err)
	}
	return Change{Path: rel}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

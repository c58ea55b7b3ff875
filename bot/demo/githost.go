package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// gitEnv is a hermetic environment for the git CLI: no user or system
// configuration, no prompts, and a human author for the seed commit.
func gitEnv(home string) []string {
	return append(os.Environ(),
		"HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+filepath.Join(home, ".gitconfig"),
		"GIT_TERMINAL_PROMPT=0", "LC_ALL=C",
		"GIT_AUTHOR_NAME=Mona Maintainer", "GIT_AUTHOR_EMAIL=mona@example.com",
		"GIT_COMMITTER_NAME=Mona Maintainer", "GIT_COMMITTER_EMAIL=mona@example.com",
	)
}

// git runs the git CLI in dir and returns its trimmed standard output.
func git(ctx context.Context, home, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv(home)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimRight(out.String(), "\n"), nil
}

// seedBare creates root/<owner>/<name>.git with the files of src committed
// on main by a human, and returns the bare repository's directory.
func seedBare(ctx context.Context, home, root, owner, name, src string) (string, error) {
	bare := filepath.Join(root, owner, name+".git")
	if err := os.MkdirAll(bare, 0o755); err != nil {
		return "", err
	}
	steps := []struct {
		dir  string
		args []string
	}{
		{bare, []string{"init", "-q", "--bare", "-b", "main"}},
		{bare, []string{"config", "http.receivepack", "true"}},
		{src, []string{"init", "-q", "-b", "main"}},
		{src, []string{"add", "-A"}},
		{src, []string{"commit", "-q", "-m", "Add the token check"}},
		{src, []string{"push", "-q", bare, "HEAD:refs/heads/main"}},
	}
	for _, s := range steps {
		if _, err := git(ctx, home, s.dir, s.args...); err != nil {
			return "", fmt.Errorf("seed %s/%s: %w", owner, name, err)
		}
	}
	return bare, nil
}

// gitHandler serves the bare repositories under root with git
// http-backend, behind the basic auth GitHub uses for installation tokens
// (user x-access-token, the token as password).
func gitHandler(ctx context.Context, home, root, user, token string) (http.Handler, error) {
	execPath, err := git(ctx, home, root, "--exec-path")
	if err != nil {
		return nil, err
	}
	backend := filepath.Join(execPath, "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		return nil, fmt.Errorf("git http-backend not found: %w", err)
	}
	h := &cgi.Handler{
		Path:       backend,
		Env:        []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + home},
		InheritEnv: []string{"PATH"},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != token {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "bad credentials", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}), nil
}

// server is an HTTP server on a loopback port.
type server struct {
	URL  string
	srv  *http.Server
	done chan error
}

// listen serves h on 127.0.0.1 on a free port until shutdown.
func listen(h http.Handler) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{URL: "http://" + ln.Addr().String(), srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, done: make(chan error, 1)}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// shutdown stops the server and waits for its serving goroutine.
func (s *server) shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

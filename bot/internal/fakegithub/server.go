package fakegithub

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Server is a fake GitHub on a loopback port, for programs (agentos demo
// --github) and end-to-end tests that run the bot as a separate process.
// It serves, like github.com and GitHub Enterprise Server:
//   - the REST API at / and at /api/v3/ (Enterprise Server's prefix);
//   - GraphQL at /graphql and /api/graphql;
//   - git over HTTP at /<owner>/<name>.git for git-backed repositories.
type Server struct {
	*Fake
	// URL is http://127.0.0.1:PORT. As a GitHub API URL it reaches the
	// REST API under /api/v3/ (go-github adds it to any host but
	// api.github.com); URL+"/api/v3" is the Enterprise form; as the git
	// host it serves the repositories.
	URL  string
	srv  *http.Server
	done chan error
}

// Start serves f on 127.0.0.1 on a free port until Close.
func Start(f *Fake) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakegithub: listen: %w", err)
	}
	s := &Server{Fake: f, URL: "http://" + ln.Addr().String(), srv: &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}, done: make(chan error, 1)}
	f.SetURL(s.URL)
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Close stops posting webhook deliveries and shuts the server down,
// waiting at most 10 seconds for requests in flight before it cuts them.
func (s *Server) Close(ctx context.Context) error {
	s.Fake.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.srv.Close()
	}
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// NewApp makes a GitHub App with a fresh 2048-bit RSA key: the App to
// register with AddApp, and its private key in PEM (PKCS#1, as GitHub
// hands it out) for the bot's configuration.
func NewApp(id int64, slug string) (App, []byte, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return App{}, nil, fmt.Errorf("fakegithub: app key: %w", err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return App{ID: id, Slug: slug, PublicKey: &key.PublicKey}, pemKey, nil
}

// AddGitRepo seeds repository r backed by a new bare git repository
// root/<owner>/<name>.git whose default branch holds files (path →
// content), committed by a human ("Mona Maintainer"). Git runs with a
// hermetic environment (no user or system configuration). It returns the
// bare repository's directory.
func (f *Fake) AddGitRepo(ctx context.Context, r Repo, root string, files map[string]string) (string, error) {
	if r.DefaultBranch == "" {
		r.DefaultBranch = "main"
	}
	bare := filepath.Join(root, r.Owner, r.Name+".git")
	work, err := os.MkdirTemp(root, "seed-")
	if err != nil {
		return "", fmt.Errorf("fakegithub: seed %s/%s: %w", r.Owner, r.Name, err)
	}
	defer os.RemoveAll(work)
	if err := os.MkdirAll(bare, 0o755); err != nil {
		return "", fmt.Errorf("fakegithub: seed %s/%s: %w", r.Owner, r.Name, err)
	}
	for p, c := range files {
		full := filepath.Join(work, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			return "", err
		}
	}
	steps := []struct {
		dir  string
		args []string
	}{
		{bare, []string{"init", "-q", "--bare", "-b", r.DefaultBranch}},
		{work, []string{"init", "-q", "-b", r.DefaultBranch}},
		{work, []string{"add", "-A"}},
		{work, []string{"commit", "-q", "--allow-empty", "-m", "Initial commit"}},
		{work, []string{"push", "-q", bare, "HEAD:refs/heads/" + r.DefaultBranch}},
	}
	for _, st := range steps {
		if err := Git(ctx, root, st.dir, st.args...); err != nil {
			return "", fmt.Errorf("fakegithub: seed %s/%s: %w", r.Owner, r.Name, err)
		}
	}
	f.AddRepo(r)
	f.BackWithGit(r.Owner+"/"+r.Name, bare)
	return bare, nil
}

// Git runs the git CLI in dir with a hermetic environment (HOME=home, no
// system configuration, a human author) and returns its error with git's
// standard error.
func Git(ctx context.Context, home, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+filepath.Join(home, ".gitconfig"),
		"GIT_TERMINAL_PROMPT=0", "LC_ALL=C",
		"GIT_AUTHOR_NAME=Mona Maintainer", "GIT_AUTHOR_EMAIL=mona@example.com",
		"GIT_COMMITTER_NAME=Mona Maintainer", "GIT_COMMITTER_EMAIL=mona@example.com",
	)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return nil
}

package worktree

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// tokenForms are the ways a token could leak: itself and its basic-auth
// header value.
func tokenForms(tok string) [][]byte {
	return [][]byte{
		[]byte(tok),
		[]byte(base64.StdEncoding.EncodeToString([]byte(TokenUser + ":" + tok))),
	}
}

// assertNoToken fails if any file under dir contains the token.
func assertNoToken(t *testing.T, dir, tok string) int {
	t.Helper()
	files := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, f := range tokenForms(tok) {
			if bytes.Contains(b, f) {
				t.Errorf("%s contains the token", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestTokenNeverWritten(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			srv := newGitServer(t)
			bare := srv.bare(t, testRepo.Owner, testRepo.Name)
			seed(t, bare, "main", map[string]string{"a.txt": "1\n"})
			m := newManager(t, srv, b.backend)
			s, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "tok", Number: 9})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Commit(ctx, CommitOptions{Message: "m", RunID: "r", Changes: []Change{write(t, s.Dir, "b.txt", "2\n")}}); err != nil {
				t.Fatal(err)
			}
			if err := s.Push(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := m.CommitArtifact(ctx, Artifact{Repo: testRepo, SessionID: "tok", Events: []byte("e\n")}); err != nil {
				t.Fatal(err)
			}
			if _, err := m.LoadArtifact(ctx, testRepo, "tok"); err != nil {
				t.Fatal(err)
			}
			// The worktree is still open: both it and the mirror are scanned.
			if n := assertNoToken(t, m.cfg.CacheDir, testToken); n < 10 {
				t.Errorf("scanned only %d files; the cache is not where the test thinks", n)
			}
			cfg, err := os.ReadFile(filepath.Join(m.mirrorDir(testRepo), "config"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(cfg), srv.url()+"/octo/widgets.git") || strings.Contains(string(cfg), "@") {
				t.Errorf("mirror config remote:\n%s", cfg)
			}
			s.Close()
		})
	}
}

func TestWrongTokenRejectedAndScrubbed(t *testing.T) {
	ctx := context.Background()
	srv := newGitServer(t)
	bare := srv.bare(t, testRepo.Owner, testRepo.Name)
	seed(t, bare, "main", map[string]string{"a.txt": "1\n"})
	const wrong = "ghs_WrongInstallationToken987654321zyx"
	m, err := New(Config{CacheDir: t.TempDir(), BaseURL: srv.url(), Token: staticToken(wrong)})
	if err != nil {
		t.Fatal(err)
	}
	ops := []struct {
		name string
		run  func() error
	}{
		{"prepare", func() error {
			_, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "w", Number: 1, Base: Base{Branch: "main"}})
			return err
		}},
		{"prepare default branch", func() error {
			_, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "w", Number: 1})
			return err
		}},
		{"commit artifact", func() error {
			_, err := m.CommitArtifact(ctx, Artifact{Repo: testRepo, SessionID: "w", Events: []byte("x")})
			return err
		}},
		{"load artifact", func() error {
			_, err := m.LoadArtifact(ctx, testRepo, "w")
			return err
		}},
	}
	for _, op := range ops {
		err := op.run()
		if err == nil {
			t.Errorf("%s with a wrong token succeeded", op.name)
			continue
		}
		if !errors.Is(err, transport.ErrAuthenticationRequired) && !errors.Is(err, transport.ErrAuthorizationFailed) {
			t.Errorf("%s: error %v is not an authentication error", op.name, err)
		}
		for _, f := range tokenForms(wrong) {
			if strings.Contains(err.Error(), string(f)) {
				t.Errorf("%s: error leaks the token: %v", op.name, err)
			}
		}
	}
	assertNoToken(t, m.cfg.CacheDir, wrong)
	if got := runGit(t, bare, "for-each-ref", "--format=%(refname)"); got != "refs/heads/main" {
		t.Errorf("remote refs after rejected operations = %q", got)
	}
}

func TestPushWithRevokedTokenScrubbed(t *testing.T) {
	ctx := context.Background()
	srv := newGitServer(t)
	bare := srv.bare(t, testRepo.Owner, testRepo.Name)
	seed(t, bare, "main", map[string]string{"a.txt": "1\n"})
	const revoked = "ghs_RevokedInstallationToken0000000000"
	tok := testToken
	m, err := New(Config{CacheDir: t.TempDir(), BaseURL: srv.url(), Token: func(context.Context, Repo) (string, error) { return tok, nil }})
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "rv", Number: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Commit(ctx, CommitOptions{Message: "m", Changes: []Change{write(t, s.Dir, "a.txt", "2\n")}}); err != nil {
		t.Fatal(err)
	}
	tok = revoked
	err = s.Push(ctx)
	if err == nil {
		t.Fatal("push with a revoked token succeeded")
	}
	if strings.Contains(err.Error(), revoked) {
		t.Errorf("error leaks the token: %v", err)
	}
	if _, err := runGitErr(bare, nil, "rev-parse", "--verify", "refs/heads/"+s.Branch); err == nil {
		t.Error("branch exists on the remote after a rejected push")
	}
}

func TestTokenSourceError(t *testing.T) {
	m, err := New(Config{CacheDir: t.TempDir(), Token: func(context.Context, Repo) (string, error) {
		return "", errors.New("installation suspended")
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Prepare(context.Background(), PrepareOptions{Repo: testRepo, SessionID: "x", Number: 1})
	if err == nil || !strings.Contains(err.Error(), "installation suspended") {
		t.Errorf("error = %v, want the token source's error", err)
	}
}

func TestScrub(t *testing.T) {
	c := cred{token: testToken}
	b64 := base64.StdEncoding.EncodeToString([]byte(TokenUser + ":" + testToken))
	tests := []struct {
		in   string
		want string
	}{
		{"GET https://x-access-token:" + testToken + "@github.com/o/r.git: 401", "worktree: op: GET https://x-access-token:[REDACTED]@github.com/o/r.git: 401"},
		{"header Authorization: Basic " + b64, "worktree: op: header Authorization: Basic [REDACTED]"},
		{"no secret here", "worktree: op: no secret here"},
	}
	for _, tt := range tests {
		cause := errors.New(tt.in)
		err := c.wrap("op", cause)
		if err.Error() != tt.want {
			t.Errorf("wrap(%q) = %q, want %q", tt.in, err.Error(), tt.want)
		}
		if !errors.Is(err, cause) {
			t.Errorf("wrap(%q) does not unwrap to its cause", tt.in)
		}
	}
	if (cred{}).wrap("op", nil) != nil {
		t.Error("wrap(nil) != nil")
	}
}

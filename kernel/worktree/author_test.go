package worktree

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
)

// AuthorFor decides the author of every commit (session and artifact),
// per repository; a bad answer or an error fails the commit instead of
// writing a broken or misattributed one.
func TestAuthorFor(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			srv := newGitServer(t)
			bare := srv.bare(t, testRepo.Owner, testRepo.Name)
			seed(t, bare, "main", map[string]string{"README.md": "hello\n"})
			var calls atomic.Int32
			answer := Identity{Name: "Mona Lisa", Email: "583231+octocat@users.noreply.github.com"}
			var failWith error
			m, err := New(Config{
				CacheDir: t.TempDir(), BaseURL: srv.url(), Token: staticToken(testToken), Backend: b.backend,
				AuthorFor: func(_ context.Context, r Repo) (Identity, error) {
					calls.Add(1)
					if r != testRepo {
						t.Errorf("AuthorFor(%v), want %v", r, testRepo)
					}
					return answer, failWith
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			s, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "01HZX3K5Q8AUTHORAAAA", Number: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			sha, err := s.Commit(ctx, CommitOptions{Message: "change", RunID: "run-1", Changes: []Change{write(t, s.Dir, "README.md", "hello agent\n")}})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Push(ctx); err != nil {
				t.Fatal(err)
			}
			if got := runGit(t, bare, "log", "-1", "--format=%an <%ae>|%cn <%ce>", sha); got != "Mona Lisa <583231+octocat@users.noreply.github.com>|Mona Lisa <583231+octocat@users.noreply.github.com>" {
				t.Errorf("session commit identity = %q", got)
			}
			art, err := m.CommitArtifact(ctx, Artifact{Repo: testRepo, SessionID: "s1", RunID: "run-1", Events: []byte("{}\n"), Snapshot: []byte("{}\n")})
			if err != nil {
				t.Fatal(err)
			}
			if got := runGit(t, bare, "log", "-1", "--format=%an <%ae>", art); got != answer.Name+" <"+answer.Email+">" {
				t.Errorf("artifact commit identity = %q", got)
			}
			if calls.Load() < 2 {
				t.Errorf("AuthorFor called %d times, want once per commit at least", calls.Load())
			}

			tests := []struct {
				name    string
				id      Identity
				err     error
				wantErr string
			}{
				{"angle bracket in the name", Identity{Name: "x <evil@x>", Email: "a@b"}, nil, "control characters"},
				{"newline in the email", Identity{Name: "x", Email: "a@b\nAuthor: y"}, nil, "control characters"},
				{"empty name", Identity{Email: "a@b"}, nil, "empty"},
				{"resolver error", answer, errors.New("GitHub is down"), "GitHub is down"},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					answer, failWith = tt.id, tt.err
					c := write(t, s.Dir, "README.md", "again "+tt.name+"\n")
					_, err := s.Commit(ctx, CommitOptions{Message: "change", RunID: "run-2", Changes: []Change{c}})
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Errorf("Commit = %v, want an error containing %q", err, tt.wantErr)
					}
				})
			}
		})
	}
	if _, err := New(Config{CacheDir: t.TempDir(), Author: Identity{Name: "a\nb", Email: "x@y"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("New with a bad Author = %v, want ErrInvalid", err)
	}
}

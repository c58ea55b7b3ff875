package worktree

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var testRepo = Repo{Owner: "octo", Name: "widgets"}

func TestSessionBranch(t *testing.T) {
	tests := []struct {
		num     int
		id      string
		want    string
		wantErr bool
	}{
		{42, "01HZX3K5Q8ABCDEFGH", "agent/42-abcdefgh", false},
		{7, "sess-1", "agent/7-sess1", false},
		{1, "a_b.c-D", "agent/1-abcd", false},
		{0, "abc", "", true},
		{-3, "abc", "", true},
		{5, "", "", true},
		{5, "../etc", "", true},
		{5, "x.lock", "", true},
		{5, "a b", "", true},
		{5, "_", "", true},
	}
	for _, tt := range tests {
		got, err := SessionBranch(tt.num, tt.id)
		if (err != nil) != tt.wantErr {
			t.Errorf("SessionBranch(%d, %q) error = %v, wantErr %v", tt.num, tt.id, err, tt.wantErr)
			continue
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("SessionBranch(%d, %q) error %v is not ErrInvalid", tt.num, tt.id, err)
		}
		if got != tt.want {
			t.Errorf("SessionBranch(%d, %q) = %q, want %q", tt.num, tt.id, got, tt.want)
		}
	}
}

func TestParseRepo(t *testing.T) {
	tests := []struct {
		in      string
		wantErr bool
	}{
		{"octo/widgets", false},
		{"my-org/my.repo_1", false},
		{"octo", true},
		{"octo/", true},
		{"../widgets", true},
		{"octo/..", true},
		{"octo/w/x", true},
		{"octo/widgets.git", true},
		{"oc to/widgets", true},
	}
	for _, tt := range tests {
		_, err := ParseRepo(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseRepo(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no cache dir", Config{}},
		{"credential in URL", Config{CacheDir: t.TempDir(), BaseURL: "https://x-access-token:secret@github.com"}},
		{"ssh URL", Config{CacheDir: t.TempDir(), BaseURL: "git@github.com:"}},
		{"bad artifact branch", Config{CacheDir: t.TempDir(), ArtifactBranch: "a..b"}},
		{"bad backend", Config{CacheDir: t.TempDir(), Backend: Backend(9)}},
		{"missing git", Config{CacheDir: t.TempDir(), Backend: BackendCLI, GitPath: "/nonexistent/git"}},
	}
	for _, tt := range tests {
		if _, err := New(tt.cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: New error = %v, want ErrInvalid", tt.name, err)
		}
	}
}

func TestPrepareCommitPush(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			srv := newGitServer(t)
			bare := srv.bare(t, testRepo.Owner, testRepo.Name)
			baseSHA := seed(t, bare, "main",
				map[string]string{"README.md": "hello\n", "src/a.go": "package a\n", "src/old.txt": "old\n"},
				map[string]string{"src/b.go": "package b\n"})
			m := newManager(t, srv, b.backend)

			s, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "01HZX3K5Q8SESSIONAAAA", Number: 12})
			if err != nil {
				t.Fatal(err)
			}
			if s.BaseSHA != baseSHA {
				t.Errorf("BaseSHA = %s, want main %s", s.BaseSHA, baseSHA)
			}
			if s.Branch != "agent/12-sionaaaa" {
				t.Errorf("Branch = %q", s.Branch)
			}
			if s.Resumed {
				t.Error("Resumed = true for a new session")
			}
			got, err := os.ReadFile(filepath.Join(s.Dir, "src", "b.go"))
			if err != nil || string(got) != "package b\n" {
				t.Fatalf("checked-out src/b.go = %q, %v", got, err)
			}
			if st := runGit(t, s.Dir, "status", "--porcelain"); st != "" {
				t.Fatalf("fresh worktree not clean:\n%s", st)
			}
			if _, err := s.Commit(ctx, CommitOptions{Message: "nothing", RunID: "run-1"}); !errors.Is(err, ErrNoChanges) {
				t.Fatalf("Commit on clean tree error = %v, want ErrNoChanges", err)
			}

			// Edit, add, delete.
			changes := []Change{
				write(t, s.Dir, "README.md", "hello agent\n"),
				write(t, s.Dir, "src/new/c.go", "package c\n"),
				// An object the mirror already has (no copy is written).
				write(t, s.Dir, "src/copy.go", "package a\n"),
				remove(t, s.Dir, "src/old.txt"),
			}
			sha, err := s.Commit(ctx, CommitOptions{Message: "Fix the widget\n\nLonger body.", RunID: "01HZXRUN0001", Changes: changes})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Push(ctx); err != nil {
				t.Fatal(err)
			}

			// What the remote now holds, seen by the git CLI.
			if got := runGit(t, bare, "rev-parse", "refs/heads/"+s.Branch); got != sha {
				t.Errorf("remote %s = %s, want %s", s.Branch, got, sha)
			}
			if got := runGit(t, bare, "rev-parse", sha+"^"); got != baseSHA {
				t.Errorf("parent = %s, want base %s", got, baseSHA)
			}
			if got := runGit(t, bare, "log", "-1", "--format=%an|%ae|%cn|%ce", sha); got != "agentos[bot]|12345+agentos[bot]@users.noreply.github.com|agentos[bot]|12345+agentos[bot]@users.noreply.github.com" {
				t.Errorf("identity = %q", got)
			}
			if got := runGit(t, bare, "log", "-1", "--format=%s", sha); got != "Fix the widget" {
				t.Errorf("subject = %q", got)
			}
			if got := runGit(t, bare, "log", "-1", "--format=%(trailers:key=Agent-Session,valueonly)", sha); got != "01HZX3K5Q8SESSIONAAAA" {
				t.Errorf("Agent-Session trailer = %q", got)
			}
			if got := runGit(t, bare, "log", "-1", "--format=%(trailers:key=Agent-Run,valueonly)", sha); got != "01HZXRUN0001" {
				t.Errorf("Agent-Run trailer = %q", got)
			}
			if got := runGit(t, bare, "show", sha+":README.md"); got != "hello agent" {
				t.Errorf("README.md = %q", got)
			}
			if got := runGit(t, bare, "show", sha+":src/new/c.go"); got != "package c" {
				t.Errorf("src/new/c.go = %q", got)
			}
			if got := runGit(t, bare, "show", sha+":src/copy.go"); got != "package a" {
				t.Errorf("src/copy.go = %q", got)
			}
			if _, err := runGitErr(bare, nil, "cat-file", "-e", sha+":src/old.txt"); err == nil {
				t.Error("src/old.txt still in the pushed tree")
			}
			if out := runGit(t, bare, "fsck", "--no-dangling"); strings.Contains(out, "missing") {
				t.Errorf("remote fsck: %s", out)
			}

			// A second commit fast-forwards the branch.
			// The change set is the session's: the first commit's changes
			// again, and the new one.
			changes = append(changes, write(t, s.Dir, "src/a.go", "package a // v2\n"))
			sha2, err := s.Commit(ctx, CommitOptions{Message: "Second", RunID: "01HZXRUN0001", Changes: changes})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Push(ctx); err != nil {
				t.Fatal(err)
			}
			if got := runGit(t, bare, "rev-list", "--count", baseSHA+".."+s.Branch); got != "2" {
				t.Errorf("commits on branch = %s, want 2", got)
			}
			if got := runGit(t, bare, "rev-parse", s.Branch); got != sha2 {
				t.Errorf("remote tip = %s, want %s", got, sha2)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
				t.Errorf("worktree still present after Close: %v", err)
			}
			if _, err := s.Commit(ctx, CommitOptions{}); !errors.Is(err, ErrClosed) {
				t.Errorf("Commit after Close error = %v, want ErrClosed", err)
			}

			// The same session prepared again, on another machine, continues
			// from its pushed tip.
			m2 := newManager(t, srv, b.backend)
			s2, err := m2.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "01HZX3K5Q8SESSIONAAAA", Number: 12})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			if !s2.Resumed || s2.BaseSHA != sha2 {
				t.Errorf("resumed = %v at %s, want true at %s", s2.Resumed, s2.BaseSHA, sha2)
			}
			if got, _ := os.ReadFile(filepath.Join(s2.Dir, "src", "a.go")); string(got) != "package a // v2\n" {
				t.Errorf("resumed worktree src/a.go = %q", got)
			}
			sha3, err := s2.Commit(ctx, CommitOptions{Message: "Third", RunID: "01HZXRUN0002", Changes: []Change{write(t, s2.Dir, "src/a.go", "package a // v3\n")}})
			if err != nil {
				t.Fatal(err)
			}
			if err := s2.Push(ctx); err != nil {
				t.Fatal(err)
			}
			if got := runGit(t, bare, "rev-parse", s.Branch+"^"); got != sha2 {
				t.Errorf("resumed commit parent = %s, want %s", got, sha2)
			}
			if got := runGit(t, bare, "rev-parse", s.Branch); got != sha3 {
				t.Errorf("remote tip = %s, want %s", got, sha3)
			}
		})
	}
}

func TestPrepareFetchesIntoExistingMirror(t *testing.T) {
	ctx := context.Background()
	srv := newGitServer(t)
	bare := srv.bare(t, testRepo.Owner, testRepo.Name)
	seed(t, bare, "main", map[string]string{"a.txt": "1\n"})
	m := newManager(t, srv, BackendAuto)
	s1, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "first", Number: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	marker := filepath.Join(m.mirrorDir(testRepo), "marker")
	mustWrite(t, marker, "kept")

	second := seed(t, bare, "main", map[string]string{"a.txt": "2\n"})
	s2, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "second", Number: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.BaseSHA != second {
		t.Errorf("second session base = %s, want new main %s", s2.BaseSHA, second)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("mirror was re-created instead of fetched: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(s1.Dir, "a.txt")); string(got) != "1\n" {
		t.Errorf("first worktree changed under it: %q", got)
	}
	if s1.Dir == s2.Dir {
		t.Error("two sessions share a worktree")
	}
}

func TestPrepareBaseBranchAndErrors(t *testing.T) {
	ctx := context.Background()
	srv := newGitServer(t)
	bare := srv.bare(t, testRepo.Owner, testRepo.Name)
	seed(t, bare, "main", map[string]string{"a.txt": "main\n"})
	dev := seed(t, bare, "develop", map[string]string{"a.txt": "develop\n"})
	m := newManager(t, srv, BackendAuto)

	s, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "s1", Number: 3, Base: Base{Branch: "develop"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.BaseSHA != dev {
		t.Errorf("base = %s, want develop %s", s.BaseSHA, dev)
	}

	tests := []struct {
		name string
		opts PrepareOptions
		want error
	}{
		{"missing branch", PrepareOptions{Repo: testRepo, SessionID: "s2", Number: 3, Base: Base{Branch: "nope"}}, ErrNotFound},
		{"missing pull request", PrepareOptions{Repo: testRepo, SessionID: "s3", Base: Base{PullRequest: 99}}, ErrNotFound},
		{"bad session", PrepareOptions{Repo: testRepo, SessionID: "../x", Number: 3}, ErrInvalid},
		{"no number", PrepareOptions{Repo: testRepo, SessionID: "s4"}, ErrInvalid},
		{"bad repo", PrepareOptions{Repo: Repo{Owner: "..", Name: "x"}, SessionID: "s5", Number: 1}, ErrInvalid},
		{"bad base branch", PrepareOptions{Repo: testRepo, SessionID: "s6", Number: 1, Base: Base{Branch: "-x"}}, ErrInvalid},
	}
	for _, tt := range tests {
		if _, err := m.Prepare(ctx, tt.opts); !errors.Is(err, tt.want) {
			t.Errorf("%s: error = %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestPullRequestFromFork(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			srv := newGitServer(t)
			base := srv.bare(t, testRepo.Owner, testRepo.Name)
			seed(t, base, "main", map[string]string{"a.txt": "base\n"})
			fork := srv.bare(t, "forker", testRepo.Name)
			runGit(t, fork, "fetch", "-q", base, "main:main")
			head := seed(t, fork, "feature", map[string]string{"fork.txt": "from the fork\n"})
			// GitHub keeps every pull request's head in the base repository.
			runGit(t, base, "fetch", "-q", fork, "feature:refs/pull/7/head")
			forkRefsBefore := runGit(t, fork, "for-each-ref")

			m := newManager(t, srv, b.backend)
			s, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "prsession01", Base: Base{PullRequest: 7}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.BaseSHA != head || s.Branch != "agent/7-ession01" {
				t.Fatalf("base %s branch %s, want %s agent/7-ession01", s.BaseSHA, s.Branch, head)
			}
			sha, err := s.Commit(ctx, CommitOptions{Message: "Address review", RunID: "r1", Changes: []Change{write(t, s.Dir, "fork.txt", "fixed by the agent\n")}})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Push(ctx); err != nil {
				t.Fatal(err)
			}
			if got := runGit(t, base, "rev-parse", s.Branch+"^"); got != head {
				t.Errorf("session commit parent = %s, want PR head %s", got, head)
			}
			if got := runGit(t, base, "rev-parse", s.Branch); got != sha {
				t.Errorf("base repo branch = %s, want %s", got, sha)
			}
			if got := runGit(t, fork, "for-each-ref"); got != forkRefsBefore {
				t.Errorf("fork refs changed:\n%s\nwas\n%s", got, forkRefsBefore)
			}
			for _, req := range srv.log() {
				if strings.Contains(req, "/forker/") {
					t.Errorf("request to the fork: %s", req)
				}
			}
			cfg, err := os.ReadFile(filepath.Join(s.Dir, ".git", "config"))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(cfg), "forker") {
				t.Errorf("fork added to the worktree config:\n%s", cfg)
			}
		})
	}
}

func TestPushRefusesNonFastForward(t *testing.T) {
	ctx := context.Background()
	srv := newGitServer(t)
	bare := srv.bare(t, testRepo.Owner, testRepo.Name)
	seed(t, bare, "main", map[string]string{"a.txt": "1\n"})
	m := newManager(t, srv, BackendGoGit)
	s, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "nff", Number: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Someone else pushes to the session branch first.
	other := seed(t, bare, s.Branch, map[string]string{"b.txt": "other\n"})
	if _, err := s.Commit(ctx, CommitOptions{Message: "mine", Changes: []Change{write(t, s.Dir, "a.txt", "mine\n")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Push(ctx); err == nil {
		t.Fatal("Push over a diverged remote branch succeeded")
	}
	if got := runGit(t, bare, "rev-parse", s.Branch); got != other {
		t.Errorf("remote branch = %s, want untouched %s", got, other)
	}
}

func TestConcurrentPrepareSharedCache(t *testing.T) {
	ctx := context.Background()
	srv := newGitServer(t)
	bare := srv.bare(t, testRepo.Owner, testRepo.Name)
	want := seed(t, bare, "main", map[string]string{"a.txt": "1\n", "d/b.txt": "2\n"})
	cache := t.TempDir()
	// Two Managers on one cache directory stand for two processes.
	var ms []*Manager
	for i := 0; i < 2; i++ {
		m, err := New(Config{CacheDir: cache, BaseURL: srv.url(), Token: staticToken(testToken), Backend: BackendGoGit})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	const n = 6
	errs := make(chan error, n)
	sessions := make(chan *Session, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			s, err := ms[i%2].Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "conc" + string(rune('a'+i)), Number: i + 1})
			if err == nil {
				sessions <- s
			}
			errs <- err
		}(i)
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	close(sessions)
	for s := range sessions {
		if s.BaseSHA != want {
			t.Errorf("%s base = %s, want %s", s.Dir, s.BaseSHA, want)
		}
		if got, _ := os.ReadFile(filepath.Join(s.Dir, "d", "b.txt")); string(got) != "2\n" {
			t.Errorf("%s: d/b.txt = %q", s.Dir, got)
		}
		s.Close()
	}
}

func mustWrite(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPrepareAfterRemoteBranchDeleted(t *testing.T) {
	ctx := context.Background()
	srv := newGitServer(t)
	bare := srv.bare(t, testRepo.Owner, testRepo.Name)
	main := seed(t, bare, "main", map[string]string{"a.txt": "1\n"})
	m := newManager(t, srv, BackendGoGit)
	s, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "gone", Number: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, CommitOptions{Message: "m", Changes: []Change{write(t, s.Dir, "a.txt", "2\n")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Push(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Another session's fetch brings the branch into the mirror...
	other, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "other", Number: 9})
	if err != nil {
		t.Fatal(err)
	}
	other.Close()
	if _, err := runGitErr(m.mirrorDir(testRepo), nil, "rev-parse", "--verify", "refs/heads/"+s.Branch); err != nil {
		t.Fatalf("mirror lacks the pushed branch: %v", err)
	}
	// ...then it is merged and deleted on the remote.
	runGit(t, bare, "branch", "-D", s.Branch)
	s2, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "gone", Number: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.Resumed || s2.BaseSHA != main {
		t.Errorf("after deletion: resumed = %v at %s, want a fresh start at main %s", s2.Resumed, s2.BaseSHA, main)
	}
}

func TestRemoteBranches(t *testing.T) {
	ctx := context.Background()
	srv := newGitServer(t)
	bare := srv.bare(t, testRepo.Owner, testRepo.Name)
	m := newManager(t, srv, BackendGoGit)
	if got, err := m.RemoteBranches(ctx, testRepo, "agent/"); err != nil || len(got) != 0 {
		t.Fatalf("empty remote: %v, %v; want none", got, err)
	}
	seed(t, bare, "main", map[string]string{"a.txt": "1\n"})
	for _, b := range []string{"agent/12-bbbbbbbb", "agent/12-aaaaaaaa", "agent/123-cccccccc", "feature/agent/12-x"} {
		runGit(t, bare, "branch", b, "main")
	}
	got, err := m.RemoteBranches(ctx, testRepo, "agent/12-")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"agent/12-aaaaaaaa", "agent/12-bbbbbbbb"}; !reflect.DeepEqual(got, want) {
		t.Errorf("branches = %v, want %v", got, want)
	}
	if _, err := os.Stat(m.mirrorDir(testRepo)); !os.IsNotExist(err) {
		t.Errorf("listing branches created or fetched the mirror: %v", err)
	}
	bad, err := New(Config{CacheDir: t.TempDir(), BaseURL: srv.url(), Token: staticToken("ghs_wrong"), Backend: BackendGoGit})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.RemoteBranches(ctx, testRepo, "agent/"); err == nil || strings.Contains(err.Error(), "ghs_wrong") {
		t.Errorf("wrong token: err = %v, want an error that does not show the token", err)
	}
}

package worktree

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
)

func TestCommitArtifactAndLoad(t *testing.T) {
	ctx := context.Background()
	srv := newGitServer(t)
	bare := srv.bare(t, testRepo.Owner, testRepo.Name)
	mainSHA := seed(t, bare, "main", map[string]string{"a.txt": "1\n"})
	m := newManager(t, srv, BackendAuto)

	if _, err := m.LoadArtifact(ctx, testRepo, "s1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("LoadArtifact before any commit error = %v, want ErrNotFound", err)
	}

	events1 := []byte(`{"seq":1,"type":"session.started"}` + "\n")
	sha1, err := m.CommitArtifact(ctx, Artifact{Repo: testRepo, SessionID: "s1", RunID: "run-a", Events: events1, Snapshot: []byte(`{"seq":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := runGit(t, bare, "rev-parse", "refs/heads/agent-sessions"); got != sha1 {
		t.Errorf("remote agent-sessions = %s, want %s", got, sha1)
	}
	if got := runGit(t, bare, "rev-list", "--max-parents=0", "agent-sessions"); got != sha1 {
		t.Errorf("root of agent-sessions = %q, want the orphan commit %s", got, sha1)
	}
	if got := runGit(t, bare, "rev-parse", "main"); got != mainSHA {
		t.Errorf("main moved to %s", got)
	}
	if got := runGit(t, bare, "show", sha1+":sessions/s1/events.jsonl"); got+"\n" != string(events1) {
		t.Errorf("events.jsonl = %q", got)
	}
	if got := runGit(t, bare, "show", sha1+":sessions/s1/snapshot.json"); got != `{"seq":1}` {
		t.Errorf("snapshot.json = %q", got)
	}
	if got := runGit(t, bare, "log", "-1", "--format=%an <%ae>|%(trailers:key=Agent-Session,valueonly,separator=)|%(trailers:key=Agent-Run,valueonly,separator=)", sha1); got != "agentos[bot] <12345+agentos[bot]@users.noreply.github.com>|s1|run-a" {
		t.Errorf("author and trailers = %q", got)
	}

	// A pause later: the log grew.
	events2 := append(append([]byte(nil), events1...), []byte(`{"seq":2,"type":"run.paused"}`+"\n")...)
	sha2, err := m.CommitArtifact(ctx, Artifact{Repo: testRepo, SessionID: "s1", RunID: "run-a", Events: events2, Snapshot: []byte(`{"seq":2}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := runGit(t, bare, "rev-parse", sha2+"^"); got != sha1 {
		t.Errorf("parent of second artifact = %s, want %s", got, sha1)
	}
	// Same bytes again: no empty commit.
	sha3, err := m.CommitArtifact(ctx, Artifact{Repo: testRepo, SessionID: "s1", RunID: "run-a", Events: events2, Snapshot: []byte(`{"seq":2}`)})
	if err != nil {
		t.Fatal(err)
	}
	if sha3 != sha2 {
		t.Errorf("unchanged artifact made commit %s, want tip %s", sha3, sha2)
	}
	// A later run on another machine (fresh cache) resumes from the branch.
	fresh := newManager(t, srv, BackendGoGit)
	got, err := fresh.LoadArtifact(ctx, testRepo, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(events2) {
		t.Errorf("LoadArtifact = %q, want %q", got, events2)
	}
	if _, err := fresh.LoadArtifact(ctx, testRepo, "other"); !errors.Is(err, ErrNotFound) {
		t.Errorf("LoadArtifact(other) error = %v, want ErrNotFound", err)
	}
	if _, err := fresh.LoadArtifact(ctx, testRepo, "../x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("LoadArtifact(../x) error = %v, want ErrInvalid", err)
	}
	if _, err := fresh.CommitArtifact(ctx, Artifact{Repo: testRepo, SessionID: "s1", RunID: "a\nb"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("CommitArtifact with a newline in the run id error = %v, want ErrInvalid", err)
	}
	// A second session on the fresh machine keeps the first one's files.
	sha4, err := fresh.CommitArtifact(ctx, Artifact{Repo: testRepo, SessionID: "s2", RunID: "run-b", Events: []byte("{}\n"), Snapshot: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	if got := runGit(t, bare, "ls-tree", "--name-only", sha4, "sessions/"); got != "sessions/s1\nsessions/s2" {
		t.Errorf("sessions on the branch = %q", got)
	}
	if out := runGit(t, bare, "fsck", "--strict", "--no-dangling"); strings.Contains(out, "error") {
		t.Errorf("fsck: %s", out)
	}
}

// TestCommitArtifactConcurrent has sessions on several "machines" (one
// Manager each, own cache) and several sessions in one process push to the
// same artifact branch at once; none may be lost.
func TestCommitArtifactConcurrent(t *testing.T) {
	ctx := context.Background()
	srv := newGitServer(t)
	bare := srv.bare(t, testRepo.Owner, testRepo.Name)
	seed(t, bare, "main", map[string]string{"a.txt": "1\n"})
	shared := newManager(t, srv, BackendAuto)
	const n = 8
	var wg sync.WaitGroup
	shas := make([]string, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		m := shared
		if i%2 == 0 {
			m = newManager(t, srv, BackendAuto)
		}
		wg.Add(1)
		go func(i int, m *Manager) {
			defer wg.Done()
			id := fmt.Sprintf("sess%02d", i)
			shas[i], errs[i] = m.CommitArtifact(ctx, Artifact{Repo: testRepo, SessionID: id, RunID: "r", Events: []byte(id + "\n"), Snapshot: []byte(`"` + id + `"`)})
		}(i, m)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
	}
	var want []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("sess%02d", i)
		want = append(want, "sessions/"+id)
		if got := runGit(t, bare, "show", "agent-sessions:sessions/"+id+"/events.jsonl"); got != id {
			t.Errorf("%s events = %q", id, got)
		}
		// Each returned SHA is on the branch and holds its own session.
		if _, err := runGitErr(bare, nil, "merge-base", "--is-ancestor", shas[i], "agent-sessions"); err != nil {
			t.Errorf("returned %s not on the branch: %v", shas[i], err)
		}
		if got := runGit(t, bare, "show", shas[i]+":sessions/"+id+"/events.jsonl"); got != id {
			t.Errorf("%s at its own commit = %q", id, got)
		}
	}
	got := strings.Split(runGit(t, bare, "ls-tree", "--name-only", "agent-sessions", "sessions/"), "\n")
	sort.Strings(got)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("sessions on the branch = %v, want %v", got, want)
	}
	if c := runGit(t, bare, "rev-list", "--count", "agent-sessions"); c != fmt.Sprint(n) {
		t.Errorf("commits on agent-sessions = %s, want %d", c, n)
	}
	if merges := runGit(t, bare, "rev-list", "--merges", "agent-sessions"); merges != "" {
		t.Errorf("history not linear: merges %s", merges)
	}
}

// TestCommitArtifactLostRaceIsRebuilt makes another writer's push land
// between this writer's fetch and its push: the server refuses the stale
// update and the commit is rebuilt on the new tip.
func TestCommitArtifactLostRaceIsRebuilt(t *testing.T) {
	ctx := context.Background()
	srv := newGitServer(t)
	bare := srv.bare(t, testRepo.Owner, testRepo.Name)
	seed(t, bare, "main", map[string]string{"a.txt": "1\n"})
	m := newManager(t, srv, BackendGoGit)
	first, err := m.CommitArtifact(ctx, Artifact{Repo: testRepo, SessionID: "early", Events: []byte("e\n")})
	if err != nil {
		t.Fatal(err)
	}
	var competing string
	srv.mu.Lock()
	srv.beforeReceive = func() {
		// Another machine commits its own session on top of the tip.
		blob := gitStdin(t, bare, "x\n", "hash-object", "-w", "--stdin")
		sub := gitStdin(t, bare, "100644 blob "+blob+"\tevents.jsonl\n", "mktree")
		tip := runGit(t, bare, "rev-parse", "agent-sessions")
		old := runGit(t, bare, "ls-tree", "agent-sessions", "sessions/")
		var lines []string
		for _, l := range strings.Split(old, "\n") {
			lines = append(lines, strings.Replace(l, "sessions/", "", 1))
		}
		lines = append(lines, "040000 tree "+sub+"\tother")
		sessions := gitStdin(t, bare, strings.Join(lines, "\n")+"\n", "mktree")
		root := gitStdin(t, bare, "040000 tree "+sessions+"\tsessions\n", "mktree")
		competing = runGit(t, bare, "commit-tree", root, "-p", tip, "-m", "other machine")
		runGit(t, bare, "update-ref", "refs/heads/agent-sessions", competing, tip)
	}
	srv.mu.Unlock()

	before := countPosts(srv)
	sha, err := m.CommitArtifact(ctx, Artifact{Repo: testRepo, SessionID: "late", Events: []byte("l\n"), Snapshot: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	if got := countPosts(srv) - before; got != 2 {
		t.Errorf("receive-pack POSTs = %d, want 2 (refused, then rebuilt)", got)
	}
	if competing == "" {
		t.Fatal("the competing push never ran")
	}
	if got := runGit(t, bare, "rev-parse", "agent-sessions"); got != sha {
		t.Errorf("tip = %s, want %s", got, sha)
	}
	if got := runGit(t, bare, "rev-parse", sha+"^"); got != competing {
		t.Errorf("parent = %s, want the competing commit %s", got, competing)
	}
	if got := runGit(t, bare, "rev-parse", competing+"^"); got != first {
		t.Errorf("competing parent = %s, want %s", got, first)
	}
	if got := runGit(t, bare, "ls-tree", "--name-only", sha, "sessions/"); got != "sessions/early\nsessions/late\nsessions/other" {
		t.Errorf("sessions = %q", got)
	}
}

func TestCommitArtifactGivesUpAfterRetries(t *testing.T) {
	ctx := context.Background()
	srv := newGitServer(t)
	bare := srv.bare(t, testRepo.Owner, testRepo.Name)
	seed(t, bare, "main", map[string]string{"a.txt": "1\n"})
	m, err := New(Config{CacheDir: t.TempDir(), BaseURL: srv.url(), Token: staticToken(testToken), PushRetries: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.CommitArtifact(ctx, Artifact{Repo: testRepo, SessionID: "s", Events: []byte("1\n")}); err != nil {
		t.Fatal(err)
	}
	// Every push loses: another writer moves the branch each time.
	var rearm func()
	n := 0
	rearm = func() {
		srv.mu.Lock()
		srv.beforeReceive = func() {
			n++
			seed(t, bare, "agent-sessions", map[string]string{fmt.Sprintf("other%d", n): "x\n"})
			rearm()
		}
		srv.mu.Unlock()
	}
	rearm()
	_, err = m.CommitArtifact(ctx, Artifact{Repo: testRepo, SessionID: "s", Events: []byte("2\n")})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("error = %v, want ErrConflict", err)
	}
	if n != 3 {
		t.Errorf("push attempts = %d, want 3 (1 + 2 retries)", n)
	}
}

func gitStdin(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	out, err := runGitErr(dir, []byte(stdin), args...)
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func countPosts(s *gitServer) int {
	n := 0
	for _, r := range s.log() {
		if strings.HasPrefix(r, "POST ") && strings.Contains(r, "git-receive-pack") {
			n++
		}
	}
	return n
}

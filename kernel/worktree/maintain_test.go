//go:build unix

package worktree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func countPacks(t *testing.T, mirror string) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(mirror, "objects", "pack"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".pack") {
			n++
		}
	}
	return n
}

// TestMirrorPacksRolledUp fetches into a mirror until it has more packs
// than the limit: no roll-up while a session has the mirror open (its
// go-git reads cache the pack list), a roll-up at the first release of the
// mirror lock after it closes, and every object kept, including a commit
// no branch reaches any more.
func TestMirrorPacksRolledUp(t *testing.T) {
	ctx := context.Background()
	srv := newGitServer(t)
	bare := srv.bare(t, testRepo.Owner, testRepo.Name)
	seed(t, bare, "main", map[string]string{"a.txt": "0\n"})
	m := newManager(t, srv, BackendGoGit) // maintenance uses the CLI whatever the backend
	if m.repackGit == "" {
		t.Fatal("no git CLI for maintenance")
	}
	m.packLimit = 4
	mirror := m.mirrorDir(testRepo)

	// A branch the mirror fetches, then loses: its commit stays only in a
	// pack, unreachable.
	gone := seed(t, bare, "topic", map[string]string{"t.txt": "topic\n"})
	open, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "open", Number: 1})
	if err != nil {
		t.Fatal(err)
	}
	runGit(t, bare, "branch", "-D", "topic")

	for i := 1; i <= 6; i++ {
		seed(t, bare, "main", map[string]string{"a.txt": fmt.Sprintf("%d\n", i)})
		s, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: fmt.Sprintf("s%d", i), Number: 2})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	if n := countPacks(t, mirror); n < 6 {
		t.Fatalf("%d packs while a session was open, want no roll-up (>= 6)", n)
	}
	// The open session still reads and commits through its cached list.
	if _, err := open.Commit(ctx, CommitOptions{Message: "still works", Changes: []Change{write(t, open.Dir, "b.txt", "b\n")}}); err != nil {
		t.Fatalf("commit in the open session: %v", err)
	}
	open.Close()

	last := seed(t, bare, "main", map[string]string{"a.txt": "last\n"})
	s, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "after", Number: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := countPacks(t, mirror); n > 2 {
		t.Errorf("%d packs after every session closed, want them rolled up", n)
	}
	if s.BaseSHA != last {
		t.Errorf("session after the roll-up starts at %s, want %s", s.BaseSHA, last)
	}
	if got, _ := os.ReadFile(filepath.Join(s.Dir, "a.txt")); string(got) != "last\n" {
		t.Errorf("worktree after the roll-up reads a.txt = %q", got)
	}
	if typ, err := runGitErr(mirror, nil, "cat-file", "-t", gone); err != nil || typ != "commit" {
		t.Errorf("unreachable commit %s after the roll-up: %q, %v; want it kept", gone, typ, err)
	}
	if _, err := runGitErr(mirror, nil, "fsck", "--no-dangling", "--connectivity-only"); err != nil {
		t.Errorf("mirror after the roll-up: %v", err)
	}
	if _, err := s.Commit(ctx, CommitOptions{Message: "after roll-up", Changes: []Change{write(t, s.Dir, "c.txt", "c\n")}}); err != nil {
		t.Fatalf("commit after the roll-up: %v", err)
	}
	if err := s.Push(ctx); err != nil {
		t.Fatalf("push after the roll-up: %v", err)
	}
}

// TestUsersLock checks the lock maintenance and sessions share: sessions
// share it with each other (in one process or several), and maintenance
// gets it only when none holds it.
func TestUsersLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.git.users")
	a, err := shareFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := shareFile(context.Background(), path)
	if err != nil {
		t.Fatalf("second shared holder: %v", err)
	}
	if _, ok, err := tryExclusive(path); ok || err != nil {
		t.Fatalf("exclusive while shared: ok = %v, err = %v", ok, err)
	}
	a()
	if _, ok, _ := tryExclusive(path); ok {
		t.Fatal("exclusive while one holder is left")
	}
	b()
	unlock, ok, err := tryExclusive(path)
	if !ok || err != nil {
		t.Fatalf("exclusive with no holders: ok = %v, err = %v", ok, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := shareFile(ctx, path); err == nil {
		t.Error("shared lock granted during maintenance")
	}
	unlock()
}

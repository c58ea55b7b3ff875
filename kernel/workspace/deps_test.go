package workspace

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentos/agentos/kernel/testenv"
)

// RepoIdentity is the same for every worktree of one repository and
// differs between repositories: the mirror a session worktree borrows its
// objects from, the common git directory of linked worktrees, else the
// top directory (docs/project-config.md).
func TestRepoIdentity(t *testing.T) {
	ident := func(dir string) string {
		t.Helper()
		w, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		return w.RepoIdentity()
	}
	mk := func(dir string, files map[string]string) string {
		t.Helper()
		for name, content := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	// Two session worktrees of one mirror, one of another.
	mirror := t.TempDir()
	a := mk(t.TempDir(), map[string]string{".git/objects/info/alternates": mirror + "/objects\n"})
	b := mk(t.TempDir(), map[string]string{".git/objects/info/alternates": "# x\n" + mirror + "/objects/\n"})
	c := mk(t.TempDir(), map[string]string{".git/objects/info/alternates": t.TempDir() + "/objects\n"})
	if ident(a) != ident(b) || ident(a) == ident(c) {
		t.Fatalf("mirrors: %s %s %s", ident(a), ident(b), ident(c))
	}
	// A fork's code in a worktree of the same mirror shares nothing: its
	// setup commands could poison the repository's caches.
	wf, err := Open(b, Options{UntrustedCode: true})
	if err != nil {
		t.Fatal(err)
	}
	defer wf.Close()
	if fork := wf.RepoIdentity(); fork == ident(a) || fork == ident(b) {
		t.Fatalf("untrusted code shares the repository's identity %s", fork)
	}
	// A plain checkout: its top directory.
	plain := mk(t.TempDir(), map[string]string{".git/HEAD": "ref: refs/heads/main\n"})
	if ident(plain) == ident(mk(t.TempDir(), map[string]string{".git/HEAD": "ref: refs/heads/main\n"})) {
		t.Fatal("two checkouts share an identity")
	}
	if first, second := ident(plain), ident(plain); first != second {
		t.Fatalf("not stable: %s, %s", first, second)
	}
	// Linked worktrees of one repository (git worktree add).
	git := testenv.LookPath(t, "git")
	main := t.TempDir()
	for _, args := range [][]string{{"init", "-q", main}, {"-C", main, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "x"}} {
		if out, err := exec.Command(git, args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	l1, l2 := filepath.Join(t.TempDir(), "l1"), filepath.Join(t.TempDir(), "l2")
	for _, l := range []string{l1, l2} {
		if out, err := exec.Command(git, "-C", main, "worktree", "add", "-q", "--detach", l).CombinedOutput(); err != nil {
			t.Fatalf("git worktree add: %v %s", err, out)
		}
	}
	if ident(l1) != ident(l2) || ident(l1) != ident(main) || ident(l1) == ident(plain) {
		t.Fatalf("linked worktrees: %s %s", ident(l1), ident(l2))
	}
	t.Logf("main %s, linked %s", ident(main), ident(l1))
}

package worktree

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5"
)

// TestMirrorCreatedAside: a process killed while creating a mirror leaves
// no half mirror behind that a later process uses. Before mirrors were
// created aside, a kill between go-git's init (HEAD written) and the
// origin remote's configuration left a repository every later fetch
// failed on ("remote not found"), and the serve chaos test's sessions
// stuck. The later process finds such a repository, or an aside
// directory of an attempt that died, and creates the mirror afresh.
func TestMirrorCreatedAside(t *testing.T) {
	ctx := context.Background()
	srv := newGitServer(t)
	bare := srv.bare(t, testRepo.Owner, testRepo.Name)
	head := seed(t, bare, "main", map[string]string{"a.txt": "1\n"})
	for _, left := range []string{"init without origin", "empty directory", "aside directory"} {
		t.Run(left, func(t *testing.T) {
			m := newManager(t, srv, BackendGoGit)
			dir := m.mirrorDir(testRepo)
			if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
				t.Fatal(err)
			}
			aside := dir + mirrorTmpSuffix + "123"
			switch left {
			case "init without origin":
				if _, err := git.PlainInit(dir, true); err != nil {
					t.Fatal(err)
				}
			case "empty directory":
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			case "aside directory":
				if _, err := git.PlainInit(aside, true); err != nil {
					t.Fatal(err)
				}
			}
			s, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "after-the-kill", Number: 1})
			if err != nil {
				t.Fatalf("prepare over what a killed process left (%s): %v", left, err)
			}
			defer s.Close()
			if s.BaseSHA != head {
				t.Errorf("base %s, want %s", s.BaseSHA, head)
			}
			repo, err := git.PlainOpen(dir)
			if err != nil {
				t.Fatal(err)
			}
			if cfg, err := repo.Config(); err != nil || cfg.Remotes["origin"] == nil {
				t.Errorf("the mirror has no origin remote: %v", err)
			}
			if _, err := os.Stat(aside); !os.IsNotExist(err) {
				t.Errorf("the aside directory of the dead attempt is still there: %v", err)
			}
			if m, _ := filepath.Glob(dir + mirrorTmpSuffix + "*"); len(m) != 0 {
				t.Errorf("aside directories left after creating the mirror: %v", m)
			}
		})
	}
}

// TestMirrorTornFetchCleaned: a fetch killed half-way leaves its pack's
// index (written in place, maybe torn) without the pack, and a tmp_ file.
// go-git keeps an index that exists when the same pack is fetched again,
// so a torn one would break every later read; opening the mirror removes
// both, and the next session reads the mirror.
func TestMirrorTornFetchCleaned(t *testing.T) {
	ctx := context.Background()
	srv := newGitServer(t)
	bare := srv.bare(t, testRepo.Owner, testRepo.Name)
	seed(t, bare, "main", map[string]string{"a.txt": "1\n"})
	m := newManager(t, srv, BackendGoGit)
	s1, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "first", Number: 1})
	if err != nil {
		t.Fatal(err)
	}
	s1.Close()
	packs := filepath.Join(m.mirrorDir(testRepo), "objects", "pack")
	torn := filepath.Join(packs, "pack-0123456789abcdef0123456789abcdef01234567.idx")
	tmp := filepath.Join(packs, "tmp_pack_42")
	mustWrite(t, torn, "\xfftOc")
	mustWrite(t, tmp, "PACK")
	kept, _ := filepath.Glob(filepath.Join(packs, "pack-*.pack"))
	second := seed(t, bare, "main", map[string]string{"a.txt": "2\n"})
	s2, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "second", Number: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.BaseSHA != second {
		t.Errorf("base %s, want %s", s2.BaseSHA, second)
	}
	for _, f := range []string{torn, tmp} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s left in the mirror: %v", filepath.Base(f), err)
		}
	}
	for _, p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("a complete pack was removed: %v", err)
		}
		if _, err := os.Stat(p[:len(p)-len(".pack")] + ".idx"); err != nil {
			t.Errorf("a complete pack's index was removed: %v", err)
		}
	}
}

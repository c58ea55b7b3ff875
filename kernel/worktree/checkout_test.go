package worktree

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckoutModesAndLinks(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			srv := newGitServer(t)
			bare := srv.bare(t, testRepo.Owner, testRepo.Name)
			work := t.TempDir()
			runGit(t, work, "init", "-q", "-b", "main")
			mustWrite(t, filepath.Join(work, "bin", "run.sh"), "#!/bin/sh\necho hi\n")
			if err := os.Chmod(filepath.Join(work, "bin", "run.sh"), 0o755); err != nil {
				t.Fatal(err)
			}
			mustWrite(t, filepath.Join(work, "docs", "a.md"), "# a\n")
			if err := os.Symlink("docs/a.md", filepath.Join(work, "link.md")); err != nil {
				t.Fatal(err)
			}
			mustWrite(t, filepath.Join(work, "empty"), "")
			os.WriteFile(filepath.Join(work, "empty"), nil, 0o644)
			runGit(t, work, "add", "-A")
			runGit(t, work, "commit", "-q", "-m", "modes")
			runGit(t, work, "push", "-q", bare, "main")

			s, err := newManager(t, srv, b.backend).Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "modes", Number: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			fi, err := os.Stat(filepath.Join(s.Dir, "bin", "run.sh"))
			if err != nil || fi.Mode().Perm()&0o100 == 0 {
				t.Errorf("bin/run.sh mode = %v, %v; want executable", fi.Mode(), err)
			}
			if target, err := os.Readlink(filepath.Join(s.Dir, "link.md")); err != nil || target != "docs/a.md" {
				t.Errorf("link.md -> %q, %v", target, err)
			}
			if fi, err := os.Stat(filepath.Join(s.Dir, "empty")); err != nil || fi.Size() != 0 {
				t.Errorf("empty file: %v, %v", fi, err)
			}
			// The git CLI agrees that the index matches both HEAD and the files.
			if st := runGit(t, s.Dir, "status", "--porcelain"); st != "" {
				t.Errorf("status after checkout:\n%s", st)
			}
			if _, err := runGitErr(s.Dir, nil, "diff-index", "--quiet", "--cached", "HEAD"); err != nil {
				t.Errorf("index differs from HEAD: %v", err)
			}
		})
	}
}

func TestCheckoutRefusesUnsafePaths(t *testing.T) {
	ctx := context.Background()
	srv := newGitServer(t)
	bare := srv.bare(t, testRepo.Owner, testRepo.Name)
	seed(t, bare, "main", map[string]string{"a.txt": "1\n"})
	// A hand-made tree with a .git directory, which git itself refuses.
	blob := gitStdin(t, bare, "[core]\n\thooksPath = /tmp\n", "hash-object", "-w", "--stdin")
	sub := gitStdin(t, bare, "100644 blob "+blob+"\tconfig\n", "mktree")
	root := gitStdin(t, bare, "040000 tree "+sub+"\t.GIT\n", "mktree")
	evil := runGit(t, bare, "commit-tree", root, "-m", "evil")
	runGit(t, bare, "update-ref", "refs/heads/evil", evil)

	for _, b := range backends {
		m := newManager(t, srv, b.backend)
		_, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "evil", Number: 1, Base: Base{Branch: "evil"}})
		if err == nil || !strings.Contains(err.Error(), ".GIT") {
			t.Errorf("%s: Prepare of a tree with .GIT error = %v, want a refusal naming .GIT", b.name, err)
		}
		if _, err := os.Stat(filepath.Join(m.cfg.CacheDir, "sessions", testRepo.Owner, testRepo.Name, "evil")); !os.IsNotExist(err) {
			t.Errorf("%s: failed worktree left behind: %v", b.name, err)
		}
	}
}

func TestSafeTreePath(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"a.txt", true},
		{"dir/sub/file.go", true},
		{".github/workflows/ci.yml", true},
		{".gitignore", true},
		{"", false},
		{"../x", false},
		{"a/../../x", false},
		{"./a", false},
		{"a//b", false},
		{"/etc/passwd", false},
		{".git/config", false},
		{"sub/.Git/hooks/pre-commit", false},
		{"a\\b", false},
	}
	for _, tt := range tests {
		if got := safeTreePath(tt.in); got != tt.want {
			t.Errorf("safeTreePath(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

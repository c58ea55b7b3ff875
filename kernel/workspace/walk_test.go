package workspace

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel/testenv"
)

// TestWalkMatchesGit: the files Walk visits are exactly the files git
// considers not ignored (`git ls-files --others --exclude-standard` in a
// fresh repository), with nested .gitignore files, negation, anchored and
// directory patterns, and .git/info/exclude.
func TestWalkMatchesGit(t *testing.T) {
	testenv.LookPath(t, "git")
	dir := t.TempDir()
	files := map[string]string{
		".gitignore":           "*.log\n/build/\n# comment\n\n!keep.log\ntmp\n",
		"a.go":                 "a",
		"debug.log":            "x",
		"keep.log":             "x",
		"build/out.bin":        "x",
		"sub/build/kept.go":    "anchored /build/ does not reach sub/build",
		"sub/.gitignore":       "*.go\n!main.go\ndeep/\n",
		"sub/main.go":          "x",
		"sub/util.go":          "x",
		"sub/notes.txt":        "x",
		"sub/deep/x.txt":       "x",
		"sub/tmp/y.txt":        "x",
		"sub/inner/.gitignore": "!util.go\n",
		"sub/inner/util.go":    "re-included below sub/inner",
		"sub/inner/z.go":       "x",
		"docs/tmp":             "a file named tmp is ignored too",
		"docs/readme.md":       "x",
		"excluded/by-info.txt": "x",
		"other/ok.txt":         "x",
	}
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, ".git", "info", "exclude"), []byte("excluded/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(git("-c", "core.excludesFile=/dev/null", "ls-files", "--others", "--exclude-standard"))
	sort.Strings(want)

	w, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var got []string
	if err := w.Walk(context.Background(), func(rel string, d fs.DirEntry) error {
		got = append(got, rel)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Walk visits\n%s\n\ngit lists\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWalkFilesStaysInside: the walk yields no symlinks (in-root or not),
// skips .git and denied paths, and a file swapped for a symlink to a
// secret after the walk listed it is not read through the link.
func TestWalkFilesStaysInside(t *testing.T) {
	w, dir, secret := jail(t)
	var got []string
	err := w.WalkFiles(context.Background(), func(f *File) error {
		defer f.Release()
		got = append(got, f.Rel)
		b, err := f.Read()
		if err != nil {
			t.Errorf("%s: %v", f.Rel, err)
		}
		if strings.Contains(string(b), "TOP SECRET") {
			t.Errorf("%s read the secret", f.Rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "ok.txt,sub/inner.txt,vendor/lib.go" {
		t.Fatalf("walked %v", got)
	}
	err = w.WalkFiles(context.Background(), func(f *File) error {
		defer f.Release()
		if f.Rel != "ok.txt" {
			return nil
		}
		full := filepath.Join(dir, "ok.txt")
		if err := os.Remove(full); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(secret, full); err != nil {
			t.Fatal(err)
		}
		if b, err := f.Read(); err == nil || strings.Contains(string(b), "TOP SECRET") {
			t.Errorf("read through a swapped-in symlink: %q %v", b, err)
		}
		return fs.SkipAll
	})
	if err != nil {
		t.Fatal(err)
	}
}

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

// TestParseGitlinks checks the index reader against indexes that git
// itself writes, in each version (3 with an extended-flags entry, 4 with
// prefix-compressed paths).
func TestParseGitlinks(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	for _, version := range []int{2, 3, 4} {
		t.Run("v"+strconv.Itoa(version), func(t *testing.T) {
			dir := t.TempDir()
			git := func(args ...string) {
				t.Helper()
				cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
				cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v: %s", args, err, out)
				}
			}
			git("init", "-q")
			for _, f := range []string{"a.txt", "deep/dir/b.txt", "deep/dir/c.txt", "deep/e.txt", "zz.txt"} {
				p := filepath.Join(dir, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			git("add", "a.txt", "deep", "zz.txt")
			git("update-index", "--add", "--cacheinfo", "160000,1111111111111111111111111111111111111111,deep/dir/sub")
			git("update-index", "--add", "--cacheinfo", "160000,2222222222222222222222222222222222222222,vendor/lib")
			if version == 3 {
				if err := os.WriteFile(filepath.Join(dir, "new.txt"), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
				git("add", "-N", "new.txt") // intent-to-add: an extended flag
			}
			git("update-index", "--index-version", strconv.Itoa(version))
			got, err := indexGitlinks(filepath.Join(dir, ".git", "index"))
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"deep/dir/sub", "vendor/lib"}; !reflect.DeepEqual(got, want) {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}

func TestParseGitlinksRefusesGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("DIRC"), []byte("DIRC\x00\x00\x00\x09\x00\x00\x00\x01"), []byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x05short")} {
		if _, err := parseGitlinks(b); err == nil {
			t.Errorf("parseGitlinks(%q) = nil error", b)
		}
	}
}

//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMoveAsideSurvivesACrash: files moved out of the worktree by a
// process that died before putting them back are restored by the next
// command's moveAside, over what a command wrote at the same path; a
// parent directory replaced by a symlink is not followed.
func TestMoveAsideSurvivesACrash(t *testing.T) {
	work := filepath.Join(t.TempDir(), "work")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(work, "config"), 0o755))
	env, nested := filepath.Join(work, ".env"), filepath.Join(work, "config", ".env.local")
	must(os.WriteFile(env, []byte("SECRET=1"), 0o600))
	must(os.WriteFile(nested, []byte("SECRET=2"), 0o600))
	if _, err := moveAside(work, []string{env, nested, filepath.Join(work, "absent")}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{env, nested} {
		if _, err := os.Lstat(p); err == nil {
			t.Fatalf("%s is still in the worktree while the command runs", p)
		}
	}
	// The process dies here; a command had written its own .env.
	must(os.WriteFile(env, []byte("FROM THE COMMAND"), 0o644))
	restore, err := moveAside(work, nil)
	if err != nil {
		t.Fatal(err)
	}
	must(restore())
	for p, want := range map[string]string{env: "SECRET=1", nested: "SECRET=2"} {
		if b, err := os.ReadFile(p); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
	if _, err := os.Lstat(asideDir(work)); err == nil {
		t.Error("the aside directory is left behind")
	}

	// A command replaces config/ with a symlink to a place later
	// commands can read: the file stays aside, with an error.
	if _, err := moveAside(work, []string{nested}); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	must(os.Remove(filepath.Join(work, "config")))
	must(os.Symlink(out, filepath.Join(work, "config")))
	if err := restoreAside(work); err == nil {
		t.Error("restored through a symlinked directory")
	}
	if _, err := os.Lstat(filepath.Join(out, ".env.local")); err == nil {
		t.Error("the secret was carried out through the symlink")
	}

	// A masked directory goes aside whole and comes back beside what a
	// command made at its place.
	must(os.Remove(filepath.Join(work, "config")))
	must(os.Rename(filepath.Join(asideDir(work), "0"), filepath.Join(t.TempDir(), "kept")))
	must(os.RemoveAll(asideDir(work)))
	secrets := filepath.Join(work, "secrets")
	must(os.MkdirAll(secrets, 0o755))
	must(os.WriteFile(filepath.Join(secrets, "id.pem"), []byte("PEM"), 0o600))
	restore, err = moveAside(work, []string{secrets})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(secrets); err == nil {
		t.Fatal("the masked directory is still in the worktree")
	}
	must(os.WriteFile(secrets, []byte("a file the command made"), 0o644))
	must(restore())
	if b, err := os.ReadFile(filepath.Join(secrets+".agentos-restored", "id.pem")); err != nil || string(b) != "PEM" {
		t.Errorf("the directory came back as %q, %v", b, err)
	}
}

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFindLauncher: the small launcher is taken from next to the running
// executable only when nobody but root or this user can change what it
// runs; otherwise the executable launches itself, and the report says
// why the small one was passed over.
func TestFindLauncher(t *testing.T) {
	mkfile := func(t *testing.T, p string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	chmod := func(t *testing.T, p string, mode os.FileMode) {
		t.Helper()
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	symlink := func(t *testing.T, target, link string) {
		t.Helper()
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name     string
		setup    func(t *testing.T, bin, elsewhere string) // bin holds agentos
		want     LauncherKind
		wantNote string
	}{
		{"next to the executable", func(t *testing.T, bin, _ string) {
			mkfile(t, filepath.Join(bin, LauncherName), 0o755)
		}, LauncherSmall, ""},
		{"absent", func(t *testing.T, bin, _ string) {}, LauncherSelf, ""},
		{"group-writable", func(t *testing.T, bin, _ string) {
			mkfile(t, filepath.Join(bin, LauncherName), 0o775)
		}, LauncherSelf, "writable by group or others"},
		{"writable by others", func(t *testing.T, bin, _ string) {
			mkfile(t, filepath.Join(bin, LauncherName), 0o757)
		}, LauncherSelf, "writable by group or others"},
		{"not executable", func(t *testing.T, bin, _ string) {
			mkfile(t, filepath.Join(bin, LauncherName), 0o644)
		}, LauncherSelf, "not executable"},
		{"a directory", func(t *testing.T, bin, _ string) {
			if err := os.Mkdir(filepath.Join(bin, LauncherName), 0o755); err != nil {
				t.Fatal(err)
			}
		}, LauncherSelf, "not a regular file"},
		{"in a directory others may write", func(t *testing.T, bin, _ string) {
			mkfile(t, filepath.Join(bin, LauncherName), 0o755)
			chmod(t, bin, 0o777)
		}, LauncherSelf, "directory " + "BIN" + " is writable"},
		{"a symlink to a trusted file", func(t *testing.T, bin, elsewhere string) {
			mkfile(t, filepath.Join(elsewhere, "libexec", LauncherName), 0o755)
			symlink(t, filepath.Join(elsewhere, "libexec", LauncherName), filepath.Join(bin, LauncherName))
		}, LauncherSmall, ""},
		{"a relative symlink to a trusted file", func(t *testing.T, bin, elsewhere string) {
			mkfile(t, filepath.Join(elsewhere, "libexec", LauncherName), 0o755)
			rel, err := filepath.Rel(bin, filepath.Join(elsewhere, "libexec", LauncherName))
			if err != nil {
				t.Fatal(err)
			}
			symlink(t, rel, filepath.Join(bin, LauncherName))
		}, LauncherSmall, ""},
		{"a symlink into a directory others may write", func(t *testing.T, bin, elsewhere string) {
			drop := filepath.Join(elsewhere, "drop")
			mkfile(t, filepath.Join(drop, LauncherName), 0o755)
			chmod(t, drop, 0o777)
			symlink(t, filepath.Join(drop, LauncherName), filepath.Join(bin, LauncherName))
		}, LauncherSelf, "drop is writable by group or others"},
		{"a symlink through a directory others may write", func(t *testing.T, bin, elsewhere string) {
			// The file is fine, but the link to its directory lies in a
			// directory anyone can change.
			mkfile(t, filepath.Join(elsewhere, "real", LauncherName), 0o755)
			open := filepath.Join(elsewhere, "open")
			if err := os.Mkdir(open, 0o755); err != nil {
				t.Fatal(err)
			}
			symlink(t, filepath.Join(elsewhere, "real"), filepath.Join(open, "dir"))
			chmod(t, open, 0o777)
			symlink(t, filepath.Join(open, "dir", LauncherName), filepath.Join(bin, LauncherName))
		}, LauncherSelf, "open is writable by group or others"},
		{"a dangling symlink", func(t *testing.T, bin, elsewhere string) {
			symlink(t, filepath.Join(elsewhere, "missing"), filepath.Join(bin, LauncherName))
		}, LauncherSelf, "no such file"},
		{"a symlink loop", func(t *testing.T, bin, _ string) {
			symlink(t, LauncherName, filepath.Join(bin, LauncherName))
		}, LauncherSelf, "too many symbolic links"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			bin, elsewhere := filepath.Join(root, "bin"), filepath.Join(root, "elsewhere")
			for _, d := range []string{bin, elsewhere} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			exe := filepath.Join(bin, "agentos")
			mkfile(t, exe, 0o755)
			c.setup(t, bin, elsewhere)
			path, kind, note := findLauncher(exe)
			if kind != c.want {
				t.Fatalf("kind %q (%s, note %q), want %q", kind, path, note, c.want)
			}
			wantPath := exe
			if kind == LauncherSmall {
				wantPath = filepath.Join(bin, LauncherName)
			}
			if path != wantPath {
				t.Errorf("launcher %s, want %s", path, wantPath)
			}
			wantNote := strings.ReplaceAll(c.wantNote, "BIN", bin)
			if (wantNote == "") != (note == "") || !strings.Contains(note, wantNote) {
				t.Errorf("note %q, want one containing %q", note, wantNote)
			}
		})
	}
}

// TestFindLauncherOwner: a launcher owned by another user is not taken,
// nor one in a directory another user owns.
func TestFindLauncherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root")
	}
	const nobody = 65534
	for _, c := range []struct {
		name  string
		chown func(bin, launcher string) string
	}{
		{"file", func(_, launcher string) string { return launcher }},
		{"directory", func(bin, _ string) string { return bin }},
	} {
		t.Run(c.name, func(t *testing.T) {
			root, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			bin := filepath.Join(root, "bin")
			launcher := filepath.Join(bin, LauncherName)
			if err := os.Mkdir(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(launcher, []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			if _, kind, note := findLauncher(filepath.Join(bin, "agentos")); kind != LauncherSmall {
				t.Fatalf("before chown: %s %s", kind, note)
			}
			if err := os.Chown(c.chown(bin, launcher), nobody, nobody); err != nil {
				t.Fatal(err)
			}
			_, kind, note := findLauncher(filepath.Join(bin, "agentos"))
			if kind != LauncherSelf || !strings.Contains(note, "owned by uid 65534") {
				t.Errorf("owned by nobody: kind %s, note %q", kind, note)
			}
		})
	}
}

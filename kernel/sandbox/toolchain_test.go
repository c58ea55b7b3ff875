package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestToolchainRoots lays out the version managers users have in their
// home directory and checks what the sandbox adds for their PATH entries.
func TestToolchainRoots(t *testing.T) {
	home := t.TempDir()
	dirs := []string{
		".pyenv/shims", ".pyenv/bin", ".pyenv/libexec", ".pyenv/versions/3.12.1/bin", ".pyenv/versions/3.12.1/lib",
		".asdf/shims", ".asdf/installs/nodejs/20.1.0/bin",
		".cargo/bin", ".cargo/registry", ".rustup/toolchains/stable/bin",
		".nvm/versions/node/v20.1.0/bin", ".nvm/versions/node/v20.1.0/lib",
		".sdkman/candidates/java/17.0.9-tem/bin", ".sdkman/candidates/java/17.0.9-tem/lib",
		".volta/bin", ".volta/tools",
		".local/bin", ".local/share/keyrings",
	}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, ".cargo", "bin", "rustup"), []byte{}, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".cargo", "credentials.toml"), []byte("token"), 0o600); err != nil {
		t.Fatal(err)
	}
	// sdkman's current is a link to the installed version.
	if err := os.Symlink("17.0.9-tem", filepath.Join(home, ".sdkman/candidates/java/current")); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}
	var path []string
	for _, d := range []string{".pyenv/shims", ".pyenv/bin", ".asdf/shims", ".cargo/bin", ".nvm/versions/node/v20.1.0/bin", ".sdkman/candidates/java/current/bin", ".volta/bin", ".local/bin"} {
		path = append(path, filepath.Join(home, d))
	}
	got := toolchainRoots(getenv, append(path, "/usr/bin", "relative/bin", ""), []string{"/usr"})
	want := []string{".pyenv", ".asdf", ".rustup", ".cargo/registry", ".nvm/versions/node/v20.1.0", ".sdkman/candidates/java/17.0.9-tem", ".volta/tools"}
	for _, w := range want {
		if !slices.Contains(got, filepath.Join(home, w)) {
			t.Errorf("%s is missing from %v", w, got)
		}
	}
	for _, p := range got {
		for _, bad := range []string{home, filepath.Join(home, ".cargo"), filepath.Join(home, ".local"), "/usr"} {
			if p == bad {
				t.Errorf("%s must not be granted", p)
			}
		}
	}
}

// TestLinkedDirs: a PATH directory of links to tools elsewhere makes
// those directories readable (and so the managers behind them), but a
// link into a directory of credentials does not.
func TestLinkedDirs(t *testing.T) {
	home := t.TempDir()
	farm := filepath.Join(t.TempDir(), "bin")
	for _, d := range []string{"tools/bin", ".ssh", farm} {
		p := d
		if !filepath.IsAbs(p) {
			p = filepath.Join(home, d)
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"tools/bin/zig", ".ssh/agent-helper"} {
		if err := os.WriteFile(filepath.Join(home, f), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"zig": "tools/bin/zig", "helper": ".ssh/agent-helper", "sh": "/bin/sh"} {
		if !filepath.IsAbs(target) {
			target = filepath.Join(home, target)
		}
		if err := os.Symlink(target, filepath.Join(farm, name)); err != nil {
			t.Fatal(err)
		}
	}
	got := linkedDirs([]string{farm}, []string{"/usr", "/bin"}, home)
	if want := []string{filepath.Join(home, "tools", "bin")}; !slices.Equal(got, want) {
		t.Errorf("linkedDirs = %v, want %v (never .ssh, never a system directory)", got, want)
	}
}

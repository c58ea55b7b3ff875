package workspace

import (
	"context"
	"errors"
	"github.com/agentos/agentos/kernel/sandbox/sandboxtest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel"
)

// jail builds a workspace inside a parent directory holding a secret, and
// plants symlink tricks at test time.
func jail(t *testing.T) (*Root, string, string) {
	t.Helper()
	parent := t.TempDir()
	secret := filepath.Join(parent, "secret.txt")
	mustW(t, secret, "TOP SECRET")
	dir := filepath.Join(parent, "ws")
	for p, c := range map[string]string{"ok.txt": "fine", "sub/inner.txt": "inner", ".git/config": "[core]", "keys/id.pem": "pem", "vendor/lib.go": "package lib"} {
		mustW(t, filepath.Join(dir, p), c)
	}
	links := map[string]string{
		"to-etc":           "/etc",
		"to-parent":        "..",
		"to-secret":        "../secret.txt",
		"sub/up":           "../..",
		"sub/deep":         "../../secret.txt",
		"chain1":           "chain2",
		"chain2":           "chain3",
		"chain3":           "../secret.txt",
		"loop-a":           "loop-b",
		"loop-b":           "loop-a",
		"to-git":           ".git",
		"to-git-config":    ".git/config",
		"dirlink":          "sub",
		"sub/abs-root":     "/",
		"inner-ok":         "sub/inner.txt",
		"sub/self":         ".",
		"to-proc":          "/proc/self/environ",
		"dirlink2":         "sub/up",
		"to-ws-via-parent": "../ws/ok.txt",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	w, err := Open(dir, Options{DenyPatterns: []string{"**/.git/**", "keys/**", "**/*.pem"}, Sandbox: sandboxtest.Sandbox(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, dir, secret
}

func mustW(t *testing.T, p, c string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
		t.Fatal(err)
	}
}

var escapes = []string{
	"../secret.txt", "../../etc/passwd", "/etc/passwd", "/", "sub/../../secret.txt", "./../secret.txt",
	"sub/../../../../../../etc/shadow", "..", "../", "a/b/../../../x",
	"to-etc/passwd", "to-etc", "to-parent/secret.txt", "to-parent", "to-secret", "sub/up/secret.txt",
	"sub/deep", "chain1", "chain2", "loop-a", "loop-b/x", "to-proc", "sub/abs-root/etc/passwd",
	"dirlink/up/secret.txt", "dirlink2/secret.txt", "sub/self/up/secret.txt",
	".git/config", ".git", ".git/hooks/pre-commit", "sub/../.git/config", "to-git/config", "to-git-config",
	"keys/id.pem", "x.pem", "sub/key.pem",
	"ok.txt\x00../secret.txt", "\x00", "",
	`..\secret.txt`, `C:\Windows\system.ini`, "//etc/passwd", "\\\\server\\share",
}

// TestJailCorpus: every attempt is refused by every entry point, nothing
// outside the root is read or written, and in-root operations still work.
func TestJailCorpus(t *testing.T) {
	w, dir, secret := jail(t)
	if len(escapes) < 40 {
		t.Fatalf("corpus has %d attempts, want at least 40", len(escapes))
	}
	for _, p := range escapes {
		if b, err := w.ReadFile(p); err == nil {
			t.Errorf("ReadFile(%q) escaped: read %q", p, b)
		} else if !isJail(err) {
			t.Errorf("ReadFile(%q): %v, want JAIL_VIOLATION", p, err)
		}
		if err := w.WriteFile(p, []byte("pwned"), 0o644); err == nil {
			t.Errorf("WriteFile(%q) escaped", p)
		}
		if err := w.Remove(p); err == nil {
			t.Errorf("Remove(%q) escaped", p)
		}
		if _, err := w.Stat(p); err == nil {
			t.Errorf("Stat(%q) escaped", p)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "TOP SECRET" {
		t.Fatalf("secret changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "pwned")); err == nil {
		t.Fatal("a file was created outside")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".git", "config")); string(b) != "[core]" {
		t.Fatal(".git/config changed")
	}
	// In-root work, including through in-root symlinks, still works.
	for p, want := range map[string]string{"ok.txt": "fine", "sub/inner.txt": "inner", "inner-ok": "inner", "dirlink/inner.txt": "inner", "to-ws-via-parent": "", "./sub/../ok.txt": "fine"} {
		b, err := w.ReadFile(p)
		if want == "" {
			if err == nil {
				t.Errorf("%s went through the parent directory and back and was allowed", p)
			}
			continue
		}
		if err != nil || string(b) != want {
			t.Errorf("ReadFile(%q) = %q, %v", p, b, err)
		}
	}
	if err := w.WriteFile("new/dir/file.txt", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile("dirlink/written.txt", []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "sub", "written.txt")); string(b) != "y" {
		t.Fatal("write through an in-root directory link missed")
	}
}

func isJail(err error) bool {
	var ke *kernel.Error
	return errors.As(err, &ke) && ke.Code == kernel.CodeJailViolation
}

func TestProcess(t *testing.T) {
	w, dir, _ := jail(t)
	ctx := context.Background()
	t.Setenv("AGENTOS_TEST_SECRET_TOKEN", "do-not-leak")
	w.opts.SecretName = func(n string) bool { return strings.Contains(n, "TOKEN") }
	w.opts.EnvAllow = []string{"AGENTOS_TEST_SECRET_TOKEN_NOT_SET"}

	res, err := w.Run(ctx, RunSpec{Argv: []string{"env"}, Timeout: 5 * time.Second})
	if err != nil || strings.Contains(res.Stdout, "do-not-leak") || !strings.Contains(res.Stdout, "AGENTOS=1") {
		t.Fatalf("env scrubbing: %v\n%s", err, res.Stdout)
	}
	res, err = w.Run(ctx, RunSpec{Argv: []string{"pwd"}, Cwd: "sub", Timeout: 5 * time.Second})
	if err != nil || strings.TrimSpace(res.Stdout) != filepath.Join(w.Root(), "sub") {
		t.Fatalf("cwd: %v %q", err, res.Stdout)
	}
	if _, err := w.Run(ctx, RunSpec{Argv: []string{"pwd"}, Cwd: "to-parent"}); !isJail(err) {
		t.Fatalf("cwd escape: %v", err)
	}
	res, err = w.Run(ctx, RunSpec{Argv: []string{"seq", "1", "100000"}, MaxOutput: 100, Timeout: 5 * time.Second})
	if err != nil || !res.Truncated || !strings.HasSuffix(res.Stdout, TruncationMarker) || len(res.Stdout) > 100+len(TruncationMarker) {
		t.Fatalf("cap: %v %d %v", err, len(res.Stdout), res.Truncated)
	}
	res, err = w.Run(ctx, RunSpec{Argv: []string{"false"}, Timeout: 5 * time.Second})
	if err != nil || res.ExitCode != 1 {
		t.Fatalf("exit code: %v %+v", err, res)
	}
	// A child that spawns a grandchild: the timeout kills the group.
	marker := filepath.Join(dir, "grandchild-survived")
	start := time.Now()
	_, err = w.Run(ctx, RunSpec{Argv: []string{"sh", "-c", "(sleep 2; touch " + marker + ") & sleep 30"}, Timeout: 300 * time.Millisecond})
	var ke *kernel.Error
	if !errors.As(err, &ke) || ke.Code != kernel.CodeTimeout || time.Since(start) > 5*time.Second {
		t.Fatalf("timeout: %v after %s", err, time.Since(start))
	}
	time.Sleep(2500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the grandchild outlived the timeout")
	}
}

func TestSplitCommand(t *testing.T) {
	// SplitCommand is argv.Split (tested against /bin/sh in kernel/argv).
	got, err := SplitCommand(`echo "a b" 'c d' e\ f`)
	if err != nil || strings.Join(got, "\x00") != "echo\x00a b\x00c d\x00e f" {
		t.Errorf("SplitCommand = %q, %v", got, err)
	}
	if !IsShell([]string{"/bin/bash", "-c", "x"}) || IsShell([]string{"go"}) {
		t.Error("IsShell")
	}
}

func TestRevisionChangesWithContent(t *testing.T) {
	w, dir, _ := jail(t)
	ctx := context.Background()
	a, err := w.Revision(ctx)
	if err != nil || a.Tree == "" {
		t.Fatal(a, err)
	}
	b, _ := w.Revision(ctx)
	if a != b {
		t.Fatal("revision not stable")
	}
	mustW(t, filepath.Join(dir, "sub", "inner.txt"), "changed")
	c, _ := w.Revision(ctx)
	if c == a {
		t.Fatal("revision did not change with content")
	}
	mustW(t, filepath.Join(dir, ".gitignore"), "ignored.log\n")
	d, _ := w.Revision(ctx)
	mustW(t, filepath.Join(dir, "ignored.log"), "noise")
	e, _ := w.Revision(ctx)
	if d != e {
		t.Fatal("an ignored file changed the revision")
	}
}

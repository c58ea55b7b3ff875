package sandbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel/sandbox"
)

// TestWithGoCache: a sandbox given a Go build cache by WithGoCache hands
// commands that directory as GOCACHE, writable, and nothing of the
// directory next to it (another repository's or trust domain's cache):
// neither readable nor writable.
func TestWithGoCache(t *testing.T) {
	for _, mode := range mechanisms {
		t.Run(string(mode), func(t *testing.T) {
			s := detect(t, mode)
			root, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			mine, other := filepath.Join(root, "a", "go-build"), filepath.Join(root, "b", "go-build")
			if err := os.MkdirAll(other, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(other, "entry"), []byte("theirs"), 0o600); err != nil {
				t.Fatal(err)
			}
			sc, err := s.WithGoCache(mine)
			if err != nil {
				t.Fatal(err)
			}
			if sc.Mechanism() != s.Mechanism() || sc.Err() != nil {
				t.Fatalf("the copy is %s (%v), the original %s", sc.Mechanism(), sc.Err(), s.Mechanism())
			}
			work, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			script := `printf '%s\n' "$GOCACHE"; echo ok > "$GOCACHE/probe" && echo wrote;` +
				` cat ` + other + `/entry && echo READ; echo planted > ` + other + `/planted && echo PLANTED; true`
			res, err := runIn(t, sc, work, nil, "sh", "-c", script)
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("err %v, exit %d\n%s%s", err, res.ExitCode, res.Stdout, res.Stderr)
			}
			lines := strings.Split(res.Stdout, "\n")
			if lines[0] != mine || !strings.Contains(res.Stdout, "wrote") {
				t.Fatalf("GOCACHE %q, want %q writable; stdout %q stderr %q", lines[0], mine, res.Stdout, res.Stderr)
			}
			if b, err := os.ReadFile(filepath.Join(mine, "probe")); err != nil || string(b) != "ok\n" {
				t.Fatalf("the command's cache entry on the host: %q, %v", b, err)
			}
			if strings.Contains(res.Stdout, "READ") || strings.Contains(res.Stdout, "theirs") || strings.Contains(res.Stdout, "PLANTED") {
				t.Fatalf("the other cache is within reach: %q", res.Stdout)
			}
			if _, err := os.Stat(filepath.Join(other, "planted")); err == nil {
				t.Fatal("the command planted a file in the other cache")
			}
			// The original keeps its own cache.
			res, err = runIn(t, s, work, nil, "sh", "-c", `printf '%s' "$GOCACHE"`)
			if err != nil || res.Stdout == mine {
				t.Fatalf("the original sandbox's GOCACHE %q (%v)", res.Stdout, err)
			}
		})
	}
	s := sandbox.Disabled()
	if _, err := s.WithGoCache("relative/go-build"); err == nil {
		t.Error("a relative cache path was accepted")
	}
	if same, err := s.WithGoCache(""); same != s || err != nil {
		t.Errorf(`WithGoCache("") = %p, %v; want the sandbox itself`, same, err)
	}
	var none *sandbox.Sandbox
	if got, err := none.WithGoCache("/x"); got != nil || err != nil {
		t.Errorf("nil sandbox: %v, %v", got, err)
	}
}

package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/testenv"
)

// TestMain removes the shared directory at the end. (The test binary acts
// as the sandbox's launcher by itself: see internal/launch.)
func TestMain(m *testing.M) {
	code := m.Run()
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// shared holds what the tests of this package share: one cache directory
// (so that the Go build cache of the sample module is built once for all
// mechanisms), and the detected sandboxes.
var shared struct {
	once sync.Once
	dir  string
	err  error
	mu   sync.Mutex
	sbx  map[sandbox.Mode]*sandbox.Sandbox
}

func sharedDir(t testing.TB) string {
	t.Helper()
	shared.once.Do(func() {
		d, err := os.MkdirTemp("", "agentos-sandbox-test-*")
		if err == nil {
			d, err = filepath.EvalSymlinks(d)
		}
		shared.dir, shared.err = d, err
		shared.sbx = map[sandbox.Mode]*sandbox.Sandbox{}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.dir
}

// mechanisms are the sandboxes the tests run under; each must be
// available under CI=true (a missing bwrap or Landlock is a failure
// there, a loud skip elsewhere).
var mechanisms = []sandbox.Mode{sandbox.ModeBwrap, sandbox.ModeLandlock}

// detect returns the sandbox of a mode, detected once, with the shared
// cache directory and the given module cache.
func detect(t testing.TB, mode sandbox.Mode) *sandbox.Sandbox {
	t.Helper()
	dir := sharedDir(t)
	shared.mu.Lock()
	s, ok := shared.sbx[mode]
	if !ok {
		modcache, npmcache := filepath.Join(dir, "modcache"), filepath.Join(dir, "npmcache")
		for _, d := range []string{modcache, npmcache} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				shared.mu.Unlock()
				t.Fatal(err)
			}
		}
		getenv := func(k string) string {
			switch k {
			case "GOMODCACHE":
				return modcache
			case "npm_config_cache":
				return npmcache
			}
			return os.Getenv(k)
		}
		// One Go build cache for every run, kept across test runs like
		// sandboxtest's: the per-worktree cache is what production uses,
		// but a cold one costs a minute of compiling the standard library.
		gocache := filepath.Join(os.TempDir(), fmt.Sprintf("agentos-sandboxtest-%d", os.Getuid()), "go-build")
		s = sandbox.Detect(context.Background(), sandbox.Config{Mode: mode, CacheDir: filepath.Join(dir, "cache"), GoCache: gocache, Getenv: getenv})
		shared.sbx[mode] = s
	}
	shared.mu.Unlock()
	if mode != sandbox.ModeNone {
		testenv.Require(t, "the "+string(mode)+" sandbox", s.Err())
	}
	return s
}

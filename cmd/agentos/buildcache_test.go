package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	botdemo "github.com/agentos/agentos/bot/demo"
	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/kernel/workspace"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/setup"
)

// fakeSession makes a session worktree as the worktree manager lays it
// out: <root>/sessions/<repo>/<sid>, borrowing the objects of the
// repository's mirror (.git/objects/info/alternates), holding a Go module
// that uses two small standard packages.
func fakeSession(t *testing.T, root, repo, sid string) string {
	t.Helper()
	dir := filepath.Join(root, "sessions", repo, sid)
	alt := filepath.Join(dir, ".git", "objects", "info", "alternates")
	if err := os.MkdirAll(filepath.Dir(alt), 0o755); err != nil {
		t.Fatal(err)
	}
	mirror := filepath.Join(root, "mirrors", repo+".git", "objects")
	files := map[string]string{
		alt:                                mirror + "\n",
		filepath.Join(dir, "go.mod"):       "module example.com/m\n\ngo 1.21\n",
		filepath.Join(dir, "m.go"):         "package m\n\nimport (\n\t\"math/bits\"\n\t\"unicode/utf8\"\n)\n\nfunc F(s string) int { return utf8.RuneCountInString(s) + bits.Len(uint(len(s))) }\n",
		filepath.Join(dir, ".git", "HEAD"): "ref: refs/heads/main\n",
	}
	for p, body := range files {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func testBuildCaches(root string) *buildCaches {
	return &buildCaches{root: root, repo: mirrorOf, maxBytes: buildCacheMaxBytes, now: time.Now}
}

// TestBuildCacheChoice: which runs share a Go build cache. A
// repository's trusted runs share one; an untrusted run has its own
// session's, as has a run whose repository cannot be told; another
// repository has another. The operator's own choice
// (AGENTOS_SANDBOX_GO_CACHE) and an unconfined sandbox turn them off.
func TestBuildCacheChoice(t *testing.T) {
	root := t.TempDir()
	c := testBuildCaches(filepath.Join(root, "buildcache"))
	a1, a2 := fakeSession(t, root, "octo/app", "s1"), fakeSession(t, root, "octo/app", "s2")
	b1 := fakeSession(t, root, "octo/other", "s3")
	bare := filepath.Join(root, "plain")
	if err := os.MkdirAll(bare, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := func(r dispatch.EngineRequest) string { _, d := c.entry(r); return d }
	trustedA := dir(dispatch.EngineRequest{Dir: a1, SessionID: "s1"})
	if got := dir(dispatch.EngineRequest{Dir: a2, SessionID: "s2"}); got != trustedA {
		t.Errorf("two trusted sessions of one repository: %s and %s", trustedA, got)
	}
	if !strings.HasPrefix(trustedA, filepath.Join(root, "buildcache", buildCacheRepo)+"/") {
		t.Errorf("a repository's cache %s", trustedA)
	}
	others := map[string]dispatch.EngineRequest{
		"another repository":                           {Dir: b1, SessionID: "s3"},
		"an untrusted session":                         {Dir: a2, SessionID: "s2", Untrusted: true},
		"another untrusted session":                    {Dir: a1, SessionID: "s1", Untrusted: true},
		"a worktree whose repository cannot be told":   {Dir: bare, SessionID: "s9"},
		"another worktree whose repository is unknown": {Dir: bare, SessionID: "s10"},
	}
	seen := map[string]string{trustedA: "the repository's"}
	for name, r := range others {
		d := dir(r)
		if prev, ok := seen[d]; ok {
			t.Errorf("%s shares %s with %s", name, d, prev)
		}
		seen[d] = name
		if (r.Untrusted || r.Dir == bare) && !strings.Contains(d, "/"+buildCacheSession+"/") {
			t.Errorf("%s: %s is not a session's cache", name, d)
		}
	}

	confinedSb := detectBuildCacheSandbox(t, sandbox.ModeAuto)
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == setup.EnvGoCache {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name string
		v    string
		sb   *sandbox.Sandbox
		on   bool
	}{
		{"default", "", confinedSb, true},
		{"one per worktree", setup.GoCachePerWorktree, confinedSb, false},
		{"one directory for all", filepath.Join(root, "shared"), confinedSb, false},
		{"unconfined", "", sandbox.Disabled(), false},
	} {
		sc, err := serveBuildCaches(env(tc.v), root, tc.sb, nil)
		ac, aerr := actionBuildCaches(env(tc.v), "https://github.com", "octo/app", tc.sb)
		if err != nil || aerr != nil || (sc != nil) != tc.on || (ac != nil) != tc.on {
			t.Errorf("%s: serve %v (%v), Action %v (%v); want on=%v", tc.name, sc, err, ac, aerr, tc.on)
		}
		// Off, a run keeps the sandbox as detected.
		if !tc.on {
			got, done, err := sc.acquire(tc.sb, dispatch.EngineRequest{Dir: a1, SessionID: "s1"})
			done()
			if err != nil || got != tc.sb {
				t.Errorf("%s: acquire changed the sandbox (%v)", tc.name, err)
			}
		}
	}
	// The Action's repository is the workflow's, whatever the worktree.
	ac, _ := actionBuildCaches(env(""), "https://github.com", "octo/app", confinedSb)
	_, x := ac.entry(dispatch.EngineRequest{Dir: a1, SessionID: "s1"})
	_, y := ac.entry(dispatch.EngineRequest{Dir: b1, SessionID: "s3"})
	other, _ := actionBuildCaches(env(""), "https://github.com", "octo/other", confinedSb)
	_, z := other.entry(dispatch.EngineRequest{Dir: a1, SessionID: "s1"})
	if x != y || x == z {
		t.Errorf("Action caches: octo/app %s and %s, octo/other %s", x, y, z)
	}
}

func detectBuildCacheSandbox(t *testing.T, mode sandbox.Mode) *sandbox.Sandbox {
	t.Helper()
	// CI's Landlock pass hides bwrap; its bwrap pass runs this subtest
	// (as onSandboxes does).
	if _, err := exec.LookPath("bwrap"); err != nil && mode == sandbox.ModeBwrap {
		t.Skipf("SKIPPING: bwrap is not on the PATH: %v", err)
	}
	sb := sandbox.Detect(context.Background(), sandbox.Config{Mode: mode, CacheDir: filepath.Join(t.TempDir(), "sandbox")})
	testenv.Require(t, "the "+string(mode)+" sandbox", sb.Err())
	return sb
}

// compiled lists the packages `go build -x` compiled (cache misses).
func compiled(stderr string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`/compile .*?-p (\S+)`).FindAllStringSubmatch(stderr, -1) {
		out = append(out, m[1])
	}
	sort.Strings(out)
	return out
}

// TestBuildCacheSandboxed runs sandboxed commands through the build caches
// under each mechanism: a repository's first trusted run fills its cache
// (the standard packages it uses are compiled), its next trusted run in
// another session's worktree finds them there (only the module's own
// package, whose build depends on its directory, is compiled); another
// repository's run and an untrusted run of the same repository see
// neither the cache nor its files, compile from cold, and cannot plant a
// file in it.
func TestBuildCacheSandboxed(t *testing.T) {
	testenv.LookPath(t, "go")
	for _, mode := range []sandbox.Mode{sandbox.ModeBwrap, sandbox.ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			sb := detectBuildCacheSandbox(t, mode)
			root, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			c := testBuildCaches(filepath.Join(root, "buildcache"))
			run := func(r dispatch.EngineRequest, argv ...string) workspace.RunResult {
				t.Helper()
				s, done, err := c.acquire(sb, r)
				if err != nil {
					t.Fatal(err)
				}
				defer done()
				ws, err := workspace.Open(r.Dir, workspace.Options{Sandbox: s, UntrustedCode: r.Untrusted})
				if err != nil {
					t.Fatal(err)
				}
				defer ws.Close()
				res, err := ws.Run(context.Background(), workspace.RunSpec{Argv: argv, Timeout: 10 * time.Minute, MaxOutput: 1 << 20})
				if err != nil {
					t.Fatalf("%v: %v", argv, err)
				}
				return res
			}
			build := func(r dispatch.EngineRequest) []string {
				t.Helper()
				res := run(r, "go", "build", "-x", "./...")
				if res.ExitCode != 0 {
					t.Fatalf("go build in %s: exit %d\n%s", r.Dir, res.ExitCode, res.Stderr)
				}
				return compiled(res.Stderr)
			}
			first := dispatch.EngineRequest{Dir: fakeSession(t, root, "octo/app", "s1"), SessionID: "s1"}
			_, cacheA := c.entry(first)
			goCacheA := filepath.Join(cacheA, "go-build")
			if res := run(first, "go", "env", "GOCACHE"); strings.TrimSpace(res.Stdout) != goCacheA {
				t.Fatalf("GOCACHE in the sandbox: %q, want the repository's %s (%s)", res.Stdout, goCacheA, res.Stderr)
			}
			cold := build(first)
			if strings.Join(cold, " ") != "example.com/m math/bits unicode/utf8" {
				t.Fatalf("the first run compiled %q", cold)
			}
			entries, _ := filepath.Glob(filepath.Join(goCacheA, "??", "*-a"))
			if len(entries) < 3 {
				t.Fatalf("the repository's cache holds %d outputs after its first run", len(entries))
			}

			next := dispatch.EngineRequest{Dir: fakeSession(t, root, "octo/app", "s2"), SessionID: "s2"}
			if warm := build(next); strings.Join(warm, " ") != "example.com/m" {
				t.Errorf("the repository's next trusted run compiled %q, want only its own package", warm)
			}

			probe := `printf '%s\n' "$GOCACHE"; ls ` + goCacheA + ` && echo LISTED; echo x > ` + goCacheA + `/planted && echo PLANTED; true`
			for name, r := range map[string]dispatch.EngineRequest{
				"another repository":                  {Dir: fakeSession(t, root, "octo/other", "s3"), SessionID: "s3"},
				"an untrusted run of this repository": {Dir: fakeSession(t, root, "octo/app", "s4"), SessionID: "s4", Untrusted: true},
			} {
				res := run(r, "sh", "-c", probe)
				own := strings.SplitN(res.Stdout, "\n", 2)[0]
				if own == goCacheA || own == "" || strings.Contains(res.Stdout, "LISTED") || strings.Contains(res.Stdout, "PLANTED") {
					t.Errorf("%s: GOCACHE %q; the repository's cache within reach:\n%s%s", name, own, res.Stdout, res.Stderr)
				}
				if _, err := os.Stat(filepath.Join(goCacheA, "planted")); err == nil {
					t.Fatalf("%s planted a file in the repository's cache", name)
				}
				if got := build(r); strings.Join(got, " ") != "example.com/m math/bits unicode/utf8" {
					t.Errorf("%s compiled %q: it read another trust domain's outputs", name, got)
				}
			}
		})
	}
}

// TestBuildCacheTrim: unused caches go (a repository's after 5 days, a
// session's after a day), then the least recently used until the total
// fits, never one in use or used within the hour; a directory a command
// made unwritable goes too.
func TestBuildCacheTrim(t *testing.T) {
	root := t.TempDir()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c := &buildCaches{root: root, repo: mirrorOf, maxBytes: 1600, now: func() time.Time { return now }}
	mk := func(kind, name string, idle time.Duration, size int) string {
		dir := filepath.Join(root, kind, name)
		if err := os.MkdirAll(filepath.Join(dir, "go-build", "ab"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "go-build", "ab", "x-a"), make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
		used := filepath.Join(dir, buildCacheUsed)
		if err := os.WriteFile(used, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(used, now.Add(-idle), now.Add(-idle)); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	oldRepo := mk(buildCacheRepo, "old", 6*24*time.Hour, 10)
	idleRepo := mk(buildCacheRepo, "idle", 4*24*time.Hour, 1000) // kept by age, the oldest of the rest
	lruRepo := mk(buildCacheRepo, "lru", 3*24*time.Hour, 1000)   // kept by age, evicted for size
	busyRepo := mk(buildCacheRepo, "busy", 10*time.Minute, 1500) // used within the hour
	oldSession := mk(buildCacheSession, "old", 25*time.Hour, 10)
	newSession := mk(buildCacheSession, "new", 2*time.Hour, 10)
	inUse := mk(buildCacheSession, "inuse", 30*24*time.Hour, 10)
	c.inUse = map[string]int{inUse: 1}
	locked := mk(buildCacheSession, "locked", 2*24*time.Hour, 10)
	if err := os.Chmod(filepath.Join(locked, "go-build", "ab"), 0o500); err != nil {
		t.Fatal(err)
	}
	removed := c.trim()
	sort.Strings(removed)
	want := []string{idleRepo, lruRepo, oldRepo, locked, oldSession}
	sort.Strings(want)
	if strings.Join(removed, "\n") != strings.Join(want, "\n") {
		t.Errorf("removed:\n%s\nwant:\n%s", strings.Join(removed, "\n"), strings.Join(want, "\n"))
	}
	for _, d := range []string{busyRepo, newSession, inUse} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s is gone", d)
		}
	}
	for _, d := range want {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s is still there", d)
		}
	}

	// acquire records the use and trims in the background at most once
	// an hour; release records the end of the use.
	sess := fakeSession(t, root, "octo/app", "s1")
	sb := detectBuildCacheSandbox(t, sandbox.ModeAuto)
	c.lastTrim = time.Time{}
	_, done, err := c.acquire(sb, dispatch.EngineRequest{Dir: sess, SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	c.wait()
	_, dir := c.entry(dispatch.EngineRequest{Dir: sess, SessionID: "s1"})
	if c.inUse[dir] != 1 || !c.lastTrim.Equal(now) {
		t.Errorf("in use %d, last trim %v", c.inUse[dir], c.lastTrim)
	}
	now = now.Add(time.Minute)
	done()
	done() // twice is once
	if fi, err := os.Stat(filepath.Join(dir, buildCacheUsed)); err != nil || !fi.ModTime().Equal(now) || c.inUse[dir] != 0 {
		t.Errorf("after release: %v, %v, in use %d", fi, err, c.inUse[dir])
	}
}

// TestBuildCacheFigures measures approve → PR ready on the standard flow
// (`agentos demo --github`: a maintainer's /agent comment, the run pauses
// for approval, the Approve review, the run resumes, patches, runs the
// tests in the sandbox, publishes and marks the pull request ready), in
// one process, with the resumed run's Go build cache cold (an empty
// directory: what each session had when serve kept one cache per
// worktree and the tests first ran after the approval) and warm (the
// directory earlier runs of the same repository filled: the per-repository
// cache). The runs before the approval share one cache; the first of them
// fills it, which gives comment → paused cold against warm too:
//
//	AGENTOS_BUILDCACHE_FIGURES=2 go test ./cmd/agentos -run BuildCacheFigures -v -timeout 30m
//
// (the value is the number of cold/warm pairs). Each run must end with the
// pull request ready; the figures are logged, not judged.
func TestBuildCacheFigures(t *testing.T) {
	pairs, _ := strconv.Atoi(os.Getenv("AGENTOS_BUILDCACHE_FIGURES"))
	if pairs <= 0 {
		t.Skip("set AGENTOS_BUILDCACHE_FIGURES=<pairs> to measure")
	}
	testenv.LookPath(t, "git")
	testenv.LookPath(t, "go")
	type figure struct {
		ask, approve time.Duration
		written      int // files the resumed run wrote to its cache
	}
	count := func(dir string) int {
		n := 0
		filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				n++
			}
			return nil
		})
		return n
	}
	// play runs the flow, the runs before the approval with askCache and
	// the resumed one with approveCache (setup.Sandbox reads the variable
	// for each engine it builds).
	play := func(askCache, approveCache string) figure {
		t.Helper()
		// Detected before, as serve detects once: the timed part does not
		// probe the sandbox.
		for _, c := range []string{askCache, approveCache} {
			if _, err := setup.Sandbox(context.Background(), func(k string) string {
				if k == setup.EnvGoCache {
					return c
				}
				return os.Getenv(k)
			}); err != nil {
				t.Fatal(err)
			}
		}
		t.Setenv(setup.EnvGoCache, askCache)
		var before int
		w := &stepClock{marks: map[string]time.Time{}, at: map[string]func(){"── 3. ": func() {
			os.Setenv(setup.EnvGoCache, approveCache)
			before = count(approveCache)
		}}}
		rep, err := botdemo.Run(context.Background(), botdemo.Options{Dir: t.TempDir(), Out: w})
		if err != nil || rep.Status != "completed" {
			t.Fatalf("the flow ended %s: %v", rep.Status, err)
		}
		for _, m := range stepMarks {
			if w.marks[m].IsZero() {
				t.Fatalf("the walkthrough lacks %q", m)
			}
		}
		return figure{ask: w.marks["── 2. "].Sub(w.marks["── 1. "]), approve: w.marks["is ready for review"].Sub(w.marks["── 3. "]), written: count(approveCache) - before}
	}
	repo := filepath.Join(t.TempDir(), "go-build")
	first := play(repo, repo)
	t.Logf("first run of the repository: comment → paused %v with a cold cache", first.ask.Round(time.Millisecond))
	for i := 0; i < pairs; i++ {
		cold := play(repo, filepath.Join(t.TempDir(), "go-build"))
		warm := play(repo, repo)
		t.Logf("pair %d: approve → PR ready: cold %v, warm %v (%.1fx); comment → paused (warm) %v, %v; files the resumed run wrote to its cache: cold %d, warm %d",
			i+1, cold.approve.Round(time.Millisecond), warm.approve.Round(time.Millisecond), float64(cold.approve)/float64(warm.approve),
			cold.ask.Round(time.Millisecond), warm.ask.Round(time.Millisecond), cold.written, warm.written)
	}
}

// stepMarks are the lines of the demo's walkthrough the figures time.
var stepMarks = []string{"── 1. ", "── 2. ", "── 3. ", "is ready for review"}

// stepClock notes when the demo's walkthrough first prints each mark, and
// calls at[mark] then.
type stepClock struct {
	mu    sync.Mutex
	marks map[string]time.Time
	at    map[string]func()
}

func (c *stepClock) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for _, m := range stepMarks {
		if c.marks[m].IsZero() && bytes.Contains(p, []byte(m)) {
			c.marks[m] = now
			if f := c.at[m]; f != nil {
				f()
			}
		}
	}
	return len(p), nil
}

// TestBotEnginesHoldTheBuildCache: the bot's engines take the run's cache
// from the build caches and give it back when released, also when the
// engine cannot be built.
func TestBotEnginesHoldTheBuildCache(t *testing.T) {
	root := t.TempDir()
	sess := fakeSession(t, root, "octo/app", "gh-1")
	prof := provider.DefaultProfile()
	prof.Provider, prof.Script = "scripted", filepath.Join("..", "..", "runtime", "demo", "testdata", "fix-auth.script.yaml")
	c := testBuildCaches(filepath.Join(root, "buildcache"))
	t.Cleanup(c.wait)
	build := meteredEngines(nil, "", prof, detectBuildCacheSandbox(t, sandbox.ModeAuto), c, nil, nil)
	req := dispatch.EngineRequest{Dir: sess, SessionID: "gh-1"}
	_, dir := c.entry(req)
	users := func() int { c.mu.Lock(); defer c.mu.Unlock(); return c.inUse[dir] }
	eng, release, err := build(context.Background(), req)
	if err != nil || eng == nil {
		t.Fatalf("engine: %v", err)
	}
	if users() != 1 {
		t.Errorf("while the engine lives the cache has %d users", users())
	}
	if _, err := os.Stat(filepath.Join(dir, "go-build")); err != nil {
		t.Errorf("the repository's cache: %v", err)
	}
	release()
	if users() != 0 {
		t.Errorf("after release the cache has %d users", users())
	}
	bad := prof
	bad.Provider = "no-such-provider"
	if _, _, err := meteredEngines(nil, "", bad, detectBuildCacheSandbox(t, sandbox.ModeAuto), c, nil, nil)(context.Background(), req); err == nil {
		t.Fatal("an engine with an unknown provider was built")
	}
	if users() != 0 {
		t.Errorf("after a failed build the cache has %d users", users())
	}
}

package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/runtime/setup"
)

// The real-project corpus (docs/real-projects.md, built by .ci/corpus.sh):
// published packages that ship their own tests, each run by `agentos run`
// under bwrap and under Landlock. The setup phase fetches the
// dependencies, then the scripted Worker's test.run, with the network off,
// must get the result the same command gets outside the sandbox.

// realProject is one project of the corpus.
type realProject struct {
	dir      string   // under the corpus directory
	needs    []string // programs on the PATH
	registry string   // the host the setup phase fetches from ("" for none)
	setup    string   // the setup command the run must run ("" for none)
	cache    string   // the dependency cache setup fills ("Go module cache", "npm cache")
	// A source line to break (replaced once in file): the tests must then
	// fail, inside and outside alike. Empty: the project is not broken.
	file, line, broken string
}

var realProjects = []realProject{
	{dir: "go/go-multierror", needs: []string{"go"}, registry: "proxy.golang.org", setup: "go mod download", cache: "Go module cache"},
	{dir: "go/go-jmespath", needs: []string{"go"}, registry: "proxy.golang.org", setup: "go mod download", cache: "Go module cache",
		file: "util.go", line: "return !v", broken: "return v"},
	{dir: "npm/shell-quote", needs: []string{"npm", "node"}, registry: "registry.npmjs.org", setup: "npm ci --ignore-scripts", cache: "npm cache",
		file: "index.js", line: `return '"' + s.replace(`, broken: `return "'" + s.replace(`},
	{dir: "npm/through", needs: []string{"npm", "node"}, registry: "registry.npmjs.org", setup: "npm install --no-package-lock --ignore-scripts --no-audit --no-fund", cache: "npm cache"},
	{dir: "python/toolz", needs: []string{"/usr/bin/python3"},
		file: "toolz/itertoolz.py", line: "return next(iter(seq))", broken: "return next(iter(reversed(seq)))"},
}

// corpusDir is where .ci/corpus.sh put the corpus.
func corpusDir() string {
	if d := os.Getenv("AGENTOS_CORPUS_DIR"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "agentos-corpus")
}

// TestRealProjects: each project of the corpus, cloned afresh, under each
// mechanism: a first run whose setup fetches the dependencies into the
// repository's empty cache (cold), a second with the setup's network off
// (cached); both runs' test.run pass as the same command does outside the
// sandbox. A project with a broken line fails inside as outside, with the
// same exit code. The MEASURE lines are docs/real-projects.md's table.
func TestRealProjects(t *testing.T) {
	corpus := corpusDir()
	for _, p := range realProjects {
		t.Run(p.dir, func(t *testing.T) {
			src := filepath.Join(corpus, p.dir)
			_, err := os.Stat(filepath.Join(src, ".git"))
			testenv.Require(t, "the real-project corpus (bash .ci/corpus.sh; AGENTOS_CORPUS_DIR="+corpus+")", err)
			for _, n := range p.needs {
				testenv.LookPath(t, n)
			}
			if strings.HasPrefix(p.dir, "python/") {
				out, err := exec.Command("/usr/bin/python3", "-c", "import pytest").CombinedOutput()
				if err != nil {
					err = errors.New(strings.TrimSpace(string(out)))
				}
				testenv.Require(t, "Debian's python3-pytest", err)
			}
			if p.registry != "" {
				requireRegistry(t, p.registry)
			}
			onSandboxes(t, func(t *testing.T) { runRealProject(t, p, src) })
		})
	}
}

func runRealProject(t *testing.T, p realProject, src string) {
	mode := os.Getenv(sandbox.EnvMode)
	repo := filepath.Join(t.TempDir(), filepath.Base(p.dir))
	if out, err := exec.Command("git", "clone", "-q", "--no-hardlinks", src, repo).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}

	// Cold: the repository's caches are empty.
	r, errOut, code := agentRun(t, repo)
	calls, _ := readCalls(t, r.LogPath)
	var cache string
	if p.setup != "" && len(calls) > 0 && calls[0].Tool == "setup.run" {
		cache = calls[0].cacheOf(t, p.cache)
		t.Cleanup(func() { removeTree(filepath.Dir(cache)) })
	}
	if code != exitOK || r.Status != "completed" || len(calls) == 0 {
		t.Fatalf("exit %d, status %s, terminal %+v, calls %+v\n%s", code, r.Status, r.Terminal, calls, errOut)
	}
	cold := realSetup(t, p, calls, "allow-list")
	tst := realTest(t, calls)

	// The same command outside the sandbox, with the same caches: the
	// project's real result.
	command, _ := tst.result()["command"].(string)
	outCode, outside, outOut := runOutside(t, repo, command, cache)
	if outCode != 0 {
		t.Fatalf("%s fails outside the sandbox (a released version's tests pass): exit %d\n%s", command, outCode, outOut)
	}
	sameResult(t, tst, outCode, outOut)

	// Cached: the same repository, its setup without network.
	writeFile(t, repo, ".agent/policy.yaml", offlineSetupPolicy)
	r2, errOut2, code2 := agentRun(t, repo)
	calls2, _ := readCalls(t, r2.LogPath)
	if code2 != exitOK || r2.Status != "completed" || len(calls2) == 0 {
		t.Fatalf("second run: exit %d, status %s, terminal %+v, calls %+v\n%s", code2, r2.Status, r2.Terminal, calls2, errOut2)
	}
	cached := realSetup(t, p, calls2, "off")
	tst2 := realTest(t, calls2)
	sameResult(t, tst2, outCode, outOut)
	t.Logf("MEASURE %s %s: setup cold %.0f ms, cached %.0f ms; tests in the sandbox %.0f ms (first run), %.0f ms (second run); outside %d ms; `%s`",
		p.dir, mode, cold, cached, tst.durationMS(), tst2.durationMS(), outside.Milliseconds(), command)

	if p.file == "" {
		return
	}
	// Broken: one source line changed; the tests fail as they do outside.
	path := filepath.Join(repo, p.file)
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), p.line) {
		t.Fatalf("%s has no line %q: %v", p.file, p.line, err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), p.line, p.broken, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r3, errOut3, _ := agentRun(t, repo)
	calls3, _ := readCalls(t, r3.LogPath)
	if len(calls3) == 0 {
		t.Fatalf("broken run: terminal %+v\n%s", r3.Terminal, errOut3)
	}
	tst3 := realTest(t, calls3)
	outCode3, _, outOut3 := runOutside(t, repo, command, cache)
	if outCode3 == 0 {
		t.Fatalf("broken %s: the tests still pass outside the sandbox\n%s", p.file, outOut3)
	}
	sameResult(t, tst3, outCode3, outOut3)
	t.Logf("broken %s: exit %d in the sandbox and outside", p.file, outCode3)
}

// sameResult checks that test.run got the result the command got outside
// the sandbox: the same exit code, passed only for 0.
func sameResult(t *testing.T, tst setupCall, outCode int, outOut string) {
	t.Helper()
	res := tst.result()
	if got, passed := res["exit_code"], res["passed"]; got != float64(outCode) || passed != (outCode == 0) {
		t.Fatalf("%s: exit %v (passed %v) in the sandbox, %d outside\nsandbox stdout: %s\nstderr: %s\noutside: %s",
			res["command"], got, passed, outCode, tail(res["stdout"]), tail(res["stderr"]), outOut)
	}
}

// realSetup checks a run's setup call (none when the project has no setup)
// and returns its duration.
func realSetup(t *testing.T, p realProject, calls []setupCall, network string) float64 {
	t.Helper()
	if p.setup == "" {
		if calls[0].Tool == "setup.run" {
			t.Fatalf("a setup command ran: %+v", calls[0])
		}
		return 0
	}
	set := calls[0]
	if set.Tool != "setup.run" || set.Command != p.setup || !set.OK || set.result()["exit_code"] != float64(0) {
		t.Fatalf("setup call %+v", set)
	}
	if sb, _ := set.Invoke["sandbox"].(map[string]any); sb["network"] != network {
		t.Fatalf("setup's network is %v, want %s", sb["network"], network)
	}
	return set.durationMS()
}

// realTest is a run's last call, test.run, with the network off.
func realTest(t *testing.T, calls []setupCall) setupCall {
	t.Helper()
	tst := calls[len(calls)-1]
	if tst.Tool != "test.run" || !tst.OK {
		t.Fatalf("test.run %+v", tst)
	}
	if sb, _ := tst.Invoke["sandbox"].(map[string]any); sb["network"] != "off" {
		t.Fatalf("test.run's profile: %v", sb)
	}
	return tst
}

// runOutside runs command (test.run's, split on spaces: the corpus's
// commands have no quotes) in repo without the sandbox, with the
// repository's dependency cache and the sandbox's Go build cache.
func runOutside(t *testing.T, repo, command, cache string) (int, time.Duration, string) {
	t.Helper()
	argv := strings.Fields(command)
	if len(argv) == 0 {
		t.Fatalf("test.run recorded no command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = repo
	cmd.Env = os.Environ()
	if argv[0] == "go" {
		cmd.Env = append(cmd.Env, "GOMODCACHE="+cache, "GOPROXY=off", "GOFLAGS=-mod=readonly")
		if gc := sandboxGoCache(); gc != "" {
			cmd.Env = append(cmd.Env, "GOCACHE="+gc)
		}
	}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, d, tail(string(out))
	case errors.As(err, &ee):
		return ee.ExitCode(), d, tail(string(out))
	}
	t.Fatalf("%s outside the sandbox: %v", command, err)
	return 0, 0, ""
}

// sandboxGoCache is the Go build cache sandboxed commands use (setup.Sandbox).
func sandboxGoCache() string {
	switch gc := os.Getenv(setup.EnvGoCache); gc {
	case setup.GoCachePerWorktree:
		return ""
	case "":
		d, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		return filepath.Join(d, "agentos", "sandbox", "go-build")
	default:
		return gc
	}
}

// tail is the end of a command's output, enough for a failure message.
func tail(v any) string {
	s, _ := v.(string)
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}

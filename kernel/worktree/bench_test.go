package worktree

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
)

// The benchmarks compare this package with the git CLI doing the same work
// on a medium repository (benchFiles files, benchCommits commits) served
// over HTTP by git http-backend, with a warm mirror:
//
//	go test -run '^$' -bench . -benchtime 20x ./kernel/worktree/
const (
	benchFiles   = 5000
	benchCommits = 200
)

// benchRun numbers benchmark runs so that every run uses fresh session
// ids and branches (a benchmark function runs more than once).
var benchRun atomic.Int64

var bench struct {
	once sync.Once
	err  error
	root string // removed by TestMain
	srv  *gitServer
	bare string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bench.srv != nil {
		bench.srv.srv.Close()
	}
	if bench.root != "" {
		os.RemoveAll(bench.root)
	}
	os.Exit(code)
}

// benchRepo generates the medium repository once per test binary run.
func benchRepo(b *testing.B) *gitServer {
	b.Helper()
	bench.once.Do(func() {
		bench.root, bench.err = os.MkdirTemp("", "worktree-bench-")
		if bench.err != nil {
			return
		}
		bench.srv, bench.err = startGitServer(filepath.Join(bench.root, "srv"))
		if bench.err != nil {
			return
		}
		bench.bare = filepath.Join(bench.srv.root, testRepo.Owner, testRepo.Name+".git")
		if err := os.MkdirAll(bench.bare, 0o755); err != nil {
			bench.err = err
			return
		}
		for _, args := range [][]string{{"init", "-q", "--bare", "-b", "main"}, {"config", "http.receivepack", "true"}} {
			if _, err := runGitErr(bench.bare, nil, args...); err != nil {
				bench.err = err
				return
			}
		}
		_, bench.err = runGitErr(bench.bare, fastImportStream(), "fast-import", "--quiet")
	})
	if bench.err != nil {
		b.Skipf("benchmark repository: %v", bench.err)
	}
	return bench.srv
}

// fastImportStream writes benchFiles files in the first commit, then
// changes 25 files in each of the next benchCommits-1 commits.
func fastImportStream() []byte {
	rng := rand.New(rand.NewSource(1))
	words := strings.Fields("alpha beta gamma delta func return if else for range struct type package import var const nil error string int")
	content := func() string {
		var sb strings.Builder
		n := 20 + rng.Intn(40)
		for i := 0; i < n; i++ {
			sb.WriteString(words[rng.Intn(len(words))])
			if i%8 == 7 {
				sb.WriteByte('\n')
			} else {
				sb.WriteByte(' ')
			}
		}
		sb.WriteByte('\n')
		return sb.String()
	}
	path := func(i int) string { return fmt.Sprintf("pkg%02d/sub%d/file%04d.go", i%50, i%7, i) }
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	for c := 0; c < benchCommits; c++ {
		msg := fmt.Sprintf("commit %d", c)
		fmt.Fprintf(w, "commit refs/heads/main\nmark :%d\ncommitter Bench <bench@example.com> %d +0000\ndata %d\n%s\n", c+1, 1700000000+c*60, len(msg), msg)
		if c > 0 {
			fmt.Fprintf(w, "from :%d\n", c)
		}
		var paths []int
		if c == 0 {
			for i := 0; i < benchFiles; i++ {
				paths = append(paths, i)
			}
		} else {
			for i := 0; i < 25; i++ {
				paths = append(paths, rng.Intn(benchFiles))
			}
		}
		for _, i := range paths {
			body := content()
			fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n%s\n", path(i), len(body), body)
		}
	}
	w.Flush()
	return buf.Bytes()
}

// cliEnv authenticates a plain git CLI run the way a careful caller would:
// the header travels in the environment.
func cliEnv(home string) []string {
	hdr := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(TokenUser+":"+testToken))
	return append(gitEnv(home), "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader", "GIT_CONFIG_VALUE_0="+hdr)
}

func cli(b *testing.B, dir string, args ...string) string {
	b.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = cliEnv(dir)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		b.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return strings.TrimSpace(out.String())
}

func benchManager(b *testing.B, srv *gitServer, backend Backend) *Manager {
	b.Helper()
	m, err := New(Config{CacheDir: b.TempDir(), BaseURL: srv.url(), Token: staticToken(testToken), Backend: backend})
	if err != nil {
		b.Fatal(err)
	}
	// Warm the mirror.
	s, err := m.Prepare(context.Background(), PrepareOptions{Repo: testRepo, SessionID: "warm", Number: 1, Base: Base{Branch: "main"}})
	if err != nil {
		b.Fatal(err)
	}
	s.Close()
	return m
}

// cliMirror is the git CLI's warm bare mirror of the benchmark repository.
func cliMirror(b *testing.B, srv *gitServer) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "mirror.git")
	cli(b, filepath.Dir(dir), "clone", "-q", "--bare", srv.url()+"/octo/widgets.git", dir)
	return dir
}

// BenchmarkPrepare measures a session worktree's preparation with a warm
// mirror: fetch, then check out 5,000 files on a new branch.
func BenchmarkPrepare(b *testing.B) {
	srv := benchRepo(b)
	ctx := context.Background()
	for _, be := range []struct {
		name    string
		backend Backend
	}{{"gogit", BackendGoGit}, {"hybrid", BackendCLI}} {
		b.Run(be.name, func(b *testing.B) {
			m := benchManager(b, srv, be.backend)
			run := benchRun.Add(1)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: fmt.Sprintf("bench%d-%d", run, i), Number: 1, Base: Base{Branch: "main"}})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				s.Close()
				b.StartTimer()
			}
		})
	}
	// go-git's own checkout (Worktree.Reset), which checkoutFresh replaces.
	b.Run("gogit-stock-reset", func(b *testing.B) {
		m := benchManager(b, srv, BackendGoGit)
		c, _ := m.cred(ctx, testRepo)
		run := benchRun.Add(1)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			id := fmt.Sprintf("stock%d-%d", run, i)
			branch, _ := SessionBranch(1, id)
			base, _, err := m.resolveBase(ctx, testRepo, c, Base{Branch: "main"}, branch)
			if err != nil {
				b.Fatal(err)
			}
			dir := filepath.Join(m.cfg.CacheDir, "stock", id)
			if err := m.initWorktree(testRepo, dir, branch, base, m.cfg.Author); err != nil {
				b.Fatal(err)
			}
			repo, st, err := m.openRepo(testRepo, dir)
			if err != nil {
				b.Fatal(err)
			}
			wt, err := repo.Worktree()
			if err != nil {
				b.Fatal(err)
			}
			if err := wt.Reset(&git.ResetOptions{Commit: base, Mode: git.HardReset}); err != nil {
				b.Fatal(err)
			}
			st.Close()
			b.StopTimer()
			os.RemoveAll(dir)
			b.StartTimer()
		}
	})
	b.Run("git-worktree-add", func(b *testing.B) {
		mirror := cliMirror(b, srv)
		work := b.TempDir()
		run := benchRun.Add(1)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			cli(b, mirror, "fetch", "-q", "origin", "+refs/heads/*:refs/heads/*")
			dir := filepath.Join(work, fmt.Sprint(i))
			cli(b, mirror, "worktree", "add", "-q", "-b", fmt.Sprintf("agent/1-wt%d-%d", run, i), dir, "main")
			b.StopTimer()
			cli(b, mirror, "worktree", "remove", "--force", dir)
			b.StartTimer()
		}
	})
	b.Run("git-clone-shared", func(b *testing.B) {
		mirror := cliMirror(b, srv)
		work := b.TempDir()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			cli(b, mirror, "fetch", "-q", "origin", "+refs/heads/*:refs/heads/*")
			dir := filepath.Join(work, fmt.Sprint(i))
			cli(b, work, "clone", "-q", "--shared", "--no-checkout", mirror, dir)
			cli(b, dir, "checkout", "-q", "-b", fmt.Sprintf("agent/1-cl%d", i), "main")
			b.StopTimer()
			os.RemoveAll(dir)
			b.StartTimer()
		}
	})
}

// BenchmarkCommitPush measures committing a one-file change in a 5,000-file
// worktree and pushing it over HTTP.
func BenchmarkCommitPush(b *testing.B) {
	srv := benchRepo(b)
	ctx := context.Background()
	for _, be := range []struct {
		name    string
		backend Backend
	}{{"gogit", BackendGoGit}, {"hybrid", BackendCLI}} {
		b.Run(be.name, func(b *testing.B) {
			m := benchManager(b, srv, be.backend)
			s, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: fmt.Sprintf("cp-%s-%d", be.name, benchRun.Add(1)), Number: 2, Base: Base{Branch: "main"}})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var commitT, pushT time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				c := write(b, s.Dir, "pkg07/sub0/file0007.go", fmt.Sprintf("package p // %d\n", i))
				b.StartTimer()
				t0 := time.Now()
				if _, err := s.Commit(ctx, CommitOptions{Message: "change", RunID: "r", Changes: []Change{c}}); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := s.Push(ctx); err != nil {
					b.Fatal(err)
				}
				commitT += t1.Sub(t0)
				pushT += time.Since(t1)
			}
			b.ReportMetric(float64(commitT.Nanoseconds())/float64(b.N), "commit-ns/op")
			b.ReportMetric(float64(pushT.Nanoseconds())/float64(b.N), "push-ns/op")
		})
	}
	b.Run("git-cli", func(b *testing.B) {
		mirror := cliMirror(b, srv)
		dir := filepath.Join(b.TempDir(), "wt")
		branch := fmt.Sprintf("agent/2-cli%d", benchRun.Add(1))
		cli(b, mirror, "worktree", "add", "-q", "-b", branch, dir, "main")
		target := filepath.Join(dir, "pkg07", "sub0", "file0007.go")
		var commitT, pushT time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			mustWrite(b, target, fmt.Sprintf("package p // cli %d\n", i))
			b.StartTimer()
			t0 := time.Now()
			cli(b, dir, "add", "-A")
			cli(b, dir, "commit", "-q", "-m", "change\n\nAgent-Session: s\nAgent-Run: r")
			t1 := time.Now()
			cli(b, dir, "push", "-q", "origin", branch)
			commitT += t1.Sub(t0)
			pushT += time.Since(t1)
		}
		b.ReportMetric(float64(commitT.Nanoseconds())/float64(b.N), "commit-ns/op")
		b.ReportMetric(float64(pushT.Nanoseconds())/float64(b.N), "push-ns/op")
	})
}

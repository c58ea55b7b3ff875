package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/kernel/worktree"
	"github.com/agentos/agentos/runtime/demo"
)

// appToken is the installation token of the round-trip tests: the API and
// git over HTTP (both served by the fake) take it.
const appToken = "ghs_RoundTripInstallationToken0123456789"

// gitDataWorld is a git-backed repository on the fake GitHub with an app
// installed on it, and a worktree manager that publishes through the Git
// Data API as that installation.
type gitDataWorld struct {
	fake *fakegithub.Fake
	url  string // the fake's
	bare string
	api  worktree.GitDataAPI
	wm   *worktree.Manager
}

func newGitDataWorld(t *testing.T, wrap func(worktree.GitDataAPI) worktree.GitDataAPI) *gitDataWorld {
	t.Helper()
	testenv.LookPath(t, "git")
	ctx := context.Background()
	f := fakegithub.New(t)
	url := f.Serve(t)
	bare, err := f.AddGitRepo(ctx, fakegithub.Repo{Owner: "octo", Name: "app"}, t.TempDir(), map[string]string{
		"README.md":      "hello\n",
		"old.txt":        "to be deleted\n",
		"tool.sh":        "#!/bin/sh\necho tool\n",
		"keep/a/b/c.txt": "deep\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	app, _, err := fakegithub.NewApp(appID, "agentos")
	if err != nil {
		t.Fatal(err)
	}
	f.AddApp(app)
	f.AddInstallation(instID, appID, repoName)
	f.AddInstallationToken(appToken, instID)
	gh, err := github.New(github.Config{BaseURL: url, Token: appToken})
	if err != nil {
		t.Fatal(err)
	}
	var api worktree.GitDataAPI = dispatch.GitData{Client: gh}
	if wrap != nil {
		api = wrap(api)
	}
	wm, err := worktree.New(worktree.Config{CacheDir: t.TempDir(), BaseURL: url, GitData: api,
		Token: func(context.Context, worktree.Repo) (string, error) { return appToken, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.CheckNoViolations(t) })
	return &gitDataWorld{fake: f, url: url, bare: bare, api: api, wm: wm}
}

func (w *gitDataWorld) prepare(t *testing.T, sid string) *worktree.Session {
	t.Helper()
	s, err := w.wm.Prepare(context.Background(), worktree.PrepareOptions{Repo: worktree.Repo{Owner: "octo", Name: "app"}, SessionID: sid, Number: 7})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func writeFile(t *testing.T, dir, name string, data []byte, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// gitDataCalls is the Git Data API's share of the calls counted so far.
func gitDataCalls(f *fakegithub.Fake) map[string]int {
	out := map[string]int{}
	for k, n := range f.Calls() {
		if strings.Contains(k, "/git/") {
			out[k] = n
		}
	}
	return out
}

// checkBranchIsWorktree: the session branch fetched with git from the
// remote is the local branch, commit for commit, and holds exactly the
// worktree's files with their modes; every commit after the base is
// GitHub's, Verified.
func checkBranchIsWorktree(t *testing.T, w *gitDataWorld, s *worktree.Session, commits int) {
	t.Helper()
	remote := gittest.Git(t, w.bare, "rev-parse", s.Branch)
	local, err := s.Head()
	if err != nil {
		t.Fatal(err)
	}
	if local != remote {
		t.Fatalf("local branch at %s, remote at %s", local, remote)
	}
	if got, want := gittest.Git(t, w.bare, "ls-tree", "-r", s.Branch), gittest.Git(t, s.Dir, "ls-tree", "-r", "HEAD"); got != want {
		t.Errorf("remote tree:\n%s\nlocal tree:\n%s", got, want)
	}
	if st := gittest.Git(t, s.Dir, "status", "--porcelain"); st != "" {
		t.Errorf("the worktree does not match its branch:\n%s", st)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	gittest.Git(t, ".", "clone", "-q", "-b", s.Branch, w.bare, clone)
	out := gittest.Git(t, s.Dir, "ls-files", "-s")
	for _, line := range strings.Split(out, "\n") {
		meta, name, _ := strings.Cut(line, "\t")
		f := strings.Fields(meta)
		want, err := os.ReadFile(filepath.Join(s.Dir, name))
		if f[0] == "120000" {
			var target string
			target, err = os.Readlink(filepath.Join(s.Dir, name))
			want = []byte(target)
		}
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		if f[0] == "120000" {
			target, err := os.Readlink(filepath.Join(clone, name))
			if err != nil {
				t.Fatal(err)
			}
			got = []byte(target)
		} else if got, err = os.ReadFile(filepath.Join(clone, name)); err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s differs in the clone (%d bytes, want %d)", name, len(got), len(want))
		}
		if f[0] == "100755" {
			if fi, err := os.Stat(filepath.Join(clone, name)); err != nil || fi.Mode()&0o111 == 0 {
				t.Errorf("%s lost its executable bit in the clone", name)
			}
		}
	}
	base := gittest.Git(t, w.bare, "rev-parse", "main")
	shas := strings.Fields(gittest.Git(t, w.bare, "rev-list", base+".."+s.Branch))
	if len(shas) != commits {
		t.Errorf("%d commits on the branch, want %d", len(shas), commits)
	}
	for _, sha := range shas {
		if !w.fake.Verified(sha) {
			t.Errorf("commit %s is not Verified", sha)
		}
		if who := gittest.Git(t, w.bare, "log", "-1", "--format=%an|%cn", sha); who != "agentos[bot]|GitHub" {
			t.Errorf("commit %s by %q, want the app's, committed by GitHub", sha, who)
		}
	}
}

// fileWrite writes data to name in the worktree dir as a kernel file tool
// does and returns the change a session commit takes for it.
func fileWrite(t *testing.T, dir, name string, data []byte) worktree.Change {
	t.Helper()
	writeFile(t, dir, name, data, 0o644)
	return worktree.Change{Path: name, SHA256: sha256Hex(string(data))}
}

// fileRemove deletes name in the worktree dir as a kernel file tool does
// and returns the change a session commit takes for it.
func fileRemove(t *testing.T, dir, name string) worktree.Change {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(name))); err != nil {
		t.Fatal(err)
	}
	return worktree.Change{Path: name}
}

// TestPublishThroughGitDataRoundTrips: what a session commits (text and
// binary content, a deletion, nested directories made and emptied, an
// empty commit) is published through the Git Data API as GitHub's
// Verified commits, and the branch fetched with git equals the worktree.
// Publishing again makes no call that writes.
func TestPublishThroughGitDataRoundTrips(t *testing.T) {
	ctx := context.Background()
	w := newGitDataWorld(t, nil)
	s := w.prepare(t, "sess-roundtrip-01")
	bin := make([]byte, 300<<10)
	rand.New(rand.NewSource(1)).Read(bin)
	bin[0], bin[1] = 0, 0xff // not UTF-8
	changes := []worktree.Change{
		fileWrite(t, s.Dir, "README.md", []byte("hello, world\n")),
		fileWrite(t, s.Dir, "bin/run", []byte("#!/bin/sh\nexec true\n")),
		fileWrite(t, s.Dir, "assets/blob.bin", bin),
		fileWrite(t, s.Dir, "x/y/z/deep.go", []byte("package z\n")),
		fileRemove(t, s.Dir, "old.txt"),
	}
	if _, err := s.Commit(ctx, worktree.CommitOptions{Message: "first", Changes: changes}); err != nil {
		t.Fatal(err)
	}
	w.fake.ResetCalls()
	head, err := s.Publish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Four files written: the text ones (README, bin/run, deep.go) go in
	// the tree request, the binary one as a blob. One tree, one commit,
	// the branch created.
	if got, want := fakegithub.FormatCalls(gitDataCalls(w.fake)), fakegithub.FormatCalls(map[string]int{
		"POST /repos/{owner}/{repo}/git/blobs":   1,
		"POST /repos/{owner}/{repo}/git/trees":   1,
		"POST /repos/{owner}/{repo}/git/commits": 1,
		"POST /repos/{owner}/{repo}/git/refs":    1,
	}); got != want {
		t.Errorf("Git Data calls:\n%s\nwant:\n%s", got, want)
	}
	if !w.fake.Verified(head) {
		t.Errorf("published head %s is not Verified", head)
	}
	checkBranchIsWorktree(t, w, s, 1)

	// The next commits: the deep file goes (its directories with it),
	// tool.sh and the binary change, then an empty commit. The change set
	// is the session's whole: the first commit's changes are in it again.
	bin[2] ^= 0xff
	changes = append(changes,
		fileRemove(t, s.Dir, "x/y/z/deep.go"),
		fileWrite(t, s.Dir, "tool.sh", []byte("#!/bin/sh\necho tool v2\n")),
		fileWrite(t, s.Dir, "assets/blob.bin", bin))
	if _, err := s.Commit(ctx, worktree.CommitOptions{Message: "second", Changes: changes}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, worktree.CommitOptions{Message: "third, empty", Changes: changes, AllowEmpty: true}); err != nil {
		t.Fatal(err)
	}
	w.fake.ResetCalls()
	if head, err = s.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	// The branch exists and every file is a regular one (the binary one
	// too, under 1 MiB): each commit, the empty one too, is one
	// createCommitOnBranch; no Git Data API call.
	if calls := w.fake.Calls(); len(gitDataCalls(w.fake)) != 0 || calls["POST /graphql"] != 2 {
		t.Errorf("calls:\n%s\nwant two createCommitOnBranch and no Git Data API call", fakegithub.FormatCalls(calls))
	}
	checkBranchIsWorktree(t, w, s, 3)
	if msg := gittest.Git(t, w.bare, "log", "-1", "--format=%s", s.Branch); msg != "third, empty" {
		t.Errorf("tip message %q", msg)
	}
	if got := gittest.Git(t, w.bare, "ls-tree", "-r", "--name-only", s.Branch); strings.Contains(got, "x/") || strings.Contains(got, "old.txt") {
		t.Errorf("deleted files on the remote:\n%s", got)
	}

	// Publishing again: nothing to create.
	w.fake.ResetCalls()
	again, err := s.Publish(ctx)
	if err != nil || again != head {
		t.Fatalf("republish = %s, %v; want %s", again, err, head)
	}
	if calls := gitDataCalls(w.fake); len(calls) != 0 {
		t.Errorf("republishing called:\n%s", fakegithub.FormatCalls(calls))
	}
}

// flakyGitData loses the answer of the n-th write after GitHub did it
// (write counts from 1), as a process killed right after the call would.
type flakyGitData struct {
	worktree.GitDataAPI
	mu     sync.Mutex
	n      int
	writes []string
}

var errLost = errors.New("the answer was lost")

func (f *flakyGitData) after(name string, err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, name)
	if err == nil && len(f.writes) == f.n {
		return fmt.Errorf("%s: %w", name, errLost)
	}
	return err
}

func (f *flakyGitData) CreateBlob(ctx context.Context, r worktree.Repo, b []byte) (string, error) {
	sha, err := f.GitDataAPI.CreateBlob(ctx, r, b)
	return sha, f.after("blob", err)
}
func (f *flakyGitData) CreateTree(ctx context.Context, r worktree.Repo, base string, e []worktree.TreeEntry) (string, error) {
	sha, err := f.GitDataAPI.CreateTree(ctx, r, base, e)
	return sha, f.after("tree", err)
}
func (f *flakyGitData) CreateCommit(ctx context.Context, r worktree.Repo, msg, tree string, parents []string) (string, error) {
	sha, err := f.GitDataAPI.CreateCommit(ctx, r, msg, tree, parents)
	return sha, f.after("commit", err)
}
func (f *flakyGitData) CreateRef(ctx context.Context, r worktree.Repo, branch, sha string) error {
	return f.after("create ref", f.GitDataAPI.CreateRef(ctx, r, branch, sha))
}
func (f *flakyGitData) UpdateRef(ctx context.Context, r worktree.Repo, branch, sha string) error {
	return f.after("update ref", f.GitDataAPI.UpdateRef(ctx, r, branch, sha))
}

// TestPublishThroughGitDataIsIdempotent: an answer lost after each write
// of a publication in turn (the blob, tree and commit made, the branch
// created, then moved); the publication tried again ends with the branch
// holding each commit once.
func TestPublishThroughGitDataIsIdempotent(t *testing.T) {
	ctx := context.Background()
	for n := 1; ; n++ {
		var total int
		ok := t.Run(fmt.Sprintf("lost-answer-%d", n), func(t *testing.T) {
			var flaky *flakyGitData
			w := newGitDataWorld(t, func(api worktree.GitDataAPI) worktree.GitDataAPI {
				flaky = &flakyGitData{GitDataAPI: api, n: n}
				return flaky
			})
			s := w.prepare(t, "sess-idempotent-01")
			publish := func() {
				t.Helper()
				_, err := s.Publish(ctx)
				if errors.Is(err, errLost) {
					_, err = s.Publish(ctx) // the retry
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			writeFile(t, s.Dir, "a.txt", []byte("one\n"), 0o644)
			one := worktree.Change{Path: "a.txt", SHA256: sha256Hex("one\n")}
			if _, err := s.Commit(ctx, worktree.CommitOptions{Message: "one", Changes: []worktree.Change{one}}); err != nil {
				t.Fatal(err)
			}
			publish()
			writeFile(t, s.Dir, "b.txt", []byte("two\n"), 0o644)
			two := worktree.Change{Path: "b.txt", SHA256: sha256Hex("two\n")}
			if _, err := s.Commit(ctx, worktree.CommitOptions{Message: "two", Changes: []worktree.Change{one, two}}); err != nil {
				t.Fatal(err)
			}
			publish()
			checkBranchIsWorktree(t, w, s, 2)
			total = len(flaky.writes)
		})
		if !ok || n >= total {
			break
		}
	}
}

// branchCommits lists the commits of the session's branch after the
// default branch, newest first.
func (w *liveWorld) branchCommits(branch string) []string {
	w.t.Helper()
	return strings.Fields(gittest.Git(w.t, w.bare, "rev-list", "main.."+branch))
}

// TestAppModeCommitsAreVerified: the bot as a GitHub App, through the
// whole /agent fix flow: every commit of the PR is GitHub's, made through
// the Git Data API, Verified, authored by the app; the PR's head is the
// branch, and the committed log verifies (approve checks it).
func TestAppModeCommitsAreVerified(t *testing.T) {
	w := newLiveWorld(t, "app", "")
	w.login()
	res := w.fullFlow("token check accepts prefixes")
	pr, _ := w.fake.PR(repoName, res.PR)
	commits := w.branchCommits(res.Branch)
	if len(commits) < 2 {
		t.Fatalf("%d commits on %s, want the draft's and the fix", len(commits), res.Branch)
	}
	if commits[0] != pr.HeadSHA {
		t.Errorf("PR head %s, branch tip %s", pr.HeadSHA, commits[0])
	}
	for _, sha := range commits {
		if !w.fake.Verified(sha) {
			t.Errorf("commit %s is not Verified", sha)
		}
		if who := gittest.Git(t, w.bare, "log", "-1", "--format=%an|%cn", sha); who != "agentos[bot]|GitHub" {
			t.Errorf("commit %s by %q, want agentos[bot], committed by GitHub", sha, who)
		}
	}
	if src := gittest.Git(t, w.bare, "show", res.Branch+":auth.go"); !strings.Contains(src, "ConstantTimeCompare") {
		t.Errorf("the fix is not on the branch:\n%s", src)
	}
	// The session's log on the artifact branch too: every commit there
	// GitHub's and Verified.
	artifacts := gittest.APICommits(t, w.bare, w.fake.Verified, "agentos[bot]", "agent-sessions")
	if raw := gittest.Git(t, w.bare, "show", "agent-sessions:sessions/"+res.SessionID+"/events.jsonl"); !strings.Contains(raw, `"turn.terminal"`) {
		t.Errorf("the committed log has no terminal report:\n%.2000s", raw)
	}
	// Commits through the Git Data API and createCommitOnBranch (the
	// GraphQL calls but markPullRequestReadyForReview).
	calls := w.botCalls()
	if n := calls["POST /repos/{owner}/{repo}/git/commits"] + calls["POST /graphql"] - 1; n != len(commits)+len(artifacts) {
		t.Errorf("%d commits made through the API, %d on the branch and %d on agent-sessions", n, len(commits), len(artifacts))
	}
}

// TestPlainTokenPushesOverGit: with a personal access token the bot pushes
// over git as before: no Git Data API call, commits the bot's own and
// unsigned.
func TestPlainTokenPushesOverGit(t *testing.T) {
	w := newLiveWorld(t, "token", "")
	w.login()
	res := w.fullFlow("token check accepts prefixes")
	commits := w.branchCommits(res.Branch)
	if len(commits) < 2 {
		t.Fatalf("%d commits on %s", len(commits), res.Branch)
	}
	for _, sha := range commits {
		if w.fake.Verified(sha) {
			t.Errorf("commit %s pushed over git is Verified", sha)
		}
		if who := gittest.Git(t, w.bare, "log", "-1", "--format=%an|%cn", sha); who != "agentos-bot|agentos-bot" {
			t.Errorf("commit %s by %q, want the bot's account", sha, who)
		}
	}
	if calls := gitDataCalls(w.fake); len(calls) != 0 {
		t.Errorf("Git Data API used with a personal token:\n%s", fakegithub.FormatCalls(calls))
	}
}

// useGitData makes gittest.Token the installation token of app "agentos"
// on the repository and restarts the bot process publishing through the
// Git Data API with it, the API wrapped by wrap in each new process.
func (w *world) useGitData(wrap func(worktree.GitDataAPI) worktree.GitDataAPI) {
	w.t.Helper()
	app, _, err := fakegithub.NewApp(appID, "agentos")
	if err != nil {
		w.t.Fatal(err)
	}
	w.fake.AddApp(app)
	w.fake.AddInstallation(instID, appID, repoName)
	w.fake.AddInstallationToken(gittest.Token, instID)
	w.gitData = wrap
	w.start(w.dataDir)
}

// mortalGitData is the Git Data API as a dying process sees it: after
// budget writes the next one dies, before GitHub got it (after=false) or
// after GitHub did it (after=true).
type mortalGitData struct {
	worktree.GitDataAPI
	mu     sync.Mutex
	budget int
	after  bool
	writes int
}

func (m *mortalGitData) write(name string, do func() error) error {
	m.mu.Lock()
	m.writes++
	dead := m.budget == 0
	m.budget--
	m.mu.Unlock()
	if !dead {
		return do()
	}
	if m.after {
		if err := do(); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s: %w", name, errDied)
}

func (m *mortalGitData) CreateBlob(ctx context.Context, r worktree.Repo, b []byte) (sha string, err error) {
	err = m.write("blob", func() (e error) { sha, e = m.GitDataAPI.CreateBlob(ctx, r, b); return })
	return sha, err
}
func (m *mortalGitData) CreateTree(ctx context.Context, r worktree.Repo, base string, es []worktree.TreeEntry) (sha string, err error) {
	err = m.write("tree", func() (e error) { sha, e = m.GitDataAPI.CreateTree(ctx, r, base, es); return })
	return sha, err
}
func (m *mortalGitData) CreateCommit(ctx context.Context, r worktree.Repo, msg, tree string, parents []string) (sha string, err error) {
	err = m.write("commit", func() (e error) { sha, e = m.GitDataAPI.CreateCommit(ctx, r, msg, tree, parents); return })
	return sha, err
}
func (m *mortalGitData) CreateRef(ctx context.Context, r worktree.Repo, branch, sha string) error {
	return m.write("create ref", func() error { return m.GitDataAPI.CreateRef(ctx, r, branch, sha) })
}
func (m *mortalGitData) UpdateRef(ctx context.Context, r worktree.Repo, branch, sha string) error {
	return m.write("update ref", func() error { return m.GitDataAPI.UpdateRef(ctx, r, branch, sha) })
}

// TestVerifiedRepublishAfterDeathInPublication: the bot process dies at
// each Git Data API write of the /agent fix flow in turn (the draft's
// commit, the branch created; the fix's tree and commit, the branch
// moved), before GitHub got it and after GitHub did it; the delivery is
// handled again by a new process. The flow ends as an undisturbed one:
// one PR, one review, one tracking comment, the fix once, and the
// branch's two commits (the draft's, the fix) both GitHub's and Verified,
// none duplicated.
func TestVerifiedRepublishAfterDeathInPublication(t *testing.T) {
	for _, after := range []bool{false, true} {
		for budget := 0; ; budget++ {
			var total int
			ok := t.Run(fmt.Sprintf("write-%d-%s", budget, map[bool]string{false: "before", true: "after"}[after]), func(t *testing.T) {
				w := newWorld(t)
				var m *mortalGitData
				w.useGitData(func(api worktree.GitDataAPI) worktree.GitDataAPI {
					if m != nil {
						return api // a new process: it lives
					}
					m = &mortalGitData{GitDataAPI: api, budget: budget, after: after}
					return m
				})
				w.fake.AddComment(repoName, w.issue, "alice", "/agent "+demo.Prompt)
				first := w.deliverUntilDone(webhook.Trigger{Kind: webhook.KindComment, Number: w.issue, Author: "alice", Body: "/agent " + demo.Prompt, IssueState: "open", DeliveryID: "d-request"})
				if first.Status != "paused" || first.PR == 0 {
					t.Fatalf("after the request: %+v", first)
				}
				p, _ := w.fake.PR(repoName, first.PR)
				res := w.deliverUntilDone(webhook.Trigger{Kind: webhook.KindReview, Number: first.PR, IsPR: true, Author: "alice", ReviewState: "approved", HeadSHA: p.HeadSHA, DeliveryID: "d-approve"})
				if res.Status != "completed" {
					t.Fatalf("after the approval: %+v", res)
				}
				w.checkOneOfEach(first.SessionID)
				commits := strings.Fields(gittest.Git(t, w.bare, "rev-list", "main.."+res.Branch))
				if len(commits) != 2 {
					t.Errorf("%d commits on %s, want 2:\n%s", len(commits), res.Branch, gittest.Git(t, w.bare, "log", "--format=%h %s", "main.."+res.Branch))
				}
				for _, sha := range commits {
					if !w.fake.Verified(sha) {
						t.Errorf("commit %s is not Verified", sha)
					}
				}
				total = m.writes
			})
			if !ok || budget >= total {
				break
			}
		}
	}
}

// TestArtifactBranchThroughGitData: with an installation token the
// session logs reach the agent-sessions branch through the Git Data API:
// the orphan branch is created with GitHub's first commit, the same bytes
// again make no commit, and writers racing from two processes (two
// managers, two mirrors) each land on a linear history, every commit
// GitHub's and Verified, no session's files lost.
func TestArtifactBranchThroughGitData(t *testing.T) {
	w := newGitDataWorld(t, nil)
	ctx := context.Background()
	repo := worktree.Repo{Owner: "octo", Name: "app"}
	art := func(sid string) worktree.Artifact {
		return worktree.Artifact{Repo: repo, SessionID: sid, RunID: "run-" + sid, Events: []byte(`{"seq":1,"session":"` + sid + `"}` + "\n"), Snapshot: []byte(`{"session":"` + sid + `"}`)}
	}
	first, err := w.wm.CommitArtifact(ctx, art("s-first"))
	if err != nil {
		t.Fatal(err)
	}
	if got := gittest.Git(t, w.bare, "rev-parse", "agent-sessions"); got != first {
		t.Fatalf("agent-sessions at %s, CommitArtifact said %s", got, first)
	}
	if parents := gittest.Git(t, w.bare, "log", "-1", "--format=%P", first); parents != "" {
		t.Errorf("the orphan branch's first commit has parents %q", parents)
	}
	calls := gitDataCalls(w.fake)
	again, err := w.wm.CommitArtifact(ctx, art("s-first"))
	if err != nil || again != first {
		t.Fatalf("the same bytes again: %s, %v; want %s and no commit", again, err, first)
	}
	if after := gitDataCalls(w.fake); fmt.Sprint(after) != fmt.Sprint(calls) {
		t.Errorf("the same bytes again called the Git Data API: %v, before %v", after, calls)
	}

	// A log too long for one createCommitOnBranch request goes through
	// the Git Data API, and, too long to travel inside the tree request,
	// as a blob.
	big := art("s-big")
	big.Events = []byte(strings.Repeat(`{"seq":1,"type":"output.delta","payload":{"text":"0123456789"}}`+"\n", 20000))
	if len(big.Events) <= github.MaxCommitOnBranchBytes {
		t.Fatalf("the long log is %d bytes, not over %d", len(big.Events), github.MaxCommitOnBranchBytes)
	}
	blobs := gitDataCalls(w.fake)["POST /repos/{owner}/{repo}/git/blobs"]
	if _, err := w.wm.CommitArtifact(ctx, big); err != nil {
		t.Fatal(err)
	}
	if got := gittest.Git(t, w.bare, "show", "agent-sessions:sessions/s-big/events.jsonl"); got+"\n" != string(big.Events) {
		t.Errorf("the long log on the branch differs (%d bytes, want %d)", len(got)+1, len(big.Events))
	}
	if n := gitDataCalls(w.fake)["POST /repos/{owner}/{repo}/git/blobs"] - blobs; n != 1 {
		t.Errorf("%d blobs created for the long log, want 1", n)
	}

	// A second process: its own mirror, the same branch.
	other, err := worktree.New(worktree.Config{CacheDir: t.TempDir(), BaseURL: w.url, GitData: w.api,
		Token: func(context.Context, worktree.Repo) (string, error) { return appToken, nil }})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := w.wm
			if i%2 == 1 {
				m = other
			}
			if _, err := m.CommitArtifact(ctx, art(fmt.Sprintf("s-%d", i))); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	files := gittest.Git(t, w.bare, "ls-tree", "-r", "--name-only", "agent-sessions")
	for _, sid := range []string{"s-first", "s-big", "s-0", "s-1", "s-2", "s-3", "s-4", "s-5", "s-6", "s-7"} {
		for _, f := range []string{"events.jsonl", "snapshot.json"} {
			if !strings.Contains(files, "sessions/"+sid+"/"+f+"\n") && !strings.HasSuffix(files, "sessions/"+sid+"/"+f) {
				t.Errorf("sessions/%s/%s lost; the branch holds:\n%s", sid, f, files)
			}
		}
	}
	// More ref updates than commits: writers lost the race and rebuilt.
	t.Logf("Git Data API calls: %v", gitDataCalls(w.fake))
	shas := gittest.APICommits(t, w.bare, w.fake.Verified, "", "agent-sessions")
	if merges := gittest.Git(t, w.bare, "rev-list", "--merges", "agent-sessions"); merges != "" {
		t.Errorf("merge commits on agent-sessions: %s", merges)
	}
	if len(shas) != 10 {
		t.Logf("agent-sessions:\n%s", gittest.Git(t, w.bare, "log", "--format=%H %P %s", "agent-sessions"))
		t.Errorf("%d commits on agent-sessions, want 10 (one per session)", len(shas))
	}
}

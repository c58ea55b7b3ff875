package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// ErrNoChanges is returned by Session.Commit when the worktree matches HEAD.
var ErrNoChanges = errors.New("worktree: nothing to commit")

// Base says where a session starts.
type Base struct {
	// PullRequest, when positive, starts from the pull request's head,
	// fetched as refs/pull/<n>/head from the base repository (forks
	// included: the fork is never added as a remote).
	PullRequest int
	// Branch starts from this branch of the repository; empty means the
	// remote's default branch. Ignored when PullRequest is set.
	Branch string
}

// PrepareOptions name a session's worktree.
type PrepareOptions struct {
	Repo      Repo
	SessionID string
	// Number is the issue or pull request the session serves; it names the
	// branch agent/<number>-<short id>. Zero takes Base.PullRequest.
	Number int
	Base   Base
	// Branch is the session branch; empty means SessionBranch(Number,
	// SessionID), agent/<number>-<short id>. The bot names it with its
	// configured prefix, and a session keeps the branch its link records.
	Branch string
}

// Session is one session's worktree on its branch. Its methods are safe for
// concurrent use but serialise.
type Session struct {
	m    *Manager
	repo Repo
	id   string

	// Dir is the worktree directory the kernel's workspace opens.
	Dir string
	// Branch is the session branch, agent/<number>-<short id>.
	Branch string
	// BaseSHA is the commit the worktree was prepared at.
	BaseSHA string
	// Resumed is true when the session branch already existed on the remote
	// and the worktree continues from its tip.
	Resumed bool

	mu     sync.Mutex
	closed bool
	// tip is the session branch's commit as this Session last set it. The
	// branch's ref in the worktree's .git is written for git's sake but
	// never trusted: commands the agent runs can write there (see
	// branchTip).
	tip plumbing.Hash
	// release drops the session's shared lock on the mirror (see
	// maintain.go), taken in Prepare and held until Close.
	release func()
	known   []plumbing.Hash // commits the remote has that are not on an advertised ref
}

// Prepare fetches the mirror and checks out a fresh worktree for the
// session on its branch. When the session branch already exists on the
// remote (a resumed session) the worktree starts from its tip; otherwise
// from opts.Base. A worktree left by a crashed process for the same
// session is replaced.
func (m *Manager) Prepare(ctx context.Context, opts PrepareOptions) (*Session, error) {
	if err := opts.Repo.Validate(); err != nil {
		return nil, err
	}
	num := opts.Number
	if num == 0 {
		num = opts.Base.PullRequest
	}
	if opts.Base.PullRequest < 0 {
		return nil, fmt.Errorf("%w: pull request %d", ErrInvalid, opts.Base.PullRequest)
	}
	if opts.Base.Branch != "" && !validBranch(opts.Base.Branch) {
		return nil, fmt.Errorf("%w: base branch %q", ErrInvalid, opts.Base.Branch)
	}
	branch := opts.Branch
	if branch == "" {
		var err error
		if branch, err = SessionBranch(num, opts.SessionID); err != nil {
			return nil, err
		}
	} else if !validBranch(branch) || !validSessionID(opts.SessionID) {
		return nil, fmt.Errorf("%w: session branch %q of session %q", ErrInvalid, branch, opts.SessionID)
	}
	c, err := m.cred(ctx, opts.Repo)
	if err != nil {
		return nil, err
	}
	base, resumed, err := m.resolveBase(ctx, opts.Repo, c, opts.Base, branch)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(m.cfg.CacheDir, "sessions", opts.Repo.Owner, opts.Repo.Name, opts.SessionID)
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("worktree: remove stale worktree: %w", err)
	}
	// From here until Close the worktree reads the mirror's objects outside
	// the mirror lock, so maintenance must not delete packs under it. A
	// roll-up that ran after resolveBase released the lock kept every
	// object and finished before this lock is granted.
	release, err := shareFile(ctx, usersLock(m.mirrorDir(opts.Repo)))
	if err != nil {
		return nil, err
	}
	s := &Session{m: m, repo: opts.Repo, id: opts.SessionID, Dir: dir, Branch: branch, BaseSHA: base.String(), Resumed: resumed, known: []plumbing.Hash{base}, tip: base, release: release}
	author, err := m.author(ctx, opts.Repo)
	if err != nil {
		release()
		return nil, err
	}
	if err := m.initWorktree(opts.Repo, dir, branch, base, author); err != nil {
		os.RemoveAll(dir)
		release()
		return nil, err
	}
	if m.UsesCLI() {
		err = m.git(ctx, dir, nil, nil, nil, "reset", "-q", "--hard", base.String())
	} else {
		err = m.checkoutGoGit(ctx, opts.Repo, dir, base)
	}
	if err != nil {
		os.RemoveAll(dir)
		release()
		return nil, c.wrap("check out "+base.String(), err)
	}
	return s, nil
}

// resolveBase fetches the mirror and returns the commit to start from.
func (m *Manager) resolveBase(ctx context.Context, r Repo, c cred, b Base, branch string) (plumbing.Hash, bool, error) {
	unlock, err := m.lockMirror(ctx, m.mirrorDir(r))
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	defer unlock()
	mirror, err := m.openMirror(ctx, r, c)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	specs := []config.RefSpec{headsSpec}
	var baseRef plumbing.ReferenceName
	if b.PullRequest > 0 {
		baseRef = plumbing.ReferenceName(fmt.Sprintf("refs/pull/%d/head", b.PullRequest))
		specs = append(specs, config.RefSpec("+"+baseRef+":"+baseRef))
	} else {
		name := b.Branch
		if name == "" {
			if name, err = m.defaultBranch(ctx, r, c); err != nil {
				return plumbing.ZeroHash, false, err
			}
		}
		baseRef = plumbing.NewBranchReferenceName(name)
	}
	if err := m.fetch(ctx, mirror, r, c, specs...); err != nil {
		return plumbing.ZeroHash, false, err
	}
	if ref, err := mirror.Reference(plumbing.NewBranchReferenceName(branch), true); err == nil {
		return ref.Hash(), true, nil
	}
	ref, err := mirror.Reference(baseRef, true)
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("%w: %s has no %s", ErrNotFound, r, baseRef)
	}
	return ref.Hash(), false, nil
}

// initWorktree creates an empty repository at dir that borrows the mirror's
// objects, with HEAD on branch at base. Nothing is checked out yet.
func (m *Manager) initWorktree(r Repo, dir, branch string, base plumbing.Hash, author Identity) error {
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		return fmt.Errorf("worktree: init %s: %w", dir, err)
	}
	objects := filepath.Join(m.mirrorDir(r), "objects")
	alt := filepath.Join(dir, ".git", "objects", "info", "alternates")
	if err := os.MkdirAll(filepath.Dir(alt), 0o755); err != nil {
		return fmt.Errorf("worktree: init %s: %w", dir, err)
	}
	if err := os.WriteFile(alt, []byte(objects+"\n"), 0o644); err != nil {
		return fmt.Errorf("worktree: init %s: %w", dir, err)
	}
	cfg, err := repo.Config()
	if err != nil {
		return fmt.Errorf("worktree: init %s: %w", dir, err)
	}
	cfg.Remotes["origin"] = &config.RemoteConfig{Name: "origin", URLs: []string{m.remoteURL(r)}, Fetch: []config.RefSpec{"+refs/heads/*:refs/remotes/origin/*"}}
	cfg.User.Name = author.Name
	cfg.User.Email = author.Email
	if err := repo.SetConfig(cfg); err != nil {
		return fmt.Errorf("worktree: init %s: %w", dir, err)
	}
	st := repo.Storer
	ref := plumbing.NewBranchReferenceName(branch)
	if err := st.SetReference(plumbing.NewHashReference(ref, base)); err != nil {
		return fmt.Errorf("worktree: init %s: %w", dir, err)
	}
	if err := st.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, ref)); err != nil {
		return fmt.Errorf("worktree: init %s: %w", dir, err)
	}
	return nil
}

// checkoutGoGit checks base out into the fresh worktree dir, reading the
// objects straight from the mirror (see sessionStorage).
func (m *Manager) checkoutGoGit(ctx context.Context, r Repo, dir string, base plumbing.Hash) error {
	st := m.openStorage(r, dir)
	defer st.Close()
	return checkoutFresh(ctx, st, st, dir, base)
}

func (s *Session) check() error {
	if s.closed {
		return ErrClosed
	}
	return nil
}

// CommitOptions describe a session commit.
type CommitOptions struct {
	// Message is the commit message without trailers.
	Message string
	// RunID is written as the Agent-Run trailer.
	RunID string
	// Time is the author and committer time; zero means now.
	Time time.Time
	// Changes are the paths the kernel's file tools changed, in order
	// (the last change of a path wins): the commit is the branch tip's
	// tree with these paths as the tools left them, and nothing else of
	// the worktree (see commit.go).
	Changes []Change
	// AllowEmpty makes a commit even when the tree did not change (the
	// draft PR of a session that changed nothing yet needs one commit).
	AllowEmpty bool
}

// commitMessage appends the Agent-Session and Agent-Run trailers as the
// message's last paragraph.
func commitMessage(msg, sessionID, runID string) string {
	msg = strings.TrimRight(msg, "\n \t")
	if msg == "" {
		msg = "agentos session " + sessionID
	}
	t := "Agent-Session: " + sessionID + "\n"
	if runID != "" {
		t += "Agent-Run: " + runID + "\n"
	}
	return msg + "\n\n" + t
}

// Commit records the change set opts.Changes as one commit on the
// session branch, authored and committed by the bot identity, and returns
// its SHA. Each changed file must hold, in the worktree, the content its
// tool wrote (else a *ChangedError); files nothing in the change set
// names are not committed, whatever commands did to them. It returns
// ErrNoChanges when the tree would not change. The commit is built with
// go-git whatever the backend: no git program runs.
func (s *Session) Commit(ctx context.Context, opts CommitOptions) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return "", err
	}
	if strings.ContainsAny(opts.RunID, "\n\r") {
		return "", fmt.Errorf("%w: run id %q", ErrInvalid, opts.RunID)
	}
	when := opts.Time
	if when.IsZero() {
		when = time.Now()
	}
	msg := commitMessage(opts.Message, s.id, opts.RunID)
	author, err := s.m.author(ctx, s.repo)
	if err != nil {
		return "", err
	}
	return s.commitChanges(msg, when, opts.Changes, opts.AllowEmpty, author)
}

// Head returns the SHA the session branch points at in the worktree.
func (s *Session) Head() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return "", err
	}
	st := s.m.openStorage(s.repo, s.Dir)
	defer st.Close()
	tip, err := s.branchTip(st)
	if err != nil {
		return "", fmt.Errorf("worktree: head: %w", err)
	}
	return tip.String(), nil
}

// Push publishes the session branch to the base repository (see
// Publish).
func (s *Session) Push(ctx context.Context) error {
	_, err := s.Publish(ctx)
	return err
}

// Publish sends the session branch to the base repository and returns the
// remote branch's tip. The update must be a fast-forward of the remote
// branch; the fork of a pull request is never a push target. Over git the
// tip is the local one; through the Git Data API (Config.Publish) GitHub
// makes its own commits with the same trees and messages, and the local
// branch is moved onto them, so later commits build on what the remote
// has. Publishing again what is already there creates nothing.
func (s *Session) Publish(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return "", err
	}
	c, err := s.m.cred(ctx, s.repo)
	if err != nil {
		return "", err
	}
	st := s.m.openStorage(s.repo, s.Dir)
	tip, err := s.branchTip(st)
	st.Close()
	if err != nil {
		return "", fmt.Errorf("worktree: push: %w", err)
	}
	head, err := s.publish(ctx, c, tip)
	if err != nil {
		return "", err
	}
	return head.String(), nil
}

// publish sends tip with the operation's publisher and remembers the
// remote tip; s.mu is held.
func (s *Session) publish(ctx context.Context, c cred, tip plumbing.Hash) (plumbing.Hash, error) {
	head, err := s.m.publisherFor(c).publish(ctx, s, c, tip)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	s.known = append(s.known, head)
	return head, nil
}

// Close removes the worktree. Unpushed commits are lost; the shared mirror
// is kept for the next session.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	// The worktree is gone (or unusable) either way; a leftover is replaced
	// by the next Prepare of the session, which takes the lock anew.
	defer s.release()
	if err := os.RemoveAll(s.Dir); err != nil {
		return fmt.Errorf("worktree: remove %s: %w", s.Dir, err)
	}
	return nil
}

// git runs the git CLI in dir for a local operation (the checkout at
// Prepare), hardened (see gitcli.go). Network operations never go through
// the CLI, so no credential ever reaches a git process.
func (m *Manager) git(ctx context.Context, dir string, env []string, stdin *strings.Reader, stdout *bytes.Buffer, args ...string) error {
	if m.gitPath == "" {
		return errors.New("git CLI not available")
	}
	return execGit(ctx, m.gitPath, dir, env, stdin, stdout, args...)
}

// CommitMessage returns the message of commit sha (a commit of the session
// branch, e.g. its tip) and its first parent ("" for a root commit):
// recovery reads what session commits recorded.
func (s *Session) CommitMessage(sha string) (msg, parent string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return "", "", err
	}
	st := s.m.openStorage(s.repo, s.Dir)
	defer st.Close()
	c, err := object.GetCommit(st, plumbing.NewHash(sha))
	if err != nil {
		return "", "", fmt.Errorf("worktree: commit %s: %w", sha, err)
	}
	if len(c.ParentHashes) > 0 {
		parent = c.ParentHashes[0].String()
	}
	return c.Message, parent, nil
}
